//! `TaskRun`: the in-memory side of one task while it runs — its journal buffer, its command table
//! and its cursor. Entries are buffered and committed by `flush`, which the engine calls before any
//! effect is released (output commit): a command is durable before it runs, and a receipt is durable
//! before anything that depends on it leaves the process.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::broadcast;

use crate::flow::{Cmd, CmdKind, Event, InvocationId, Receipt};
use crate::journal::{now_ms, Entry, JournalRecord};
use crate::model::TaskState;
use crate::store::{Append, Store, StoreError};

/// The wall-clock time `millis` from now (a timer's or a question's deadline).
pub(crate) fn after_ms(millis: u64) -> i64 {
    now_ms().saturating_add(i64::try_from(millis).unwrap_or(i64::MAX))
}

impl CmdRec {
    /// True for a question whose deadline has passed without a receipt (it takes its default).
    pub fn question_expired(&self, now_ms: i64) -> bool {
        matches!(self.cmd.kind, CmdKind::AskUser { .. })
            && self.receipt.is_none()
            && self.fire_at_ms.is_some_and(|at| at <= now_ms)
    }
}

/// What the engine knows of one command of the task.
#[derive(Debug, Clone)]
pub(crate) struct CmdRec {
    pub cmd: Cmd,
    pub receipt: Option<Receipt>,
    pub attempts: u32,
    pub transition: bool,
    pub fire_at_ms: Option<i64>,
    /// Journaled by an earlier run of the engine (before a crash or a wait).
    pub recovered: bool,
}

/// Work queued for the driver.
#[derive(Debug, Clone)]
pub(crate) enum Work {
    /// Deliver an event; `rerun` re-runs an already journaled visit.
    Activate { event: Event, rerun: Option<u64> },
    /// Perform (or deliver the recorded result of) a transition-issued command.
    Execute(InvocationId),
}

/// Mutable state of a running task.
pub(crate) struct RunState {
    pub next_seq: u64,
    pending: Vec<Entry>,
    pending_state: Option<TaskState>,
    pending_wake: Option<Option<i64>>,
    pub status: TaskState,
    pub commands: HashMap<InvocationId, CmdRec>,
    /// `Compensate` commands with successful receipts, in issue order.
    pub compensable: Vec<InvocationId>,
    pub state: serde_json::Value,
    pub visit: u64,
    pub queue: VecDeque<Work>,
    pub cancel_requested: bool,
    /// The skill was told of the cancel (its `cancel` visit is journaled): a recovered run that
    /// finishes a cancel cut off by a crash does not tell it again.
    pub cancel_delivered: bool,
    /// The driver stopped: this run flushes nothing more, so nothing may be asked of it (a cancel goes
    /// through the store instead). Set under this lock together with the driver's last look at
    /// `cancel_requested`, so a cancel is either seen by the driver or refused here.
    pub closed: bool,
    /// A visit whose final transition (`complete`, `fail`, `reject`, the second field) was journaled
    /// before a crash, without the terminal entry: replay re-runs it to finish the task, and the
    /// transition is not journaled again.
    pub journaled_end: Option<(u64, String)>,
}

impl RunState {
    pub fn new(next_seq: u64, status: TaskState, state: serde_json::Value) -> Self {
        RunState {
            next_seq,
            pending: Vec::new(),
            pending_state: None,
            pending_wake: None,
            status,
            commands: HashMap::new(),
            compensable: Vec::new(),
            state,
            visit: 0,
            queue: VecDeque::new(),
            cancel_requested: false,
            cancel_delivered: false,
            closed: false,
            journaled_end: None,
        }
    }

    /// Ask this run to cancel the task (`cancel_requested`, journaled with the next flush). Returns
    /// false when the run cannot carry it out: its driver stopped or the task ended. A task whose final
    /// transition is journaled (`journaled_end`) is finished as decided, as the live path does.
    pub fn request_cancel(&mut self) -> bool {
        if self.closed || self.status.is_terminal() {
            return false;
        }
        if !self.cancel_requested && self.journaled_end.is_none() {
            self.cancel_requested = true;
            self.push(Entry::CancelRequested);
        }
        true
    }

    /// The driver stops. Returns true when a cancel was asked of this run that it did not carry out
    /// (it stopped on a halt, a lost lease or a failed append).
    pub fn close(&mut self) -> bool {
        self.closed = true;
        self.cancel_requested && !self.status.is_terminal()
    }

    /// Buffer an entry.
    pub fn push(&mut self, entry: Entry) {
        self.next_seq += 1;
        self.pending.push(entry);
    }

    /// Record a command in the table and buffer its `command_issued` entry.
    pub fn issue(
        &mut self,
        id: &InvocationId,
        cmd: &Cmd,
        transition: bool,
        fire_at_ms: Option<i64>,
    ) {
        let rec = CmdRec {
            cmd: cmd.clone(),
            receipt: None,
            attempts: 0,
            transition,
            fire_at_ms,
            recovered: false,
        };
        self.commands.insert(id.clone(), rec);
        self.push(Entry::CommandIssued {
            id: id.clone(),
            cmd: cmd.clone(),
            transition,
        });
    }

    /// Journal a question (`ask_user`): the command, its deadline as a durable timer (like a sleep's),
    /// the `awaiting_input` entry and the `input-required` status. Returns the deadline. Questions
    /// asked inside a step and those a transition issues both go through here (and expire through
    /// [`RunState::expire_question`]), so the two paths cannot diverge.
    pub fn ask(&mut self, id: &InvocationId, cmd: &Cmd, transition: bool) -> Option<i64> {
        let CmdKind::AskUser {
            slot,
            message,
            expires_in_ms,
            ..
        } = &cmd.kind
        else {
            self.issue(id, cmd, transition, None);
            return None;
        };
        let expires_at = expires_in_ms.map(after_ms);
        self.issue(id, cmd, transition, expires_at);
        if let Some(at) = expires_at {
            self.set_timer(id, at);
        }
        self.push(Entry::AwaitingInput {
            slot: slot.clone(),
            message: message.clone(),
            resume: None,
            ask: Some(id.clone()),
        });
        self.set_status(TaskState::InputRequired);
        expires_at
    }

    /// Question `id` passed its deadline without a reply: its receipt is its declared default
    /// (journaled), and the task works again. Returns the default.
    pub fn expire_question(&mut self, id: &InvocationId, cmd: &Cmd) -> serde_json::Value {
        let value = match &cmd.kind {
            CmdKind::AskUser { on_expiry, .. } => on_expiry.clone(),
            _ => None,
        }
        .unwrap_or(serde_json::Value::Null);
        self.record_receipt(Receipt {
            id: id.clone(),
            attempt: 1,
            outcome: Ok(value.clone()),
            usage: None,
        });
        self.set_wake(None);
        self.set_status(TaskState::Working);
        value
    }

    /// Buffer a durable timer for command `id` and set the task row's wake time.
    pub fn set_timer(&mut self, id: &InvocationId, fire_at_ms: i64) {
        self.push(Entry::TimerSet {
            id: id.clone(),
            fire_at_ms,
        });
        self.set_wake(Some(fire_at_ms));
    }

    /// Buffer a status change (journaled, and stored on the task row).
    pub fn set_status(&mut self, state: TaskState) {
        if self.status != state {
            self.status = state;
            self.pending_state = Some(state);
            if !state.is_terminal() {
                self.push(Entry::StatusChanged { state });
            }
        }
    }

    /// Set or clear the task row's wake time.
    pub fn set_wake(&mut self, at: Option<i64>) {
        self.pending_wake = Some(at);
    }

    /// Record a receipt in the table and the buffer.
    pub fn record_receipt(&mut self, receipt: Receipt) {
        if let Some(rec) = self.commands.get_mut(&receipt.id) {
            if rec.cmd.policy == crate::flow::EffectPolicy::Compensate && receipt.outcome.is_ok() {
                self.compensable.push(receipt.id.clone());
            }
            rec.receipt = Some(receipt.clone());
        }
        self.push(Entry::ReceiptRecorded { receipt });
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty() || self.pending_state.is_some() || self.pending_wake.is_some()
    }
}

/// One running task.
pub(crate) struct TaskRun {
    pub task_id: Arc<str>,
    pub context_id: Arc<str>,
    pub skill_id: String,
    state: Mutex<RunState>,
    flush_lock: tokio::sync::Mutex<()>,
    store: Arc<dyn Store>,
    halted: Arc<AtomicBool>,
    tx: broadcast::Sender<Arc<JournalRecord>>,
    /// The lease's fencing token, when the store is shared (every append carries it).
    pub fence: Option<u64>,
    /// The lease was taken over by another engine: this run must stop and write nothing more.
    lost: AtomicBool,
    /// An append failed: this run must stop and write nothing more (see [`TaskRun::flush`]).
    write_failed: AtomicBool,
    /// The task row to create with the first flush.
    pub create: Mutex<Option<crate::store::TaskRecord>>,
    /// The lease to take with the row it creates.
    pub new_lease: Mutex<Option<crate::store::NewLease>>,
    /// The task's permission mode.
    pub mode: super::PermissionMode,
}

/// Why a flush failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FlushError {
    #[error("engine halted")]
    Halted,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl TaskRun {
    pub fn new(
        task_id: Arc<str>,
        context_id: Arc<str>,
        skill_id: String,
        state: RunState,
        store: Arc<dyn Store>,
        halted: Arc<AtomicBool>,
        tx: broadcast::Sender<Arc<JournalRecord>>,
    ) -> Self {
        TaskRun {
            task_id,
            context_id,
            skill_id,
            state: Mutex::new(state),
            flush_lock: tokio::sync::Mutex::new(()),
            store,
            halted,
            tx,
            fence: None,
            lost: AtomicBool::new(false),
            write_failed: AtomicBool::new(false),
            create: Mutex::new(None),
            new_lease: Mutex::new(None),
            mode: super::PermissionMode::Default,
        }
    }

    /// Lock the run state. Never held across an await.
    pub fn lock(&self) -> MutexGuard<'_, RunState> {
        // A poisoned lock means a panic while holding it: the state is still consistent because every
        // mutation is a single push or insert, so keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True when the engine halted, this run's lease was lost or one of its appends failed.
    pub fn is_halted(&self) -> bool {
        self.halted.load(Ordering::SeqCst)
            || self.lost.load(Ordering::SeqCst)
            || self.write_failed.load(Ordering::SeqCst)
    }

    /// True once an append of this run failed (the task must be reloaded from the store).
    pub fn write_failed(&self) -> bool {
        self.write_failed.load(Ordering::SeqCst)
    }

    /// The lease was taken over: stop this run.
    pub fn lose_lease(&self) {
        if !self.lost.swap(true, Ordering::SeqCst) {
            tracing::warn!(task = %self.task_id, token = ?self.fence, "lease lost to another worker; fenced off, this run stops");
        }
    }

    /// True once the lease was lost.
    pub fn lease_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Commit everything buffered, then publish it to live subscribers.
    ///
    /// A failed append stops the run for good: the batch's seqs are given out and the store may or may
    /// not hold the batch (an error can arrive after the commit), so the in-memory run no longer knows
    /// what is durable. Nothing of the batch was published and no effect waiting on it started (every
    /// caller stops on the error), so the task is reloaded from the store and replayed, as after a
    /// crash (`Inner::reload_after_failed_write`; on a shared store the released lease is claimed).
    pub async fn flush(&self) -> Result<(), FlushError> {
        let _serial = self.flush_lock.lock().await;
        let (first_seq, entries, state, wake) = {
            let mut st = self.lock();
            if !st.has_pending() {
                return Ok(());
            }
            let entries = std::mem::take(&mut st.pending);
            let first_seq = st.next_seq - entries.len() as u64;
            (
                first_seq,
                entries,
                st.pending_state.take(),
                st.pending_wake.take(),
            )
        };
        if self.is_halted() {
            return Err(FlushError::Halted);
        }
        // Subscribers read the store after subscribing, so one that subscribes before this commit ends
        // must get these records live: decide whether to publish only after the commit.
        let copy = entries.clone();
        let mut append = Append::new(self.task_id.to_string(), first_seq, entries);
        append.state = state;
        append.wake_at_ms = wake;
        append.fence = self.fence;
        append.create = self.create.lock().unwrap_or_else(|p| p.into_inner()).take();
        if append.create.is_some() {
            append.lease = self
                .new_lease
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
        }
        match self.store.append(append).await {
            Ok(()) => {}
            Err(e @ StoreError::Fenced { .. }) => {
                self.lose_lease();
                return Err(e.into());
            }
            Err(e) => {
                if !self.write_failed.swap(true, Ordering::SeqCst) {
                    tracing::warn!(task = %self.task_id, error = %e, first_seq, "journal append failed; this run stops and the task is reloaded from the store");
                }
                return Err(e.into());
            }
        }
        if self.tx.receiver_count() > 0 {
            let at_ms = now_ms();
            for (i, entry) in copy.into_iter().enumerate() {
                let _ = self.tx.send(Arc::new(JournalRecord {
                    seq: first_seq + i as u64,
                    at_ms,
                    entry,
                }));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_run_refuses_a_cancel() {
        let mut st = RunState::new(5, TaskState::InputRequired, serde_json::Value::Null);
        assert!(!st.close(), "nothing was asked of it");
        assert!(!st.request_cancel());
        assert!(!st.cancel_requested && !st.has_pending());
    }

    #[test]
    fn a_cancel_the_run_stopped_before_carrying_out_is_reported_at_close() {
        let mut st = RunState::new(5, TaskState::Working, serde_json::Value::Null);
        assert!(st.request_cancel());
        assert!(st.request_cancel(), "asked twice, journaled once");
        assert_eq!(st.next_seq, 6);
        assert!(st.close());
    }

    #[test]
    fn an_ended_task_refuses_a_cancel() {
        let mut st = RunState::new(5, TaskState::Working, serde_json::Value::Null);
        st.set_status(TaskState::Completed);
        assert!(!st.request_cancel());
        assert!(!st.close());
    }
}
