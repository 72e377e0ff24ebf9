//! A call to another agent (`ctx.agent`) made in a serverless pass (or a Restate workflow, which
//! steps its calls the same way): one step of it per pass. The
//! first pass starts it (its message under the `messageId` derived from its InvocationId, as the
//! engine sends it) and journals the callee's task (`call_started`); a pass that finds the callee
//! still working journals a recheck and the task rests until then; the pass at the recheck asks
//! the callee by the journaled id, never starting the call again. A callee that settled gives the
//! call its receipt; the call's deadline cancels the callee and fails the call, as in the engine.
//! Nothing follows a callee between passes (no watcher, no webhook): the recheck wakes the task.

use std::time::Duration;

use super::deadline::Limit;
use super::remote::Agents;
use super::{message_id, recheck_after, reply_value, settled, Started};
use crate::engine::machine::Effect;
use crate::flow::{AgentReply, CmdKind, EffectError};
use crate::journal::now_ms;

/// What one pass found of a call.
pub(crate) struct PassCall {
    /// The callee's task, when this pass started the call: journal it first.
    pub started: Option<(String, Option<String>)>,
    /// What follows.
    pub then: PassCallStep,
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
    }
}

/// One pass's step of call `effect` (a `ctx.agent` call to perform), its first recheck after
/// `first_recheck` (doubling, as the engine's).
pub(crate) async fn step(agents: &Agents, effect: &Effect, first_recheck: Duration) -> PassCall {
    let what = effect.cmd.kind.fingerprint();
    let (agent, message) = match &effect.cmd.kind {
        CmdKind::Agent { agent, message, .. } => (agent, message),
        _ => {
            return settled_with(Err(EffectError::permanent(format!(
                "{what} cannot run here: a child skill (`ctx.skill`) runs only in the long-running engine, not in a serverless pass or a Restate workflow; serve this skill with `radkit serve` or `radkit worker`"
            ))))
        }
    };
    // The remote peer itself, not `Peer`: a child skill's peer would drive the engine, whose
    // serverless mode runs passes, and a pass's future would contain itself.
    let Some(peer) = agents.peer(agent) else {
        return settled_with(Err(EffectError::permanent(format!(
            "no agent named `{agent}` is declared; declare it with EngineBuilder::agent or `--agent {agent}=URL`{}",
            agents.known()
        ))));
    };
    let limit = Limit::of_kind(&effect.cmd.kind);
    let rechecks = effect.call.as_ref().map_or(0, |c| c.rechecks);
    let recheck = || {
        let after = recheck_after(first_recheck, rechecks);
        limit.cap(now_ms().saturating_add(i64::try_from(after.as_millis()).unwrap_or(i64::MAX)))
    };
    let (started, task) = match &effect.call {
        Some(progress) => match peer.get(&progress.callee_task).await {
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
            match peer.start(message, None).await {
                Ok((Started::Task(task), _)) => {
                    let started = Some((task.id.clone(), Some(task.context_id.clone())));
                    (started, Some(task))
                }
                Ok((Started::Message(message), _)) => {
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
    let then = match task {
        Some(task) if settled(task.status.state) && !timed_out => {
            PassCallStep::Settled(reply_value(AgentReply::from_task(task)))
        }
        _ if limit.passed() => {
            if let (Some(task), false) = (&callee_task, timed_out) {
                if let Err(e) = peer.cancel(task).await {
                    tracing::info!(callee_task = %task, error = %e, "the timed-out call's callee could not be canceled");
                }
            }
            PassCallStep::Settled(Err(EffectError::permanent(
                limit.timed_out(&what, callee_task.as_deref()),
            )))
        }
        _ => PassCallStep::Recheck(recheck()),
    };
    PassCall { started, then }
}
