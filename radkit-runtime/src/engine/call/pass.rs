//! A call to another agent (`ctx.agent`) or to a child skill (`ctx.skill`) made in a serverless
//! pass or a Restate workflow, which step their calls the same way: one step of it per pass. A
//! child skill's task is created in the same store by a pass of its own, run from inside its
//! parent's; later passes (a sweep's) run it on, and the parent asks the store. On Restate the
//! child is a workflow of its own, which the parent's host starts (and cancels) through its
//! durable context; a step only reads the child's task from the store. The
//! first pass starts it (its message under the `messageId` derived from its InvocationId, as the
//! engine sends it) and journals the callee's task (`call_started`); a pass that finds the callee
//! still working journals a recheck and the task rests until then; the pass at the recheck asks
//! the callee by the journaled id, never starting the call again. A callee that settled gives the
//! call its receipt; the call's deadline cancels the callee and fails the call, as in the engine.
//! Nothing follows a callee between passes (no watcher, no webhook): the recheck wakes the task.

use std::time::{Duration, Instant};

use super::deadline::Limit;
use super::remote::Agents;
use super::{message_id, recheck_after, reply_value, settled, Started};
use crate::engine::machine::{Effect, MachineError};
use crate::engine::{Caller, PassError, PassEvent as Event, Passes, Rest};
use crate::flow::{AgentReply, Cmd, CmdKind, EffectError, InvocationId, PermissionMode};
use crate::journal::now_ms;
use crate::model::{Message, Task};

/// What one pass found of a call.
pub(crate) struct PassCall {
    /// The callee's task, when this pass started the call: journal it first.
    pub started: Option<(String, Option<String>)>,
    /// What follows.
    pub then: PassCallStep,
    /// A callee its host must cancel (the call timed out): a child workflow on Restate, which only
    /// the host's context reaches durably. A pass cancels its callees itself.
    #[cfg_attr(not(feature = "restate"), allow(dead_code))] // read by the Restate host
    pub cancel: Option<String>,
}

pub(crate) enum PassCallStep {
    /// The call's receipt: the callee's reply, or why there is none.
    Settled(Result<serde_json::Value, EffectError>),
    /// The callee works: ask it again at this time.
    Recheck(i64),
}

fn settled_with(outcome: Result<serde_json::Value, EffectError>) -> PassCall {
    PassCall {
        started: None,
        then: PassCallStep::Settled(outcome),
        cancel: None,
    }
}

/// Where the child skills of a call run.
pub(crate) enum Children<'a> {
    /// Passes of the same host: a child's first pass runs from inside its parent's (the task as a
    /// parent, and the pass's deadline).
    Passes(&'a Passes, Parent, Instant),
    /// Restate workflows of their own, started and canceled by the parent's host: a step reads the
    /// child's task from the store the workflows write, as the task's parent may see it.
    #[cfg_attr(not(feature = "restate"), allow(dead_code))] // made by the Restate host
    Hosted(&'a dyn crate::store::Store, Parent),
}

/// Who a call in a pass calls: a remote agent, a skill of this store run by passes too, or one
/// run by a Restate workflow of its own.
enum Callee<'a> {
    Remote(super::remote::RemotePeer),
    /// A child on Restate: its host starts and cancels it; here it is only read.
    Hosted {
        store: &'a dyn crate::store::Store,
        caller: Caller,
    },
    Child {
        passes: &'a Passes,
        caller: Caller,
        context_id: String,
        skill: String,
        mode: PermissionMode,
        deadline: Instant,
    },
}

impl Callee<'_> {
    /// Send `message`: the callee's task (a child's first pass runs inside this one), or its
    /// direct answer.
    async fn start(&self, mut message: Message) -> Result<Started, EffectError> {
        match self {
            Callee::Remote(peer) => peer.start(message, None).await.map(|(started, _)| started),
            Callee::Hosted { .. } => Err(EffectError::permanent(
                "a child skill's workflow is started by its Restate host, not by a call's step",
            )),
            Callee::Child {
                passes,
                caller,
                context_id,
                skill,
                mode,
                deadline,
            } => {
                if message.context_id.is_none() {
                    message.context_id = Some(context_id.clone());
                }
                let event = Event::Message {
                    caller: caller.clone(),
                    message,
                    skill: Some(skill.clone()),
                    mode: Some(*mode),
                };
                let passed = passes
                    .run_boxed(event, *deadline)
                    .await
                    .map_err(pass_error)?;
                if passed.rest == Rest::Busy {
                    // A reply the child's other pass did not take: sent again after the backoff.
                    return Err(EffectError::transient(format!(
                        "the child task {} is being run by another invocation",
                        passed.task_id
                    )));
                }
                self.get(&passed.task_id).await.map(Started::Task)
            }
        }
    }

    async fn get(&self, task_id: &str) -> Result<Task, EffectError> {
        match self {
            Callee::Remote(peer) => peer.get(task_id).await,
            Callee::Hosted { store, caller } => {
                let view = store
                    .task_view(task_id, None)
                    .await
                    .map_err(|e| EffectError::transient(e.to_string()))?
                    .filter(|view| caller.can_see(view.record.principal.as_deref()));
                match view {
                    Some(view) => Ok(crate::engine::projection::project_task(view)),
                    // Its workflow has not made its first append yet: asked again at the recheck.
                    None => Err(EffectError::transient(format!(
                        "the child task {task_id} is not in the store yet"
                    ))),
                }
            }
            Callee::Child { passes, caller, .. } => {
                passes.task_for(caller, task_id).await.map_err(pass_error)
            }
        }
    }

    async fn cancel(&self, task_id: &str) -> Result<(), EffectError> {
        match self {
            Callee::Remote(peer) => peer.cancel(task_id).await,
            // Never asked: a step leaves a hosted child's cancel to its host (`PassCall::cancel`).
            Callee::Hosted { .. } => Ok(()),
            Callee::Child {
                passes,
                caller,
                deadline,
                ..
            } => {
                let event = Event::Cancel {
                    caller: caller.clone(),
                    task_id: task_id.to_owned(),
                };
                match passes.run_boxed(event, *deadline).await {
                    Ok(_) | Err(PassError::Machine(MachineError::Finished(_))) => Ok(()),
                    Err(e) => Err(pass_error(e)),
                }
            }
        }
    }
}

/// A pass's error as a call's: a store that fails may come back, anything else will not.
fn pass_error(e: PassError) -> EffectError {
    match e {
        PassError::Store(e) => EffectError::transient(e.to_string()),
        other => EffectError::permanent(other.to_string()),
    }
}

/// The task whose pass makes a call: who it runs for, its context and mode (a child skill runs
/// as its parent's principal, in its context and mode).
pub(crate) struct Parent {
    pub principal: Option<String>,
    pub context_id: String,
    pub mode: PermissionMode,
}

/// One pass's step of call `effect` (a `ctx.agent` or `ctx.skill` call to perform), its first
/// recheck after `first_recheck` (doubling, as the engine's), its child skills run by `children`.
/// A hosted child (Restate) is started by its host before its first step: a step only asks it.
pub(crate) async fn step(
    agents: &Agents,
    children: Children<'_>,
    effect: &Effect,
    first_recheck: Duration,
) -> PassCall {
    let what = effect.cmd.kind.fingerprint();
    let (callee, message) = match (&effect.cmd.kind, children) {
        (CmdKind::Agent { agent, message, .. }, _) => {
            // The remote peer itself, not `Peer`: a child skill's peer would drive the engine,
            // whose serverless mode runs passes, and a pass's future would contain itself.
            let Some(peer) = agents.peer(agent) else {
                return settled_with(Err(EffectError::permanent(format!(
                    "no agent named `{agent}` is declared; declare it with EngineBuilder::agent or `--agent {agent}=URL`{}",
                    agents.known()
                ))));
            };
            (Callee::Remote(peer), message)
        }
        (CmdKind::Skill { message, .. }, Children::Hosted(store, parent)) => {
            let caller = parent.principal.map_or(Caller::Operator, Caller::Principal);
            (Callee::Hosted { store, caller }, message)
        }
        (CmdKind::Skill { skill, message, .. }, Children::Passes(passes, parent, deadline)) => {
            if !passes.serves(skill) {
                return settled_with(Err(EffectError::permanent(format!(
                    "no skill `{skill}` is served here"
                ))));
            }
            let callee = Callee::Child {
                passes,
                caller: parent.principal.map_or(Caller::Operator, Caller::Principal),
                context_id: parent.context_id,
                skill: skill.clone(),
                mode: parent.mode,
                deadline,
            };
            (callee, message)
        }
        _ => {
            return settled_with(Err(EffectError::permanent(format!(
                "{what} is not a call to an agent or a skill"
            ))))
        }
    };
    let limit = Limit::of_kind(&effect.cmd.kind);
    let rechecks = effect.call.as_ref().map_or(0, |c| c.rechecks);
    let recheck = || recheck_at(&limit, first_recheck, rechecks);
    let (started, task) = match &effect.call {
        Some(progress) => match callee.get(&progress.callee_task).await {
            Ok(task) => (None, Some(task)),
            // Unreachable for now: asked again at the recheck (or timed out at the deadline).
            Err(e) if e.is_transient() => {
                tracing::info!(callee_task = %progress.callee_task, error = %e, "callee unreachable; the call waits and asks again");
                (None, None)
            }
            Err(e) => {
                return settled_with(Err(EffectError::permanent(format!(
                    "{what} lost its task {}: {e}",
                    progress.callee_task
                ))))
            }
        },
        None if limit.passed() => {
            return settled_with(Err(EffectError::permanent(limit.timed_out(&what, None))))
        }
        None => {
            let mut message = message.clone();
            message.message_id = message_id(&effect.id);
            match callee.start(message).await {
                Ok(Started::Task(task)) => {
                    let started = Some((task.id.clone(), Some(task.context_id.clone())));
                    (started, Some(task))
                }
                Ok(Started::Message(message)) => {
                    return settled_with(reply_value(AgentReply::from_message(message)))
                }
                // A transient refusal is retried by the command's policy (the machine journals
                // the attempt and asks again after the backoff).
                Err(error) => return settled_with(Err(error)),
            }
        }
    };
    let callee_task = task
        .as_ref()
        .map(|t| t.id.clone())
        .or_else(|| effect.call.as_ref().map(|c| c.callee_task.clone()));
    // A callee found canceled past the deadline was canceled by the timeout.
    let timed_out = limit.passed()
        && task
            .as_ref()
            .is_some_and(|t| t.status.state == crate::model::TaskState::Canceled);
    let mut cancel = None;
    let then = match task {
        Some(task) if settled(task.status.state) && !timed_out => {
            PassCallStep::Settled(reply_value(AgentReply::from_task(task)))
        }
        _ if limit.passed() => {
            if let (Some(task), false) = (&callee_task, timed_out) {
                if matches!(callee, Callee::Hosted { .. }) {
                    cancel = Some(task.clone());
                } else if let Err(e) = callee.cancel(task).await {
                    tracing::info!(callee_task = %task, error = %e, "the timed-out call's callee could not be canceled");
                }
            }
            PassCallStep::Settled(Err(EffectError::permanent(
                limit.timed_out(&what, callee_task.as_deref()),
            )))
        }
        _ => PassCallStep::Recheck(recheck()),
    };
    PassCall {
        started,
        then,
        cancel,
    }
}

/// When a call that was asked `rechecks` times already asks its callee next: after `first_recheck`
/// doubled as often, within the call's `limit` (its deadline, if it has one).
fn recheck_at(limit: &Limit, first_recheck: Duration, rechecks: u32) -> i64 {
    let after = recheck_after(first_recheck, rechecks);
    limit.cap(now_ms().saturating_add(i64::try_from(after.as_millis()).unwrap_or(i64::MAX)))
}

/// When a call started now asks its callee first (a Restate workflow starts a child itself).
#[cfg(feature = "restate")]
pub(crate) fn first_recheck_at(kind: &CmdKind, first_recheck: Duration) -> i64 {
    recheck_at(&Limit::of_kind(kind), first_recheck, 0)
}

/// Cancel the callees of `calls` (a task's open calls, each with its callee's task when journaled)
/// of a task canceled or failed in a pass (`passes`: the host, the task as a child's parent, the
/// deadline) or a Restate workflow (`None`: it cancels its child workflows itself, through its
/// context): no work goes on on its behalf, as the engine's `cancel_calls` does. Best effort, each
/// within [`CANCEL_WAIT`] (a child skill's cancel is a pass of its own): a callee that cannot be
/// reached is logged. A call cut off before its callee was journaled has no callee to name here
/// and is left.
///
/// [`CANCEL_WAIT`]: super::cancel::CANCEL_WAIT
pub(crate) async fn cancel_callees(
    agents: &Agents,
    passes: Option<(&Passes, Parent, Instant)>,
    calls: Vec<(InvocationId, Cmd, Option<String>)>,
) {
    for (id, cmd, callee_task) in calls {
        let Some(task_id) = callee_task else {
            tracing::info!(invocation = %id, callee = %cmd.kind.fingerprint(), "a call cut off before its callee was journaled is not canceled");
            continue;
        };
        let callee = match &cmd.kind {
            CmdKind::Agent { agent, .. } => match agents.peer(agent) {
                Some(peer) => Callee::Remote(peer),
                None => continue,
            },
            // A Restate workflow's children are canceled by its host.
            CmdKind::Skill { skill, .. } => match &passes {
                Some((passes, parent, deadline)) => Callee::Child {
                    passes,
                    caller: parent
                        .principal
                        .clone()
                        .map_or(Caller::Operator, Caller::Principal),
                    context_id: parent.context_id.clone(),
                    skill: skill.clone(),
                    mode: parent.mode,
                    deadline: *deadline,
                },
                None => continue,
            },
            _ => continue,
        };
        match tokio::time::timeout(super::cancel::CANCEL_WAIT, callee.cancel(&task_id)).await {
            Ok(Ok(())) => {
                tracing::info!(invocation = %id, callee_task = %task_id, "callee canceled")
            }
            Ok(Err(e)) => {
                tracing::warn!(invocation = %id, callee_task = %task_id, error = %e, "could not cancel the callee")
            }
            Err(_) => {
                tracing::warn!(invocation = %id, callee_task = %task_id, "the callee's cancel took too long; it is left")
            }
        }
    }
}
