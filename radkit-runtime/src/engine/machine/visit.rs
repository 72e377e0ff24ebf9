//! What a step visit keeps about its calls, whoever polls it (the engine's driver or the
//! [`TaskMachine`](super::TaskMachine)): the strongest control error a call returned, a misuse
//! that fails the visit, and the batch of calls in flight.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::flow::{Cmd, CmdKind, StepError};

/// The calls of a visit in flight at once, to refuse a call whose position would depend on timing.
///
/// A batch (`ctx.all`, `join!`) takes its ids in one poll of the step: every call starts before
/// any finishes. A call that starts while others are in flight, after one of them finished, was
/// chained behind a sibling inside one element: when it starts, and so its InvocationId, depends on
/// which effect returned first, and a replay could hand it another call's receipt. Such a call
/// fails the step with a message that says so. Receipts returned on replay do not count as
/// finishing (they return at once), so a replay of a correct batch is never refused.
#[derive(Default)]
pub(crate) struct Batch(std::sync::Mutex<BatchState>);

/// One call in flight in its visit's [`Batch`]; ends it when dropped.
pub(crate) struct InFlight<'a> {
    pub batch: &'a Batch,
    pub replayed: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.batch.end(self.replayed);
    }
}

#[derive(Default)]
struct BatchState {
    in_flight: u32,
    finished_live: u32,
}

impl Batch {
    /// Let a call in. One that took its position before a call it follows finished
    /// (`reserved`, see `Invoker::invoke_reserved`) is always let in: its id never depended on
    /// timing.
    pub fn start(&self, step: &str, cmd: &Cmd, reserved: bool) -> Result<(), StepError> {
        let mut st = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if !reserved && st.in_flight > 0 && st.finished_live > 0 {
            return Err(StepError::Failed(format!(
                "step `{step}` started {} while other calls of its batch were running and one had finished: its position, and so its InvocationId, would depend on which effect returned first; make each element of `ctx.all`/`join!` one ctx call and make further calls after the batch",
                cmd.kind.fingerprint()
            )));
        }
        st.in_flight += 1;
        Ok(())
    }

    fn end(&self, replayed: bool) {
        let mut st = self.0.lock().unwrap_or_else(|p| p.into_inner());
        st.in_flight = st.in_flight.saturating_sub(1);
        if !replayed {
            st.finished_live += 1;
        }
        if st.in_flight == 0 {
            st.finished_live = 0;
        }
    }
}

/// The strongest control error a visit's calls returned (see `Invoker::stop`), or the
/// misuse that fails the visit.
#[derive(Default)]
pub(crate) struct VisitStop {
    level: std::sync::atomic::AtomicU8,
    misuse: std::sync::Mutex<Option<String>>,
}

impl VisitStop {
    pub fn note(&self, e: &StepError) {
        let level = match e {
            StepError::Suspended => 1,
            StepError::Interrupted => 2,
            StepError::Canceled => 3,
            StepError::Halted => 4,
            _ => return,
        };
        self.level.fetch_max(level, Ordering::SeqCst);
    }

    /// Fail the visit with `reason` whatever the step does next (a ctx call used where its id or
    /// its outcome could not be journaled faithfully). The first reason is kept.
    pub fn fail(&self, reason: String) -> StepError {
        let mut misuse = self.misuse.lock().unwrap_or_else(|p| p.into_inner());
        StepError::Failed(misuse.get_or_insert(reason).clone())
    }

    /// The address that names this visit (the engine's driver polls a step inside a task-local
    /// scope holding it).
    pub fn token(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as usize
    }

    /// The error the visit stops with, whatever the step returned: a halt or a cancel first,
    /// then a misuse, then an interrupt, then a suspension.
    pub fn error(&self) -> Option<StepError> {
        match self.level.load(Ordering::SeqCst) {
            4 => return Some(StepError::Halted),
            3 => return Some(StepError::Canceled),
            _ => {}
        }
        if let Some(reason) = self
            .misuse
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            return Some(StepError::Failed(reason));
        }
        match self.level.load(Ordering::SeqCst) {
            2 => Some(StepError::Interrupted),
            1 => Some(StepError::Suspended),
            _ => None,
        }
    }
}

/// The error a call made after its visit stopped returns at once, if the visit stopped: whatever
/// the step does next is not journaled (what it does with that error must not become the task's
/// history). A suspension inside a race makes the call wait with the rest of the visit.
pub(crate) fn stopped(stop: &VisitStop) -> Option<StepError> {
    let error = stop.error()?;
    if error == StepError::Suspended {
        crate::flow::race::defer_suspension();
    }
    Some(error)
}

/// Let call `cmd` of step `step` into the visit: a race command is refused (only `ctx.race`
/// journals one), and so is a call that would take its position by timing (see [`Batch`]).
pub(crate) fn enter(
    stop: &VisitStop,
    batch: &Batch,
    step: &str,
    cmd: &Cmd,
    reserved: bool,
) -> Result<(), StepError> {
    if matches!(cmd.kind, CmdKind::Race { .. }) {
        return Err(StepError::Failed(
            "a race is journaled by `ctx.race` with its winner; it cannot be run as a command"
                .into(),
        ));
    }
    batch
        .start(step, cmd, reserved)
        .inspect_err(|e| stop.note(e))
}

/// Note what a call's result means for its visit. Inside `ctx.race` a call that waits does not
/// suspend the step: the race decides.
pub(crate) fn settled(stop: &VisitStop, result: &Result<serde_json::Value, StepError>) {
    match result {
        Err(StepError::Suspended) if crate::flow::race::defer_suspension() => {}
        Err(e) => stop.note(e),
        Ok(_) => {}
    }
}

impl VisitStop {
    /// The error that refuses a race's record: the visit halted, was canceled or misused.
    pub fn refuses_record(&self) -> Option<StepError> {
        match self.error() {
            Some(
                stop @ (StepError::Halted
                | StepError::Canceled
                | StepError::Interrupted
                | StepError::Failed(_)),
            ) => Some(stop),
            _ => None,
        }
    }

    /// Stop the visit with `error` whatever the step does (`Invoker::stop`).
    pub fn stop_with(&self, error: &StepError) {
        match error {
            StepError::Failed(reason) => drop(self.fail(reason.clone())),
            other => self.note(other),
        }
    }
}
