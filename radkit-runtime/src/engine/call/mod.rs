//! Calls to other agents (`CmdKind::Agent`) and to child skills (`CmdKind::Skill`): started once,
//! then waited on without a step in memory.
//!
//! ```text
//! command_issued --start (messageId derived from the id)--> callee answers with its task
//!   --call_started {callee task id} (flushed at once)--> settled? receipt : timer_set (recheck)
//!   and a watcher follows the callee; when it settles (or at the recheck) the task is woken,
//!   replayed, and the call asks the callee where it stands (`get` by the journaled id)
//! ```
//!
//! A call is never started twice once its callee answered: a journaled `call_started` makes every
//! later visit resume by that id. A crash before it is journaled sends the same message again with
//! the same `messageId` (radkit peers, and any peer that deduplicates on it, find the first task).
//! The watcher holds only ids; a restart or a worker that starts asks the callee at once (the task
//! row says it waits on a call), and another worker picks the wait up from the row's wake time
//! (the recheck, doubling from 5 s to 2 min).
//!
//! Every call has a deadline, fixed when it is journaled (its own `.timeout(..)`, else the
//! engine's `call_timeout`): rechecks are capped at it, and a call still without an answer then
//! cancels its callee and records an error as its receipt.

mod cancel;
mod child;
mod deadline;
pub(crate) mod pass;
mod posts;
mod remote;
pub(crate) mod webhook;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

pub(crate) use posts::{waits_on_any, Posts};
pub use remote::AgentSpec;
pub(crate) use remote::Agents;

use deadline::Limit;

use super::fault::Boundary;
use super::fold::CmdRec;
use super::run::TaskRun;
use super::Inner;
use crate::client::PushTarget;
use crate::flow::{AgentReply, Cmd, CmdKind, EffectError, InvocationId, Receipt};
use crate::journal::{now_ms, Entry};
use crate::model::{Message, Task, TaskState};

/// How a call stands after a visit to it.
pub(crate) enum CallStep {
    /// The callee settled (or the call failed): the receipt is buffered.
    Settled(Receipt),
    /// The callee works: the task waits (a recheck timer is buffered and flushed, a watcher runs).
    Waiting,
    /// The engine halted or the run stopped.
    Halted,
    /// The task is being canceled (a streamed call stopped following its callee).
    Canceled,
}

/// The calls this engine follows now (each by one watcher).
#[derive(Default)]
pub(crate) struct Watchers(std::sync::Mutex<std::collections::HashSet<InvocationId>>);

impl Watchers {
    /// True when nobody watched call `id` yet (it is now).
    fn begin(&self, id: &InvocationId) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone())
    }

    fn end(&self, id: &InvocationId) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }

    /// How many calls are followed now.
    #[cfg(feature = "metrics")]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// A call's rechecks so far, the time of the last one journaled, and the deadline they stop at.
#[derive(Default, Clone, Copy)]
struct Recheck {
    done: u32,
    at: Option<i64>,
    /// The call's deadline: the last recheck comes then.
    limit: Limit,
}

/// What a callee said to a start.
pub(crate) enum Started {
    Task(Task),
    Message(Message),
}

/// One step of a callee's progress: its state and the status message that came with it, or an
/// artifact (chunk) it sent while working.
pub(crate) struct Progress {
    pub state: TaskState,
    pub message: Option<Message>,
    pub artifact: Option<Relayed>,
}

/// An artifact (chunk) of a callee, as a streamed call relays it.
pub(crate) struct Relayed {
    pub artifact: crate::model::Artifact,
    pub append: bool,
    pub last_chunk: bool,
}

impl Progress {
    /// The callee's state, and the status message that came with it.
    pub(crate) fn status(state: TaskState, message: Option<Message>) -> Self {
        Progress {
            state,
            message,
            artifact: None,
        }
    }

    /// An artifact (chunk) the callee sent while working.
    pub(crate) fn artifact(
        artifact: crate::model::Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Self {
        Progress {
            state: TaskState::Working,
            message: None,
            artifact: Some(Relayed {
                artifact,
                append,
                last_chunk,
            }),
        }
    }
}

/// One callee: an A2A agent or a skill of this engine.
#[derive(Clone)]
pub(crate) enum Peer {
    Remote(remote::RemotePeer),
    Child(child::ChildPeer),
}

impl Peer {
    async fn start(
        &self,
        message: Message,
        push: Option<PushTarget>,
    ) -> Result<(Started, bool), EffectError> {
        match self {
            Peer::Remote(p) => p.start(message, push).await,
            Peer::Child(p) => p.start(message).await.map(|s| (s, false)),
        }
    }

    async fn get(&self, task_id: &str) -> Result<Task, EffectError> {
        match self {
            Peer::Remote(p) => p.get(task_id).await,
            Peer::Child(p) => p.get(task_id).await,
        }
    }

    async fn cancel(&self, task_id: &str) -> Result<(), EffectError> {
        match self {
            Peer::Remote(p) => p.cancel(task_id).await,
            Peer::Child(p) => p.cancel(task_id).await,
        }
    }

    /// The callee's progress while it works, until it settles (or the stream ends early).
    fn follow(&self, task_id: &str) -> futures::stream::BoxStream<'static, Progress> {
        match self {
            Peer::Remote(p) => p.follow(task_id),
            Peer::Child(p) => p.follow(task_id),
        }
    }

    /// Return when the callee's task settles (or following it fails: the caller rechecks later).
    async fn watch(&self, task_id: &str) {
        match self {
            Peer::Remote(p) => p.watch(task_id).await,
            Peer::Child(p) => p.watch(task_id).await,
        }
    }
}

/// True when a callee's task needs nothing more from it to be answered: it ended or asks for input.
pub(crate) fn settled(state: TaskState) -> bool {
    state.is_terminal() || matches!(state, TaskState::InputRequired | TaskState::AuthRequired)
}

/// What wakes a waiting call besides its recheck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// The callee posts to this engine's call webhook (`call_started.webhook`).
    Webhook,
    /// A watcher follows the callee until it settles.
    Watch,
    /// Nothing: the recheck alone (a watcher could not tell the callee's state from settled).
    Recheck,
}

/// True when `cmd` answers a question of its callee (`.reply(..)`) and `task`, the callee's task,
/// still shows that very question: the callee has not taken the reply yet (a peer may answer a
/// non-blocking send with the task as it was before it ran it). That is no answer: the call waits
/// like any other. The question is the one an earlier call of this task received from the same
/// callee task (its receipt's status message); when that receipt is no longer in memory (a
/// checkpoint dropped its visit), the task is taken as it is.
fn still_asks_what_it_answers(st: &super::run::RunState, cmd: &Cmd, task: &Task) -> bool {
    let (CmdKind::Agent { message, .. } | CmdKind::Skill { message, .. }) = &cmd.kind else {
        return false;
    };
    if message.task_id.is_none() || task.status.state != TaskState::InputRequired {
        return false;
    }
    let Some(shown) = task.status.message.as_ref().map(|m| m.message_id.as_str()) else {
        return false;
    };
    st.commands().values().any(|c| {
        c.callee.as_ref().is_some_and(|k| k.task_id == task.id)
            && c.receipt
                .as_ref()
                .and_then(|r| r.outcome.as_ref().ok())
                .and_then(|v| serde_json::from_value::<AgentReply>(v.clone()).ok())
                .is_some_and(|r| {
                    r.state == TaskState::InputRequired
                        && r.message.is_some_and(|m| m.message_id == shown)
                })
    })
}

/// The `messageId` a call sends: derived from its invocation id, the same on every attempt and
/// every replay (and opaque: the caller's task id does not leak to the callee).
pub(crate) fn message_id(id: &InvocationId) -> String {
    const NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6a0e_2c4d_8f1b_4d6e_9a3c_51b7_0e2f_c0de);
    uuid::Uuid::new_v5(&NAMESPACE, id.as_str().as_bytes()).to_string()
}

/// The first recheck comes after 5 s, each later one after twice as long, at most 2 min: a lost
/// watcher or post costs at most that (a restart asks at once), and an hour-long callee costs its
/// caller about 30 `timer_set` entries.
fn recheck_after(first: Duration, rechecks: u32) -> Duration {
    first
        .saturating_mul(1 << rechecks.min(7))
        .min(first.max(Duration::from_secs(120)))
}

fn receipt(
    id: &InvocationId,
    attempt: u32,
    outcome: Result<serde_json::Value, EffectError>,
) -> Receipt {
    Receipt {
        id: id.clone(),
        attempt: attempt.max(1),
        outcome,
        usage: None,
    }
}

/// The calls (to agents and child skills) of a task's journal that have no outcome yet, or whose
/// callee waits for input, each with its callee's task when the journal names it: what is canceled
/// when the task is canceled or fails, so that no work goes on on its behalf (the engine's
/// `Inner::cancel_calls`, a serverless pass's `pass::cancel_callees`).
pub(crate) fn open_calls(fold: &super::fold::Folded) -> Vec<(InvocationId, Cmd, Option<String>)> {
    fold.commands()
        .iter()
        .filter(|(_, c)| c.receipt.as_ref().is_none_or(asks_for_input))
        .filter(|(_, c)| c.cmd.kind.is_call())
        .map(|(id, c)| {
            let callee = c.callee.as_ref().map(|callee| callee.task_id.clone());
            (id.clone(), c.cmd.clone(), callee)
        })
        .collect()
}

/// True for a call's receipt whose callee waits for input (it would wait for good once its caller
/// ended).
fn asks_for_input(receipt: &Receipt) -> bool {
    receipt
        .outcome
        .as_ref()
        .ok()
        .and_then(|v| serde_json::from_value::<AgentReply>(v.clone()).ok())
        .is_some_and(|r| r.needs_input())
}

/// The fingerprint of call `id` (`agent \`planner\``), for the fault hook.
fn peer_what(run: &TaskRun, id: &InvocationId) -> Option<String> {
    run.lock().command(id).map(|c| c.cmd.kind.fingerprint())
}

/// The receipt value of a reply. A reply the journal could not read back (nested deeper than a
/// message may be) is refused here, as a message is at ingress: a hostile callee cannot wedge its
/// caller.
fn reply_value(reply: AgentReply) -> Result<serde_json::Value, EffectError> {
    let value = serde_json::to_value(reply).map_err(|e| {
        EffectError::permanent(format!("the callee's reply does not serialize: {e}"))
    })?;
    let depth = crate::journal::json_depth(&value);
    if depth > crate::journal::MAX_MESSAGE_DEPTH + 2 {
        return Err(EffectError::permanent(format!(
            "the callee's reply nests {depth} levels deep; the limit is {}",
            crate::journal::MAX_MESSAGE_DEPTH + 2
        )));
    }
    Ok(value)
}

impl Inner {
    /// The callee of call `cmd`, or why there is none (a permanent error: the step named an agent
    /// or skill this engine does not know).
    fn peer(self: &Arc<Self>, run: &TaskRun, kind: &CmdKind) -> Result<Peer, EffectError> {
        match kind {
            CmdKind::Agent { agent, .. } => self
                .agents
                .peer(agent)
                .map(Peer::Remote)
                .ok_or_else(|| {
                    EffectError::permanent(format!(
                        "no agent named `{agent}` is declared; declare it with EngineBuilder::agent or `--agent {agent}=URL`{}",
                        self.agents.known()
                    ))
                }),
            CmdKind::Skill { skill, .. } => {
                if !self.skills.contains_key(skill) {
                    return Err(EffectError::permanent(format!(
                        "no skill `{skill}` in this engine; skills are {}",
                        self.order.join(", ")
                    )));
                }
                let principal = run.lock().header().and_then(|h| h.principal.clone());
                Ok(Peer::Child(child::ChildPeer::new(
                    self.clone(),
                    principal,
                    run.context_id.to_string(),
                    skill.clone(),
                    run.mode,
                )))
            }
            _ => Err(EffectError::permanent(format!(
                "{} is not a call",
                kind.fingerprint()
            ))),
        }
    }

    /// Start call `id` (`rec`: its journal record, when it has one) or resume it by its callee's
    /// task id, and settle it or leave the task waiting on it.
    pub(crate) async fn call(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        id: &InvocationId,
        cmd: &Cmd,
        rec: Option<&CmdRec>,
    ) -> CallStep {
        let span = crate::telemetry::engine_span!(run, "call", task = %run.task_id, invocation = %id, callee = %cmd.kind.fingerprint());
        tracing::Instrument::instrument(self.call_inner(run, id, cmd, rec), span).await
    }

    async fn call_inner(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        id: &InvocationId,
        cmd: &Cmd,
        rec: Option<&CmdRec>,
    ) -> CallStep {
        let peer = match self.peer(run, &cmd.kind) {
            Ok(peer) => peer,
            Err(error) => return self.settle_call(run, receipt(id, 1, Err(error))),
        };
        // As journaled: the step's own command has no deadline yet (the engine fixes it as it
        // journals the call).
        let limit = Limit::of(run, id);
        let (callee, recheck, attempts) = match rec {
            Some(r) => (
                r.callee.clone(),
                Recheck {
                    done: r.rechecks,
                    at: r.fire_at_ms,
                    limit,
                },
                r.attempts,
            ),
            None => (
                None,
                Recheck {
                    limit,
                    ..Recheck::default()
                },
                0,
            ),
        };
        let mut webhook = callee.as_ref().is_some_and(|c| c.webhook);
        let task = match callee.map(|c| c.task_id) {
            Some(task_id) => match peer.get(&task_id).await {
                Ok(task) => task,
                Err(e) if e.is_transient() && limit.passed() => {
                    tracing::info!(callee_task = %task_id, error = %e, "callee unreachable at the call's deadline");
                    let task = Some(task_id);
                    return self
                        .time_out(run, id, cmd, &peer, task, true, attempts, limit)
                        .await;
                }
                // The callee is unreachable for now: wait, and ask again at the recheck.
                Err(e) if e.is_transient() => {
                    tracing::info!(callee_task = %task_id, error = %e, "callee unreachable; the call waits and asks again");
                    let wait = if webhook { Wait::Webhook } else { Wait::Watch };
                    return self.wait(run, id, &peer, task_id, recheck, wait).await;
                }
                Err(e) => {
                    let error = EffectError::permanent(format!(
                        "{} lost its task {task_id}: {e}",
                        cmd.kind.fingerprint()
                    ));
                    return self.settle_call(run, receipt(id, attempts, Err(error)));
                }
            },
            // Journaled, never bound, and its deadline passed (the engine was down): whatever
            // task the callee may have made is canceled, and the call is not started now.
            None if limit.passed() => {
                return self
                    .time_out(run, id, cmd, &peer, None, true, attempts, limit)
                    .await;
            }
            None => match self.start(run, id, cmd, &peer, attempts, limit).await {
                Some(Ok((Started::Task(task), pushed))) => {
                    webhook = pushed;
                    run.lock().push(Entry::CallStarted {
                        id: id.clone(),
                        task_id: task.id.clone(),
                        context_id: Some(task.context_id.clone()),
                        webhook,
                    });
                    // The callee's task id is durable before anything else happens: a crash from
                    // here on resumes it, never starts a second one.
                    if run.flush().await.is_err() {
                        return CallStep::Halted;
                    }
                    task
                }
                Some(Ok((Started::Message(message), _))) => {
                    let value = reply_value(AgentReply::from_message(message));
                    return self.settle_call(run, receipt(id, attempts + 1, value));
                }
                // The start was still being retried at the deadline (a refusal is its own answer).
                Some(Err(e)) if e.is_transient() && limit.passed() => {
                    return self
                        .time_out(run, id, cmd, &peer, None, true, attempts, limit)
                        .await;
                }
                Some(Err(error)) => {
                    return self.settle_call(run, receipt(id, attempts + 1, Err(error)))
                }
                None => return CallStep::Halted,
            },
        };
        let task = match task {
            task if settled(task.status.state) || !cmd.kind.streams() => task,
            task => match self.follow_call(run, &peer, &task.id, limit).await {
                Ok(Some(settled)) => settled,
                Ok(None) => task,
                Err(stop) => return stop,
            },
        };
        let stale = still_asks_what_it_answers(&run.lock(), cmd, &task);
        // A callee found canceled past the deadline was canceled by the timeout (a crash came
        // between that cancel and the receipt): the call timed out.
        let timed_out = limit.passed() && task.status.state == TaskState::Canceled;
        if settled(task.status.state) && !stale && !timed_out {
            let value = reply_value(AgentReply::from_task(task));
            return self.settle_call(run, receipt(id, attempts + 1, value));
        }
        let task_id = task.id.clone();
        if limit.passed() {
            let (task, cancel) = (Some(task_id), !timed_out);
            return self
                .time_out(run, id, cmd, &peer, task, cancel, attempts, limit)
                .await;
        }
        // A watcher would find the callee settled at once (it shows the question): the recheck,
        // or a post to the webhook, asks again.
        let wait = match stale {
            true => Wait::Recheck,
            false if webhook => Wait::Webhook,
            false => Wait::Watch,
        };
        self.wait(run, id, &peer, task_id, recheck, wait).await
    }

    /// A streamed call: follow the callee in this visit, journaling each of its status messages
    /// as this task's progress and each of its artifacts (chunks) as this task's own, until it
    /// settles (its task, read again) or the stream ends early
    /// (`None`: the call waits like any other). `Err`: the run stopped.
    async fn follow_call(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        peer: &Peer,
        callee_task: &str,
        limit: Limit,
    ) -> Result<Option<Task>, CallStep> {
        let mut events = peer.follow(callee_task);
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            // A cancel of this task (buffered by `Engine::cancel`) stops following: the call has
            // no receipt, so the cancel's cascade cancels the callee. So does the call's deadline:
            // the call then times out.
            let progress = tokio::select! {
                progress = events.next() => progress,
                _ = tick.tick() => {
                    if run.lock().cancel_requested() {
                        return Err(CallStep::Canceled);
                    }
                    if limit.passed() {
                        return Ok(None);
                    }
                    continue;
                }
            };
            let Some(progress) = progress else {
                break;
            };
            if run.is_halted() {
                return Err(CallStep::Halted);
            }
            // The message a settled callee ends with is its answer (the reply), not progress.
            let relayed = progress
                .message
                .filter(|m| !m.parts.is_empty() && !settled(progress.state));
            if let Some(text) = relayed {
                let mut message = Message::new(crate::model::Role::Agent, text.parts);
                message.metadata = text.metadata;
                run.lock().push(Entry::Progress { message });
                run.flush().await.map_err(|_| CallStep::Halted)?;
            }
            // An artifact is relayed as it comes, journaled like the task's own, so a replay and
            // every client of this task see it where it came.
            if let Some(Relayed {
                artifact,
                append,
                last_chunk,
            }) = progress.artifact
            {
                run.lock().push(Entry::ArtifactEmitted {
                    artifact,
                    append,
                    last_chunk,
                });
                run.flush().await.map_err(|_| CallStep::Halted)?;
            }
            if settled(progress.state) {
                drop(events);
                return Ok(peer
                    .get(callee_task)
                    .await
                    .ok()
                    .filter(|t| settled(t.status.state)));
            }
        }
        Ok(None)
    }

    /// Start the call: send its message (with the derived `messageId`), retrying transient errors.
    /// `None`: the engine halted.
    async fn start(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        id: &InvocationId,
        cmd: &Cmd,
        peer: &Peer,
        prior_attempts: u32,
        limit: Limit,
    ) -> Option<Result<(Started, bool), EffectError>> {
        let what = cmd.kind.fingerprint();
        let (CmdKind::Agent { message, .. } | CmdKind::Skill { message, .. }) = &cmd.kind else {
            return Some(Err(EffectError::permanent(format!("{what} is not a call"))));
        };
        let mut message = message.clone();
        message.message_id = message_id(id);
        if self.crash_at(Boundary::CommandJournaled, run, Some(id), Some(&what)) {
            return None;
        }
        let push = self.push_target(run, id, peer).await;
        let max = cmd.retry.max_attempts.max(1);
        let mut attempt = prior_attempts;
        loop {
            attempt += 1;
            if run.is_halted() {
                return None;
            }
            if self.crash_at(Boundary::DuringEffect, run, Some(id), Some(&what)) {
                // The process "dies" with the request in flight: the callee may still make the task.
                let (peer, message, push) = (peer.clone(), message.clone(), push.clone());
                tokio::spawn(async move {
                    let _ = peer.start(message, push).await;
                });
                return None;
            }
            let result = peer.start(message.clone(), push.clone()).await;
            if self.crash_at(Boundary::EffectReturned, run, Some(id), Some(&what)) {
                return None;
            }
            match result {
                // Not retried past the call's deadline: the call times out instead.
                Err(error)
                    if error.is_transient()
                        && attempt < max
                        && attempt - prior_attempts < max
                        && !limit.passed() =>
                {
                    tracing::info!(attempt, error = %error, "call not accepted yet; trying again");
                    let delay = cmd.retry.backoff(attempt + 1).min(limit.left());
                    run.lock().push(Entry::AttemptFailed {
                        id: id.clone(),
                        attempt,
                        error,
                    });
                    tokio::time::sleep(delay).await;
                }
                result => return Some(result),
            }
        }
    }

    /// Where the remote callee of call `id` posts its task's updates: this engine's call webhook,
    /// when it has one and the agent's card says it pushes.
    async fn push_target(
        &self,
        run: &TaskRun,
        id: &InvocationId,
        peer: &Peer,
    ) -> Option<PushTarget> {
        let (Peer::Remote(remote), Some(webhook)) = (peer, self.agents.webhook()) else {
            return None;
        };
        remote
            .pushes()
            .await
            .then(|| webhook.target(&run.task_id, id, now_ms()))
    }

    /// Buffer a settled call's receipt.
    fn settle_call(&self, run: &TaskRun, receipt: Receipt) -> CallStep {
        let mut st = run.lock();
        st.record_receipt(receipt.clone());
        // The row keeps a wake time while another timer waits, or a cancel (whose wake time is
        // what finds it after a crash) is being carried out.
        st.rewake();
        CallStep::Settled(receipt)
    }

    /// The callee works: journal the recheck time (the row's wake time, for a restart or another
    /// worker), flush, and follow the callee until it settles or the recheck comes. A recheck
    /// journaled before and still ahead stands: a visit woken early (a post to the call webhook,
    /// another call of the visit settling, a restart) that finds the callee still working
    /// journals nothing.
    async fn wait(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        id: &InvocationId,
        peer: &Peer,
        callee_task: String,
        recheck: Recheck,
        wait: Wait,
    ) -> CallStep {
        let now = now_ms();
        let at = match recheck.at {
            Some(at) if at > now => at,
            _ => {
                let after = recheck_after(self.config.call_recheck, recheck.done);
                let at = now.saturating_add(i64::try_from(after.as_millis()).unwrap_or(i64::MAX));
                // The last recheck comes at the deadline: the task is woken then, with or without
                // a post or a watcher, and the call times out.
                let at = recheck.limit.cap(at);
                run.lock().set_timer(id, at);
                at
            }
        };
        if run.flush().await.is_err() {
            return CallStep::Halted;
        }
        let what = peer_what(run, id);
        if self.crash_at(Boundary::AwaitingInput, run, Some(id), what.as_deref()) {
            return CallStep::Halted;
        }
        // A callee asked to post to this engine's webhook wakes the task itself: nothing follows
        // it here, and the recheck's alarm covers a post lost or refused (a token of an earlier
        // start, without `call_webhook_secret`).
        let follow = match wait {
            Wait::Webhook => self.agents.webhook().is_none(),
            Wait::Watch => true,
            Wait::Recheck => false,
        };
        if !follow {
            self.schedule_timer(run.task_id.to_string(), at);
            return CallStep::Waiting;
        }
        // One watcher per call: a visit re-run while an earlier watcher still follows the callee
        // (another call of the visit woke it) leaves that one to wake the task.
        if !self.watchers.begin(id) {
            return CallStep::Waiting;
        }
        let engine = self.clone();
        let (peer, task_id, call) = (peer.clone(), run.task_id.to_string(), id.clone());
        tokio::spawn(async move {
            let until = Duration::from_millis(u64::try_from(at - now_ms()).unwrap_or(0));
            let _ = tokio::time::timeout(until, peer.watch(&callee_task)).await;
            engine.watchers.end(&call);
            if engine.halted.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            if let Err(e) = engine.wake(&task_id).await {
                tracing::warn!(task = %task_id, error = %e, "could not wake the task after its callee settled; the recheck will");
            }
        });
        CallStep::Waiting
    }

    /// How many tasks waiting on calls a starting worker asks at once.
    const ASKS_AT_ONCE: usize = 8;

    /// A worker on a shared store that starts asks, once, the callees of the calls waiting in the
    /// cluster ([`crate::store::TaskRecord::waits_on_call`]): the watchers that followed them may
    /// have died with a worker (most often this one, restarted), and a callee that settled
    /// meanwhile would otherwise be noticed only at its call's recheck. Each task is taken through
    /// its lease as this worker has room, a few at once; a lease held elsewhere is waited out for
    /// up to two ttls (its holder may have died holding it), then left to its holder. A callee
    /// still working is waited on again, watched from here as well.
    pub(crate) fn ask_waiting_callees(self: &Arc<Self>) {
        // An engine that only submits drives nothing.
        if self.config.max_active_tasks == 0 {
            return;
        }
        let engine = Arc::downgrade(self);
        tokio::spawn(async move {
            let query = crate::store::TaskQuery {
                non_terminal: true,
                waits_on_call: true,
                ..crate::store::TaskQuery::default()
            };
            let Some(store) = engine.upgrade().map(|e| e.store.clone()) else {
                return;
            };
            let tasks = match store.list(query).await {
                Ok(tasks) => tasks,
                Err(e) => {
                    tracing::warn!(error = %e, "could not list the tasks waiting on calls; they are asked at their rechecks");
                    return;
                }
            };
            // A few asks at once: each may wait out a lease (up to two ttls), and one busy task
            // must not hold up the rest.
            let asks = Arc::new(tokio::sync::Semaphore::new(Self::ASKS_AT_ONCE));
            for task in tasks {
                loop {
                    let Some(engine) = engine.upgrade() else {
                        return;
                    };
                    if engine.halted.load(std::sync::atomic::Ordering::SeqCst) {
                        return;
                    }
                    if engine.has_room() {
                        let Ok(permit) = asks.clone().acquire_owned().await else {
                            return;
                        };
                        // The worker that had the task may have died holding its lease (right
                        // after journaling the call's recheck, before giving the task back): wait
                        // for that lease to expire, or this ask is lost and the task waits for
                        // its recheck.
                        tokio::spawn(async move {
                            if let Err(e) = engine.ask_after_leases(&task.id).await {
                                tracing::warn!(task = %task.id, error = %e, "task waiting on a call not resumed; it is asked at its recheck");
                            }
                            drop(permit);
                        });
                        break;
                    }
                    let poll = engine.config.poll;
                    drop(engine);
                    tokio::time::sleep(poll).await;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer may answer a reply's non-blocking send with its task as it was: still asking the
    /// question the reply answers. That is no answer; a new question, or an end, is.
    #[test]
    fn a_reply_whose_callee_still_shows_the_question_it_answers_is_not_answered() {
        let mut st = super::super::run::RunState::new(serde_json::Value::Null);
        let ask = InvocationId::derive("t", 1, 0);
        st.issue(
            &ask,
            Cmd::agent("peer", Message::user_text("ask me")),
            false,
        );
        st.push(Entry::CallStarted {
            id: ask.clone(),
            task_id: "callee".into(),
            context_id: None,
            webhook: false,
        });
        let mut question = Message::agent_text("Your answer?");
        question.message_id = "q1".into();
        let asked = AgentReply {
            task_id: Some("callee".into()),
            context_id: None,
            state: TaskState::InputRequired,
            message: Some(question.clone()),
            artifacts: Vec::new(),
        };
        st.record_receipt(receipt(&ask, 1, Ok(serde_json::to_value(asked).unwrap())));
        let mut answer = Message::user_text("42");
        answer.task_id = Some("callee".into());
        let reply = Cmd::agent("peer", answer);
        let callee = |state: TaskState, message: Option<Message>| Task {
            id: "callee".into(),
            context_id: "c".into(),
            status: crate::model::TaskStatus {
                state,
                message,
                timestamp: None,
            },
            history: Vec::new(),
            artifacts: Vec::new(),
            metadata: None,
        };
        let stale = callee(TaskState::InputRequired, Some(question.clone()));
        assert!(still_asks_what_it_answers(&st, &reply, &stale));
        let mut again = Message::agent_text("And your name?");
        again.message_id = "q2".into();
        let asks_again = callee(TaskState::InputRequired, Some(again));
        assert!(!still_asks_what_it_answers(&st, &reply, &asks_again));
        let done = callee(TaskState::Completed, Some(question.clone()));
        assert!(!still_asks_what_it_answers(&st, &reply, &done));
        let first = Cmd::agent("peer", Message::user_text("ask me"));
        assert!(
            !still_asks_what_it_answers(&st, &first, &stale),
            "a first message answers no question"
        );
    }

    fn nested(depth: usize) -> serde_json::Value {
        let mut v = serde_json::json!("leaf");
        for _ in 0..depth {
            v = serde_json::json!([v]);
        }
        v
    }

    fn reply_with_metadata(value: serde_json::Value) -> AgentReply {
        let mut message = Message::agent_text("hi");
        message.metadata = Some(serde_json::Map::from_iter([("x".to_owned(), value)]));
        AgentReply::from_message(message)
    }

    #[test]
    fn a_reply_nested_deeper_than_the_journal_reads_back_is_refused_as_a_permanent_error() {
        let error = reply_value(reply_with_metadata(nested(200))).unwrap_err();
        assert!(!error.is_transient());
        assert!(error.message.contains("levels deep"), "{}", error.message);
        assert!(reply_value(reply_with_metadata(nested(40))).is_ok());
    }

    #[test]
    fn the_message_id_is_derived_from_the_invocation_id_alone() {
        let id = InvocationId::derive("task", 3, 1);
        assert_eq!(message_id(&id), message_id(&id.clone()));
        assert_ne!(
            message_id(&id),
            message_id(&InvocationId::derive("task", 3, 2))
        );
        assert!(!message_id(&id).contains("task"), "opaque to the callee");
    }

    #[test]
    fn rechecks_double_from_five_seconds_to_two_minutes() {
        let first = Duration::from_secs(5);
        let secs: Vec<u64> = (0..7).map(|n| recheck_after(first, n).as_secs()).collect();
        assert_eq!(secs, [5, 10, 20, 40, 80, 120, 120]);
        let long = Duration::from_secs(600);
        assert_eq!(
            recheck_after(long, 3),
            long,
            "a first recheck beyond the cap stays"
        );
    }
}
