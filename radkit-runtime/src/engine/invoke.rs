//! The engine's side of a step visit's calls (`machine::CallHost`): the machine's invoker looks
//! each call up, asks the hooks, applies the gate and journals it; the engine flushes it through
//! the run's group commit and performs it here, inside the step's future — with retries, effect
//! slots, lease checks, token streams and crash boundaries (`perform.rs`), or as a call to an agent
//! or a child skill (`call/`).

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;

use super::call::CallStep;
use super::fault::Boundary;
use super::fold::CmdRec;
use super::hooks::{HookAnswer, HookCall, HookContext, HookKind};
use super::machine::rules::{self, Abandoned};
use super::machine::visit::VisitStop;
use super::machine::CallHost;
use super::run::TaskRun;
use super::Inner;
use crate::flow::{Cmd, CmdKind, InvocationId, StepError};

/// The engine's side of the calls of one visit.
pub(crate) struct EngineCalls {
    pub engine: Arc<Inner>,
    pub run: Arc<TaskRun>,
    pub visit: u64,
    pub step: String,
    /// The visit's stop (its address names the visit: see [`VISIT`]).
    pub stop: Arc<VisitStop>,
}

tokio::task_local! {
    /// The visit whose step future the current task polls (its [`VisitStop`]'s address): a ctx
    /// call polled anywhere else (a spawned task) was taken out of its step.
    pub(crate) static VISIT: usize;
}

impl EngineCalls {
    fn hook_context(&self) -> HookContext {
        HookContext {
            task_id: self.run.task_id.to_string(),
            skill_id: self.run.skill_id.clone(),
            step: self.step.clone(),
            visit: self.visit,
            mode: self.run.mode,
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
        // Boxed: a call's future (an A2A client's request, a child task's wait) is 15 KB, and every
        // command's future would carry room for it otherwise.
        match Box::pin(self.engine.call(&self.run, &id, cmd, rec)).await {
            CallStep::Settled(receipt) => rules::outcome(cmd, receipt),
            CallStep::Waiting => Err(StepError::Suspended),
            CallStep::Halted => Err(StepError::Halted),
            CallStep::Canceled => Err(StepError::Canceled),
        }
    }
}

impl CallHost for EngineCalls {
    fn enter(&self, cmd: &Cmd) -> Result<(), StepError> {
        if VISIT.try_with(|v| *v) == Ok(self.stop.token()) {
            return Ok(());
        }
        Err(self.stop.fail(format!(
            "step `{}` made {} outside its own future (in a spawned task?): a ctx call must be awaited inside the step that made it, so that its outcome is journaled before the step goes on; run calls together with `ctx.all` or `ctx.race`",
            self.step,
            cmd.kind.fingerprint()
        )))
    }

    fn before_command<'a>(
        &'a self,
        id: &'a InvocationId,
        cmd: &'a Cmd,
    ) -> Option<BoxFuture<'a, HookAnswer>> {
        if self.engine.config.hooks.is_empty() {
            return None;
        }
        let call = HookCall {
            context: self.hook_context(),
            kind: HookKind::BeforeCommand {
                id: id.clone(),
                cmd: cmd.clone(),
            },
        };
        Some(async move { call.ask(&self.engine.config.hooks).await }.boxed())
    }

    /// The call waits once for the step's poll to end: the calls of a batch (`ctx.all`, `join!`)
    /// are polled one after the other in one poll of the step, and each buffers its command there,
    /// so when the poll ends, all have buffered theirs, and the driver flushes them in one append:
    /// the call asks it to (`RunState::flush_asked`), and the machine turns `Turn::Flush` as soon
    /// as the poll returns. Polled again after that flush, each finds its command committed and
    /// commits nothing (or fails if that append did: see `TaskRun::flush_through`), or commits it
    /// itself if the driver did not.
    ///
    /// The wait is tokio's `yield_now`, whose wake comes after the poll (a wake during it would
    /// make a combinator poll its other futures in a later poll, each in an append of its own);
    /// it finds the driver in its flush, a shallow poll. (The yield alone, the driver not asked,
    /// polled the whole step again before the first call flushed: 4 µs of CPU per durable step in
    /// `bench concurrent`.)
    fn flush_batch(&self) -> BoxFuture<'_, Result<(), StepError>> {
        async move {
            let issued_through = {
                let mut st = self.run.lock();
                st.flush_asked = true;
                st.next_seq - 1
            };
            tokio::task::yield_now().await;
            self.run
                .flush_through(issued_through)
                .await
                .map_err(|_| StepError::Halted)
        }
        .boxed()
    }

    /// Any failure stops the step as a crash would (never fails the task: a failed append stops
    /// the run, and the task is reloaded from the store).
    fn flush(&self) -> BoxFuture<'_, Result<(), StepError>> {
        async move { self.run.flush().await.map_err(|_| StepError::Halted) }.boxed()
    }

    fn perform<'a>(
        &'a self,
        id: InvocationId,
        cmd: Cmd,
        prior_attempts: u32,
        rec: Option<CmdRec>,
        fresh: bool,
    ) -> BoxFuture<'a, Result<serde_json::Value, StepError>> {
        async move {
            if cmd.kind.is_call() {
                return self.call(id, &cmd, rec.as_ref()).await;
            }
            let receipt = self
                .engine
                .perform(&self.run, &id, &cmd, prior_attempts)
                .await
                .ok_or(StepError::Halted)?;
            if fresh && !self.engine.config.hooks.is_empty() {
                let ctx = self.hook_context();
                for hook in &self.engine.config.hooks {
                    hook.after_command(&ctx, &cmd, &receipt).await;
                }
            }
            rules::outcome(&cmd, receipt)
        }
        .boxed()
    }

    fn waits(&self, cmd: &Cmd, wake_at_ms: Option<i64>, fresh: bool) -> Result<(), StepError> {
        if let Some(at) = wake_at_ms {
            self.engine.schedule_timer(self.run.task_id.to_string(), at);
        }
        if !fresh {
            return Ok(());
        }
        let boundary = match cmd.kind {
            CmdKind::Sleep { .. } => Boundary::TimerWait,
            _ => Boundary::AwaitingInput,
        };
        if self.engine.crash_at(boundary, &self.run, None, None) {
            return Err(StepError::Halted);
        }
        Ok(())
    }

    fn abandoned(&self, calls: Vec<Abandoned>) {
        // A callee working for a call that lost the race works for nobody now.
        self.engine.cancel_abandoned(&self.run, calls);
    }
}
