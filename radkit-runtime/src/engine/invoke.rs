//! `StepInvoker`: performs the `ctx` calls of one step visit. A call with a receipt returns the
//! recorded outcome; a call without one is journaled, flushed, performed (with retries) and receipted.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use async_trait::async_trait;

use super::call::CallStep;
use super::command::{self, Issued, Outstanding};
use super::fault::Boundary;
use super::fold::CmdRec;
use super::hooks::{HookContext, HookDecision};
use super::run::TaskRun;
use super::Inner;
use crate::flow::PermissionMode;
use crate::flow::{Cmd, CmdKind, EffectError, InvocationId, Invoker, Receipt, StepError};
use crate::journal::now_ms;

/// The invoker of one visit.
pub(crate) struct StepInvoker {
    pub engine: Arc<Inner>,
    pub run: Arc<TaskRun>,
    pub visit: u64,
    pub step: String,
    /// Whether a call of this visit suspended, halted or was canceled: the visit stops so whatever
    /// the step does with the error (a step that matches on a call's error may swallow it).
    pub stop: Arc<VisitStop>,
    /// The calls of this visit in flight (see [`Batch`]).
    pub batch: Batch,
}

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
struct InFlight<'a> {
    batch: &'a Batch,
    replayed: bool,
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
    fn start(&self, step: &str, cmd: &Cmd) -> Result<(), StepError> {
        let mut st = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if st.in_flight > 0 && st.finished_live > 0 {
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

tokio::task_local! {
    /// The visit whose step future the current task polls (its [`VisitStop`]'s address): a ctx
    /// call polled anywhere else (a spawned task) was taken out of its step.
    pub(crate) static VISIT: usize;
}

/// The strongest control error a visit's calls returned (see [`StepInvoker::stop`]), or the
/// misuse that fails the visit.
#[derive(Default)]
pub(crate) struct VisitStop {
    level: std::sync::atomic::AtomicU8,
    misuse: std::sync::Mutex<Option<String>>,
}

impl VisitStop {
    fn note(&self, e: &StepError) {
        let level = match e {
            StepError::Suspended => 1,
            StepError::Canceled => 2,
            StepError::Halted => 3,
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

    /// The address that names this visit in [`VISIT`].
    pub fn token(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as usize
    }

    /// The error the visit stops with, whatever the step returned: a halt or a cancel first,
    /// then a misuse, then a suspension.
    pub fn error(&self) -> Option<StepError> {
        match self.level.load(Ordering::SeqCst) {
            3 => return Some(StepError::Halted),
            2 => return Some(StepError::Canceled),
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
        (self.level.load(Ordering::SeqCst) == 1).then_some(StepError::Suspended)
    }
}

/// What the table says about a command at a position.
enum Found {
    Receipt(Receipt),
    /// Journaled without a receipt; true when an earlier run journaled it.
    NoReceipt(Box<CmdRec>, bool),
    New,
}

#[async_trait]
impl Invoker for StepInvoker {
    async fn invoke(&self, position: u32, cmd: Cmd) -> Result<serde_json::Value, StepError> {
        let id = InvocationId::derive(&self.run.task_id, self.visit, position);
        // A call of this visit stopped it (suspended, canceled, halted): whatever the step does
        // next is not journaled — what it does with that error must not become the task's history.
        if let Some(stop) = self.stop.error() {
            if stop == StepError::Suspended {
                // Inside a race this call waits with the rest of the visit: it must not win.
                crate::flow::race::defer_suspension();
            }
            return Err(stop);
        }
        if VISIT.try_with(|v| *v) != Ok(self.stop.token()) {
            return Err(self.stop.fail(format!(
                "step `{}` made {} outside its own future (in a spawned task?): a ctx call must be awaited inside the step that made it, so that its outcome is journaled before the step goes on; run calls together with `ctx.all` or `ctx.race`",
                self.step,
                cmd.kind.fingerprint()
            )));
        }
        if matches!(cmd.kind, CmdKind::Race { .. }) {
            return Err(StepError::Failed(
                "a race is journaled by `ctx.race` with its winner; it cannot be run as a command"
                    .into(),
            ));
        }
        if let Err(e) = self.batch.start(&self.step, &cmd) {
            self.stop.note(&e);
            return Err(e);
        }
        let replayed = self
            .run
            .lock()
            .command(&id)
            .is_some_and(|r| r.receipt.is_some());
        // Ends the call in the batch however the call ends, also when the step drops it.
        let _in_flight = InFlight {
            batch: &self.batch,
            replayed,
        };
        let result = self.invoke_at(position, id, cmd).await;
        match &result {
            // Inside `ctx.race` a call that waits does not suspend the step: the race decides.
            Err(StepError::Suspended) if crate::flow::race::defer_suspension() => {}
            Err(e) => self.stop.note(e),
            Ok(_) => {}
        }
        result
    }

    fn recorded(&self, position: u32, cmd: &Cmd) -> Result<Option<serde_json::Value>, StepError> {
        let id = InvocationId::derive(&self.run.task_id, self.visit, position);
        let st = self.run.lock();
        let Some(rec) = st.command(&id) else {
            return Ok(None);
        };
        if rec.cmd.kind.fingerprint() != cmd.kind.fingerprint() {
            return Err(StepError::NonDeterminism {
                skill: self.run.skill_id.clone(),
                step: self.step.clone(),
                position,
                recorded: rec.cmd.kind.fingerprint(),
                issued: cmd.kind.fingerprint(),
            });
        }
        match &rec.receipt {
            Some(Receipt { outcome: Ok(v), .. }) => Ok(Some(v.clone())),
            _ => Ok(None),
        }
    }

    async fn record(
        &self,
        position: u32,
        cmd: Cmd,
        value: serde_json::Value,
        abandoned: &[u32],
    ) -> Result<(), StepError> {
        if let Some(stop @ (StepError::Halted | StepError::Canceled | StepError::Failed(_))) =
            self.stop.error()
        {
            return Err(stop);
        }
        let id = InvocationId::derive(&self.run.task_id, self.visit, position);
        let mut abandoned_calls = Vec::new();
        {
            let mut st = self.run.lock();
            st.issue(&id, cmd, false);
            st.record_receipt(Receipt {
                id: id.clone(),
                attempt: 1,
                outcome: Ok(value),
                usage: None,
            });
            for &lost in abandoned {
                let lost_id = InvocationId::derive(&self.run.task_id, self.visit, lost);
                let Some(rec) = st.command(&lost_id).filter(|r| r.receipt.is_none()) else {
                    continue;
                };
                let error = EffectError::permanent(format!(
                    "abandoned: {} lost the race at position {position} of step `{}`",
                    rec.cmd.kind.fingerprint(),
                    self.step
                ));
                let attempt = rec.attempts.max(1);
                if rec.cmd.kind.is_call() {
                    let callee = rec.callee.as_ref().map(|c| c.task_id.clone());
                    abandoned_calls.push((lost_id.clone(), rec.cmd.clone(), callee));
                }
                st.record_receipt(Receipt {
                    id: lost_id,
                    attempt,
                    outcome: Err(error),
                    usage: None,
                });
            }
            // A question that lost the race is no longer asked.
            if st.status() == crate::model::TaskState::InputRequired && st.open_question().is_none()
            {
                st.set_status(crate::model::TaskState::Working);
            }
        }
        self.flush().await?;
        // A callee working for a call that lost the race works for nobody now.
        self.engine.cancel_abandoned(&self.run, abandoned_calls);
        Ok(())
    }

    fn stop(&self, error: &StepError) {
        match error {
            StepError::Failed(reason) => drop(self.stop.fail(reason.clone())),
            other => self.stop.note(other),
        }
    }
}

impl StepInvoker {
    /// Run or replay `cmd` as command `id` (at `ordinal`, for error messages).
    fn invoke_at(
        &self,
        ordinal: u32,
        id: InvocationId,
        mut cmd: Cmd,
    ) -> futures::future::BoxFuture<'_, Result<serde_json::Value, StepError>> {
        Box::pin(async move {
            cmd.policy = self.engine.effects.policy_for(&cmd.kind, cmd.policy);
            let found = {
                let st = self.run.lock();
                if st.cancel_requested() {
                    return Err(StepError::Canceled);
                }
                match st.command(&id) {
                    Some(rec) if rec.cmd.kind.fingerprint() != cmd.kind.fingerprint() => {
                        return Err(StepError::NonDeterminism {
                            skill: self.run.skill_id.clone(),
                            step: self.step.clone(),
                            position: ordinal,
                            recorded: rec.cmd.kind.fingerprint(),
                            issued: cmd.kind.fingerprint(),
                        });
                    }
                    Some(rec) => match &rec.receipt {
                        Some(receipt) => Found::Receipt(receipt.clone()),
                        None => Found::NoReceipt(Box::new(rec.clone()), st.recovered(rec)),
                    },
                    None => Found::New,
                }
            };
            match found {
                Found::Receipt(receipt) => outcome(&cmd, receipt),
                Found::NoReceipt(rec, recovered) => self.resume_issued(id, *rec, recovered).await,
                Found::New => {
                    let cmd = self.admit(ordinal, &id, cmd).await?;
                    self.issue(id, cmd).await
                }
            }
        })
    }

    fn hook_context(&self) -> HookContext {
        HookContext {
            task_id: self.run.task_id.to_string(),
            skill_id: self.run.skill_id.clone(),
            step: self.step.clone(),
            visit: self.visit,
            mode: self.run.mode,
        }
    }

    /// Hooks and the permission gate, before a command is journaled for the first time. A refusal is
    /// journaled as the command's receipt, so a replay refuses it the same way.
    async fn admit(&self, ordinal: u32, id: &InvocationId, mut cmd: Cmd) -> Result<Cmd, StepError> {
        let ctx = self.hook_context();
        let original = cmd.clone();
        for hook in &self.engine.config.hooks {
            if let HookDecision::Deny(reason) = hook.before_command(&ctx, &mut cmd).await {
                return Err(self
                    .refuse(id, cmd, format!("denied by a hook: {reason}"))
                    .await);
            }
        }
        if cmd.kind.fingerprint() != original.kind.fingerprint() {
            // A replay re-issues the step's own command and compares targets with the journal, so
            // the refusal is journaled under the step's command.
            let reason = format!(
                "a hook changed {} into {}; hooks may change arguments and policies, not the target",
                original.kind.fingerprint(),
                cmd.kind.fingerprint()
            );
            return Err(self.refuse(id, original, reason).await);
        }
        if let CmdKind::Tool { tool, args } = &cmd.kind {
            let (slot, request) = match self.gate(tool, args) {
                None => return Ok(cmd),
                Some(Err(reason)) => return Err(self.refuse(id, cmd, reason).await),
                Some(Ok(ask)) => ask,
            };
            // The questions have ids derived from the tool call's, so the ordinals of the
            // step's later commands do not depend on whether (or how often) it was asked.
            let approval = crate::flow::approval::decide(slot, &request, |round, ask| {
                let ask_id = match round {
                    0 => format!("{id}/{slot}"),
                    n => format!("{id}/{slot}/{}", n + 1),
                };
                self.invoke_at(ordinal, InvocationId::from_string(ask_id), ask)
            })
            .await?;
            if !approval.approved() {
                let why = if approval.expired {
                    "the approval expired"
                } else {
                    "it was rejected"
                };
                return Err(StepError::Rejected(format!(
                    "tool `{tool}` was not approved: {why}"
                )));
            }
        }
        Ok(cmd)
    }

    /// The built-in gate for a tool call: `None` to run it, `Some(Err(reason))` to refuse it (plan
    /// mode below the tool's minimum), `Some(Ok((slot, request)))` to ask a human first (below the
    /// minimum in other modes, or when the tool demands approval for these arguments).
    #[allow(clippy::type_complexity)]
    fn gate(
        &self,
        tool: &str,
        args: &serde_json::Value,
    ) -> Option<Result<(&'static str, crate::flow::ApprovalRequest), String>> {
        let found = self.engine.effects.find_tool(tool);
        let need = found.map(|t| t.min_mode()).unwrap_or_default();
        let mode = self.run.mode;
        if mode < need && mode == PermissionMode::Plan {
            return Some(Err(format!("tool `{tool}` needs permission mode {need:?}; this task runs in plan mode (read-only)")));
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
            return None;
        }
        let mut request =
            crate::flow::ApprovalRequest::new(tool.to_owned(), args.clone(), reasons.join("; "));
        let slot = match demanded {
            Some(d) => {
                if let Some(after) = d.expires_in {
                    request = request.expires(after, d.default);
                }
                "approval"
            }
            None => "permission",
        };
        Some(Ok((slot, request)))
    }

    /// Journal `cmd` with a permanent error as its receipt and return that error.
    async fn refuse(&self, id: &InvocationId, cmd: Cmd, reason: String) -> StepError {
        let error = EffectError::permanent(reason);
        {
            let mut st = self.run.lock();
            st.issue(id, cmd.clone(), false);
            st.record_receipt(Receipt {
                id: id.clone(),
                attempt: 1,
                outcome: Err(error.clone()),
                usage: None,
            });
        }
        if let Err(e) = self.flush().await {
            return e;
        }
        StepError::Effect {
            what: cmd.kind.fingerprint(),
            error,
        }
    }
}

fn outcome(cmd: &Cmd, receipt: Receipt) -> Result<serde_json::Value, StepError> {
    receipt.outcome.map_err(|error| StepError::Effect {
        what: cmd.kind.fingerprint(),
        error,
    })
}

impl StepInvoker {
    fn halted<T>(&self) -> Result<T, StepError> {
        Err(StepError::Halted)
    }

    /// Flush the run's buffer. Any failure stops the step as a crash would (never fails the task: a
    /// failed append stops the run, and the task is reloaded from the store).
    async fn flush(&self) -> Result<(), StepError> {
        self.run.flush().await.map_err(|_| StepError::Halted)
    }

    /// Make durable the command `issue` just buffered (called right after it, with no await
    /// between), together with its parallel siblings. The step yields once first: the calls of a
    /// batch (`ctx.all`, `join!`) are first polled one after the other in one poll of the step, and
    /// each buffers its command there, so by the time the first of them flushes, all have buffered
    /// theirs. The first flush commits the batch in one append; the others find their commands
    /// committed and commit nothing (they fail if that append did: see `TaskRun::flush_through`).
    async fn flush_batch(&self) -> Result<(), StepError> {
        let issued_through = self.run.lock().next_seq - 1;
        tokio::task::yield_now().await;
        self.run
            .flush_through(issued_through)
            .await
            .map_err(|_| StepError::Halted)
    }

    /// A command seen for the first time: journal it, then perform it.
    async fn issue(&self, id: InvocationId, cmd: Cmd) -> Result<serde_json::Value, StepError> {
        let run = &self.run;
        let issued = command::issue(&mut run.lock(), &id, cmd.clone(), false, now_ms());
        // Emissions are what clients stream, waits must be durable before the step suspends, and a
        // command before it runs: flush now in every case.
        self.flush_batch().await?;
        match issued {
            Issued::Journaled => Ok(serde_json::Value::Null),
            Issued::Waits(wake) => {
                if let Some(at) = wake {
                    self.engine.schedule_timer(run.task_id.to_string(), at);
                }
                let boundary = match cmd.kind {
                    CmdKind::Sleep { .. } => Boundary::TimerWait,
                    _ => Boundary::AwaitingInput,
                };
                if self.engine.crash_at(boundary, run, None, None) {
                    return self.halted();
                }
                Err(StepError::Suspended)
            }
            Issued::Perform if cmd.kind.is_call() => self.call(id, &cmd, None).await,
            Issued::Perform => {
                let receipt = self
                    .engine
                    .perform(run, &id, &cmd, 0)
                    .await
                    .ok_or(StepError::Halted)?;
                if !self.engine.config.hooks.is_empty() {
                    let ctx = self.hook_context();
                    for hook in &self.engine.config.hooks {
                        hook.after_command(&ctx, &cmd, &receipt).await;
                    }
                }
                outcome(&cmd, receipt)
            }
        }
    }

    /// Start or resume a call (`ctx.agent`, `ctx.skill`): its reply, or a suspension while the
    /// callee works.
    async fn call(
        &self,
        id: InvocationId,
        cmd: &Cmd,
        rec: Option<&CmdRec>,
    ) -> Result<serde_json::Value, StepError> {
        match self.engine.call(&self.run, &id, cmd, rec).await {
            CallStep::Settled(receipt) => outcome(cmd, receipt),
            CallStep::Waiting => Err(StepError::Suspended),
            CallStep::Halted => self.halted(),
            CallStep::Canceled => Err(StepError::Canceled),
        }
    }

    /// A command journaled without a receipt (by an earlier run when `recovered`: before a crash or a
    /// suspension).
    async fn resume_issued(
        &self,
        id: InvocationId,
        rec: CmdRec,
        recovered: bool,
    ) -> Result<serde_json::Value, StepError> {
        match command::outstanding(&rec, recovered, now_ms()) {
            Outstanding::Due => Ok(command::settle_due(&mut self.run.lock(), &id, &rec.cmd)),
            Outstanding::Timer(at) | Outstanding::Question(Some(at)) => {
                self.engine.schedule_timer(self.run.task_id.to_string(), at);
                Err(StepError::Suspended)
            }
            Outstanding::Question(None) => Err(StepError::Suspended),
            Outstanding::Unknown => Err(StepError::OutcomeUnknown {
                what: rec.cmd.kind.fingerprint(),
                id,
            }),
            Outstanding::Perform if rec.cmd.kind.is_call() => {
                self.call(id, &rec.cmd, Some(&rec)).await
            }
            Outstanding::Perform => {
                let receipt = self
                    .engine
                    .perform(&self.run, &id, &rec.cmd, rec.attempts)
                    .await
                    .ok_or(StepError::Halted)?;
                outcome(&rec.cmd, receipt)
            }
        }
    }
}
