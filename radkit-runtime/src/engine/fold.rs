//! The fold: the one code that turns journal entries into task state. [`Folded::apply`] is called by
//! the live path as it buffers each entry (`RunState::push`) and by replay over the stored journal
//! (from the last checkpoint), so a task cannot behave differently after a crash than without one:
//! both read the same state, built by the same function. Its fields are private; nothing else
//! writes them.
//!
//! The fold does not read the clock and keeps no copy of a visit's state or event that the journal
//! holds: it points at the entries by `seq` (replay looks them up when it plans the run's next work).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::flow::PermissionMode;
use crate::flow::{Cmd, CmdKind, EffectPolicy, Event, InvocationId, Receipt};
use crate::journal::{Compensable, Entry, RunsOn, StepShapes, TransitionKind};
use crate::model::TaskState;

/// Who the task is (its `task_created` entry, and the version it runs on since its last move).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Header {
    pub skill_id: String,
    /// The version it runs on: the creating one, or the last `migrated` entry's.
    pub skill_version: String,
    /// The shapes of that version's steps.
    pub steps: StepShapes,
    /// It moved since it was created (a checkpoint says where to).
    pub migrated: bool,
    pub context_id: String,
    pub principal: Option<String>,
    pub permission_mode: PermissionMode,
}

impl Header {
    /// Where a checkpoint says the task runs, when it moved.
    pub fn runs_on(&self) -> Option<RunsOn> {
        self.migrated.then(|| RunsOn {
            version: self.skill_version.clone(),
            steps: self.steps.clone(),
        })
    }

    fn moved(&mut self, version: &str, steps: &StepShapes) {
        self.skill_version = version.to_owned();
        self.steps = steps.clone();
        self.migrated = true;
    }
}

/// What the journal says of one command of the task.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CmdRec {
    pub cmd: Cmd,
    pub receipt: Option<Receipt>,
    /// Attempts made so far (failed attempts, then the receipt's).
    pub attempts: u32,
    /// Issued by a transition (its result comes back as an event), not from inside a step.
    pub transition: bool,
    /// A sleep's firing time or a question's deadline (its `timer_set` entry).
    pub fire_at_ms: Option<i64>,
    /// The `seq` of its `command_issued` entry (0 for one a checkpoint carried).
    pub issued_seq: u64,
    /// A call's callee task (its `call_started` entry): the call resumes by this id.
    pub callee: Option<Callee>,
    /// `timer_set` entries of this command: a call's rechecks so far (each waits twice as long).
    pub rechecks: u32,
}

/// The task a call started (an agent's or a child skill's).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Callee {
    pub task_id: String,
    pub context_id: Option<String>,
    /// The callee posts its updates to the engine's call webhook.
    pub webhook: bool,
}

impl CmdRec {
    /// True for a question whose deadline has passed without a receipt (it takes its default).
    pub fn question_expired(&self, now_ms: i64) -> bool {
        matches!(self.cmd.kind, CmdKind::AskUser { .. })
            && self.receipt.is_none()
            && self.fire_at_ms.is_some_and(|at| at <= now_ms)
    }
}

/// A step visit, by its `activated` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VisitRef {
    pub visit: u64,
    /// The `seq` of its `activated` entry (which holds its state and event).
    pub seq: u64,
}

/// What a task waits for, as its `awaiting_input` entry said.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Awaiting {
    /// The reply is delivered to a state (an `await_input` transition), not to an `ask` command.
    pub resumes_state: bool,
}

/// A task's state as its journal builds it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Folded {
    header: Option<Header>,
    last_seq: u64,
    status: TaskState,
    state: serde_json::Value,
    visit: u64,
    commands: HashMap<InvocationId, CmdRec>,
    compensable: Vec<InvocationId>,
    transition_order: Vec<InvocationId>,
    delivered: HashSet<InvocationId>,
    open: Option<VisitRef>,
    ended: Option<(VisitRef, TransitionKind)>,
    pending_goto: bool,
    awaiting: Option<Awaiting>,
    unconsumed: Option<u64>,
    activated: bool,
    cancel_requested: bool,
    cancel_delivered: bool,
    /// Messages that arrived while the task worked and are not delivered yet, oldest first.
    inbox: Vec<Queued>,
    /// The `seq` of the queued message delivered to the interrupt step, until its visit begins.
    interrupt: Option<u64>,
}

/// A message kept for later ([`Entry::MessageQueued`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Queued {
    /// The `seq` of its `message_queued` entry.
    pub seq: u64,
    pub message: crate::model::Message,
    /// It interrupts the task (else it answers the next question).
    pub interrupt: bool,
}

impl Folded {
    /// A task before its first entry, in the skill's `initial` state.
    pub fn new(initial: serde_json::Value) -> Self {
        Folded {
            header: None,
            last_seq: 0,
            status: TaskState::Submitted,
            state: initial,
            visit: 0,
            commands: HashMap::new(),
            compensable: Vec::new(),
            transition_order: Vec::new(),
            delivered: HashSet::new(),
            open: None,
            ended: None,
            pending_goto: false,
            awaiting: None,
            unconsumed: None,
            activated: false,
            cancel_requested: false,
            cancel_delivered: false,
            inbox: Vec::new(),
            interrupt: None,
        }
    }

    /// Apply the entry at `seq`.
    pub fn apply(&mut self, seq: u64, entry: &Entry) {
        self.last_seq = seq;
        match entry {
            Entry::TaskCreated {
                skill_id,
                skill_version,
                context_id,
                principal,
                permission_mode,
                steps,
            } => {
                self.header = Some(Header {
                    skill_id: skill_id.clone(),
                    skill_version: skill_version.clone(),
                    steps: steps.clone(),
                    migrated: false,
                    context_id: context_id.clone(),
                    principal: principal.clone(),
                    permission_mode: *permission_mode,
                })
            }
            Entry::Migrated {
                to, steps, state, ..
            } => {
                if let Some(header) = &mut self.header {
                    header.moved(to, steps);
                }
                if let Some(state) = state {
                    self.state = state.clone();
                }
            }
            Entry::MessageReceived { .. } => self.unconsumed = Some(seq),
            Entry::Activated {
                visit,
                state,
                event,
                ..
            } => self.activated(seq, *visit, state, event),
            Entry::CommandIssued {
                id,
                cmd,
                transition,
            } => self.issued(seq, id, cmd, *transition),
            Entry::AttemptFailed { id, attempt, .. } => {
                if let Some(rec) = self.commands.get_mut(id) {
                    rec.attempts = *attempt;
                }
            }
            Entry::ReceiptRecorded { receipt } => self.receipt(receipt),
            Entry::Transitioned { visit, next, state } => {
                if let Some(open) = self.open.take() {
                    if open.visit == *visit && next.is_final() {
                        self.ended = Some((open, *next));
                        // The task ends as the step decided, whenever a cancel came: one asked
                        // during the visit is dropped, as one asked after it is ignored.
                        self.cancel_requested = false;
                    }
                }
                if let Some(state) = state {
                    self.state = state.clone();
                }
                self.pending_goto = *next == TransitionKind::Goto;
                if self.pending_goto {
                    self.forget_settled_effects();
                }
            }
            Entry::TimerSet { id, fire_at_ms } => {
                if let Some(rec) = self.commands.get_mut(id) {
                    rec.fire_at_ms = Some(*fire_at_ms);
                    rec.rechecks = rec.rechecks.saturating_add(1);
                }
            }
            Entry::CallStarted {
                id,
                task_id,
                context_id,
                webhook,
            } => {
                if let Some(rec) = self.commands.get_mut(id) {
                    rec.callee = Some(Callee {
                        task_id: task_id.clone(),
                        context_id: context_id.clone(),
                        webhook: *webhook,
                    });
                }
            }
            Entry::AwaitingInput { resume, .. } => {
                self.awaiting = Some(Awaiting {
                    resumes_state: resume.is_some(),
                })
            }
            Entry::StatusChanged { state } | Entry::Terminal { state, .. } => self.status = *state,
            // A cancel journaled after the task decided its end is ignored: the task finishes as
            // decided.
            Entry::CancelRequested => self.cancel_requested |= self.ended.is_none(),
            Entry::MessageQueued { message, interrupt } => self.inbox.push(Queued {
                seq,
                message: message.clone(),
                interrupt: *interrupt,
            }),
            Entry::QueuedDelivered { message_id } => {
                if let Some(i) = self
                    .inbox
                    .iter()
                    .position(|q| q.message.message_id == *message_id)
                {
                    let queued = self.inbox.remove(i);
                    if queued.interrupt {
                        self.interrupt = Some(queued.seq);
                    } else {
                        // The answer to the question just asked: consumed by the visit it starts
                        // (an `await_input`) or by the question's receipt (a `ctx.ask`).
                        self.unconsumed = Some(queued.seq);
                    }
                }
            }
            Entry::Compensated { id, .. } => self.compensable.retain(|c| c != id),
            Entry::Checkpoint {
                visit,
                state,
                status,
                compensable,
                runs_on,
            } => {
                if let (Some(header), Some(runs_on)) = (&mut self.header, runs_on) {
                    header.moved(&runs_on.version, &runs_on.steps);
                }
                self.checkpoint(*visit, state, *status, compensable)
            }
            Entry::MessageEmitted { .. }
            | Entry::Progress { .. }
            | Entry::ArtifactEmitted { .. } => {}
        }
    }

    /// After a `goto`, the model and tool calls with a receipt are forgotten, as a checkpoint
    /// forgets them: nothing looks them up again. A command's id names its visit, so no later visit
    /// finds it, and replay re-runs only a visit whose transition is not journaled (or, to finish
    /// the task, one that ended it). Kept: calls to agents and skills (a later call may continue
    /// their callee, and a cancel reaches a callee that waits for input), transition-issued
    /// commands (their results go to the next visit) and compensable ones (compensated if the
    /// task fails). Without this a task's fold held every command since its last checkpoint, and
    /// the folds' scans for timers and outstanding effects went over them at every step.
    fn forget_settled_effects(&mut self) {
        let compensable = &self.compensable;
        self.commands.retain(|id, c| {
            c.receipt.is_none()
                || c.transition
                || !matches!(c.cmd.kind, CmdKind::Llm { .. } | CmdKind::Tool { .. })
                || compensable.contains(id)
        });
    }

    /// A checkpoint is written right after a `goto` transition with nothing outstanding: what came
    /// before it matters only through its fields.
    fn checkpoint(
        &mut self,
        visit: u64,
        state: &serde_json::Value,
        status: TaskState,
        compensable: &[Compensable],
    ) {
        self.commands = compensable
            .iter()
            .map(|c| {
                let rec = CmdRec {
                    cmd: c.cmd.clone(),
                    receipt: Some(c.receipt.clone()),
                    attempts: c.receipt.attempt,
                    transition: false,
                    fire_at_ms: None,
                    issued_seq: 0,
                    callee: None,
                    rechecks: 0,
                };
                (c.id.clone(), rec)
            })
            .collect();
        self.compensable = compensable.iter().map(|c| c.id.clone()).collect();
        self.transition_order.clear();
        self.delivered.clear();
        self.state = state.clone();
        self.visit = visit;
        self.status = status;
        self.open = None;
        self.ended = None;
        self.pending_goto = true;
        self.awaiting = None;
        self.unconsumed = None;
        self.activated = true;
    }

    fn activated(&mut self, seq: u64, visit: u64, state: &serde_json::Value, event: &Event) {
        self.visit = self.visit.max(visit);
        self.open = Some(VisitRef { visit, seq });
        self.ended = None;
        self.pending_goto = false;
        // Every later visit starts in the state the fold already holds (the last transition's or
        // checkpoint's); the first one in the state the task was created with, which the journal
        // keeps (the skill's initial state may have changed since).
        if !self.activated {
            self.state = state.clone();
        }
        self.activated = true;
        match event {
            Event::UserMessage { .. } => {
                self.unconsumed = None;
                self.awaiting = None;
            }
            Event::CommandResult { id, .. } | Event::TimerFired { id } => {
                self.delivered.insert(id.clone());
            }
            Event::Cancel => self.cancel_delivered = true,
            Event::Interrupted { .. } => {
                self.interrupt = None;
                self.awaiting = None;
            }
            Event::Enter => {}
        }
    }

    fn issued(&mut self, seq: u64, id: &InvocationId, cmd: &Cmd, transition: bool) {
        if transition {
            self.transition_order.push(id.clone());
        }
        let rec = CmdRec {
            cmd: cmd.clone(),
            receipt: None,
            attempts: 0,
            transition,
            fire_at_ms: None,
            issued_seq: seq,
            callee: None,
            rechecks: 0,
        };
        self.commands.insert(id.clone(), rec);
    }

    fn receipt(&mut self, receipt: &Receipt) {
        let Some(rec) = self.commands.get_mut(&receipt.id) else {
            return;
        };
        if rec.cmd.policy == EffectPolicy::Compensate && receipt.outcome.is_ok() {
            self.compensable.push(receipt.id.clone());
        }
        if matches!(rec.cmd.kind, CmdKind::AskUser { .. }) {
            // The reply is this receipt: the message that carried it is consumed.
            self.awaiting = None;
            self.unconsumed = None;
        }
        rec.attempts = receipt.attempt;
        rec.receipt = Some(receipt.clone());
    }

    /// The task's header, once its `task_created` entry is applied.
    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }
    /// The `seq` of the last entry applied.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }
    /// The task's status.
    pub fn status(&self) -> TaskState {
        self.status
    }
    /// The state the next visit starts in.
    pub fn state(&self) -> &serde_json::Value {
        &self.state
    }
    /// The last visit's number.
    pub fn visit(&self) -> u64 {
        self.visit
    }
    /// The commands the journal holds since the last checkpoint (and those a checkpoint carried).
    pub fn commands(&self) -> &HashMap<InvocationId, CmdRec> {
        &self.commands
    }
    /// One command.
    pub fn command(&self, id: &InvocationId) -> Option<&CmdRec> {
        self.commands.get(id)
    }
    /// `Compensate` commands with successful receipts not compensated yet, in receipt order (issue
    /// order, except within a parallel batch, whose receipts land as its calls finish).
    pub fn compensable(&self) -> &[InvocationId] {
        &self.compensable
    }
    /// Transition-issued commands, in issue order.
    pub fn transition_order(&self) -> &[InvocationId] {
        &self.transition_order
    }
    /// True when the result of transition command `id` was delivered to a visit.
    pub fn delivered(&self, id: &InvocationId) -> bool {
        self.delivered.contains(id)
    }
    /// The visit whose transition is not journaled (cut off by a crash, or suspended in a step).
    pub fn open(&self) -> Option<VisitRef> {
        self.open
    }
    /// The last visit, when its final transition is journaled and the task has not ended yet.
    pub fn ended(&self) -> Option<(VisitRef, TransitionKind)> {
        self.ended
    }
    /// The last transition was a `goto` whose visit has not begun.
    pub fn pending_goto(&self) -> bool {
        self.pending_goto
    }
    /// What the task waits for, after an `awaiting_input` entry.
    pub fn awaiting(&self) -> Option<&Awaiting> {
        self.awaiting.as_ref()
    }
    /// The `seq` of a user message no visit has consumed yet.
    pub fn unconsumed(&self) -> Option<u64> {
        self.unconsumed
    }
    /// A visit happened (or a checkpoint stands for some).
    pub fn has_activated(&self) -> bool {
        self.activated
    }
    /// Messages that arrived while the task worked, not delivered yet (oldest first).
    pub fn inbox(&self) -> &[Queued] {
        &self.inbox
    }
    /// An interrupting message waits to be delivered: the running visit stops at its next call.
    pub fn interrupt_pending(&self) -> bool {
        self.inbox.iter().any(|q| q.interrupt)
    }
    /// The `seq` of the `message_queued` entry whose message the interrupt step is to receive
    /// (delivered, its visit not begun yet).
    pub fn interrupt_delivered(&self) -> Option<u64> {
        self.interrupt
    }
    /// A cancel was requested (and the task had not decided its end).
    pub fn cancel_requested(&self) -> bool {
        self.cancel_requested
    }
    /// The skill was told of the cancel (its `cancel` visit is journaled).
    pub fn cancel_delivered(&self) -> bool {
        self.cancel_delivered
    }
    /// The earliest time a command without a receipt waits for (a sleep's end, a question's
    /// deadline, a call's recheck).
    pub fn earliest_timer(&self) -> Option<i64> {
        self.commands
            .values()
            .filter(|c| c.receipt.is_none())
            .filter_map(|c| c.fire_at_ms)
            .min()
    }

    /// An effect is outstanding that the engine performs by itself, without waiting for anything: a
    /// model or tool call without its receipt (and not handed to an executor: a dispatched command
    /// has a recheck timer and waits for the executor's receipt), or a call to another agent or
    /// skill not yet bound to its callee (a bound call waits for its callee, rechecked by its timer).
    pub fn has_effect_to_perform(&self) -> bool {
        self.commands.values().any(|c| {
            c.receipt.is_none()
                && match c.cmd.kind {
                    CmdKind::Llm { .. } | CmdKind::Tool { .. } => c.fire_at_ms.is_none(),
                    CmdKind::Agent { .. } | CmdKind::Skill { .. } => c.callee.is_none(),
                    _ => false,
                }
        })
    }

    /// A call waits on its callee: it is bound to the callee's task (`call_started`) and has no
    /// receipt. Such a callee may settle while no engine watches it (a restart, a dead worker), so
    /// the task row says so ([`crate::store::TaskRecord::waits_on_call`]) and an engine that starts
    /// asks the callee at once.
    pub fn waits_on_call(&self) -> bool {
        self.commands
            .values()
            .any(|c| c.receipt.is_none() && c.callee.is_some() && c.cmd.kind.is_call())
    }

    /// The question (`ask_user` command) that waits for its reply, if any.
    pub fn open_question(&self) -> Option<&InvocationId> {
        self.commands
            .iter()
            .filter(|(_, c)| c.receipt.is_none() && matches!(c.cmd.kind, CmdKind::AskUser { .. }))
            .map(|(id, _)| id)
            .min_by_key(|id| self.commands[*id].issued_seq)
    }

    /// Something outstanding can wake the task: a transition command without its receipt, or a timer.
    pub fn has_outstanding_wake(&self) -> bool {
        self.commands
            .values()
            .any(|c| c.receipt.is_none() && (c.transition || c.fire_at_ms.is_some()))
    }
}

/// What a run needs to check its live fold against the stored journal's after each append (see
/// `EngineBuilder::check_fold`).
#[derive(Clone)]
pub(crate) struct FoldCheck {
    /// The skill's initial state (what replay folds over).
    pub initial: serde_json::Value,
    /// Where differences are kept.
    pub divergences: Arc<Mutex<Vec<String>>>,
}

impl FoldCheck {
    /// Compare `live` (the run's fold when it took the entries it just committed) with the fold of
    /// `stored` (the task's journal as a restart reads it). Returns false on a difference, which is
    /// kept.
    pub fn compare(
        &self,
        task_id: &str,
        live: &Folded,
        stored: &[crate::journal::JournalRecord],
    ) -> bool {
        let mut folded = Folded::new(self.initial.clone());
        for record in stored {
            folded.apply(record.seq, &record.entry);
        }
        if folded == *live {
            return true;
        }
        let difference = format!(
            "task {task_id}: after seq {} the live fold differs from the stored journal's\nlive:   {live:?}\nstored: {folded:?}",
            live.last_seq()
        );
        self.diverged(task_id, difference)
    }

    /// Compare the task's stored view (what reads show) with the fold of its whole `journal`
    /// (`store::view::fold_journal`). Returns false on a difference, which is kept.
    pub fn compare_view(
        &self,
        task_id: &str,
        view: Option<crate::store::TaskView>,
        journal: &[crate::journal::JournalRecord],
    ) -> bool {
        let expected = view
            .as_ref()
            .map(|v| crate::store::view::fold_journal(v.record.clone(), journal, None));
        if view.is_some() && view == expected {
            return true;
        }
        self.diverged(
            task_id,
            format!(
                "task {task_id}: the stored view differs from its journal's fold\nview:    {view:?}\njournal: {expected:?}"
            ),
        )
    }

    fn diverged(&self, task_id: &str, difference: String) -> bool {
        tracing::error!(task = %task_id, "{difference}");
        self.divergences
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(difference);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Message;

    /// Visit 1 issues five commands and ends with `next`: a settled tool call, an outstanding
    /// one, a settled call to an agent, a settled compensable tool call and a settled
    /// transition-issued one.
    fn visit_ending(next: TransitionKind) -> (Folded, Vec<InvocationId>) {
        let mut fold = Folded::new(serde_json::Value::Null);
        let id = |n| InvocationId::derive("task", 1, n);
        let mut compensable = Cmd::tool("book", serde_json::json!(3));
        compensable.policy = EffectPolicy::Compensate;
        let commands = [
            (Cmd::tool("noop", serde_json::json!(0)), false, true),
            (Cmd::tool("noop", serde_json::json!(1)), false, false),
            (Cmd::agent("peer", Message::user_text("x")), false, true),
            (compensable, false, true),
            (Cmd::tool("noop", serde_json::json!(4)), true, true),
        ];
        let mut entries = vec![Entry::Activated {
            visit: 1,
            step: "a".into(),
            state: serde_json::Value::Null,
            event: Event::Enter,
        }];
        for (n, (cmd, transition, settled)) in (0u32..).zip(commands) {
            entries.push(Entry::CommandIssued {
                id: id(n),
                cmd,
                transition,
            });
            if settled {
                entries.push(Entry::ReceiptRecorded {
                    receipt: Receipt {
                        id: id(n),
                        attempt: 1,
                        outcome: Ok(serde_json::Value::Null),
                        usage: None,
                    },
                });
            }
        }
        entries.push(Entry::Transitioned {
            visit: 1,
            next,
            state: Some(serde_json::json!("b")),
        });
        for (seq, entry) in (1u64..).zip(&entries) {
            fold.apply(seq, entry);
        }
        (fold, (0..5).map(id).collect())
    }

    #[test]
    fn a_goto_forgets_settled_model_and_tool_calls_and_keeps_what_a_later_visit_may_need() {
        let (fold, ids) = visit_ending(TransitionKind::Goto);
        assert!(fold.command(&ids[0]).is_none(), "the settled tool call");
        for (i, why) in [
            (1, "outstanding"),
            (2, "a call to an agent"),
            (3, "compensable"),
            (4, "transition-issued"),
        ] {
            assert!(fold.command(&ids[i]).is_some(), "{why}");
        }
        assert_eq!(fold.compensable(), &ids[3..4]);
    }

    #[test]
    fn a_transition_other_than_a_goto_keeps_every_command() {
        for next in [
            TransitionKind::Complete,
            TransitionKind::AwaitInput,
            TransitionKind::To,
        ] {
            let (fold, ids) = visit_ending(next);
            for id in &ids {
                assert!(fold.command(id).is_some(), "{next:?}: {id}");
            }
        }
    }
}
