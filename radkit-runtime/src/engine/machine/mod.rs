//! The task machine without I/O: one task's run as a value that is fed events and yields what to
//! do. No clock (time is passed in), no I/O, no runtime and no threads inside: a host (the
//! serverless pass, a distributed engine, a test) persists what it yields, performs the effects it
//! asks for and hands their outcomes back.
//!
//! ```text
//!            start / resume(journal, now) / reply / cancel(now)
//!                              │
//!   ┌──────────────────────────▼─────────────────────────────┐
//!   │ TaskMachine::poll(now) ── step visits (async fn steps   │
//!   │   polled here: a ctx call without a receipt becomes an  │
//!   │   Effect), transitions, compensations, the end          │
//!   └───┬──────────────┬──────────────┬───────────────┬───────┘
//!   Persist(Append)  Perform(effects)  Awaiting      Waiting / Ended
//!   host appends     host runs each,   host completes  host stops; the journal
//!   it, polls again  `complete(id,..)` an effect       holds the rest (timers,
//!                                                      input, claimable work)
//! ```
//!
//! It applies the engine's one fold (`engine/fold.rs`) and command rules (`engine/command.rs`)
//! through `engine/machine/rules.rs`, the same functions the long-running engine's driver applies: a visit, a
//! transition, an ending, a cancel, a retry decide the same entries whoever hosts the task. Output
//! commit holds as in the engine: the machine yields `Persist` before any effect that depends on
//! what it buffered, and before it rests or ends.

pub(crate) mod rules;
pub(crate) mod visit;

mod invoker;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

pub(crate) use self::invoker::CallHost;
use self::invoker::MachineInvoker;
use self::rules::{After, AfterVisit, Execute, VisitResult};
use self::visit::VisitStop;
use super::command;
pub use super::hooks::{HookAnswer, HookCall, HookContext, HookKind};
use super::replay::replay;
use super::run::{RunState, Work};
use crate::effects::{Effects, Performed};
use crate::flow::{
    Cmd, EffectError, ErasedSkill, Event, InvocationId, PermissionMode, StepCtx, StepError,
    Transition,
};
use crate::journal::{Entry, JournalRecord};
use crate::model::{Message, TaskState};
use crate::store::{Append, TaskRecord};

/// The limits a machine runs a task under (the engine's `EngineBuilder` settings of the same names).
#[derive(Debug, Clone)]
pub struct MachineConfig {
    /// Step visits a task may run before it fails (a loop that never ends).
    pub max_steps: u64,
    /// Journal a checkpoint every this many visits (0: never).
    pub checkpoint_every: u64,
    /// The timeout of a call to an agent or a skill that sets none.
    pub call_timeout: Duration,
    /// Put each step visit and each new command to the host's hooks ([`Output::Hook`]), as the
    /// long-running engine puts them to its own (`EngineBuilder::hook`). Off: no hook call is
    /// ever yielded.
    pub hooks: bool,
}

impl Default for MachineConfig {
    fn default() -> Self {
        let engine = super::EngineConfig::default();
        MachineConfig {
            max_steps: engine.max_steps,
            checkpoint_every: engine.checkpoint_every,
            call_timeout: engine.call_timeout,
            hooks: false,
        }
    }
}

/// A skill ready to be run by [`TaskMachine`]s: the skill, the registered models and tools (their
/// declared policies and approval rules; the machine never calls them) and the limits. Cheap to
/// clone; one per skill per host.
#[derive(Clone)]
pub struct MachineSkill {
    parts: Arc<Parts>,
}

struct Parts {
    skill: Arc<dyn ErasedSkill>,
    /// Shared with every visit's invoker (and a host's effects), never copied per visit.
    effects: Arc<Effects>,
    config: MachineConfig,
}

impl MachineSkill {
    /// `skill` with no registered tools and the default limits.
    pub fn new(skill: Arc<dyn ErasedSkill>) -> Self {
        Self::with(skill, Effects::default(), MachineConfig::default())
    }

    /// `skill` with the registered `effects` (whose tools' policies and approval rules apply) and
    /// `config`.
    pub fn with(skill: Arc<dyn ErasedSkill>, effects: Effects, config: MachineConfig) -> Self {
        MachineSkill {
            parts: Arc::new(Parts {
                skill,
                effects: Arc::new(effects),
                config,
            }),
        }
    }

    /// `skill` with effects shared with their owner (the long-running engine's).
    pub(crate) fn shared(
        skill: Arc<dyn ErasedSkill>,
        effects: Arc<Effects>,
        config: MachineConfig,
    ) -> Self {
        MachineSkill {
            parts: Arc::new(Parts {
                skill,
                effects,
                config,
            }),
        }
    }

    /// The skill.
    pub fn skill(&self) -> &Arc<dyn ErasedSkill> {
        &self.parts.skill
    }

    /// The registered models and tools.
    pub fn effects(&self) -> &Effects {
        &self.parts.effects
    }

    /// The same, shared (a host performing effects concurrently holds them without copying).
    pub(crate) fn shared_effects(&self) -> Arc<Effects> {
        self.parts.effects.clone()
    }

    /// A new task created by `task.message` at `now_ms`. Its first [`Output::Persist`] creates
    /// the task's row ([`Append::create`]).
    pub fn start(&self, task: NewTask, now_ms: i64) -> Result<TaskMachine, MachineError> {
        let skill = &self.parts.skill;
        let info = skill.info();
        let initial = skill
            .initial_state()
            .map_err(|e| MachineError::Skill(e.to_string()))?;
        let NewTask {
            task_id,
            context_id,
            principal,
            mode,
            mut message,
        } = task;
        let context_id = context_id
            .or_else(|| message.context_id.clone())
            .unwrap_or_else(|| task_id.clone());
        message.task_id = Some(task_id.clone());
        message.context_id = Some(context_id.clone());
        let mut st = RunState::new(initial);
        st.clock_ms = Some(now_ms);
        st.call_timeout = self.parts.config.call_timeout;
        rules::create(&mut st, info, &context_id, principal.clone(), mode, message);
        let create = TaskRecord {
            id: task_id.clone(),
            context_id: context_id.clone(),
            skill_id: info.id.clone(),
            skill_version: info.version.clone(),
            principal,
            state: TaskState::Submitted,
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            wake_at_ms: None,
            waits_on_call: false,
            last_seq: 0,
        };
        Ok(self.machine(task_id, context_id, mode, st, Some(create)))
    }

    /// Task `task_id` whose journal is `records` (its first entry and everything from its last
    /// checkpoint on, in `seq` order, as `Store::journal_for_replay` returns them), replayed at
    /// `now_ms`: the open visit is re-run (its commands with receipts return them), a command
    /// without a receipt is reissued with the same id (or, when its policy forbids that, the task
    /// fails with its outcome unknown), due timers fire and waits are recognised.
    pub fn resume(
        &self,
        task_id: &str,
        records: &[JournalRecord],
        now_ms: i64,
    ) -> Result<TaskMachine, MachineError> {
        let skill = &self.parts.skill;
        let info = skill.info();
        let initial = skill
            .initial_state()
            .map_err(|e| MachineError::Skill(e.to_string()))?;
        let replayed = replay(records, initial, now_ms).map_err(MachineError::Journal)?;
        let header = replayed.header;
        let mut st = replayed.run;
        if header.skill_id != info.id {
            return Err(MachineError::VersionMismatch {
                skill_id: header.skill_id,
                recorded: header.skill_version,
                running: format!("{} {}", info.id, info.version),
                reason: format!("it is a task of another skill than `{}`", info.id),
            });
        }
        if header.skill_version != info.version && !st.status().is_terminal() {
            // Written by another version: it moves to this one if it rests where this one can
            // take it on (the move is the first thing it persists).
            let recorded = super::versions::Recorded {
                skill_id: header.skill_id.clone(),
                version: header.skill_version.clone(),
                steps: header.steps.clone(),
            };
            let rest = super::versions::AtRest {
                state: st.open().is_none().then(|| st.state()),
            };
            let state = match super::versions::plan(&recorded, &rest, skill.as_ref()) {
                Ok(state) => state,
                Err(reason) => {
                    return Err(MachineError::VersionMismatch {
                        skill_id: header.skill_id,
                        recorded: header.skill_version,
                        running: format!("{} {}", info.id, info.version),
                        reason,
                    })
                }
            };
            st.push(super::versions::migrated(&recorded, skill.as_ref(), state));
        }
        st.clock_ms = Some(now_ms);
        st.call_timeout = self.parts.config.call_timeout;
        st.visit_event = replayed.open_visit;
        Ok(self.machine(
            task_id.to_owned(),
            header.context_id,
            header.permission_mode,
            st,
            None,
        ))
    }

    /// A machine over a run `st` its host holds and journals itself (the long-running engine's
    /// `TaskRun`): the host performs the effects of each visit's calls inside the step's future
    /// ([`Host`], [`CallHost`]) and persists what the machine asks it to through its own buffer
    /// ([`Turn::Flush`]).
    pub(crate) fn hosted(
        &self,
        task_id: Arc<str>,
        context_id: Arc<str>,
        mode: PermissionMode,
        st: Arc<Mutex<RunState>>,
        host: Arc<dyn Host>,
    ) -> TaskMachine {
        let mut machine = self.with_state(task_id, context_id, mode, st, None);
        machine.host = Some(host);
        machine
    }

    fn machine(
        &self,
        task_id: String,
        context_id: String,
        mode: PermissionMode,
        st: RunState,
        create: Option<TaskRecord>,
    ) -> TaskMachine {
        self.with_state(
            task_id.into(),
            context_id.into(),
            mode,
            Arc::new(Mutex::new(st)),
            create,
        )
    }

    fn with_state(
        &self,
        task_id: Arc<str>,
        context_id: Arc<str>,
        mode: PermissionMode,
        st: Arc<Mutex<RunState>>,
        create: Option<TaskRecord>,
    ) -> TaskMachine {
        TaskMachine {
            parts: self.parts.clone(),
            task_id,
            context_id,
            mode,
            st,
            create,
            host: None,
            halted: false,
            awaiting_input: false,
            flush_now: false,
            phase: Phase::Queue,
            outbox: Vec::new(),
            outstanding: HashMap::new(),
            persist_now: false,
            parked: Parked::default(),
            hook_queue: std::collections::VecDeque::new(),
            hook_pending: None,
            step_denied: None,
        }
    }
}

/// What an effect for command `rec` says of its call, if it is one already started.
fn call_progress(rec: &super::fold::CmdRec) -> Option<CallProgress> {
    let callee = rec.callee.as_ref().filter(|_| rec.cmd.kind.is_call())?;
    Some(CallProgress {
        callee_task: callee.task_id.clone(),
        rechecks: rec.rechecks,
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A task to start.
#[derive(Debug, Clone)]
pub struct NewTask {
    /// Its id (a host derives it, e.g. from the creating message's id, so a retried invocation
    /// finds the task it created).
    pub task_id: String,
    /// Its context: this, else the message's, else the task id.
    pub context_id: Option<String>,
    /// Who created it.
    pub principal: Option<String>,
    /// Its permission mode.
    pub mode: PermissionMode,
    /// The message that creates it.
    pub message: Message,
}

impl NewTask {
    /// Task `task_id` created by `message`, in no context of its own, by nobody in particular, in
    /// the default permission mode.
    pub fn new(task_id: impl Into<String>, message: Message) -> Self {
        NewTask {
            task_id: task_id.into(),
            context_id: None,
            principal: None,
            mode: PermissionMode::default(),
            message,
        }
    }
}

/// What the machine asks of its host next ([`TaskMachine::poll`]).
#[derive(Debug)]
pub enum Output {
    /// Append this to the task's journal (it is ready for `Store::append`; a host with leases sets
    /// its `fence`), then poll again. A failed append leaves the machine unusable: resume the task
    /// from the store, as after a crash.
    Persist(Box<Append>),
    /// Perform these effects (at once or concurrently, each not before its `not_before_ms`) and
    /// hand each outcome to [`TaskMachine::complete`]. Their commands are durable (a `Persist`
    /// came first).
    Perform(Vec<Effect>),
    /// Nothing to do until an effect yielded earlier is completed.
    Awaiting,
    /// Put this to the host's hooks and hand their answer to [`TaskMachine::hooked`] before
    /// polling again (only with [`MachineConfig::hooks`]). Nothing waits to be persisted for it.
    Hook(Box<HookCall>),
    /// The task rests and everything is persisted: it waits for a reply (`input`) and/or until
    /// `wake_at_ms` (resume it then), or for a call's callee. The machine may be dropped.
    Waiting {
        /// A reply is awaited ([`TaskMachine::reply`]).
        input: bool,
        /// Its earliest timer (a sleep, a question's deadline, a call's recheck).
        wake_at_ms: Option<i64>,
    },
    /// The task ended in this state; everything is persisted.
    Ended(TaskState),
}

/// An effect to perform: a model or tool call (or a call to an agent or a skill) under its
/// InvocationId, or the compensation of an earlier tool call.
#[derive(Debug, Clone)]
pub struct Effect {
    /// The command's id: the idempotency key of the effect (the same on every reissue).
    pub id: InvocationId,
    /// The command, with the policy it runs under.
    pub cmd: Cmd,
    /// What to do with it.
    pub action: Action,
    /// The attempt this is (from 1; counting attempts earlier runs journaled).
    pub attempt: u32,
    /// Not before this time (a retry's backoff, or the service's `Retry-After`).
    pub not_before_ms: Option<i64>,
    /// For a call (to an agent or a child skill) already started (`call_started` journaled): its
    /// callee's task and how often the host asked it already. The host asks the callee where it
    /// stands; it never starts the call again.
    pub call: Option<CallProgress>,
}

/// A started call, as an [`Effect`] carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallProgress {
    /// The callee's task id.
    pub callee_task: String,
    /// The rechecks journaled so far (each waits twice as long as the one before).
    pub rechecks: u32,
}

/// What an [`Effect`] asks.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Perform the command (`Effects::perform`).
    Perform,
    /// Undo it: its receipt's value is `output` (`Effects::compensate`).
    Compensate {
        /// The value the command returned.
        output: serde_json::Value,
    },
}

impl Effect {
    /// Carry out the effect with `effects` (the registered models and tools): a convenience for
    /// hosts that perform effects in process.
    pub async fn run(&self, effects: &Effects) -> Result<Performed, EffectError> {
        match &self.action {
            Action::Perform => effects.perform(&self.id, &self.cmd.kind).await,
            Action::Compensate { output } => effects
                .compensate(&self.id, &self.cmd.kind, output.clone())
                .await
                .map(|value| Performed { value, usage: None }),
        }
    }
}

/// What a machine refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MachineError {
    /// The task ended.
    #[error("the task ended ({})", .0.as_str())]
    Finished(TaskState),
    /// A reply to a task that does not wait for one.
    #[error("the task is not waiting for input (it is {})", .0.as_str())]
    NotAwaitingInput(TaskState),
    /// An outcome for an effect the machine did not ask for (or was answered already).
    #[error("no effect with id `{0}` is outstanding")]
    UnknownEffect(InvocationId),
    /// The journal cannot be replayed.
    #[error("the journal cannot be replayed: {0}")]
    Journal(String),
    /// The journal was written by another skill, or by another version of it that the task cannot
    /// move from (see `reason`).
    #[error("the task runs on skill `{skill_id}` version `{recorded}`; this machine runs {running}, which it cannot move to: {reason}")]
    VersionMismatch {
        /// The skill the journal names.
        skill_id: String,
        /// The version it names.
        recorded: String,
        /// The skill and version of this machine.
        running: String,
        /// Why the task cannot move to it.
        reason: String,
    },
    /// The skill has no initial state.
    #[error("the skill cannot start: {0}")]
    Skill(String),
    /// A hook answer when no hook call waits for one.
    #[error("no hook call is waiting for an answer")]
    NoHookCall,
}

/// One task's run without I/O. See the [module docs](self).
pub struct TaskMachine {
    parts: Arc<Parts>,
    task_id: Arc<str>,
    context_id: Arc<str>,
    mode: PermissionMode,
    /// The fold, buffer and queue (shared with the open visit's invoker).
    st: Arc<Mutex<RunState>>,
    /// The row the first append creates (a new task).
    create: Option<TaskRecord>,
    phase: Phase,
    /// Effects to yield with the next `Perform`.
    outbox: Vec<Effect>,
    /// Effects asked for and not completed (in the outbox or yielded), by id.
    outstanding: HashMap<InvocationId, Asked>,
    /// An `AtMostOnce` receipt was recorded: persist before anything else.
    persist_now: bool,
    /// Calls whose callee the host found working in this machine's life (`call_waiting`): they
    /// wait for their recheck, and are asked again by the next machine resumed from the journal.
    parked: Parked,
    /// Hook calls to yield, in order ([`MachineConfig::hooks`]).
    hook_queue: std::collections::VecDeque<HookCall>,
    /// The hook call yielded and not answered yet.
    hook_pending: Option<HookCall>,
    /// The hooks refused the open visit's step.
    step_denied: Option<String>,
    /// The host that opens this machine's visits and performs their calls itself (the
    /// long-running engine); `None`: the machine's own invoker yields them as effects.
    host: Option<Arc<dyn Host>>,
    /// A visit of a hosted machine ended halted (its host stops): nothing more is done.
    halted: bool,
    /// A hosted machine's task began to wait for input: the host is told once it is durable.
    awaiting_input: bool,
    /// A hosted machine's visit suspended or began to wait for input: what it journaled is made
    /// durable before anything else runs (after the hooks heard of the visit), as it always was.
    flush_now: bool,
}

/// A host that performs a machine's effects itself, inside the step's future where the step awaits
/// them (the long-running engine): for each visit it gives the host side of its calls and wraps
/// the step's future (its span, its panic, the scope that names the visit), and it hears how each
/// visit ended. The machine keeps everything else: the queue, each call's lookup, hooks, gate and
/// issue, the visits' results, transition commands, cancels, compensations and the end.
pub(crate) trait Host: Send + Sync {
    /// The host side of the calls of visit `visit` of `step`, whose stop is `stop`.
    fn calls(&self, visit: u64, step: &str, stop: &Arc<VisitStop>) -> Arc<dyn CallHost>;

    /// The step's `future` as the host polls it (`replayed`: the visit ran before and is run again
    /// from the journal; `cancel`: the visit that tells the skill of a cancel).
    fn wrap(&self, future: StepFuture, visit: VisitKey<'_>) -> StepFuture;

    /// The visit of `step` ended with `result` (what the machine applies: a stop of its calls
    /// overrides what the step returned).
    fn ended(&self, step: &str, result: &Result<Transition<serde_json::Value>, StepError>);
}

/// Which visit a [`Host`] wraps.
pub(crate) struct VisitKey<'a> {
    /// Its number.
    pub visit: u64,
    /// Its step.
    pub step: &'a str,
    /// It ran before and runs again from the journal.
    pub replayed: bool,
    /// It tells the skill of a cancel.
    pub cancel: bool,
    /// Whether a call stopped it.
    pub stop: &'a Arc<VisitStop>,
}

/// A step visit's future.
pub(crate) type StepFuture =
    Pin<Box<dyn Future<Output = Result<Transition<serde_json::Value>, StepError>> + Send>>;

/// What a hosted machine asks of its host next ([`TaskMachine::turn`]); the machine's own
/// [`Output`] for the others.
#[derive(Debug)]
pub(crate) enum Turn {
    /// Make what is buffered durable (the host's own flush), then turn again.
    Flush,
    /// Perform these effects (transition commands, compensations) and settle each.
    Perform(Vec<Effect>),
    /// Put this to the hooks and hand the answer to [`TaskMachine::hooked`].
    Hook(Box<HookCall>),
    /// The open visit's step waits (for its calls' effects, or anything else it awaits): the
    /// context given to `turn` is woken when it can go on.
    Pending,
    /// A transition command's timer is set for this time.
    Timer(i64),
    /// The task began to wait for input, durably.
    AwaitingInput,
    /// Cancel the callees of the task's open calls: it is ending failed or canceled.
    CancelCalls,
    /// The task rests: a reply, a timer or a callee wakes it.
    Rest {
        /// A reply is awaited.
        input: bool,
        /// Its earliest timer.
        wake_at_ms: Option<i64>,
    },
    /// The task ended in this state; everything is persisted.
    Ended(TaskState),
    /// A visit ended halted: the host stops.
    Halted,
}

/// The calls a machine's host found still working.
pub(crate) type Parked = Arc<Mutex<std::collections::HashSet<InvocationId>>>;

/// An effect asked for, and whose outcome it is.
struct Asked {
    effect: Effect,
    /// Attempts earlier runs journaled (the retry budget counts from there).
    prior_attempts: u32,
    purpose: Purpose,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Purpose {
    /// A call of the open visit's step.
    Step,
    /// A transition command (its result is delivered as an event).
    Transition,
    /// A compensation while the task ends.
    Compensation,
}

enum Phase {
    /// Between visits: take the queue's next work.
    Queue,
    /// A step visit in progress.
    Visit(Box<OpenVisit>),
    /// A transition command being performed.
    Execute(InvocationId),
    /// The visit that tells the skill of a cancel, then the cancel's ending.
    CancelVisit(Box<OpenVisit>),
    /// Compensating, then ending the task.
    Finishing(Box<Finishing>),
    /// The task ended.
    Ended(TaskState),
}

struct OpenVisit {
    future: StepFuture,
    ctx: StepCtx,
    /// Whether a call of the visit stopped it.
    stop: Arc<VisitStop>,
    /// The visit's invoker (its desk).
    invoker: Arc<MachineInvoker>,
    /// Its calls are performed by the host, inside the step's future.
    hosted: bool,
    visit: u64,
    step: String,
    /// The hooks were asked about this visit ([`MachineConfig::hooks`]).
    admitted: bool,
}

struct Finishing {
    state: TaskState,
    message: Option<Message>,
    owed: Vec<(InvocationId, Cmd, serde_json::Value)>,
    current: Option<InvocationId>,
    /// A hosted machine's host was asked to cancel the open calls' callees.
    calls_canceled: bool,
}

impl TaskMachine {
    /// The task's id.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The task's context.
    pub fn context_id(&self) -> &str {
        &self.context_id
    }

    /// Who created the task (a child skill it calls runs as them).
    pub(crate) fn principal(&self) -> Option<String> {
        self.lock().header().and_then(|h| h.principal.clone())
    }

    /// The task's permission mode.
    pub(crate) fn mode(&self) -> PermissionMode {
        self.mode
    }

    /// The task's status as journaled and buffered so far.
    pub fn status(&self) -> TaskState {
        self.lock().status()
    }

    /// The seq the next journal entry takes.
    pub fn next_seq(&self) -> u64 {
        self.lock().next_seq
    }

    fn lock(&self) -> MutexGuard<'_, RunState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The task's calls without an outcome (or whose callee waits for input), each with its
    /// callee's task when journaled: what its host cancels once the task is canceled or failed.
    pub(crate) fn open_calls(&self) -> Vec<(InvocationId, Cmd, Option<String>)> {
        super::call::open_calls(&self.lock())
    }

    /// Take the user's `message` as the reply the task waits for: the question it asked gets it as
    /// its receipt (the step that asked re-runs, or the transition's command delivers it), or the
    /// state that awaits input gets it as an event. A task that works takes it only when its skill
    /// keeps such messages ([`crate::flow::WhileWorking`]): journaled, for its next question or
    /// as an interrupt.
    pub fn reply(&mut self, mut message: Message) -> Result<(), MachineError> {
        let mut st = self.lock();
        let status = st.status();
        if status.is_terminal() {
            return Err(MachineError::Finished(status));
        }
        if st.cancel_requested() {
            return Err(MachineError::NotAwaitingInput(status));
        }
        if status != TaskState::InputRequired {
            let interrupt = match self.parts.skill.info().while_working {
                crate::flow::WhileWorking::Queue => false,
                crate::flow::WhileWorking::Interrupt => true,
                _ => return Err(MachineError::NotAwaitingInput(status)),
            };
            message.task_id = Some(self.task_id.to_string());
            message.context_id = Some(self.context_id.to_string());
            st.queue_message(message, interrupt);
            return Ok(());
        }
        let ask = st.open_question().cloned();
        let open_visit = st
            .open()
            .and_then(|open| st.visit_event.clone().filter(|(v, _)| *v == open.visit));
        message.task_id = Some(self.task_id.to_string());
        message.context_id = Some(self.context_id.to_string());
        command::receive_reply(&mut st, message, ask, open_visit);
        Ok(())
    }

    /// Ask the task to cancel at `now_ms`: the step is told (`Event::Cancel`), compensations run,
    /// the task ends `canceled`. False when the task ended, or ended its last visit with a final
    /// transition (it ends as decided).
    pub fn cancel(&mut self, now_ms: i64) -> bool {
        let mut st = self.lock();
        st.clock_ms = Some(now_ms);
        st.request_cancel()
    }

    /// Hand back the outcome of effect `id` (an [`Effect`] this machine yielded) at `now_ms`. A
    /// transient failure with attempts left is journaled and the effect asked for again (after its
    /// backoff); anything else is its receipt.
    pub fn complete(
        &mut self,
        id: &InvocationId,
        result: Result<Performed, EffectError>,
        now_ms: i64,
    ) -> Result<(), MachineError> {
        self.lock().clock_ms = Some(now_ms);
        self.completed(id, result)
    }

    /// [`complete`](Self::complete) at the time the run reads (a hosted machine's: the wall
    /// clock; the machine's own: the time last passed in).
    pub(crate) fn completed(
        &mut self,
        id: &InvocationId,
        result: Result<Performed, EffectError>,
    ) -> Result<(), MachineError> {
        let Some(asked) = self.outstanding.remove(id) else {
            return Err(MachineError::UnknownEffect(id.clone()));
        };
        self.outbox.retain(|e| &e.id != id);
        let mut st = self.st.lock().unwrap_or_else(|p| p.into_inner());
        let now_ms = st.now();
        let Asked {
            effect,
            prior_attempts,
            purpose,
        } = asked;
        if purpose == Purpose::Compensation {
            st.push(Entry::Compensated {
                id: id.clone(),
                outcome: result.map(|p| p.value),
            });
            return Ok(());
        }
        if st.command(id).is_some_and(|r| r.receipt.is_some()) {
            // It lost a race, which journaled its outcome (`abandoned`) already.
            return Ok(());
        }
        let attempted = rules::attempted(
            &mut st,
            id,
            &effect.cmd,
            effect.attempt,
            prior_attempts,
            result,
        );
        match attempted {
            rules::Attempted::Retry(delay) => {
                let again = Effect {
                    attempt: effect.attempt + 1,
                    not_before_ms: Some(super::run::after_ms(
                        now_ms,
                        u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    )),
                    ..effect
                };
                drop(st);
                self.ask(again, prior_attempts, purpose);
            }
            rules::Attempted::Receipt(receipt) => {
                // Narrow the window in which an at-most-once outcome could be lost.
                self.persist_now |= !effect.cmd.policy.reissue_allowed();
                match purpose {
                    Purpose::Step => {
                        if let Phase::Visit(v) | Phase::CancelVisit(v) = &self.phase {
                            if self.parts.config.hooks && !effect.cmd.kind.is_call() {
                                self.hook_queue.push_back(HookCall {
                                    context: self.hook_context(v),
                                    kind: HookKind::AfterCommand {
                                        cmd: effect.cmd.clone(),
                                        receipt: receipt.clone(),
                                    },
                                });
                            }
                            v.invoker
                                .desk
                                .settle(id.clone(), rules::outcome(&effect.cmd, receipt));
                        }
                    }
                    Purpose::Transition => rules::deliver(&mut st, id, &effect.cmd, &receipt),
                    Purpose::Compensation => {}
                }
            }
        }
        Ok(())
    }

    /// A hosted machine's host performed effect `id` (a transition command) and journaled its
    /// receipt itself, as the engine's attempts and calls do: the command's result is delivered.
    pub(crate) fn settled(&mut self, id: &InvocationId, receipt: &crate::flow::Receipt) {
        let Some(asked) = self.outstanding.remove(id) else {
            return;
        };
        self.outbox.retain(|e| &e.id != id);
        if asked.purpose == Purpose::Transition {
            rules::deliver(&mut self.lock(), id, &asked.effect.cmd, receipt);
        }
    }

    /// A hosted machine's host left effect `id` without an outcome: a call whose callee works (its
    /// answer wakes the task later) or that a cancel cut off (the machine carries the cancel out
    /// next).
    pub(crate) fn withdraw(&mut self, id: &InvocationId) {
        self.outstanding.remove(id);
        self.outbox.retain(|e| &e.id != id);
    }

    /// The host did not perform effect `id` (an [`Effect`] this machine yielded) but handed it to an
    /// executor, which records its receipt in the journal itself. The command gets a recheck timer
    /// at `recheck_at_ms` (journaled: the task's row wakes then if no receipt came; the executor's
    /// receipt makes it due at once), the step (or transition) that asked for it waits, and a later
    /// pass resumes the task from the journal, where the receipt short-circuits the call.
    pub fn dispatched(
        &mut self,
        id: &InvocationId,
        recheck_at_ms: i64,
    ) -> Result<(), MachineError> {
        let Some(asked) = self.outstanding.remove(id) else {
            return Err(MachineError::UnknownEffect(id.clone()));
        };
        self.outbox.retain(|e| &e.id != id);
        self.lock().set_timer(id, recheck_at_ms);
        if asked.purpose == Purpose::Step {
            if let Phase::Visit(v) | Phase::CancelVisit(v) = &self.phase {
                // The call waits like a question: the visit is suspended and re-run later.
                v.stop.note(&StepError::Suspended);
                v.invoker.desk.settle(id.clone(), Err(StepError::Suspended));
            }
        }
        Ok(())
    }

    /// The host started call `id` (an [`Effect`] for `ctx.agent` or `ctx.skill` this machine
    /// yielded) and its callee answered with task `callee_task`: journaled (`call_started`) before
    /// anything else the host says of the call, so the call is never started again — every later
    /// effect for it carries [`Effect::call`]. Then [`complete`](Self::complete) the call with the
    /// callee's reply, or [`call_waiting`](Self::call_waiting).
    pub fn call_started(
        &mut self,
        id: &InvocationId,
        callee_task: impl Into<String>,
        callee_context: Option<String>,
    ) -> Result<(), MachineError> {
        if !self.outstanding.contains_key(id) {
            return Err(MachineError::UnknownEffect(id.clone()));
        }
        self.lock().push(Entry::CallStarted {
            id: id.clone(),
            task_id: callee_task.into(),
            context_id: callee_context,
            webhook: false,
        });
        Ok(())
    }

    /// The callee of call `id` (started: [`call_started`](Self::call_started) or
    /// [`Effect::call`]) still works: the call waits until `recheck_at_ms` (journaled as its
    /// timer: the task's row wakes then), the step that made it waits as on a question, and the
    /// call is asked for again by a machine resumed from the journal (the next pass), never by
    /// this one.
    pub fn call_waiting(
        &mut self,
        id: &InvocationId,
        recheck_at_ms: i64,
    ) -> Result<(), MachineError> {
        if self.lock().command(id).is_none_or(|c| c.callee.is_none()) {
            return Err(MachineError::UnknownEffect(id.clone()));
        }
        lock(&self.parked).insert(id.clone());
        self.dispatched(id, recheck_at_ms)
    }

    fn ask(&mut self, effect: Effect, prior_attempts: u32, purpose: Purpose) {
        self.outbox.push(effect.clone());
        self.outstanding.insert(
            effect.id.clone(),
            Asked {
                effect,
                prior_attempts,
                purpose,
            },
        );
    }

    /// Everything buffered so far, as the append that makes it durable (`None` when nothing is).
    /// A host may persist at any time: the serverless pass does when its invocation's time runs
    /// out, so the receipts of the effects that returned are kept while others are still out.
    pub fn persist(&mut self, now_ms: i64) -> Option<Append> {
        self.take_append(now_ms)
    }

    /// What the buffer holds, as the append that makes it durable.
    fn take_append(&mut self, now_ms: i64) -> Option<Append> {
        let batch = self.lock().take_batch()?;
        Some(Append {
            task_id: self.task_id.to_string(),
            first_seq: batch.first_seq,
            entries: batch.entries.into(),
            create: self.create.take(),
            state: batch.state,
            wake_at_ms: batch.wake_at_ms,
            waits_on_call: batch.waits_on_call,
            fence: None,
            lease: None,
            at_ms: now_ms,
        })
    }

    /// The host's hooks answered the [`Output::Hook`] call yielded last. A refused step fails the
    /// task; a refused command gets a permanent error as its receipt, journaled, as in the engine;
    /// a changed command is journaled as changed (its target may not change).
    pub fn hooked(&mut self, answer: HookAnswer) -> Result<(), MachineError> {
        let call = self.hook_pending.take().ok_or(MachineError::NoHookCall)?;
        match call.kind {
            HookKind::BeforeStep => {
                if let HookAnswer::Deny(reason) = answer {
                    self.step_denied = Some(reason);
                }
            }
            HookKind::BeforeCommand { id, .. } => {
                if let Phase::Visit(v) | Phase::CancelVisit(v) = &self.phase {
                    v.invoker.desk.answer_hook(id, answer);
                }
            }
            HookKind::AfterStep { .. } | HookKind::AfterCommand { .. } => {}
        }
        Ok(())
    }

    /// Run the task at `now_ms` as far as it goes without its host: until the host must persist,
    /// perform, complete an effect, or the task rests or ends.
    pub fn poll(&mut self, now_ms: i64) -> Output {
        self.lock().clock_ms = Some(now_ms);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            match self.turn(&mut cx) {
                Turn::Flush => {
                    if let Some(append) = self.take_append(now_ms) {
                        return Output::Persist(Box::new(append));
                    }
                }
                Turn::Perform(effects) => return Output::Perform(effects),
                Turn::Hook(call) => return Output::Hook(call),
                Turn::Pending => return Output::Awaiting,
                Turn::Rest { input, wake_at_ms } => return Output::Waiting { input, wake_at_ms },
                Turn::Ended(state) => return Output::Ended(state),
                // Only a hosted machine turns these (its host sets timers, cancels callees and
                // stops); this machine's hosts read them from `Waiting` and `open_calls`.
                Turn::Timer(_) | Turn::AwaitingInput | Turn::CancelCalls | Turn::Halted => {}
            }
        }
    }

    /// A hosted machine's next request of its host, the open visit's step polled with `cx` (the
    /// host's: the step wakes it). See [`Turn`].
    pub(crate) fn turn(&mut self, cx: &mut Context<'_>) -> Turn {
        loop {
            if self.halted {
                return Turn::Halted;
            }
            if std::mem::take(&mut self.persist_now) && self.buffered() {
                return Turn::Flush;
            }
            if self.hook_pending.is_none() {
                self.hook_pending = self.hook_queue.pop_front();
            }
            if let Some(call) = &self.hook_pending {
                return Turn::Hook(Box::new(call.clone()));
            }
            if std::mem::take(&mut self.flush_now) && self.buffered() {
                return Turn::Flush;
            }
            if std::mem::take(&mut self.awaiting_input) {
                return Turn::AwaitingInput;
            }
            if !self.outbox.is_empty() {
                // Output commit: the commands (and everything before them) are durable first.
                if self.buffered() {
                    return Turn::Flush;
                }
                return Turn::Perform(std::mem::take(&mut self.outbox));
            }
            match std::mem::replace(&mut self.phase, Phase::Queue) {
                Phase::Ended(state) => {
                    self.phase = Phase::Ended(state);
                    return if self.buffered() {
                        Turn::Flush
                    } else {
                        Turn::Ended(state)
                    };
                }
                Phase::Queue => {
                    if let Some(turn) = self.next_work() {
                        return turn;
                    }
                }
                Phase::Execute(id) => {
                    if self.outstanding.contains_key(&id) {
                        self.phase = Phase::Execute(id);
                        return Turn::Pending;
                    }
                }
                Phase::Visit(mut visit) if self.parts.config.hooks && !visit.admitted => {
                    visit.admitted = true;
                    self.hook_queue.push_back(HookCall {
                        context: self.hook_context(&visit),
                        kind: HookKind::BeforeStep,
                    });
                    self.phase = Phase::Visit(visit);
                }
                Phase::Visit(visit) if self.step_denied.is_some() => {
                    let reason = self.step_denied.take().unwrap_or_default();
                    let step = visit.step.clone();
                    drop(visit);
                    self.fail(format!("step `{step}` denied by a hook: {reason}"));
                }
                Phase::Visit(mut visit) => match self.poll_visit(&mut visit, cx) {
                    Some(result) => self.after_visit(&visit, result),
                    None => {
                        if self.flush_asked() {
                            self.phase = Phase::Visit(visit);
                            return Turn::Flush;
                        }
                        if let Some(turn) = self.visit_waits(&visit) {
                            self.phase = Phase::Visit(visit);
                            return turn;
                        }
                        if !self.outbox.is_empty() || !self.hook_queue.is_empty() {
                            // A call waits for the hooks (asked at the top of the loop) or its
                            // effect.
                            self.phase = Phase::Visit(visit);
                        } else {
                            let reason = format!("step `{}` of skill `{}` awaited something that is not a ctx call (a timer, a channel, a spawned task?); a step run by the task machine may await only its ctx calls", visit.step, self.parts.skill.info().id);
                            drop(visit);
                            self.fail(reason);
                        }
                    }
                },
                Phase::CancelVisit(mut visit) => match self.poll_visit(&mut visit, cx) {
                    Some(result) => {
                        rules::end_cancel_visit(&mut self.lock(), visit.visit, result.ok());
                        self.finishing(TaskState::Canceled, Some(cancel_message()));
                    }
                    None => {
                        if self.flush_asked() {
                            self.phase = Phase::CancelVisit(visit);
                            return Turn::Flush;
                        }
                        if let Some(turn) = self.visit_waits(&visit) {
                            self.phase = Phase::CancelVisit(visit);
                            return turn;
                        }
                        if !self.outbox.is_empty() || !self.hook_queue.is_empty() {
                            self.phase = Phase::CancelVisit(visit);
                        } else {
                            rules::end_cancel_visit(&mut self.lock(), visit.visit, None);
                            self.finishing(TaskState::Canceled, Some(cancel_message()));
                        }
                    }
                },
                Phase::Finishing(mut f) => {
                    if let Some(id) = &f.current {
                        if self.outstanding.contains_key(id) {
                            self.phase = Phase::Finishing(f);
                            return Turn::Pending;
                        }
                    }
                    match f.owed.pop() {
                        Some((id, cmd, output)) => {
                            f.current = Some(id.clone());
                            let effect = Effect {
                                id,
                                cmd,
                                action: Action::Compensate { output },
                                attempt: 1,
                                not_before_ms: None,
                                call: None,
                            };
                            self.ask(effect, 0, Purpose::Compensation);
                            self.phase = Phase::Finishing(f);
                        }
                        // A hosted machine's host cancels the callees before the task ends (a
                        // crash between the two ends the task again, and asks again).
                        None if self.host.is_some() && !f.calls_canceled => {
                            f.calls_canceled = true;
                            self.phase = Phase::Finishing(f);
                            return Turn::CancelCalls;
                        }
                        None => {
                            let state = f.state;
                            rules::end(&mut self.lock(), state, f.message);
                            self.phase = Phase::Ended(state);
                        }
                    }
                }
            }
        }
    }

    /// What a visit whose step is pending waits for, when it is the host's to say: a hosted
    /// visit's step is woken by what it awaits; the machine's own waits on the effects its calls
    /// asked for. `None`: the loop goes on (to ask the hooks or the host first), or the step
    /// awaited something that nothing here completes.
    fn visit_waits(&self, visit: &OpenVisit) -> Option<Turn> {
        if visit.hosted {
            return Some(Turn::Pending);
        }
        let asked_for = self.outbox.is_empty()
            && self.hook_queue.is_empty()
            && self
                .outstanding
                .values()
                .any(|a| a.purpose == Purpose::Step);
        asked_for.then_some(Turn::Pending)
    }

    /// Where the hooks are called from in `visit`.
    fn hook_context(&self, visit: &OpenVisit) -> HookContext {
        HookContext {
            task_id: self.task_id.to_string(),
            skill_id: self.parts.skill.info().id.clone(),
            step: visit.step.clone(),
            visit: visit.visit,
            mode: self.mode,
        }
    }

    /// A call of the visit just polled waits for the driver to flush what the poll buffered (its
    /// command and its siblings'), in one append, before the step is polled again
    /// (`EngineCalls::flush_batch`).
    fn flush_asked(&self) -> bool {
        std::mem::take(&mut self.lock().flush_asked)
    }

    /// True when entries wait in the run's buffer.
    fn buffered(&self) -> bool {
        self.lock().has_buffered()
    }

    /// Take the queue's next work (the phase is `Queue`); `Some` when the host must act first.
    fn next_work(&mut self) -> Option<Turn> {
        // The run's state through its own handle: `self` stays free for the phase it sets.
        let shared = Arc::clone(&self.st);
        let mut st = shared.lock().unwrap_or_else(|p| p.into_inner());
        let status = st.status();
        if status.is_terminal() {
            drop(st);
            self.phase = Phase::Ended(status);
            return None;
        }
        if st.cancel_requested() {
            drop(st);
            self.finish_canceled();
            return None;
        }
        let Some(work) = rules::next_work(&mut st) else {
            if rules::stuck(&st) {
                drop(st);
                self.fail(rules::STUCK.to_owned());
                return None;
            }
            if st.has_buffered() {
                return Some(Turn::Flush);
            }
            let input = st.status() == TaskState::InputRequired;
            let wake_at_ms = st.earliest_timer();
            return Some(Turn::Rest { input, wake_at_ms });
        };
        match work {
            Work::Execute(id) => match rules::execute(&mut st, &id) {
                Execute::Timer(at) if self.host.is_some() => return Some(Turn::Timer(at)),
                Execute::Done | Execute::Wait | Execute::Timer(_) => {}
                Execute::Unknown(error) => {
                    drop(st);
                    self.fail(error.to_string());
                }
                Execute::Perform(_) if lock(&self.parked).contains(&id) => {}
                Execute::Perform(rec) => {
                    drop(st);
                    let call = call_progress(&rec);
                    let effect = Effect {
                        id: id.clone(),
                        cmd: rec.cmd,
                        action: Action::Perform,
                        attempt: rec.attempts + 1,
                        not_before_ms: None,
                        call,
                    };
                    self.ask(effect, rec.attempts, Purpose::Transition);
                    self.phase = Phase::Execute(id);
                }
            },
            Work::Activate { event, rerun } => {
                let skill = self.parts.skill.clone();
                match rules::begin_visit(
                    &mut st,
                    &*skill,
                    &event,
                    rerun,
                    self.parts.config.max_steps,
                ) {
                    Ok(visit) => {
                        drop(st);
                        let replayed = rerun.is_some();
                        self.phase =
                            Phase::Visit(Box::new(self.open_visit(visit, event, replayed)));
                    }
                    Err(reason) => {
                        drop(st);
                        self.fail(reason);
                    }
                }
            }
        }
        None
    }

    /// A visit's future: the skill's step polled by this machine, its calls through a
    /// [`MachineInvoker`] (performed by the host inside the future, for a hosted machine).
    fn open_visit(&self, visit: rules::Visit, event: Event, replayed: bool) -> OpenVisit {
        let rules::Visit { visit, state, step } = visit;
        let stop = Arc::new(VisitStop::default());
        let calls = self
            .host
            .as_ref()
            .map(|host| host.calls(visit, &step, &stop));
        let invoker = Arc::new(MachineInvoker {
            st: self.st.clone(),
            effects: self.parts.effects.clone(),
            task_id: self.task_id.clone(),
            skill_id: self.parts.skill.info().id.clone(),
            mode: self.mode,
            visit,
            step: step.clone(),
            stop: stop.clone(),
            batch: Default::default(),
            desk: Default::default(),
            parked: self.parked.clone(),
            hooks: self.parts.config.hooks && calls.is_none(),
            host: calls,
        });
        let ctx = StepCtx::new(
            self.task_id.clone(),
            self.context_id.clone(),
            step.clone(),
            invoker.clone(),
        );
        let skill = self.parts.skill.clone();
        let step_ctx = ctx.clone();
        let cancel = matches!(event, Event::Cancel);
        let mut future: StepFuture =
            Box::pin(async move { skill.activate(state, event, &step_ctx).await });
        if let Some(host) = &self.host {
            let key = VisitKey {
                visit,
                step: &step,
                replayed,
                cancel,
                stop: &stop,
            };
            future = host.wrap(future, key);
        }
        OpenVisit {
            future,
            ctx,
            stop,
            hosted: self.host.is_some(),
            invoker,
            visit,
            step,
            admitted: false,
        }
    }

    /// Poll the visit's step once: its result, or `None` while it waits (the effects its calls
    /// asked for are in the outbox).
    fn poll_visit(
        &mut self,
        visit: &mut OpenVisit,
        cx: &mut Context<'_>,
    ) -> Option<Result<Transition<serde_json::Value>, StepError>> {
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            visit.future.as_mut().poll(cx)
        }));
        // A hosted machine's host performs the calls inside the future: nothing waits on the desk.
        if !visit.hosted {
            let invoker = visit.invoker.clone();
            for (id, cmd) in invoker.desk.take_hook_requests() {
                self.hook_queue.push_back(HookCall {
                    context: self.hook_context(visit),
                    kind: HookKind::BeforeCommand { id, cmd },
                });
            }
            for (id, cmd, prior_attempts) in invoker.desk.take_requests() {
                let call = self.lock().command(&id).and_then(call_progress);
                let effect = Effect {
                    id,
                    cmd,
                    action: Action::Perform,
                    attempt: prior_attempts + 1,
                    not_before_ms: None,
                    call,
                };
                self.ask(effect, prior_attempts, Purpose::Step);
            }
        }
        match polled {
            Ok(Poll::Pending) => None,
            Ok(Poll::Ready(result)) => Some(result),
            // The payload, which may quote data or secrets, is not in the failure.
            Err(_) => Some(Err(StepError::Failed(format!(
                "step `{}` of skill `{}` panicked",
                visit.step,
                self.parts.skill.info().id
            )))),
        }
    }

    /// Apply a visit's result, as the engine's driver does.
    fn after_visit(
        &mut self,
        visit: &OpenVisit,
        mut result: Result<Transition<serde_json::Value>, StepError>,
    ) {
        // Effects of the visit still asked for have nobody to receive them.
        self.outstanding.retain(|_, a| a.purpose != Purpose::Step);
        self.outbox.retain(|e| self.outstanding.contains_key(&e.id));
        let alive = visit.ctx.calls_alive();
        if alive > 0 && !matches!(result, Err(StepError::Halted)) {
            visit.stop.fail(rules::outlived(&visit.step, alive));
        }
        if let Some(stop) = visit.stop.error() {
            result = Err(stop);
        }
        if let Some(host) = &self.host {
            host.ended(&visit.step, &result);
        }
        if self.parts.config.hooks {
            let outcome = match &result {
                Ok(t) => crate::journal::TransitionKind::from(&t.next).to_string(),
                Err(e) => e.to_string(),
            };
            self.hook_queue.push_back(HookCall {
                context: self.hook_context(visit),
                kind: HookKind::AfterStep { outcome },
            });
        }
        let after = {
            let mut st = self.lock();
            let effects = &self.parts.effects;
            rules::after_visit(
                &mut st,
                VisitResult {
                    task_id: &self.task_id,
                    skill_id: &self.parts.skill.info().id,
                    visit: visit.visit,
                    step: &visit.step,
                    ordinal: visit.ctx.positions_taken(),
                    effects,
                    checkpoint_every: self.parts.config.checkpoint_every,
                },
                result,
            )
        };
        let hosted = self.host.is_some();
        match after {
            AfterVisit::Then(After::AwaitInput) if hosted => {
                self.flush_now = true;
                self.awaiting_input = true;
            }
            AfterVisit::Suspended if hosted => self.flush_now = true,
            AfterVisit::Then(After::Continue | After::AwaitInput) | AfterVisit::Suspended => {}
            AfterVisit::Then(After::End(state, message)) => {
                rules::end(&mut self.lock(), state, message);
                self.phase = Phase::Ended(state);
            }
            AfterVisit::Then(After::Fail(reason)) => self.fail(reason),
            // A hosted machine's visit halts when its host does (a crash, a lost lease, a failed
            // append): the host stops. Nothing halts the machine's own visits: a step that
            // returns `Halted` itself fails its task.
            AfterVisit::Halted if hosted => self.halted = true,
            AfterVisit::Halted => self.fail(StepError::Halted.to_string()),
            AfterVisit::Canceled => self.finish_canceled(),
        }
    }

    /// Compensate, then end the task as failed with `reason`.
    fn fail(&mut self, reason: String) {
        self.finishing(TaskState::Failed, Some(rules::failure_message(reason)));
    }

    /// Tell the skill (unless a run before a crash did), compensate, end the task as canceled.
    fn finish_canceled(&mut self) {
        let delivered = self.lock().cancel_delivered();
        if delivered {
            self.finishing(TaskState::Canceled, Some(cancel_message()));
            return;
        }
        let skill = self.parts.skill.clone();
        let visit = rules::begin_cancel_visit(&mut self.lock(), &*skill);
        self.phase = Phase::CancelVisit(Box::new(self.open_visit(visit, Event::Cancel, false)));
    }

    fn finishing(&mut self, state: TaskState, message: Option<Message>) {
        let mut owed = rules::compensations_owed(&self.lock());
        // Popped from the back: newest first.
        owed.reverse();
        self.phase = Phase::Finishing(Box::new(Finishing {
            state,
            message,
            owed,
            current: None,
            calls_canceled: false,
        }));
    }
}

fn cancel_message() -> Message {
    rules::status_message("Task canceled.")
}

impl std::fmt::Debug for TaskMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskMachine")
            .field("task_id", &self.task_id)
            .field("status", &self.status())
            .field("outstanding", &self.outstanding.len())
            .finish_non_exhaustive()
    }
}
