//! The crash matrix's vocabulary: the crash points, the two ways a skill issues its effect, the stores,
//! and what a row expects. The table itself is in `crash_matrix.rs`; the probe (the counting tool and
//! the pauses), the two skills, the stores and the runner of one cell are the submodules. Nothing here
//! touches the engine's internals: a crash is a fault hook or `Engine::halt`, and the only evidence is
//! what the tool counted and what the store holds.
#![allow(dead_code)]

pub mod bugs;
pub mod probe;
pub mod run;
pub mod skills;
pub mod stores;

use radkit_runtime::flow::EffectPolicy;

/// Where the process dies, relative to the one effect the skill issues (a tool named `effect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// The skill is about to issue the command; nothing of it is journaled (the skill pauses there
    /// and the engine is halted).
    BeforeJournaled,
    /// The command is durably journaled, the effect not started (`Boundary::CommandJournaled`).
    AfterJournaled,
    /// The tool is running: it pauses inside the call and the engine is halted under it.
    DuringEffect,
    /// The effect returned, its receipt is not written (`Boundary::EffectReturned`).
    EffectReturned,
    /// The result reached the skill and nothing was flushed since (the skill pauses on it and the
    /// engine is halted): a receipt is durable here only if the engine flushed it at once.
    ResultArrived,
    /// The receipt is durably written (`Boundary::ReceiptWritten`, which flushes it itself).
    ReceiptWritten,
    /// The task durably waits for input (`Boundary::AwaitingInput`).
    AwaitingInput,
    /// The reply is taken, not yet durable: it commits with the resumed step's first append
    /// (`Boundary::Resuming`).
    Resuming,
    /// A durable timer is set and the task sleeps (`Boundary::TimerWait` in a step; for a transition's
    /// sleep, which has no fault point, the engine is halted once the `timer_set` entry is committed).
    TimerWait,
    /// The first attempt failed transiently; the retry pauses inside the tool and the engine is halted.
    RetryAfterTransient,
    /// The task waits for input (the engine that ran it stopped cleanly); another engine cancels it,
    /// the compensation pauses and that engine is halted.
    CompensationAfterCancel,
    /// The skill fails the task after the effect; the compensation pauses and the engine is halted.
    CompensationAfterFailure,
}

impl Point {
    /// The trial name's segment.
    pub fn name(self) -> &'static str {
        match self {
            Point::BeforeJournaled => "before_command_journaled",
            Point::AfterJournaled => "after_command_journaled",
            Point::DuringEffect => "during_effect",
            Point::EffectReturned => "after_effect_before_receipt",
            Point::ResultArrived => "after_result_before_any_flush",
            Point::ReceiptWritten => "after_receipt_written",
            Point::AwaitingInput => "while_awaiting_input",
            Point::Resuming => "during_resume",
            Point::TimerWait => "during_timer_wait",
            Point::RetryAfterTransient => "during_retry_after_transient_failure",
            Point::CompensationAfterCancel => "during_compensation_after_cancel",
            Point::CompensationAfterFailure => "during_compensation_after_failure",
        }
    }

    /// What the skill does once the effect succeeded.
    pub fn tail(self) -> Tail {
        match self {
            Point::AwaitingInput | Point::Resuming | Point::CompensationAfterCancel => Tail::Ask,
            Point::TimerWait => Tail::Sleep,
            Point::CompensationAfterFailure => Tail::Fail,
            _ => Tail::Complete,
        }
    }
}

/// What the skill does after its effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// Complete the task.
    Complete,
    /// Wait for a note from the user, then complete with it.
    Ask,
    /// Sleep on a durable timer, then complete.
    Sleep,
    /// Fail the task (so the effect is compensated).
    Fail,
}

/// How the skill issues its effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `ctx.tool("effect").call(..)` inside a step (a step table).
    Ctx,
    /// `Transition::to(..).cmd(Cmd::tool("effect", ..))` from an explicit reducer.
    Transition,
    /// The in-step call as the second of a parallel batch: `join!` over a call of the `sibling`
    /// tool and the `effect` call (journaled in one append, performed at once).
    Parallel,
}

impl Form {
    pub const ALL: [Form; 3] = [Form::Ctx, Form::Transition, Form::Parallel];

    pub fn name(self) -> &'static str {
        match self {
            Form::Ctx => "ctx",
            Form::Transition => "transition",
            Form::Parallel => "parallel",
        }
    }
}

/// Every issue form.
pub const EVERY_FORM: &[Form] = &Form::ALL;

/// The store a cell runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Memory,
    Sqlite,
    Postgres,
}

impl Backend {
    pub const ALL: [Backend; 3] = [Backend::Memory, Backend::Sqlite, Backend::Postgres];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Memory => "memory",
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// The trial name's segment for a policy.
pub fn policy_name(policy: EffectPolicy) -> &'static str {
    match policy {
        EffectPolicy::Idempotent => "idempotent",
        EffectPolicy::AtLeastOnce => "at_least_once",
        EffectPolicy::AtMostOnce => "at_most_once",
        EffectPolicy::Compensate => "compensate",
    }
}

/// What the store holds at the crash, read before any recovery. Every variant also means: no
/// `terminal` entry, seqs from 1 without gaps, the effect journaled at most once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtCrash {
    /// No `command_issued` for the effect.
    NotIssued,
    /// The effect's `command_issued` (with the tool's policy), no receipt.
    IssuedNoReceipt,
    /// The effect's `command_issued` and its successful receipt.
    Receipted,
    /// `Receipted`, then `awaiting_input`.
    InputAwaited,
    /// `InputAwaited`, and no `message_received` after it: the reply was not acknowledged.
    ReplyNotDurable,
    /// `Receipted`, then a sleep's `timer_set` without a receipt for the sleep.
    TimerSet,
    /// `Receipted`, then the decision to compensate (`cancel_requested`, or a `fail` transition),
    /// and no `compensated` entry.
    Compensating,
}

/// How the task ends after recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// `completed`, with the skill's own final message.
    Completed,
    /// `failed` with "outcome unknown" naming the effect's command and InvocationId.
    OutcomeUnknown,
    /// `canceled`.
    Canceled,
    /// `failed` with the skill's own reason ([`skills::REFUSED`]).
    Failed,
}

/// What a row promises. Counts are raw calls of the tool's function (and of its compensation), not
/// distinct keys: "at crash" is read right after the crash, the total after the recovered task ended.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    pub at_crash: AtCrash,
    pub calls_at_crash: usize,
    pub calls: usize,
    pub undos_at_crash: usize,
    pub undos: usize,
    pub end: End,
}

/// One row of the matrix: a policy, a crash point, the issue forms it runs in, and what it expects.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub policy: EffectPolicy,
    pub point: Point,
    pub forms: &'static [Form],
    pub expect: Expect,
    /// A known engine bug: the row states the documented promise and fails today, so it runs only
    /// when `RADKIT_MATRIX_KNOWN_BUGS=1` (and is listed on stderr otherwise).
    pub bug: Option<&'static str>,
}

/// A row whose compensation never runs (`undos` 0 at the crash and after).
pub const fn row(
    policy: EffectPolicy,
    point: Point,
    forms: &'static [Form],
    at_crash: AtCrash,
    calls: (usize, usize),
    end: End,
) -> Row {
    Row {
        policy,
        point,
        forms,
        expect: Expect {
            at_crash,
            calls_at_crash: calls.0,
            calls: calls.1,
            undos_at_crash: 0,
            undos: 0,
            end,
        },
        bug: None,
    }
}

impl Row {
    /// Compensation calls at the crash and in total.
    pub const fn undos(mut self, at_crash: usize, total: usize) -> Row {
        self.expect.undos_at_crash = at_crash;
        self.expect.undos = total;
        self
    }

    /// Mark the row as a known engine bug (see [`Row::bug`]).
    pub const fn bug(mut self, what: &'static str) -> Row {
        self.bug = Some(what);
        self
    }

    /// The trial's name without the store: `at_most_once::after_effect_before_receipt::ctx`.
    pub fn name(&self, form: Form) -> String {
        format!(
            "{}::{}::{}",
            policy_name(self.policy),
            self.point.name(),
            form.name()
        )
    }
}
