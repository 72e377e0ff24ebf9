//! `MachineInvoker`: the `ctx` calls of a step visit the [`TaskMachine`](super::TaskMachine)
//! polls, for every host. A call with a receipt returns it; a call without one is journaled and
//! then either asked of the host through the [`Desk`] (the machine's own hosts: it stays pending
//! until the host completes the effect) or, for a hosted machine, performed by the host inside the
//! step's future ([`CallHost`]: the long-running engine). The lookup, the hooks, the gate, the
//! issue, the resume and a race's record are applied here once, whoever performs the effect.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use async_trait::async_trait;
use futures::future::BoxFuture;

use super::rules::{self, Found, Gate, Resume};
use super::visit::{self, Batch, InFlight, VisitStop};
use crate::effects::Effects;
use crate::engine::command::{self, Issued};
use crate::engine::fold::CmdRec;
use crate::engine::hooks::HookAnswer;
use crate::engine::run::RunState;
use crate::flow::{Cmd, CmdKind, InvocationId, Invoker, PermissionMode, StepError};

/// How a hosted visit's calls reach their effects: the host performs them inside the step's
/// future, flushes its own buffer where output commit needs it, and is told of waits and of
/// calls a race abandoned. Implemented by the long-running engine (`engine/invoke.rs`).
pub(crate) trait CallHost: Send + Sync {
    /// A call of the visit is about to run: refuse it (with the error the visit fails with) when
    /// it was moved out of its step's future.
    fn enter(&self, cmd: &Cmd) -> Result<(), StepError>;

    /// Put a new command `id` to the host's hooks (`None`: it has none).
    fn before_command<'a>(
        &'a self,
        id: &'a InvocationId,
        cmd: &'a Cmd,
    ) -> Option<BoxFuture<'a, HookAnswer>>;

    /// Make durable the command just buffered, together with its parallel siblings (the calls of
    /// a batch buffer theirs in one poll of the step; the first flush commits them all).
    fn flush_batch(&self) -> BoxFuture<'_, Result<(), StepError>>;

    /// Make durable what is buffered.
    fn flush(&self) -> BoxFuture<'_, Result<(), StepError>>;

    /// Perform command `id` (its attempts from `prior_attempts`; `rec` when it was journaled
    /// before this call, `fresh` when this call journaled it) and return its outcome, its receipt
    /// journaled.
    fn perform<'a>(
        &'a self,
        id: InvocationId,
        cmd: Cmd,
        prior_attempts: u32,
        rec: Option<CmdRec>,
        fresh: bool,
    ) -> BoxFuture<'a, Result<serde_json::Value, StepError>>;

    /// The call waits (a question, a timer) until `wake_at_ms`, if set; `fresh` when this call
    /// journaled it. An error stops the visit.
    fn waits(&self, cmd: &Cmd, wake_at_ms: Option<i64>, fresh: bool) -> Result<(), StepError>;

    /// Calls a race abandoned (their callees work for nobody now).
    fn abandoned(&self, calls: Vec<rules::Abandoned>);
}

/// The invoker of one visit run by the machine.
pub(crate) struct MachineInvoker {
    pub st: Arc<Mutex<RunState>>,
    pub effects: Arc<Effects>,
    pub task_id: Arc<str>,
    pub skill_id: String,
    pub mode: PermissionMode,
    pub visit: u64,
    pub step: String,
    pub stop: Arc<VisitStop>,
    pub batch: Batch,
    pub desk: Desk,
    /// Calls the host found still working in this machine's life: they wait for their recheck.
    pub parked: super::Parked,
    /// A new command is put to the host's hooks first (`MachineConfig::hooks`; a hosted
    /// machine's host asks its own).
    pub hooks: bool,
    /// The host that performs the calls, for a hosted machine; `None`: they go through the desk.
    pub host: Option<Arc<dyn CallHost>>,
}

/// What the visit's calls ask of the host, and what the host answered.
#[derive(Default)]
pub(crate) struct Desk {
    /// Effects to perform: id, command, attempts earlier runs journaled.
    requests: Mutex<Vec<(InvocationId, Cmd, u32)>>,
    /// Outcomes of completed effects, taken by the calls waiting for them.
    outcomes: Mutex<HashMap<InvocationId, Result<serde_json::Value, StepError>>>,
    /// New commands to put to the host's hooks.
    hook_requests: Mutex<Vec<(InvocationId, Cmd)>>,
    /// What the hooks answered, taken by the calls waiting for it.
    hook_answers: Mutex<HashMap<InvocationId, HookAnswer>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Desk {
    fn request(&self, id: InvocationId, cmd: Cmd, prior_attempts: u32) {
        lock(&self.requests).push((id, cmd, prior_attempts));
    }

    /// The effects asked for since the last call.
    pub fn take_requests(&self) -> Vec<(InvocationId, Cmd, u32)> {
        std::mem::take(&mut *lock(&self.requests))
    }

    /// Hand the outcome of `id` to the call waiting for it.
    pub fn settle(&self, id: InvocationId, outcome: Result<serde_json::Value, StepError>) {
        lock(&self.outcomes).insert(id, outcome);
    }

    /// The outcome of `id`, once the host completed it.
    fn outcome(&self, id: InvocationId) -> Outcome<'_> {
        Outcome { desk: self, id }
    }

    /// The new commands to put to the hooks since the last call.
    pub fn take_hook_requests(&self) -> Vec<(InvocationId, Cmd)> {
        std::mem::take(&mut *lock(&self.hook_requests))
    }

    /// Hand the hooks' answer about command `id` to the call waiting for it.
    pub fn answer_hook(&self, id: InvocationId, answer: HookAnswer) {
        lock(&self.hook_answers).insert(id, answer);
    }

    /// Put `cmd` (to be journaled as `id`) to the hooks and wait for their answer.
    async fn hooks(&self, id: InvocationId, cmd: Cmd) -> HookAnswer {
        lock(&self.hook_requests).push((id.clone(), cmd));
        std::future::poll_fn(|_| match lock(&self.hook_answers).remove(&id) {
            Some(answer) => Poll::Ready(answer),
            None => Poll::Pending,
        })
        .await
    }
}

/// A call waiting for its effect's outcome: ready once the host completed it (the machine polls
/// the step again after every completion, so it needs no waker).
struct Outcome<'a> {
    desk: &'a Desk,
    id: InvocationId,
}

impl Future for Outcome<'_> {
    type Output = Result<serde_json::Value, StepError>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        match lock(&self.desk.outcomes).remove(&self.id) {
            Some(outcome) => Poll::Ready(outcome),
            None => Poll::Pending,
        }
    }
}

impl MachineInvoker {
    /// Let the call at `position` into the visit (`reserved`: its position was taken before a
    /// call it follows finished) and run or replay it.
    async fn enter_call(
        &self,
        position: u32,
        cmd: Cmd,
        reserved: bool,
    ) -> Result<serde_json::Value, StepError> {
        let id = InvocationId::derive(&self.task_id, self.visit, position);
        // A call of this visit stopped it: whatever the step does next is not journaled.
        if let Some(stop) = visit::stopped(&self.stop) {
            return Err(stop);
        }
        if let Some(host) = &self.host {
            host.enter(&cmd)?;
        }
        visit::enter(&self.stop, &self.batch, &self.step, &cmd, reserved)?;
        let replayed = lock(&self.st)
            .command(&id)
            .is_some_and(|r| r.receipt.is_some());
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
impl Invoker for MachineInvoker {
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
        let id = InvocationId::derive(&self.task_id, self.visit, position);
        rules::recorded(
            &lock(&self.st),
            &self.skill_id,
            &self.step,
            position,
            &id,
            cmd,
        )
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
        let id = InvocationId::derive(&self.task_id, self.visit, position);
        // The losers' effects still in the host's hands complete into receipts already written
        // (`TaskMachine::complete` ignores them).
        let abandoned = rules::record_race(
            &mut lock(&self.st),
            &self.task_id,
            self.visit,
            &self.step,
            position,
            &id,
            cmd,
            value,
            abandoned,
        );
        if let Some(host) = &self.host {
            host.flush().await?;
            host.abandoned(abandoned);
        }
        Ok(())
    }

    fn stop(&self, error: &StepError) {
        self.stop.stop_with(error);
    }
}

impl MachineInvoker {
    /// Replay `cmd` as command `id` (made at `position`), or journal it and ask the host for it.
    fn invoke_at(
        &self,
        position: u32,
        id: InvocationId,
        cmd: Cmd,
    ) -> futures::future::BoxFuture<'_, Result<serde_json::Value, StepError>> {
        Box::pin(async move {
            let cmd = rules::with_policy(&self.effects, cmd);
            let found = rules::find(
                &lock(&self.st),
                &self.skill_id,
                &self.step,
                position,
                &id,
                &cmd,
            )?;
            match found {
                Found::Receipt(receipt) => rules::outcome(&cmd, receipt),
                Found::NoReceipt(_, _) if lock(&self.parked).contains(&id) => {
                    Err(StepError::Suspended)
                }
                Found::NoReceipt(rec, recovered) => {
                    let resumed = rules::resume(&mut lock(&self.st), &id, &rec, recovered);
                    match resumed {
                        Resume::Settled(value) => Ok(value),
                        Resume::Wait(at) => {
                            if let Some(host) = &self.host {
                                host.waits(&rec.cmd, at, false)?;
                            }
                            Err(StepError::Suspended)
                        }
                        Resume::Unknown(e) => Err(e),
                        Resume::Perform => match &self.host {
                            Some(host) => {
                                let (cmd, attempts) = (rec.cmd.clone(), rec.attempts);
                                host.perform(id, cmd, attempts, Some(*rec), false).await
                            }
                            None => {
                                self.desk.request(id.clone(), rec.cmd, rec.attempts);
                                self.desk.outcome(id).await
                            }
                        },
                    }
                }
                Found::New => {
                    let cmd = self.admit(position, &id, cmd).await?;
                    let issued = {
                        let mut st = lock(&self.st);
                        let now = st.now();
                        command::issue(&mut st, &id, cmd.clone(), false, now)
                    };
                    if let Some(host) = &self.host {
                        // Emissions are what clients stream, waits must be durable before the
                        // step suspends, and a command before it runs: flushed in every case.
                        host.flush_batch().await?;
                    }
                    match issued {
                        Issued::Journaled => Ok(serde_json::Value::Null),
                        Issued::Answered(value) => Ok(value),
                        Issued::Waits(wake) => {
                            if let Some(host) = &self.host {
                                host.waits(&cmd, wake, true)?;
                            }
                            Err(StepError::Suspended)
                        }
                        Issued::Perform => match &self.host {
                            Some(host) => host.perform(id, cmd, 0, None, true).await,
                            None => {
                                self.desk.request(id.clone(), cmd, 0);
                                self.desk.outcome(id).await
                            }
                        },
                    }
                }
            }
        })
    }

    /// The host's hooks (when the machine runs with them), then the permission gate, before a
    /// command is journaled for the first time. A refusal is journaled as the command's receipt,
    /// so a replay refuses it the same way.
    async fn admit(&self, position: u32, id: &InvocationId, cmd: Cmd) -> Result<Cmd, StepError> {
        let answer = match &self.host {
            Some(host) => match host.before_command(id, &cmd) {
                Some(asked) => Some(asked.await),
                None => None,
            },
            None if self.hooks => Some(self.desk.hooks(id.clone(), cmd.clone()).await),
            None => None,
        };
        let cmd = if let Some(answer) = answer {
            match answer {
                HookAnswer::Continue => cmd,
                HookAnswer::Deny(reason) => {
                    let reason = format!("denied by a hook: {reason}");
                    return Err(self.refuse(id, cmd, reason).await);
                }
                HookAnswer::Command(changed)
                    if changed.kind.fingerprint() != cmd.kind.fingerprint() =>
                {
                    // A replay re-issues the step's own command and compares targets with the
                    // journal, so the refusal is journaled under the step's command.
                    let reason = format!(
                        "a hook changed {} into {}; hooks may change arguments and policies, not the target",
                        cmd.kind.fingerprint(),
                        changed.kind.fingerprint()
                    );
                    return Err(self.refuse(id, cmd, reason).await);
                }
                HookAnswer::Command(changed) => *changed,
            }
        } else {
            cmd
        };
        let CmdKind::Tool { tool, args } = &cmd.kind else {
            return Ok(cmd);
        };
        let (slot, request) = match rules::gate(&self.effects, self.mode, tool, args) {
            Gate::Pass => return Ok(cmd),
            Gate::Refuse(reason) => return Err(self.refuse(id, cmd, reason).await),
            Gate::Ask(slot, request) => (slot, request),
        };
        let approval = crate::flow::approval::decide(slot, &request, |round, ask| {
            self.invoke_at(position, rules::gate_question_id(id, slot, round), ask)
        })
        .await?;
        if !approval.approved() {
            return Err(rules::not_approved(tool, approval.expired));
        }
        Ok(cmd)
    }

    /// Journal `cmd` with a permanent error as its receipt and return that error (a hosted
    /// machine's host makes it durable first).
    async fn refuse(&self, id: &InvocationId, cmd: Cmd, reason: String) -> StepError {
        let error = rules::refuse(&mut lock(&self.st), id, cmd, reason);
        if let Some(host) = &self.host {
            if let Err(e) = host.flush().await {
                return e;
            }
        }
        error
    }
}
