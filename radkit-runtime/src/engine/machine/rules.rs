//! The rules of a task's run, decided on its state alone: what a visit, a transition, an ending, a
//! cancel, a transition command and an effect's attempt journal, and what a step's call finds in
//! the command table. No clock (time is passed in), no I/O, no runtime. The sans-IO
//! [`TaskMachine`](super::TaskMachine) and the long-running engine's driver both apply them, so each
//! rule exists once; the engine adds only what a host does (flushes, effects, hooks, leases).

use crate::effects::{Effects, Performed};
use crate::engine::command::{self, Issued, Outstanding};
use crate::engine::fold::CmdRec;
use crate::engine::run::{RunState, Work};
use crate::flow::{
    ApprovalRequest, Cmd, EffectError, ErasedSkill, Event, InvocationId, Next, PermissionMode,
    Receipt, StepError, Transition,
};
use crate::journal::{Compensable, Entry, TransitionKind};
use crate::model::{Message, Part, Role, TaskState};

/// The text of a status message the engine writes (a rejection's reason, a cancel).
pub(crate) fn status_message(text: &str) -> Message {
    Message::agent_text(text)
}

/// The status message of a failed task.
pub(crate) fn failure_message(reason: String) -> Message {
    Message::new(Role::Agent, vec![Part::text(reason)])
}

/// Journal a new task's first entries (`task_created`, the message that created it) and queue its
/// first visit. The message carries the task's id and context.
pub(crate) fn create(
    st: &mut RunState,
    info: &crate::flow::SkillInfo,
    context_id: &str,
    principal: Option<String>,
    mode: PermissionMode,
    message: Message,
) {
    st.push(Entry::TaskCreated {
        skill_id: info.id.clone(),
        skill_version: info.version.clone(),
        context_id: context_id.to_owned(),
        principal,
        permission_mode: mode,
        steps: info.step_shapes(),
    });
    st.push(Entry::MessageReceived {
        message: message.clone(),
    });
    st.queue.push_back(Work::Activate {
        event: Event::UserMessage { message },
        rerun: None,
    });
}

/// The step visit about to run.
pub(crate) struct Visit {
    pub visit: u64,
    pub state: serde_json::Value,
    pub step: String,
}

/// Begin a visit delivering `event`: its number, state and step. A new visit (not a `rerun`) is
/// journaled (`activated`; a user message makes the task `working`). `Err` is the reason the task
/// fails instead: it ran `max_steps` visits.
pub(crate) fn begin_visit(
    st: &mut RunState,
    skill: &dyn ErasedSkill,
    event: &Event,
    rerun: Option<u64>,
    max_steps: u64,
) -> Result<Visit, String> {
    let visit = rerun.unwrap_or(st.visit() + 1);
    if visit > max_steps {
        return Err(format!("max_steps exceeded: the task ran {} step visits (limit {max_steps}); a loop that never ends?", visit - 1));
    }
    let state = st.state().clone();
    let step = skill.step_name(&state);
    st.visit_event = Some((visit, event.clone()));
    if rerun.is_none() {
        if matches!(event, Event::UserMessage { .. } | Event::Interrupted { .. }) {
            st.set_status(TaskState::Working);
        }
        st.push(Entry::Activated {
            visit,
            step: step.clone(),
            state: state.clone(),
            event: event.clone(),
        });
    }
    Ok(Visit { visit, state, step })
}

/// The work the queue holds next: `None` when it is empty (or the task ended), skipping re-runs a
/// later transition made stale.
pub(crate) fn next_work(st: &mut RunState) -> Option<Work> {
    if st.status().is_terminal() {
        return None;
    }
    if st.interrupt_pending() && !st.cancel_requested() && st.ended().is_none() {
        interrupt(st);
    }
    let mut work = st.queue.pop_front();
    while let Some(Work::Activate {
        rerun: Some(visit), ..
    }) = &work
    {
        if !st.rerun_is_stale(*visit) {
            break;
        }
        work = st.queue.pop_front();
    }
    work
}

/// Deliver the oldest interrupting message ([`crate::flow::WhileWorking::Interrupt`]): the open
/// visit (stopped at a call, or suspended in one) is closed as interrupted and its calls without a
/// receipt are abandoned (an error receipt each; a callee's task is the host's to cancel, see
/// [`RunState::abandoned`]); a `goto`'s entry and re-runs of the closed visit no longer apply; the
/// interrupt step's visit is queued first. Transition commands still deliver their results.
pub(crate) fn interrupt(st: &mut RunState) {
    let Some(queued) = st.inbox().iter().find(|q| q.interrupt).cloned() else {
        return;
    };
    if let Some(open) = st.open() {
        let mut unanswered: Vec<(InvocationId, u64)> = st
            .commands()
            .iter()
            .filter(|(_, c)| !c.transition && c.receipt.is_none())
            .map(|(id, c)| (id.clone(), c.issued_seq))
            .collect();
        unanswered.sort_by_key(|(_, seq)| *seq);
        for (id, _) in unanswered {
            let Some(rec) = st.command(&id).cloned() else {
                continue;
            };
            let error = EffectError::permanent(format!(
                "abandoned: {} was cut off when a new message interrupted visit {}",
                rec.cmd.kind.fingerprint(),
                open.visit
            ));
            if rec.cmd.kind.is_call() {
                let callee = rec.callee.as_ref().map(|c| c.task_id.clone());
                st.abandoned.push((id.clone(), rec.cmd.clone(), callee));
            }
            st.record_receipt(Receipt {
                id,
                attempt: rec.attempts.max(1),
                outcome: Err(error),
                usage: None,
            });
        }
        st.push(Entry::Transitioned {
            visit: open.visit,
            next: TransitionKind::Interrupt,
            state: None,
        });
    }
    st.push(Entry::QueuedDelivered {
        message_id: queued.message.message_id.clone(),
    });
    st.rewake();
    st.queue.retain(|w| {
        matches!(
            w,
            Work::Execute(_)
                | Work::Activate {
                    event: Event::UserMessage { .. }
                        | Event::CommandResult { .. }
                        | Event::TimerFired { .. },
                    rerun: None,
                }
        )
    });
    st.queue.push_front(Work::Activate {
        event: Event::Interrupted {
            message: queued.message,
        },
        rerun: None,
    });
}

/// True when the queue is empty and nothing can ever wake the task: no input asked, no command,
/// timer or call outstanding. The task then fails with [`STUCK`]. Work queued since the host found
/// the queue empty (a reply the engine took into the live run while its driver settled: the
/// question's receipt, and the re-run of its visit) is not stuck: the host goes on with it.
pub(crate) fn stuck(st: &RunState) -> bool {
    let waiting = st.status().is_terminal()
        || st.status() == TaskState::InputRequired
        || st.has_outstanding_wake()
        || st.interrupt_pending()
        || !st.queue.is_empty();
    !waiting
}

/// Why a stuck task fails.
pub(crate) const STUCK: &str = "the skill moved to a state that waits for an event, but no command, timer or input is outstanding";

/// What follows a journaled transition.
#[derive(Debug)]
pub(crate) enum After {
    /// Go on with the queue (`to`, `goto`, `ignore`).
    Continue,
    /// The task waits for input (`awaiting_input` and `input-required` are journaled).
    AwaitInput,
    /// End the task in this state (`complete`, `reject`).
    End(TaskState, Option<Message>),
    /// Fail the task (compensations first) with this reason: a `fail` transition, or a transition
    /// the engine refuses.
    Fail(String),
}

/// How a host's policy for a command is decided: a registered tool's declared policy wins.
pub(crate) fn with_policy(effects: &Effects, mut cmd: Cmd) -> Cmd {
    cmd.policy = effects.policy_for(&cmd.kind, cmd.policy);
    cmd
}

/// Journal the transition `t` that `visit` of step `step` returned, with its messages, artifacts
/// and commands (their ids from `ordinal` on, the positions the step's own calls left), and queue
/// what follows it; return what the host does next.
#[allow(clippy::too_many_arguments)]
pub(crate) fn apply_transition(
    st: &mut RunState,
    task_id: &str,
    skill_id: &str,
    visit: u64,
    step: &str,
    t: Transition<serde_json::Value>,
    ordinal: u32,
    effects: &Effects,
    checkpoint_every: u64,
) -> After {
    let Transition {
        next,
        cmds,
        messages,
        artifacts,
    } = t;
    let effects_only = cmds.iter().all(|c| c.kind.is_journal_effect());
    if !effects_only && !matches!(next, Next::To(_) | Next::Goto(_)) {
        return After::Fail(format!("step `{step}` returned a final or waiting transition with commands; only `to` and `goto` transitions may carry commands (messages and artifacts are fine)"));
    }
    let kind = TransitionKind::from(&next);
    // A re-run of a visit whose final transition was journaled before a crash (see replay): the
    // transition, its messages and artifacts are durable already; only the ending is left to do.
    let recorded = st
        .journaled_end
        .take_if(|(v, _)| *v == visit)
        .map(|(_, recorded)| recorded);
    match recorded {
        Some(recorded) if recorded != kind => {
            return After::Fail(format!("step `{step}` of skill `{skill_id}` ended the task with `{recorded}` before a restart and returned `{kind}` when re-run; a step must return the same transition given the same receipts"));
        }
        Some(_) => {}
        None => {
            for message in messages {
                st.push(Entry::MessageEmitted { message });
            }
            for artifact in artifacts {
                st.push(Entry::ArtifactEmitted {
                    artifact,
                    append: false,
                    last_chunk: true,
                });
            }
            journal_transition(
                st,
                task_id,
                visit,
                &next,
                cmds,
                ordinal,
                effects,
                checkpoint_every,
            );
        }
    }
    follow(st, next)
}

/// Journal the transition `next` of `visit` and its commands, and queue what follows: the next
/// visit after a `goto`, each command to perform or wait for.
#[allow(clippy::too_many_arguments)]
fn journal_transition(
    st: &mut RunState,
    task_id: &str,
    visit: u64,
    next: &Next<serde_json::Value>,
    cmds: Vec<Cmd>,
    mut ordinal: u32,
    effects: &Effects,
    checkpoint_every: u64,
) {
    let plain_goto = matches!(next, Next::Goto(_)) && cmds.is_empty();
    // The state moves into the journal entry (the fold reads it from there).
    let state = match next {
        Next::To(s) | Next::Goto(s) | Next::AwaitInput { state: s, .. } => Some(s.clone()),
        _ => None,
    };
    st.push(Entry::Transitioned {
        visit,
        next: TransitionKind::from(next),
        state,
    });
    if let Next::Goto(_) = next {
        st.queue.push_back(Work::Activate {
            event: Event::Enter,
            rerun: None,
        });
    }
    let now = st.now();
    for cmd in cmds {
        let id = InvocationId::derive(task_id, visit, ordinal);
        ordinal += 1;
        let cmd = with_policy(effects, cmd);
        if command::issue(st, &id, cmd, true, now) != Issued::Journaled {
            st.queue.push_back(Work::Execute(id));
        }
    }
    if plain_goto {
        checkpoint(st, visit, checkpoint_every);
    }
}

/// Every `every` visits, after a `goto` that leaves nothing outstanding, journal a checkpoint
/// (replay restarts from it); the fold then forgets the commands only replay needed.
fn checkpoint(st: &mut RunState, visit: u64, every: u64) {
    // A checkpoint forgets the entries before it: none while a queued message waits.
    if every == 0
        || !visit.is_multiple_of(every)
        || st.cancel_requested()
        || !st.inbox().is_empty()
        || st.interrupt_delivered().is_some()
    {
        return;
    }
    let quiet = st.queue.len() == 1 && st.commands().values().all(|c| c.receipt.is_some());
    if !quiet {
        return;
    }
    let compensable: Vec<Compensable> = st
        .compensable()
        .iter()
        .filter_map(|id| {
            let rec = st.command(id)?;
            Some(Compensable {
                id: id.clone(),
                cmd: rec.cmd.clone(),
                receipt: rec.receipt.clone()?,
            })
        })
        .collect();
    let entry = Entry::Checkpoint {
        visit,
        state: st.state().clone(),
        status: st.status(),
        compensable,
        runs_on: st.header().and_then(|h| h.runs_on()),
    };
    st.push(entry);
}

/// What follows a journaled transition: the entries of a wait for input, or what the host does.
fn follow(st: &mut RunState, next: Next<serde_json::Value>) -> After {
    match next {
        Next::AwaitInput {
            slot,
            message,
            state,
        } => {
            st.push(Entry::AwaitingInput {
                slot,
                message,
                resume: Some(state),
                ask: None,
            });
            if let Some(message) = command::take_queued(st) {
                // A message kept while the task worked answers at once.
                st.queue.push_back(Work::Activate {
                    event: Event::UserMessage { message },
                    rerun: None,
                });
                return After::Continue;
            }
            st.set_status(TaskState::InputRequired);
            After::AwaitInput
        }
        Next::Complete { message } => After::End(TaskState::Completed, message),
        Next::Fail { reason } => After::Fail(reason),
        Next::Reject { reason } => After::End(TaskState::Rejected, Some(status_message(&reason))),
        Next::To(_) | Next::Goto(_) | Next::Ignore => After::Continue,
    }
}

/// What a visit's result means for the task, once the visit's control errors are accounted for.
pub(crate) fn after_visit(
    st: &mut RunState,
    ctx: VisitResult<'_>,
    result: Result<Transition<serde_json::Value>, StepError>,
) -> AfterVisit {
    match result {
        Err(StepError::Rejected(reason)) => AfterVisit::Then(After::End(
            TaskState::Rejected,
            Some(status_message(&reason)),
        )),
        Ok(transition) => AfterVisit::Then(apply_transition(
            st,
            ctx.task_id,
            ctx.skill_id,
            ctx.visit,
            ctx.step,
            transition,
            ctx.ordinal,
            ctx.effects,
            ctx.checkpoint_every,
        )),
        Err(StepError::Suspended) => AfterVisit::Suspended,
        // The visit stopped at a call: `next_work` closes it and delivers the message.
        Err(StepError::Interrupted) => AfterVisit::Then(After::Continue),
        Err(StepError::Halted) => AfterVisit::Halted,
        Err(StepError::Canceled) => AfterVisit::Canceled,
        Err(other) => AfterVisit::Then(After::Fail(other.to_string())),
    }
}

/// What [`after_visit`] needs to know of the visit.
pub(crate) struct VisitResult<'a> {
    pub task_id: &'a str,
    pub skill_id: &'a str,
    pub visit: u64,
    pub step: &'a str,
    /// The positions the step's calls took (the transition's commands take the next ones).
    pub ordinal: u32,
    pub effects: &'a Effects,
    pub checkpoint_every: u64,
}

/// What a host does after a visit.
#[derive(Debug)]
pub(crate) enum AfterVisit {
    Then(After),
    /// A call of the visit waits (a question, a timer, a callee): commit and go on with the queue.
    Suspended,
    /// The host stopped the visit (a halt, a lost lease, a failed append).
    Halted,
    /// The task is being canceled: the host finishes the cancel.
    Canceled,
}

/// The reason a step's result is overridden by a call that stopped its visit, or by a call that
/// outlived it (`alive` calls still pending when the step returned).
pub(crate) fn outlived(step: &str, alive: u32) -> String {
    format!(
        "step `{step}` returned while {alive} ctx call(s) it made were still pending outside it (in a spawned task, or stored away): await every ctx call inside the step before it returns; run calls together with `ctx.all` or `ctx.race`"
    )
}

/// End the task in `state`: no wake time, nothing queued, the `terminal` entry.
pub(crate) fn end(st: &mut RunState, state: TaskState, message: Option<Message>) {
    st.set_wake(None);
    st.queue.clear();
    st.push(Entry::Terminal { state, message });
}

/// The compensations owed (successful `Compensate` commands not compensated yet), newest first.
pub(crate) fn compensations_owed(st: &RunState) -> Vec<(InvocationId, Cmd, serde_json::Value)> {
    st.compensable()
        .iter()
        .rev()
        .filter_map(|id| {
            let rec = st.command(id)?;
            let value = rec.receipt.as_ref()?.outcome.clone().ok()?;
            Some((id.clone(), rec.cmd.clone(), value))
        })
        .collect()
}

/// Begin the visit that tells the skill of a cancel (`Event::Cancel`), journaled.
pub(crate) fn begin_cancel_visit(st: &mut RunState, skill: &dyn ErasedSkill) -> Visit {
    let (visit, state) = (st.visit() + 1, st.state().clone());
    let step = skill.step_name(&state);
    st.push(Entry::Activated {
        visit,
        step: step.clone(),
        state: state.clone(),
        event: Event::Cancel,
    });
    Visit { visit, state, step }
}

/// End the cancel's visit: the messages and artifacts of its transition are kept (its commands were
/// refused, its next state is ignored).
pub(crate) fn end_cancel_visit(
    st: &mut RunState,
    visit: u64,
    transition: Option<Transition<serde_json::Value>>,
) {
    if let Some(t) = transition {
        for message in t.messages {
            st.push(Entry::MessageEmitted { message });
        }
        for artifact in t.artifacts {
            st.push(Entry::ArtifactEmitted {
                artifact,
                append: false,
                last_chunk: true,
            });
        }
    }
    st.push(Entry::Transitioned {
        visit,
        next: TransitionKind::Cancel,
        state: None,
    });
}

/// What a transition command needs now.
pub(crate) enum Execute {
    /// Nothing (unknown id), or its result is queued for the skill already.
    Done,
    /// It waits (a timer until this time, or a question's deadline): the host arms an alarm.
    Timer(i64),
    /// It waits for a reply.
    Wait,
    /// Its outcome is unknown: the task fails with this error.
    Unknown(StepError),
    /// The host performs it (or starts or resumes the call), then hands its receipt to
    /// [`deliver`].
    Perform(Box<CmdRec>),
}

/// What transition command `id` needs at the run's time: a receipt is delivered to the skill (queued
/// first), a due timer or expired question settled and delivered.
pub(crate) fn execute(st: &mut RunState, id: &InvocationId) -> Execute {
    let Some(rec) = st.command(id).cloned() else {
        return Execute::Done;
    };
    if let Some(receipt) = &rec.receipt {
        deliver(st, id, &rec.cmd, receipt);
        return Execute::Done;
    }
    let recovered = st.recovered(&rec);
    let now = st.now();
    match command::outstanding(&rec, recovered, now) {
        // A timer that fired, or a question answered by nobody by its deadline: it takes its
        // default, as in a step.
        Outstanding::Due => {
            command::settle_due(st, id, &rec.cmd);
            if let Some(receipt) = st.command(id).and_then(|r| r.receipt.clone()) {
                deliver(st, id, &rec.cmd, &receipt);
            }
            Execute::Done
        }
        Outstanding::Timer(at) | Outstanding::Question(Some(at)) => Execute::Timer(at),
        Outstanding::Question(None) => Execute::Wait,
        Outstanding::Unknown => Execute::Unknown(StepError::OutcomeUnknown {
            what: rec.cmd.kind.fingerprint(),
            id: id.clone(),
        }),
        Outstanding::Perform => Execute::Perform(Box::new(rec)),
    }
}

/// Queue the result of transition command `id` for the skill, first.
pub(crate) fn deliver(st: &mut RunState, id: &InvocationId, cmd: &Cmd, receipt: &Receipt) {
    st.queue.push_front(Work::Activate {
        event: command::result_event(id.clone(), cmd, receipt),
        rerun: None,
    });
}

/// What the command table holds for a step's call at `position`.
pub(crate) enum Found {
    Receipt(Receipt),
    /// Journaled without a receipt; true when an earlier run journaled it.
    NoReceipt(Box<CmdRec>, bool),
    New,
}

/// Look up the call `cmd` that step `step` made at `position` (command `id`): a recorded receipt, a
/// command journaled without one, or nothing yet. A command of another kind or target at the
/// position is a non-determinism error; a task being canceled refuses every call.
pub(crate) fn find(
    st: &RunState,
    skill_id: &str,
    step: &str,
    position: u32,
    id: &InvocationId,
    cmd: &Cmd,
) -> Result<Found, StepError> {
    if st.cancel_requested() {
        return Err(StepError::Canceled);
    }
    // A visit whose end is journaled (re-run after a crash to finish the task) ends as decided.
    if st.interrupt_pending() && st.ended().is_none() {
        return Err(StepError::Interrupted);
    }
    Ok(match st.command(id) {
        Some(rec) if rec.cmd.kind.fingerprint() != cmd.kind.fingerprint() => {
            return Err(non_determinism(skill_id, step, position, rec, cmd));
        }
        Some(rec) => match &rec.receipt {
            Some(receipt) => Found::Receipt(receipt.clone()),
            None => Found::NoReceipt(Box::new(rec.clone()), st.recovered(rec)),
        },
        None => Found::New,
    })
}

fn non_determinism(
    skill_id: &str,
    step: &str,
    position: u32,
    rec: &CmdRec,
    cmd: &Cmd,
) -> StepError {
    StepError::NonDeterminism {
        skill: skill_id.to_owned(),
        step: step.to_owned(),
        position,
        recorded: rec.cmd.kind.fingerprint(),
        issued: cmd.kind.fingerprint(),
    }
}

/// The value [`record_race`] journaled at `position` for `cmd`, if any.
pub(crate) fn recorded(
    st: &RunState,
    skill_id: &str,
    step: &str,
    position: u32,
    id: &InvocationId,
    cmd: &Cmd,
) -> Result<Option<serde_json::Value>, StepError> {
    let Some(rec) = st.command(id) else {
        return Ok(None);
    };
    if rec.cmd.kind.fingerprint() != cmd.kind.fingerprint() {
        return Err(non_determinism(skill_id, step, position, rec, cmd));
    }
    match &rec.receipt {
        Some(Receipt { outcome: Ok(v), .. }) => Ok(Some(v.clone())),
        _ => Ok(None),
    }
}

/// A call of a race that lost it: its id, its command, and its callee's task when it is a bound
/// call (which the host cancels).
pub(crate) type Abandoned = (InvocationId, Cmd, Option<String>);

/// Journal a race's winner (`cmd` at `position`, command `id`, with `value`) and give the commands
/// at the `abandoned` positions without an outcome an `abandoned` error; return the calls among
/// them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn record_race(
    st: &mut RunState,
    task_id: &str,
    visit: u64,
    step: &str,
    position: u32,
    id: &InvocationId,
    cmd: Cmd,
    value: serde_json::Value,
    abandoned: &[u32],
) -> Vec<Abandoned> {
    let mut calls = Vec::new();
    st.issue(id, cmd, false);
    st.record_receipt(Receipt {
        id: id.clone(),
        attempt: 1,
        outcome: Ok(value),
        usage: None,
    });
    for &lost in abandoned {
        let lost_id = InvocationId::derive(task_id, visit, lost);
        let Some(rec) = st.command(&lost_id).filter(|r| r.receipt.is_none()) else {
            continue;
        };
        let error = EffectError::permanent(format!(
            "abandoned: {} lost the race at position {position} of step `{step}`",
            rec.cmd.kind.fingerprint(),
        ));
        let attempt = rec.attempts.max(1);
        if rec.cmd.kind.is_call() {
            let callee = rec.callee.as_ref().map(|c| c.task_id.clone());
            calls.push((lost_id.clone(), rec.cmd.clone(), callee));
        }
        st.record_receipt(Receipt {
            id: lost_id,
            attempt,
            outcome: Err(error),
            usage: None,
        });
    }
    // A question that lost the race is no longer asked.
    if st.status() == TaskState::InputRequired && st.open_question().is_none() {
        st.set_status(TaskState::Working);
    }
    calls
}

/// Journal `cmd` with a permanent error as its receipt (a refused call) and return the error.
pub(crate) fn refuse(st: &mut RunState, id: &InvocationId, cmd: Cmd, reason: String) -> StepError {
    let error = EffectError::permanent(reason);
    let what = cmd.kind.fingerprint();
    st.issue(id, cmd, false);
    st.record_receipt(Receipt {
        id: id.clone(),
        attempt: 1,
        outcome: Err(error.clone()),
        usage: None,
    });
    StepError::Effect { what, error }
}

/// A receipt as the step sees it.
pub(crate) fn outcome(cmd: &Cmd, receipt: Receipt) -> Result<serde_json::Value, StepError> {
    receipt.outcome.map_err(|error| StepError::Effect {
        what: cmd.kind.fingerprint(),
        error,
    })
}

/// What a tool call needs before it is journaled for the first time.
pub(crate) enum Gate {
    /// Run it.
    Pass,
    /// Refuse it with this reason (plan mode below the tool's minimum).
    Refuse(String),
    /// Ask a human first, in `slot` (`permission` or `approval`).
    Ask(&'static str, ApprovalRequest),
}

/// The built-in gate for a call of `tool` with `args` in a task running in `mode`: refused in plan
/// mode below the tool's minimum; asked below the minimum in other modes, or when the tool demands
/// approval for these arguments.
pub(crate) fn gate(
    effects: &Effects,
    mode: PermissionMode,
    tool: &str,
    args: &serde_json::Value,
) -> Gate {
    let found = effects.find_tool(tool);
    let need = found.as_ref().map(|t| t.min_mode()).unwrap_or_default();
    if mode < need && mode == PermissionMode::Plan {
        return Gate::Refuse(format!(
            "tool `{tool}` needs permission mode {need:?}; this task runs in plan mode (read-only)"
        ));
    }
    let mut reasons = Vec::new();
    if mode < need {
        reasons.push(format!(
            "tool `{tool}` needs permission mode {need:?} and this task runs in {mode:?}"
        ));
    }
    let demanded = found.and_then(|t| t.needs_approval(args));
    if let Some(d) = &demanded {
        reasons.push(d.reason.clone());
    }
    if reasons.is_empty() {
        return Gate::Pass;
    }
    let mut request = ApprovalRequest::new(tool.to_owned(), args.clone(), reasons.join("; "));
    let slot = match demanded {
        Some(d) => {
            if let Some(after) = d.expires_in {
                request = request.expires(after, d.default);
            }
            "approval"
        }
        None => "permission",
    };
    Gate::Ask(slot, request)
}

/// The id of the question a gate asks for command `id` in `slot`, in its `round` (0 first): derived
/// from the tool call's, so the ordinals of the step's later commands do not depend on whether (or
/// how often) it was asked.
pub(crate) fn gate_question_id(id: &InvocationId, slot: &str, round: u32) -> InvocationId {
    InvocationId::from_string(match round {
        0 => format!("{id}/{slot}"),
        n => format!("{id}/{slot}/{}", n + 1),
    })
}

/// The reason a gate's refusal gives the step.
pub(crate) fn not_approved(tool: &str, expired: bool) -> StepError {
    let why = if expired {
        "the approval expired"
    } else {
        "it was rejected"
    };
    StepError::Rejected(format!("tool `{tool}` was not approved: {why}"))
}

/// What an attempt of an effect came to.
#[derive(Debug)]
pub(crate) enum Attempted {
    /// A transient failure with attempts left: `attempt_failed` is journaled; try again after this
    /// delay (the backoff, or the service's `Retry-After` when longer).
    Retry(std::time::Duration),
    /// The receipt, recorded (buffered).
    Receipt(Receipt),
}

/// Journal what `attempt` of command `id` (`cmd`, whose earlier runs made `prior_attempts`)
/// returned.
pub(crate) fn attempted(
    st: &mut RunState,
    id: &InvocationId,
    cmd: &Cmd,
    attempt: u32,
    prior_attempts: u32,
    result: Result<Performed, EffectError>,
) -> Attempted {
    let max = cmd.retry.max_attempts.max(1);
    match result {
        Err(error) if error.is_transient() && attempt < max && attempt - prior_attempts < max => {
            // Honour the service's `Retry-After` when it asks for longer than our backoff.
            let hint = std::time::Duration::from_millis(error.retry_after_ms.unwrap_or(0));
            let delay = cmd.retry.backoff(attempt + 1).max(hint);
            st.push(Entry::AttemptFailed {
                id: id.clone(),
                attempt,
                error,
            });
            Attempted::Retry(delay)
        }
        result => {
            let (outcome, usage) = match result {
                Ok(performed) => (Ok(performed.value), performed.usage),
                Err(e) => (Err(e), None),
            };
            let receipt = Receipt {
                id: id.clone(),
                attempt,
                outcome,
                usage,
            };
            st.record_receipt(receipt.clone());
            Attempted::Receipt(receipt)
        }
    }
}

/// A step's call that needs its effect performed, or what it finds instead (the command journaled
/// without a receipt by `find`).
pub(crate) enum Resume {
    /// A due timer or expired question, settled now with this value.
    Settled(serde_json::Value),
    /// It waits (a timer or a question's deadline at this time, or a reply).
    Wait(Option<i64>),
    /// Its outcome is unknown (a recovered `AtMostOnce` command).
    Unknown(StepError),
    /// Perform it (again, with the same id), after its `attempts` so far.
    Perform,
}

/// What a step's call journaled without a receipt (`rec`) needs at the run's time.
pub(crate) fn resume(
    st: &mut RunState,
    id: &InvocationId,
    rec: &CmdRec,
    recovered: bool,
) -> Resume {
    let now = st.now();
    match command::outstanding(rec, recovered, now) {
        Outstanding::Due => Resume::Settled(command::settle_due(st, id, &rec.cmd)),
        Outstanding::Timer(at) | Outstanding::Question(Some(at)) => Resume::Wait(Some(at)),
        Outstanding::Question(None) => Resume::Wait(None),
        Outstanding::Unknown => Resume::Unknown(StepError::OutcomeUnknown {
            what: rec.cmd.kind.fingerprint(),
            id: id.clone(),
        }),
        Outstanding::Perform => Resume::Perform,
    }
}
