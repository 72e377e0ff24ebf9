//! `TaskRun`: the in-memory side of one task while it runs — its journal buffer, its command table
//! and its cursor. Entries are buffered and committed by `flush`, which the engine calls before any
//! effect is released (output commit): a command is durable before it runs, and a receipt is durable
//! before anything that depends on it leaves the process.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::fold::{CmdRec, FoldCheck, Folded};
use super::live::{Published, Records};
use crate::flow::{Cmd, Event, InvocationId, Receipt};
use crate::journal::{now_ms, Entry, TransitionKind};
use crate::model::TaskState;
use crate::store::{Append, Store, StoreError};

/// The wall-clock time `millis` after `now_ms` (a timer's or a question's deadline).
pub(crate) fn after_ms(now_ms: i64, millis: u64) -> i64 {
    now_ms.saturating_add(i64::try_from(millis).unwrap_or(i64::MAX))
}

/// Work queued for the driver.
#[derive(Debug, Clone)]
pub(crate) enum Work {
    /// Deliver an event; `rerun` re-runs an already journaled visit.
    Activate { event: Event, rerun: Option<u64> },
    /// Perform (or deliver the recorded result of) a transition-issued command.
    Execute(InvocationId),
}

/// Mutable state of a running task: the fold of its journal (read through `Deref`; only
/// [`RunState::push`] changes it, by applying the entry it buffers) and what the run itself keeps —
/// the entries not yet committed, the driver's queue and its flags.
pub(crate) struct RunState {
    fold: Folded,
    pub next_seq: u64,
    pending: Vec<Entry>,
    pending_state: Option<TaskState>,
    pending_wake: Option<Option<i64>>,
    /// The task's row has a wake time (as this run last set it, or as replay found the task): only
    /// then can settling an effect change it, so the hot path (a working task without timers)
    /// never looks for timers.
    row_wakes: bool,
    /// The first `seq` this run journals: commands issued before it were journaled by an earlier run
    /// of the engine (before a crash or a wait).
    first_own_seq: u64,
    pub queue: VecDeque<Work>,
    /// The driver stopped: this run flushes nothing more, so nothing may be asked of it (a cancel goes
    /// through the store instead). Set under this lock together with the driver's last look at
    /// `cancel_requested`, so a cancel is either seen by the driver or refused here.
    pub closed: bool,
    /// A visit whose final transition (`complete`, `fail`, `reject`, the second field) was journaled
    /// before a crash, without the terminal entry: replay re-runs it to finish the task, and the
    /// transition is not journaled again.
    pub journaled_end: Option<(u64, TransitionKind)>,
    /// The visit the driver began last, with its event: a reply taken while that visit runs (its
    /// question open beside a slow call) queues its re-run.
    pub visit_event: Option<(u64, Event)>,
    /// The engine's default call timeout (`EngineBuilder::call_timeout`), which a call issued
    /// without one of its own gets when it is journaled (`Duration::MAX`, as a run starts: no
    /// deadline).
    pub call_timeout: std::time::Duration,
    /// The time a host passed in (the sans-IO `TaskMachine` sets it for each pass); `None` reads
    /// the wall clock (the long-running engine).
    pub clock_ms: Option<i64>,
    /// Calls an interrupt abandoned whose callee's task the host cancels (`rules::interrupt`).
    pub abandoned: Vec<crate::engine::machine::rules::Abandoned>,
    /// When each receipt still buffered was recorded: the receipt-commit latency `/metrics` shows.
    receipts_at: Vec<std::time::Instant>,
    /// A call of the open visit buffered its command and waits for the driver to flush it, with
    /// those its siblings buffer in the same poll of the step (`EngineCalls::flush_batch`): the
    /// machine turns [`Turn::Flush`](super::machine::Turn) when that poll ends.
    pub flush_asked: bool,
}

/// What a run has buffered and not committed: the entries (from `first_seq`), the row's new state and
/// wake time, and whether it then waits on a bound call (written with the wake time).
#[derive(Debug)]
pub(crate) struct Buffered {
    pub first_seq: u64,
    pub entries: Vec<Entry>,
    pub state: Option<TaskState>,
    pub wake_at_ms: Option<Option<i64>>,
    pub waits_on_call: Option<bool>,
    /// When each receipt of `entries` was recorded.
    pub receipts_at: Vec<std::time::Instant>,
}

impl std::ops::Deref for RunState {
    type Target = Folded;
    fn deref(&self) -> &Folded {
        &self.fold
    }
}

impl RunState {
    /// A new task, in the skill's `initial` state, before its first entry.
    pub fn new(initial: serde_json::Value) -> Self {
        Self::resumed(Folded::new(initial), VecDeque::new(), None)
    }

    /// A task whose journal folded into `fold`, with the work replay planned.
    pub fn resumed(
        fold: Folded,
        queue: VecDeque<Work>,
        journaled_end: Option<(u64, TransitionKind)>,
    ) -> Self {
        let next_seq = fold.last_seq() + 1;
        let mut st = RunState {
            fold,
            next_seq,
            pending: Vec::new(),
            pending_state: None,
            pending_wake: None,
            row_wakes: false,
            first_own_seq: next_seq,
            queue,
            closed: false,
            journaled_end,
            visit_event: None,
            call_timeout: std::time::Duration::MAX,
            clock_ms: None,
            abandoned: Vec::new(),
            receipts_at: Vec::new(),
            flush_asked: false,
        };
        st.row_wakes = st.cancel_requested() || st.waits_by_row();
        st
    }

    /// The time now: the one a host passed in ([`RunState::clock_ms`]), else the wall clock.
    pub fn now(&self) -> i64 {
        self.clock_ms.unwrap_or_else(now_ms)
    }

    /// Take what is buffered, to be committed as one append (`None` when nothing is). A change of
    /// the row alone (its state or wake time, without entries) waits for the next entries: an
    /// append always carries at least one (the SQL stores key a journal row by its first seq).
    pub fn take_batch(&mut self) -> Option<Buffered> {
        if self.pending.is_empty() {
            return None;
        }
        let entries = std::mem::take(&mut self.pending);
        let first_seq = self.next_seq - u64::try_from(entries.len()).unwrap_or(u64::MAX);
        let wake_at_ms = self.pending_wake.take();
        // Written with the wake time, which every change to a call's wait writes (its recheck
        // set, its receipt while the row wakes, a cancel): read from the fold as committed.
        let waits_on_call = wake_at_ms.map(|at| at.is_some() && self.fold.waits_on_call());
        Some(Buffered {
            first_seq,
            entries,
            state: self.pending_state.take(),
            wake_at_ms,
            waits_on_call,
            receipts_at: std::mem::take(&mut self.receipts_at),
        })
    }

    /// True when entries wait to be committed.
    pub fn has_buffered(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The fold of everything journaled or buffered so far.
    pub fn fold(&self) -> &Folded {
        &self.fold
    }

    /// True for a command an earlier run of the engine journaled.
    pub fn recovered(&self, rec: &CmdRec) -> bool {
        rec.issued_seq < self.first_own_seq
    }

    /// Ask this run to cancel the task (`cancel_requested`, journaled with the next flush). Returns
    /// false when the run cannot carry it out: its driver stopped or the task ended. A task whose final
    /// transition is journaled is finished as decided, as the live path does.
    pub fn request_cancel(&mut self) -> bool {
        if self.closed || self.status().is_terminal() {
            return false;
        }
        if !self.cancel_requested() && self.journaled_end.is_none() && self.ended().is_none() {
            self.push(Entry::CancelRequested);
            // The task has work now, whatever its status says: a due wake time is what recovery and
            // a shared store's claims look for in the row, so a cancel cut off by a crash is finished.
            let now = self.now();
            self.set_wake(Some(now));
        }
        true
    }

    /// Keep `message`, sent while the task works, for the skill (see
    /// [`crate::flow::WhileWorking`]): journaled with the next flush. An interrupting message makes
    /// the task's row due now, so that one cut off by a crash before its delivery is found.
    pub fn queue_message(&mut self, message: crate::model::Message, interrupt: bool) {
        self.push(Entry::MessageQueued { message, interrupt });
        if interrupt {
            let now = self.now();
            self.set_wake(Some(now));
        }
    }

    /// The driver stops. Returns true when a cancel was asked of this run that it did not carry out
    /// (it stopped on a halt, a lost lease or a failed append).
    pub fn close(&mut self) -> bool {
        self.closed = true;
        self.cancel_requested() && !self.status().is_terminal()
    }

    /// Apply an entry to the fold and buffer it; a status entry also goes to the task row.
    pub fn push(&mut self, entry: Entry) {
        self.fold.apply(self.next_seq, &entry);
        match &entry {
            Entry::StatusChanged { state } | Entry::Terminal { state, .. } => {
                self.pending_state = Some(*state);
            }
            Entry::ReceiptRecorded { .. } => self.receipts_at.push(std::time::Instant::now()),
            _ => {}
        }
        self.next_seq += 1;
        self.pending.push(entry);
    }

    /// True when a queued re-run of `visit` no longer applies: the visit's transition was journaled
    /// since (a reply taken while it ran queued it, and the visit went on to its end), and it is not
    /// the journaled end that replay re-runs to finish the task.
    pub fn rerun_is_stale(&self, visit: u64) -> bool {
        self.open().map(|o| o.visit) != Some(visit)
            && self.journaled_end.map(|(v, _)| v) != Some(visit)
    }

    /// Buffer a `command_issued` entry.
    pub fn issue(&mut self, id: &InvocationId, cmd: Cmd, transition: bool) {
        self.push(Entry::CommandIssued {
            id: id.clone(),
            cmd,
            transition,
        });
    }

    /// Buffer a durable timer for command `id` and set the task row's wake time.
    pub fn set_timer(&mut self, id: &InvocationId, fire_at_ms: i64) {
        self.push(Entry::TimerSet {
            id: id.clone(),
            fire_at_ms,
        });
        self.rewake();
    }

    /// Set the task row's wake time to what the task waits for now: a cancel being carried out, or
    /// an effect to perform that the row's state would hide (at once), else its earliest
    /// outstanding timer (a sleep, a question's deadline, a call's recheck), else none. One timer
    /// never hides an earlier one of the same task.
    pub fn rewake(&mut self) {
        let at = if self.cancel_requested() || self.interrupt_pending() || self.hides_work() {
            Some(self.now())
        } else {
            self.earliest_timer()
        };
        self.set_wake(at);
    }

    /// True when the task waits by its row (`input-required`, or a timer set) while an effect is
    /// outstanding that needs nothing but to be performed (a transition that asks a question and
    /// calls a tool together, a sleep beside a tool): recovery and a shared store's claims look
    /// for such a task by its row's wake time, which must then be now — or a crash during the
    /// effect leaves the task to wait for a reply (or the timer) that its own replay would refuse.
    fn hides_work(&self) -> bool {
        self.waits_by_row() && self.has_effect_to_perform()
    }

    fn waits_by_row(&self) -> bool {
        self.status() == TaskState::InputRequired || self.earliest_timer().is_some()
    }

    /// [`RunState::rewake`] when the row shows the task waiting (`input-required`, or a wake time
    /// set): the only case in which issuing or settling an effect changes the wake time (a working
    /// task without a timer is runnable by its state alone). On the hot path this is two flag
    /// reads: no timer is looked for and no wake time written.
    pub fn rewake_if_waiting(&mut self) {
        if self.row_wakes || self.status() == TaskState::InputRequired {
            self.rewake();
        }
    }

    /// Buffer a change to a non-terminal status (a task ends with a `terminal` entry).
    pub fn set_status(&mut self, state: TaskState) {
        if self.status() != state && !state.is_terminal() {
            self.push(Entry::StatusChanged { state });
        }
    }

    /// Set or clear the task row's wake time.
    pub fn set_wake(&mut self, at: Option<i64>) {
        self.row_wakes = at.is_some();
        self.pending_wake = Some(at);
    }

    /// Buffer a receipt (and, while the row shows the task waiting, its wake time: the effect it
    /// settles no longer needs one).
    pub fn record_receipt(&mut self, receipt: Receipt) {
        self.push(Entry::ReceiptRecorded { receipt });
        self.rewake_if_waiting();
    }

    /// The task's terminal state is journaled: it ended and nothing of the run waits to be
    /// committed (an append that finishes a task gives its lease back, see `Leases::release`).
    pub fn finished_durably(&self) -> bool {
        self.status().is_terminal()
            && self.pending.is_empty()
            && self.pending_state.is_none()
            && self.pending_wake.is_none()
    }

    /// The `seq` of the first entry not committed yet (`next_seq` when none is buffered).
    pub fn first_pending_seq(&self) -> u64 {
        self.next_seq - u64::try_from(self.pending.len()).unwrap_or(u64::MAX)
    }

    #[cfg(test)]
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty() || self.pending_state.is_some() || self.pending_wake.is_some()
    }
}

/// One running task.
pub(crate) struct TaskRun {
    pub task_id: Arc<str>,
    pub context_id: Arc<str>,
    pub skill_id: String,
    /// Shared with the machine its driver turns (`TaskMachine::hosted`).
    state: Arc<Mutex<RunState>>,
    flush_lock: tokio::sync::Mutex<()>,
    store: Arc<dyn Store>,
    halted: Arc<AtomicBool>,
    tx: Records,
    /// The lease's fencing token, when the store is shared (every append carries it).
    pub fence: Option<u64>,
    /// The lease was taken over by another engine: this run must stop and write nothing more.
    lost: AtomicBool,
    /// An append failed: this run must stop and write nothing more (see [`TaskRun::flush`]).
    write_failed: AtomicBool,
    /// The append that was to create the task was refused: the task exists (its first message
    /// sent again). This run never was: nothing of it is reloaded or reported.
    duplicate: AtomicBool,
    /// What the failed append's store said, for whoever waited on entries it carried.
    append_failure: std::sync::OnceLock<String>,
    /// The `seq` of the last entry this run committed (0 before its first commit).
    durable_through: std::sync::atomic::AtomicU64,
    /// Woken when a flush takes the buffer, and when the driver stops
    /// ([`TaskRun::flush_through_within`]).
    taken: tokio::sync::Notify,
    /// The task row to create with the first flush.
    pub create: Mutex<Option<crate::store::TaskRecord>>,
    /// The lease to take with the row it creates.
    pub new_lease: Mutex<Option<crate::store::NewLease>>,
    /// The task's permission mode.
    pub mode: crate::flow::PermissionMode,
    /// Compare the live fold with the stored journal's after every append (tests).
    pub fold_check: Option<FoldCheck>,
    /// Told of every commit, to wake the push sender when the task has webhooks.
    pub push_watch: Option<Arc<super::push::Watch>>,
    /// Told of every commit, for the readers of the engine's changed tasks.
    pub changes: Option<Arc<super::changes::Changes>>,
    /// The skill version the task runs on (set by `Inner::equip`).
    pub skill: Option<Arc<dyn crate::flow::ErasedSkill>>,
    /// Marked when an append of this run fails, cleared when one succeeds (single-engine stores).
    pub stalled: Option<Arc<super::stalled::Stalled>>,
    /// Effects of this task in flight at once (parallel calls of one step): each attempt holds a
    /// permit (`EngineConfig::max_parallel_effects`).
    pub effect_slots: tokio::sync::Semaphore,
    /// The engine's counters (receipt commits, takeovers, fencing).
    pub metrics: crate::telemetry::Metrics,
    /// OpenTelemetry's sampler dropped the trace of the run's `task` span: its step, command and
    /// call spans are made where the exporting layer does not look ([`crate::telemetry::engine_span`]).
    pub unsampled: AtomicBool,
}

/// A task's bound on effects in flight: `n` permits (at least one).
pub(crate) fn effect_slots(n: usize) -> tokio::sync::Semaphore {
    tokio::sync::Semaphore::new(n.clamp(1, tokio::sync::Semaphore::MAX_PERMITS))
}

/// Times an append rolled back by a deadlock or a serialization conflict is made again before the
/// run stops on it (the store has retried it already; this covers a conflict that outlasts that).
const APPEND_RETRIES: u32 = 5;

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
        tx: Records,
    ) -> Self {
        TaskRun {
            task_id,
            context_id,
            skill_id,
            state: Arc::new(Mutex::new(state)),
            flush_lock: tokio::sync::Mutex::new(()),
            store,
            halted,
            tx,
            fence: None,
            lost: AtomicBool::new(false),
            write_failed: AtomicBool::new(false),
            duplicate: AtomicBool::new(false),
            append_failure: std::sync::OnceLock::new(),
            durable_through: std::sync::atomic::AtomicU64::new(0),
            taken: tokio::sync::Notify::new(),
            create: Mutex::new(None),
            new_lease: Mutex::new(None),
            mode: crate::flow::PermissionMode::Default,
            fold_check: None,
            push_watch: None,
            changes: None,
            stalled: None,
            skill: None,
            effect_slots: effect_slots(super::builder::DEFAULT_MAX_PARALLEL_EFFECTS),
            metrics: Default::default(),
            unsampled: AtomicBool::new(false),
        }
    }

    /// The run state, for the machine the driver turns over it.
    pub fn shared_state(&self) -> Arc<Mutex<RunState>> {
        self.state.clone()
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

    /// True when the append that was to create the task was refused because the task exists.
    pub fn duplicate(&self) -> bool {
        self.duplicate.load(Ordering::SeqCst)
    }

    /// The lease was taken over: stop this run. The takeover is logged once, and only for a run
    /// that had not finished: a run whose task ended, or whose driver stopped (it waits and gives
    /// its lease back), was fenced off by nobody, and renewal finds its lease gone because the run
    /// let it go (released as the task ended or given back).
    pub fn lose_lease(&self) {
        if self.lost.swap(true, Ordering::SeqCst) {
            return;
        }
        let finished = {
            let st = self.lock();
            st.closed || st.status().is_terminal()
        };
        if finished {
            tracing::debug!(task = %self.task_id, token = ?self.fence, "the lease of a finished run is gone");
        } else {
            self.metrics.lease_taken_over();
            tracing::warn!(task = %self.task_id, token = ?self.fence, "lease lost to another worker; fenced off, this run stops");
        }
    }

    /// Stop this run as on a lost lease, without logging a takeover (the caller logged why).
    pub fn stop_as_lost(&self) {
        self.lost.store(true, Ordering::SeqCst);
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
    ///
    /// A flush that finds nothing to commit still fails on a halted run: several calls of one step
    /// (parallel effects) buffer their commands and then each flush, and the first flush commits the
    /// whole batch. A sibling whose command went out in a batch that failed (or was never appended
    /// because the engine halted) must not take "nothing pending" for "durable" and start its effect.
    pub async fn flush(&self) -> Result<(), FlushError> {
        let _serial = self.flush_lock.lock().await;
        self.commit().await
    }

    /// Make the entries up to `seq` durable: a [`TaskRun::flush`], unless an earlier flush committed
    /// them already (then, on a run still going, nothing more is committed now). This is how the
    /// calls of a parallel batch wait for their commands: the first one's flush commits the whole
    /// batch, and the others must not each commit the receipts their siblings recorded since (one
    /// append per call instead of one per batch); those go with the next flush.
    pub async fn flush_through(&self, seq: u64) -> Result<(), FlushError> {
        let _serial = self.flush_lock.lock().await;
        // Under `flush_lock`, an entry that left the buffer was committed, or its append failed and
        // stopped the run.
        if self.lock().first_pending_seq() > seq {
            return if self.is_halted() {
                Err(FlushError::Halted)
            } else {
                Ok(())
            };
        }
        self.commit().await
    }

    /// Make the entries up to `seq` durable, leaving the commit to the driver when it takes them
    /// within `patience`: an answer's reply then goes to the store in one append with what the
    /// step it resumes does first (its first command, or its end), one commit instead of two. A
    /// driver that has not taken them by then (a step awaiting something that is not an effect, a
    /// slow hook) does not hold the answer back: its own flush commits them, as
    /// [`TaskRun::flush_through`] does.
    pub async fn flush_through_within(
        &self,
        seq: u64,
        patience: std::time::Duration,
    ) -> Result<(), FlushError> {
        let taken = async {
            loop {
                let woken = self.taken.notified();
                tokio::pin!(woken);
                woken.as_mut().enable();
                if self.lock().first_pending_seq() > seq || self.is_halted() {
                    return;
                }
                woken.await;
            }
        };
        let _ = tokio::time::timeout(patience, taken).await;
        match self.flush_through(seq).await {
            // Committed, and then the run stopped: they are durable all the same.
            Err(_) if self.durable_through.load(Ordering::SeqCst) >= seq => Ok(()),
            Err(FlushError::Halted) => match self.append_failure.get() {
                // The append that carried them failed: say why, not just that the run stopped.
                Some(failure) => Err(FlushError::Store(StoreError::Backend {
                    context: "appending to the task's journal".into(),
                    source: failure.clone().into(),
                })),
                None => Err(FlushError::Halted),
            },
            flushed => flushed,
        }
    }

    /// The driver stopped: whoever waits for it to take entries (see
    /// [`TaskRun::flush_through_within`]) stops waiting.
    pub fn driver_stopped(&self) {
        self.taken.notify_waiters();
    }

    /// The body of a flush; the caller holds `flush_lock`.
    async fn commit(&self) -> Result<(), FlushError> {
        let (batch, live) = {
            let mut st = self.lock();
            let Some(batch) = st.take_batch() else {
                return if self.is_halted() {
                    Err(FlushError::Halted)
                } else {
                    Ok(())
                };
            };
            self.taken.notify_waiters();
            (batch, self.fold_check.as_ref().map(|_| st.fold().clone()))
        };
        let Buffered {
            first_seq,
            entries,
            state,
            wake_at_ms: wake,
            waits_on_call,
            receipts_at,
        } = batch;
        if self.is_halted() {
            return Err(FlushError::Halted);
        }
        // Subscribers read the store after subscribing, so one that subscribes before this commit ends
        // must get these records live: decide whether to publish only after the commit. The store and
        // the publication share the entries: one copy however many subscribers there are.
        let entries: Arc<[Entry]> = entries.into();
        let mut append = Append::new(self.task_id.to_string(), first_seq, entries.clone());
        append.state = state;
        append.wake_at_ms = wake;
        append.waits_on_call = waits_on_call;
        append.fence = self.fence;
        append.create = self.create.lock().unwrap_or_else(|p| p.into_inner()).take();
        if append.create.is_some() {
            append.lease = self
                .new_lease
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
        }
        // An append rolled back by a conflict with a concurrent statement wrote nothing: the same
        // append is made again, so the conflict costs the run no step.
        let mut conflicts = 0;
        let appended = loop {
            match self.store.append(append.clone()).await {
                Err(e) if e.is_retryable() && conflicts < APPEND_RETRIES && !self.is_halted() => {
                    conflicts += 1;
                    tracing::debug!(task = %self.task_id, error = %e, first_seq, conflicts, "journal append lost a conflict; appending again");
                    tokio::time::sleep(std::time::Duration::from_millis(10 << conflicts.min(6)))
                        .await;
                }
                appended => break appended,
            }
        };
        match appended {
            Ok(()) => {
                let last = first_seq
                    .saturating_add(u64::try_from(entries.len()).unwrap_or(u64::MAX))
                    .saturating_sub(1);
                self.durable_through.store(last, Ordering::SeqCst);
                self.metrics.receipts_committed(&receipts_at);
                if let Some(stalled) = &self.stalled {
                    stalled.clear(&self.task_id);
                }
            }
            Err(e @ StoreError::Fenced { .. }) => {
                self.metrics.fenced();
                self.lose_lease();
                return Err(e.into());
            }
            // The task exists (a first message sent again): this run never was, and the task's
            // own run and subscribers are not told of it.
            Err(e @ StoreError::Conflict { .. }) if append.create.is_some() => {
                self.duplicate.store(true, Ordering::SeqCst);
                self.write_failed.store(true, Ordering::SeqCst);
                return Err(e.into());
            }
            Err(e) => {
                let _ = self.append_failure.set(e.to_string());
                if !self.write_failed.swap(true, Ordering::SeqCst) {
                    tracing::warn!(task = %self.task_id, error = %e, first_seq, "journal append failed; this run stops and the task is reloaded from the store");
                    if let Some(stalled) = &self.stalled {
                        stalled.stall(&self.task_id);
                    }
                    // Whoever waits on the task (a stream, a blocking send) is told now, not left
                    // waiting for a run that stopped.
                    let _ = self.tx.send(Arc::new(Published::WriteFailed));
                }
                return Err(e.into());
            }
        }
        if let Some(watch) = &self.push_watch {
            watch.committed(&self.task_id, &entries);
        }
        if let Some(changes) = &self.changes {
            changes.committed(&self.task_id);
        }
        if self.tx.receiver_count() > 0 {
            // The time the store wrote: a live event says what a replay or a read will.
            let _ = self.tx.send(Arc::new(Published::Records {
                first_seq,
                at_ms: append.at_ms,
                entries,
            }));
        }
        if let (Some(check), Some(live)) = (&self.fold_check, live) {
            let stored = self.store.journal_for_replay(&self.task_id).await?;
            let view = self.store.task_view(&self.task_id, None).await?;
            let journal = self.store.journal(&self.task_id, 0).await?;
            if !check.compare(&self.task_id, &live, &stored)
                || !check.compare_view(&self.task_id, view, &journal)
            {
                self.halted.store(true, Ordering::SeqCst);
                return Err(FlushError::Halted);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of a task created and now in `status`, its next entry at seq 5.
    fn run_in(status: TaskState) -> RunState {
        let mut st = RunState::new(serde_json::Value::Null);
        st.push(Entry::TaskCreated {
            skill_id: "s".into(),
            skill_version: "1".into(),
            context_id: "c".into(),
            principal: None,
            permission_mode: Default::default(),
            steps: Default::default(),
        });
        st.push(Entry::MessageReceived {
            message: crate::model::Message::user_text("go"),
        });
        st.push(Entry::StatusChanged {
            state: TaskState::Working,
        });
        st.set_status(status);
        while st.next_seq < 5 {
            st.push(Entry::Progress {
                message: crate::model::Message::agent_text("."),
            });
        }
        st.pending.clear();
        st.pending_state = None;
        st
    }

    /// A run over a memory store that has no row for its task: its first append fails.
    fn run_without_a_row() -> TaskRun {
        let (tx, _) = tokio::sync::broadcast::channel(4);
        TaskRun::new(
            "t".into(),
            "c".into(),
            "s".into(),
            RunState::new(serde_json::Value::Null),
            Arc::new(crate::store::MemoryStore::new()),
            Arc::new(AtomicBool::new(false)),
            tx,
        )
    }

    /// Parallel effects: the first sibling's flush commits the batch; the others find nothing
    /// pending. When that batch failed, nothing pending must not read as "durable": their effects
    /// would start without their commands journaled.
    #[tokio::test]
    async fn a_flush_with_nothing_pending_fails_after_a_failed_append() {
        let run = run_without_a_row();
        run.lock().push(Entry::Progress {
            message: crate::model::Message::agent_text("."),
        });
        assert!(matches!(run.flush().await, Err(FlushError::Store(_))));
        assert!(!run.lock().has_pending(), "the batch went out");
        assert!(
            matches!(run.flush().await, Err(FlushError::Halted)),
            "a sibling's flush after the failed batch"
        );
        assert!(
            matches!(run.flush_through(1).await, Err(FlushError::Halted)),
            "a sibling waiting for its command in the failed batch"
        );
    }

    #[tokio::test]
    async fn a_flush_with_nothing_pending_fails_once_the_engine_halted() {
        let run = run_without_a_row();
        assert!(
            run.flush().await.is_ok(),
            "nothing to commit, still running"
        );
        run.halted.store(true, Ordering::SeqCst);
        assert!(matches!(run.flush().await, Err(FlushError::Halted)));
        let run = run_without_a_row();
        run.lose_lease();
        assert!(matches!(run.flush().await, Err(FlushError::Halted)));
    }

    #[test]
    fn the_row_wakes_for_the_earliest_outstanding_timer_of_the_task() {
        let mut st = run_in(TaskState::Working);
        let (sleep, call) = (
            InvocationId::derive("t", 1, 0),
            InvocationId::derive("t", 1, 1),
        );
        st.issue(&sleep, Cmd::sleep(std::time::Duration::from_secs(1)), false);
        st.set_timer(&sleep, 1_000);
        st.issue(
            &call,
            Cmd::skill("child", crate::model::Message::user_text("x")),
            false,
        );
        // A call waits by its recheck once its callee is bound.
        st.push(Entry::CallStarted {
            id: call.clone(),
            task_id: "callee".into(),
            context_id: None,
            webhook: false,
        });
        st.set_timer(&call, 5_000);
        assert_eq!(
            st.pending_wake,
            Some(Some(1_000)),
            "the later recheck does not hide the sleep"
        );
        st.record_receipt(Receipt {
            id: sleep,
            attempt: 1,
            outcome: Ok(serde_json::Value::Null),
            usage: None,
        });
        st.rewake();
        assert_eq!(st.pending_wake, Some(Some(5_000)));
        st.record_receipt(Receipt {
            id: call,
            attempt: 1,
            outcome: Ok(serde_json::Value::Null),
            usage: None,
        });
        st.rewake();
        assert_eq!(st.pending_wake, Some(None));
    }

    /// A question and a tool from one transition: while the tool has no receipt the row wakes now
    /// (recovery and claims must find the work), after it the row waits for the reply; a working
    /// task's effects write no wake time at all (the hot path).
    #[test]
    fn a_tool_beside_a_question_wakes_the_row_until_its_receipt() {
        let mut st = run_in(TaskState::Working);
        let tool = InvocationId::derive("t", 1, 0);
        super::super::command::issue(
            &mut st,
            &tool,
            crate::flow::Cmd::tool("lookup", serde_json::json!({})),
            true,
            0,
        );
        assert_eq!(
            st.pending_wake, None,
            "a working task's effect writes no wake time"
        );
        let ask = InvocationId::derive("t", 1, 1);
        let question = crate::flow::Cmd::new(crate::flow::CmdKind::AskUser {
            slot: "note".into(),
            message: crate::model::Message::agent_text("note?"),
            expires_in_ms: None,
            on_expiry: None,
        });
        let before = now_ms();
        super::super::command::issue(&mut st, &ask, question, true, before);
        assert_eq!(st.status(), TaskState::InputRequired);
        assert!(
            matches!(st.pending_wake, Some(Some(at)) if at >= before),
            "the lookup is work to do now: {:?}",
            st.pending_wake
        );
        st.record_receipt(Receipt {
            id: tool,
            attempt: 1,
            outcome: Ok(serde_json::Value::Null),
            usage: None,
        });
        assert_eq!(
            st.pending_wake,
            Some(None),
            "then the task waits for the reply"
        );
    }

    /// Counts the warnings logged while it is the thread's subscriber.
    struct Warnings(Arc<std::sync::atomic::AtomicUsize>);

    impl tracing::Subscriber for Warnings {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            if *event.metadata().level() == tracing::Level::WARN {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    /// The warnings `f` logs.
    fn warnings(f: impl FnOnce()) -> usize {
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        tracing::subscriber::with_default(Warnings(count.clone()), f);
        count.load(Ordering::SeqCst)
    }

    /// Renewal finds the lease of a run that just completed gone (released with the task's end,
    /// before the run left the live table): no takeover is reported for it.
    #[test]
    fn a_lease_lost_after_the_task_ended_or_the_run_stopped_reports_no_takeover() {
        let ended = run_without_a_row();
        ended.lock().push(Entry::Terminal {
            state: TaskState::Completed,
            message: None,
        });
        assert_eq!(warnings(|| ended.lose_lease()), 0, "the task completed");
        assert!(
            ended.lease_lost() && ended.is_halted(),
            "the run still stops"
        );
        let stopped = run_without_a_row();
        stopped.lock().close();
        assert_eq!(warnings(|| stopped.lose_lease()), 0, "the run waits");
        let running = run_without_a_row();
        assert_eq!(warnings(|| running.lose_lease()), 1, "fenced off");
        assert_eq!(warnings(|| running.lose_lease()), 0, "reported once");
    }

    #[test]
    fn a_row_change_alone_waits_for_the_next_entries() {
        let mut st = run_in(TaskState::Working);
        st.set_wake(Some(1_000));
        assert!(st.take_batch().is_none(), "no append without entries");
        st.push(Entry::Progress {
            message: crate::model::Message::agent_text("."),
        });
        let batch = st
            .take_batch()
            .expect("the entry and the wake time together");
        assert_eq!(batch.entries.len(), 1);
        assert_eq!(batch.wake_at_ms, Some(Some(1_000)));
    }

    #[test]
    fn a_closed_run_refuses_a_cancel() {
        let mut st = run_in(TaskState::InputRequired);
        assert!(!st.close(), "nothing was asked of it");
        assert!(!st.request_cancel());
        assert!(!st.cancel_requested() && !st.has_pending());
    }

    #[test]
    fn a_cancel_the_run_stopped_before_carrying_out_is_reported_at_close() {
        let mut st = run_in(TaskState::Working);
        assert!(st.request_cancel());
        assert!(st.request_cancel(), "asked twice, journaled once");
        assert_eq!(st.next_seq, 6);
        assert!(st.close());
    }

    #[test]
    fn an_ended_task_refuses_a_cancel() {
        let mut st = run_in(TaskState::Working);
        st.push(Entry::Terminal {
            state: TaskState::Completed,
            message: None,
        });
        assert!(!st.request_cancel());
        assert!(!st.close());
    }
}
