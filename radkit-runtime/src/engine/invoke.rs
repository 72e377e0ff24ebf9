//! `StepInvoker`: performs the `ctx` calls of one step visit. A call with a receipt returns the
//! recorded outcome; a call without one is journaled, flushed, performed (with retries) and receipted.

use std::sync::Arc;

use async_trait::async_trait;

use super::call::CallStep;
use super::command::{self, Issued};
use super::fault::Boundary;
use super::fold::CmdRec;
use super::hooks::{HookContext, HookDecision};
use super::machine::rules::{self, Found, Gate, Resume};
use super::machine::visit::{self, Batch, InFlight, VisitStop};
use super::run::TaskRun;
use super::Inner;
use crate::flow::{Cmd, CmdKind, InvocationId, Invoker, StepError};
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

tokio::task_local! {
    /// The visit whose step future the current task polls (its [`VisitStop`]'s address): a ctx
    /// call polled anywhere else (a spawned task) was taken out of its step.
    pub(crate) static VISIT: usize;
}

impl StepInvoker {
    /// Let the call at `position` into the visit (`reserved`: its position was taken before a
    /// call it follows finished) and run or replay it.
    async fn enter_call(
        &self,
        position: u32,
        cmd: Cmd,
        reserved: bool,
    ) -> Result<serde_json::Value, StepError> {
        let id = InvocationId::derive(&self.run.task_id, self.visit, position);
        // A call of this visit stopped it (suspended, canceled, halted): whatever the step does
        // next is not journaled — what it does with that error must not become the task's history.
        if let Some(stop) = visit::stopped(&self.stop) {
            return Err(stop);
        }
        if VISIT.try_with(|v| *v) != Ok(self.stop.token()) {
            return Err(self.stop.fail(format!(
                "step `{}` made {} outside its own future (in a spawned task?): a ctx call must be awaited inside the step that made it, so that its outcome is journaled before the step goes on; run calls together with `ctx.all` or `ctx.race`",
                self.step,
                cmd.kind.fingerprint()
            )));
        }
        visit::enter(&self.stop, &self.batch, &self.step, &cmd, reserved)?;
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
        visit::settled(&self.stop, &result);
        result
    }
}

#[async_trait]
impl Invoker for StepInvoker {
    async fn invoke(&self, position: u32, cmd: Cmd) -> Result<serde_json::Value, StepError> {
        self.enter_call(position, cmd, false).await
    }

    async fn invoke_reserved(
        &self,
        position: u32,
        cmd: Cmd,
    ) -> Result<serde_json::Value, StepError> {
        self.enter_call(position, cmd, true).await
    }

    fn recorded(&self, position: u32, cmd: &Cmd) -> Result<Option<serde_json::Value>, StepError> {
        let id = InvocationId::derive(&self.run.task_id, self.visit, position);
        let st = self.run.lock();
        rules::recorded(&st, &self.run.skill_id, &self.step, position, &id, cmd)
    }

    async fn record(
        &self,
        position: u32,
        cmd: Cmd,
        value: serde_json::Value,
        abandoned: &[u32],
    ) -> Result<(), StepError> {
        if let Some(stop) = self.stop.refuses_record() {
            return Err(stop);
        }
        let id = InvocationId::derive(&self.run.task_id, self.visit, position);
        let abandoned_calls = rules::record_race(
            &mut self.run.lock(),
            &self.run.task_id,
            self.visit,
            &self.step,
            position,
            &id,
            cmd,
            value,
            abandoned,
        );
        self.flush().await?;
        // A callee working for a call that lost the race works for nobody now.
        self.engine.cancel_abandoned(&self.run, abandoned_calls);
        Ok(())
    }

    fn stop(&self, error: &StepError) {
        self.stop.stop_with(error);
    }
}

impl StepInvoker {
    /// Run or replay `cmd` as command `id` (at `ordinal`, for error messages).
    fn invoke_at(
        &self,
        ordinal: u32,
        id: InvocationId,
        cmd: Cmd,
    ) -> futures::future::BoxFuture<'_, Result<serde_json::Value, StepError>> {
        Box::pin(async move {
            let cmd = rules::with_policy(&self.engine.effects, cmd);
            let found = rules::find(
                &self.run.lock(),
                &self.run.skill_id,
                &self.step,
                ordinal,
                &id,
                &cmd,
            )?;
            match found {
                Found::Receipt(receipt) => rules::outcome(&cmd, receipt),
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
            let (slot, request) = match rules::gate(&self.engine.effects, self.run.mode, tool, args)
            {
                Gate::Pass => return Ok(cmd),
                Gate::Refuse(reason) => return Err(self.refuse(id, cmd, reason).await),
                Gate::Ask(slot, request) => (slot, request),
            };
            let approval = crate::flow::approval::decide(slot, &request, |round, ask| {
                self.invoke_at(ordinal, rules::gate_question_id(id, slot, round), ask)
            })
            .await?;
            if !approval.approved() {
                return Err(rules::not_approved(tool, approval.expired));
            }
        }
        Ok(cmd)
    }

    /// Journal `cmd` with a permanent error as its receipt and return that error.
    async fn refuse(&self, id: &InvocationId, cmd: Cmd, reason: String) -> StepError {
        let error = rules::refuse(&mut self.run.lock(), id, cmd, reason);
        if let Err(e) = self.flush().await {
            return e;
        }
        error
    }
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
            Issued::Answered(value) => Ok(value),
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
                rules::outcome(&cmd, receipt)
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
            CallStep::Settled(receipt) => rules::outcome(cmd, receipt),
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
        let resumed = rules::resume(&mut self.run.lock(), &id, &rec, recovered);
        match resumed {
            Resume::Settled(value) => Ok(value),
            Resume::Wait(at) => {
                if let Some(at) = at {
                    self.engine.schedule_timer(self.run.task_id.to_string(), at);
                }
                Err(StepError::Suspended)
            }
            Resume::Unknown(e) => Err(e),
            Resume::Perform if rec.cmd.kind.is_call() => self.call(id, &rec.cmd, Some(&rec)).await,
            Resume::Perform => {
                let receipt = self
                    .engine
                    .perform(&self.run, &id, &rec.cmd, rec.attempts)
                    .await
                    .ok_or(StepError::Halted)?;
                rules::outcome(&rec.cmd, receipt)
            }
        }
    }
}
