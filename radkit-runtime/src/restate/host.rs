//! The workflow `RadkitTask`: one instance per task, its `run` handler driving the task machine on
//! Restate's journal.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};

use crate::effects::{Effects, Performed};
use restate_sdk::context::RequestTarget;

use crate::engine::call_pass::{self, Children, Parent, PassCallStep};
use crate::engine::hosted::{Start, TaskReply, WORKFLOW};
use crate::engine::machine::{Action, Effect, MachineSkill, NewTask, Output};
use crate::engine::{
    call_message_id, machine_skills, task_id_for, Agents, Caller, EngineBuilder, EngineError, Hook,
};
use crate::flow::{CmdKind, EffectError};
use crate::journal::{now_ms, Entry, JournalRecord};
use crate::model::{Message, TaskState};
use crate::store::{Append, Store, StoreError};

/// An effect's outcome as Restate journals it.
#[derive(Serialize, Deserialize)]
struct Done {
    value: serde_json::Value,
    #[serde(default)]
    usage: Option<serde_json::Value>,
    #[serde(default)]
    error: Option<EffectError>,
    at_ms: i64,
}

impl Done {
    fn of(
        outcome: Result<serde_json::Value, EffectError>,
        usage: Option<serde_json::Value>,
    ) -> Self {
        match outcome {
            Ok(value) => Done {
                value,
                usage,
                error: None,
                at_ms: now_ms(),
            },
            Err(error) => Done {
                value: serde_json::Value::Null,
                usage: None,
                error: Some(error),
                at_ms: now_ms(),
            },
        }
    }

    fn into_result(self) -> Result<Performed, EffectError> {
        match self.error {
            Some(error) => Err(error),
            None => Ok(Performed {
                value: self.value,
                usage: self.usage,
            }),
        }
    }
}

/// One step of a call as Restate journals it: the callee it started, then its receipt or when to
/// ask again, and a child workflow to cancel (a call that timed out).
#[derive(Serialize, Deserialize)]
struct CallDone {
    #[serde(default)]
    started: Option<(String, Option<String>)>,
    #[serde(default)]
    settled: Option<Done>,
    #[serde(default)]
    recheck_at_ms: Option<i64>,
    #[serde(default)]
    cancel: Option<String>,
    at_ms: i64,
}

/// The skills of a builder, hosted as the Restate workflow `RadkitTask` (key: the task id): serve
/// [`RestateHost::endpoint`] as a Restate deployment (or [`RestateHost::listen`] on a socket) and
/// register it with the Restate server. Its handlers:
///
/// * `run` drives the task from its creating message ([`Start`]) to its end and returns its final
///   state;
/// * `reply` (shared) resolves the task's wait for input ([`TaskReply`]);
/// * `cancel` (shared) asks the task to cancel.
#[derive(Clone)]
pub struct RestateHost {
    store: Arc<dyn Store>,
    skills: Arc<HashMap<String, MachineSkill>>,
    /// The agents steps may call (`ctx.agent`), each connected on first use.
    agents: Arc<Agents>,
    /// A call's first recheck (`EngineBuilder::call_recheck`).
    call_recheck: Duration,
    /// The hooks each step visit and each new command is put to (`EngineBuilder::hook`).
    hooks: Arc<[Arc<dyn Hook>]>,
}

impl RestateHost {
    /// The skills, effects, limits and store of `builder`, hosted by Restate.
    pub fn from_builder(builder: EngineBuilder) -> Result<Self, EngineError> {
        let parts = builder.into_parts()?;
        let skills = machine_skills(parts.skills, &parts.effects, &parts.config);
        Ok(RestateHost {
            store: parts.store,
            skills: Arc::new(skills),
            agents: Arc::new(Agents::new(parts.config.agents.clone(), None)),
            call_recheck: parts.config.call_recheck,
            hooks: parts.config.hooks.iter().cloned().collect(),
        })
    }

    /// The Restate endpoint serving the workflow.
    pub fn endpoint(self) -> restate_sdk::endpoint::Endpoint {
        restate_sdk::endpoint::Endpoint::builder()
            .bind(self)
            .build()
    }

    /// Serve the workflow to Restate on `listener` (HTTP/2, as Restate's deployments speak) until
    /// the process ends.
    pub async fn listen(self, listener: tokio::net::TcpListener) {
        restate_sdk::http_server::HttpServer::new(self.endpoint())
            .serve(listener)
            .await;
    }

    /// One step of call `effect` made by `parent`: a child skill's first starts its workflow
    /// ([`RestateHost::start_child`]); every other is one `ctx.run` that starts the call to an agent
    /// or asks its callee, as a serverless pass does (a child's task is read from the store).
    async fn call(
        &self,
        ctx: &WorkflowContext<'_>,
        effect: Effect,
        parent: Parent,
    ) -> Result<CallDone, HandlerError> {
        if let CmdKind::Skill { skill, message, .. } = &effect.cmd.kind {
            if effect.call.is_none() {
                return self.start_child(ctx, &effect, skill, message, parent).await;
            }
        }
        let (agents, first, store) = (self.agents.clone(), self.call_recheck, self.store.clone());
        let name = format!("call {}", effect.id);
        let Json(done) = ctx
            .run(move || async move {
                let children = Children::Hosted(store.as_ref(), parent);
                let step = call_pass::step(&agents, children, &effect, first).await;
                let (settled, recheck_at_ms) = match step.then {
                    PassCallStep::Settled(outcome) => (Some(Done::of(outcome, None)), None),
                    PassCallStep::Recheck(at) => (None, Some(at)),
                };
                Ok(Json(CallDone {
                    started: step.started,
                    settled,
                    recheck_at_ms,
                    cancel: step.cancel,
                    at_ms: now_ms(),
                }))
            })
            .name(name)
            .await?;
        Ok(done)
    }

    /// Start the task of child skill call `effect` as a workflow of its own (key: the task id the
    /// engine and a pass give it, from the parent's principal and the call's InvocationId), with
    /// the parent's principal, context and mode. The send is Restate's own (`ctx.request(..)
    /// .send()`), journaled: a replay of this workflow does not send it again, and Restate starts a
    /// workflow once per key. The call then rests until its first recheck, which reads the child's
    /// task from the store.
    async fn start_child(
        &self,
        ctx: &WorkflowContext<'_>,
        effect: &Effect,
        skill: &str,
        message: &Message,
        parent: Parent,
    ) -> Result<CallDone, HandlerError> {
        let (kind, first) = (effect.cmd.kind.clone(), self.call_recheck);
        let Json((at_ms, recheck_at_ms)) =
            ctx.run(move || async move {
                Ok(Json((now_ms(), call_pass::first_recheck_at(&kind, first))))
            })
            .name(format!("start {}", effect.id))
            .await?;
        if !self.skills.contains_key(skill) {
            let error = EffectError::permanent(format!("no skill `{skill}` is hosted here"));
            return Ok(CallDone {
                started: None,
                settled: Some(Done::of(Err(error), None)),
                recheck_at_ms: None,
                cancel: None,
                at_ms,
            });
        }
        let caller = parent
            .principal
            .clone()
            .map_or(Caller::Operator, Caller::Principal);
        let mut message = message.clone();
        message.message_id = call_message_id(&effect.id);
        message
            .context_id
            .get_or_insert_with(|| parent.context_id.clone());
        let child = task_id_for(&caller, &message.message_id).into_string();
        let context = message.context_id.clone();
        let start = Start {
            skill: skill.to_owned(),
            context_id: context.clone(),
            principal: parent.principal,
            mode: parent.mode,
            message,
        };
        let target = RequestTarget::workflow(WORKFLOW, child.clone(), "run");
        // Fire and forget: the child's end reaches the parent through the store, at a recheck.
        drop(ctx.request::<_, ()>(target, Json(start)).send());
        Ok(CallDone {
            started: Some((child, context)),
            settled: None,
            recheck_at_ms: Some(recheck_at_ms),
            cancel: None,
            at_ms,
        })
    }

    /// Append what the machine journaled to the store, once: an earlier attempt of the same
    /// `ctx.run` that appended it before Restate recorded its end is recognised by the row's seq.
    /// Returns the time after it.
    async fn persist(store: Arc<dyn Store>, append: Append) -> Result<i64, HandlerError> {
        let (task_id, last) = (
            append.task_id.clone(),
            append.first_seq + append.entries.len() as u64 - 1,
        );
        match store.append(append).await {
            Ok(()) => {}
            Err(StoreError::Conflict { .. })
                if store
                    .task(&task_id)
                    .await?
                    .is_some_and(|row| row.last_seq >= last) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(now_ms())
    }
}

#[restate_sdk::workflow(name = "RadkitTask")]
impl RestateHost {
    /// Drive the task from its creating message to its end.
    #[handler]
    async fn run(
        &self,
        ctx: WorkflowContext<'_>,
        Json(start): Json<Start>,
    ) -> Result<Json<TaskState>, HandlerError> {
        let skill = self.skills.get(&start.skill).cloned().ok_or_else(|| {
            TerminalError::new(format!("no skill `{}` is hosted here", start.skill))
        })?;
        let effects = skill.shared_effects();
        let mut now = clock(&ctx).await?;
        let task = NewTask {
            task_id: ctx.key().to_owned(),
            context_id: start.context_id,
            principal: start.principal,
            mode: start.mode,
            message: start.message,
        };
        let task_id = task.task_id.clone();
        let mut m = skill.start(task, now).map_err(terminal)?;
        // The appends as persisted (their entries shared, not copied), to resume the machine from
        // when a call's recheck comes.
        let mut persisted: Vec<(u64, i64, Arc<[Entry]>)> = Vec::new();
        let mut canceled = false;
        loop {
            match m.poll(now) {
                // The hooks' answer is journaled: a replay takes the same decision without
                // asking them again, and a notice reaches them once.
                Output::Hook(call) => {
                    let hooks = self.hooks.clone();
                    let Json(answer) = ctx
                        .run(move || async move { Ok(Json(call.ask(&hooks).await)) })
                        .name("hooks")
                        .await?;
                    m.hooked(answer).map_err(terminal)?;
                }
                Output::Persist(append) => {
                    persisted.push((append.first_seq, append.at_ms, append.entries.clone()));
                    let store = self.store.clone();
                    let name = format!("append {}", append.first_seq);
                    now = ctx
                        .run(move || async move { Self::persist(store, *append).await.map(Json) })
                        .name(name)
                        .await?
                        .0;
                }
                Output::Perform(asked) => {
                    if !canceled && cancel_requested(&ctx).await? {
                        canceled = true;
                        m.cancel(now);
                    }
                    for effect in asked {
                        if let Some(at) = effect.not_before_ms.filter(|at| *at > now) {
                            ctx.sleep(millis(at - now)).await?;
                        }
                        let id = effect.id.clone();
                        if effect.cmd.kind.is_call() && effect.action == Action::Perform {
                            let parent = Parent {
                                principal: m.principal(),
                                context_id: m.context_id().to_owned(),
                                mode: m.mode(),
                            };
                            let call = self.call(&ctx, effect, parent).await?;
                            now = call.at_ms;
                            if let Some(child) = &call.cancel {
                                // The call timed out: no work goes on for it.
                                cancel_child(&ctx, child);
                            }
                            if let Some((callee, context)) = call.started {
                                m.call_started(&id, callee, context).map_err(terminal)?;
                            }
                            match (call.recheck_at_ms, call.settled) {
                                (Some(at), _) => m.call_waiting(&id, at).map_err(terminal)?,
                                (None, Some(done)) => {
                                    m.complete(&id, done.into_result(), now).map_err(terminal)?
                                }
                                (None, None) => {
                                    return Err(terminal("a call's step said nothing"));
                                }
                            }
                            continue;
                        }
                        let (result, at) = perform(&ctx, effects.clone(), effect).await?;
                        now = at;
                        m.complete(&id, result, now).map_err(terminal)?;
                    }
                }
                Output::Awaiting => {
                    return Err(TerminalError::new(
                        "the task machine awaits an effect its Restate host did not run",
                    )
                    .into())
                }
                Output::Waiting { input, wake_at_ms } => {
                    let seq = m.next_seq() - 1;
                    let sleep = wake_at_ms.map(|at| millis(at - now));
                    let woke = wait(&ctx, seq, input, sleep, canceled).await?;
                    now = clock(&ctx).await?;
                    match woke {
                        Woke::Reply(message) => {
                            if let Err(e) = m.reply(message) {
                                tracing::warn!(task = %ctx.key(), error = %e, "a reply reached a task that no longer waits for it");
                            }
                        }
                        // A timer came due (a sleep, a question's deadline, a call's recheck):
                        // the machine resumed from the journal at this time plays it, as the next
                        // pass would (a live machine is never told that time passed).
                        Woke::Timer => {
                            let journal = records(&persisted);
                            m = skill.resume(&task_id, &journal, now).map_err(terminal)?;
                        }
                        Woke::Cancel => {
                            canceled = true;
                            m.cancel(now);
                        }
                    }
                }
                Output::Ended(state) => {
                    let open = match state {
                        TaskState::Canceled | TaskState::Failed => m.open_calls(),
                        _ => Vec::new(),
                    };
                    // No work goes on for a task that ended so: its child workflows are asked to
                    // cancel through Restate (journaled sends), its agents' tasks in one `ctx.run`
                    // (a replay finds it done).
                    let (children, agents_called): (Vec<_>, Vec<_>) = open
                        .into_iter()
                        .partition(|(_, cmd, _)| matches!(cmd.kind, CmdKind::Skill { .. }));
                    for child in children.iter().filter_map(|(_, _, task)| task.as_deref()) {
                        cancel_child(&ctx, child);
                    }
                    if !agents_called.is_empty() {
                        let agents = self.agents.clone();
                        ctx.run(move || async move {
                            call_pass::cancel_callees(&agents, None, agents_called).await;
                            Ok(Json(true))
                        })
                        .name("cancel callees")
                        .await?;
                    }
                    return Ok(Json(state));
                }
            }
        }
    }

    /// Resolve the task's wait for input (the front checked that it waits).
    #[handler]
    async fn reply(
        &self,
        ctx: SharedWorkflowContext<'_>,
        Json(reply): Json<TaskReply>,
    ) -> Result<(), HandlerError> {
        ctx.resolve_promise::<Json<Message>>(&input_promise(reply.seq), Json(reply.message));
        Ok(())
    }

    /// Ask the task to cancel.
    #[handler]
    async fn cancel(&self, ctx: SharedWorkflowContext<'_>) -> Result<(), HandlerError> {
        if ctx.peek_promise::<bool>(CANCEL).await?.is_none() {
            ctx.resolve_promise::<bool>(CANCEL, true);
        }
        Ok(())
    }
}

/// The promise a cancel resolves.
const CANCEL: &str = "cancel";

/// Ask child workflow `task_id` to cancel (its `cancel` handler), through Restate: journaled, sent
/// once. A child that ended already is left as it is.
fn cancel_child(ctx: &WorkflowContext<'_>, task_id: &str) {
    let target = RequestTarget::workflow(WORKFLOW, task_id.to_owned(), "cancel");
    drop(ctx.request::<_, ()>(target, ()).send());
}

/// The promise a reply to the wait that began at `seq` resolves.
fn input_promise(seq: u64) -> String {
    format!("input-{seq}")
}

/// The journal records of `persisted` appends (first seq, time, entries).
fn records(persisted: &[(u64, i64, Arc<[Entry]>)]) -> Vec<JournalRecord> {
    persisted
        .iter()
        .flat_map(|(first_seq, at_ms, entries)| {
            (*first_seq..)
                .zip(entries.iter())
                .map(|(seq, entry)| JournalRecord {
                    seq,
                    at_ms: *at_ms,
                    entry: entry.clone(),
                })
        })
        .collect()
}

/// The time, journaled: a replay sees the same.
async fn clock(ctx: &WorkflowContext<'_>) -> Result<i64, HandlerError> {
    Ok(ctx
        .run(|| async { Ok(Json(now_ms())) })
        .name("clock")
        .await?
        .0)
}

async fn cancel_requested(ctx: &WorkflowContext<'_>) -> Result<bool, HandlerError> {
    Ok(ctx.peek_promise::<bool>(CANCEL).await?.is_some())
}

fn millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

fn terminal(e: impl std::fmt::Display) -> HandlerError {
    TerminalError::new(e.to_string()).into()
}

/// Perform `effect` as one `ctx.run` named by its InvocationId; returns its outcome and the time
/// after it.
async fn perform(
    ctx: &WorkflowContext<'_>,
    effects: Arc<Effects>,
    effect: Effect,
) -> Result<(Result<Performed, EffectError>, i64), HandlerError> {
    let name = effect.id.to_string();
    let once = !effect.cmd.policy.reissue_allowed();
    // Whether this attempt of the handler journaled the start marker itself (else Restate replayed
    // it: an earlier attempt got that far and may have started the effect).
    let fresh = Arc::new(AtomicBool::new(!once));
    if once {
        let marked = fresh.clone();
        ctx.run(move || async move {
            marked.store(true, Ordering::SeqCst);
            Ok(())
        })
        .name(format!("begin {name}"))
        .await?;
    }
    let Json(done) = ctx
        .run(move || async move {
            let result = if fresh.load(Ordering::SeqCst) {
                effect.run(&effects).await
            } else {
                Err(EffectError::permanent(format!(
                    "outcome unknown: {} (invocation {}) was started before Restate restarted its workflow and has no recorded outcome; its policy is at-most-once, so it is not run again",
                    effect.cmd.kind.fingerprint(),
                    effect.id
                )))
            };
            let done = match result {
                Ok(performed) => Done::of(Ok(performed.value), performed.usage),
                Err(error) => Done::of(Err(error), None),
            };
            Ok(Json(done))
        })
        .name(name)
        .await?;
    let at = done.at_ms;
    Ok((done.into_result(), at))
}

/// What ended a wait.
enum Woke {
    Reply(Message),
    Timer,
    Cancel,
}

/// Wait for a reply (`input`), a timer (`sleep`) and, unless the task is canceled already, a
/// cancel: whichever comes first.
async fn wait(
    ctx: &WorkflowContext<'_>,
    seq: u64,
    input: bool,
    sleep: Option<Duration>,
    canceled: bool,
) -> Result<Woke, HandlerError> {
    let name = input_promise(seq);
    let woke = match (input, sleep, canceled) {
        (false, None, _) => {
            return Err(TerminalError::new(
                "the task waits on nothing its Restate host can wake (a call to another agent)",
            )
            .into())
        }
        (true, Some(sleep), false) => restate_sdk::select! {
            reply = ctx.promise::<Json<Message>>(&name) => Woke::Reply(reply?.0),
            slept = ctx.sleep(sleep) => { slept?; Woke::Timer },
            cancel = ctx.promise::<bool>(CANCEL) => { cancel?; Woke::Cancel },
        },
        (true, None, false) => restate_sdk::select! {
            reply = ctx.promise::<Json<Message>>(&name) => Woke::Reply(reply?.0),
            cancel = ctx.promise::<bool>(CANCEL) => { cancel?; Woke::Cancel },
        },
        (false, Some(sleep), false) => restate_sdk::select! {
            slept = ctx.sleep(sleep) => { slept?; Woke::Timer },
            cancel = ctx.promise::<bool>(CANCEL) => { cancel?; Woke::Cancel },
        },
        (true, Some(sleep), true) => restate_sdk::select! {
            reply = ctx.promise::<Json<Message>>(&name) => Woke::Reply(reply?.0),
            slept = ctx.sleep(sleep) => { slept?; Woke::Timer },
        },
        (true, None, true) => Woke::Reply(ctx.promise::<Json<Message>>(&name).await?.0),
        (false, Some(sleep), true) => {
            ctx.sleep(sleep).await?;
            Woke::Timer
        }
    };
    Ok(woke)
}
