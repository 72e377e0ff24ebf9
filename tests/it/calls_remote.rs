//! Durable calls to remote A2A agents (`ctx.agent(name)`), with both agents in this process on
//! loopback: a caller engine whose step calls a radkit callee served over A2A (the version picked
//! from its card: 1.0; and 0.3 forced), the input-required round trip, a remote failure as a typed
//! error, cancel cascading to the remote task, the caller crashed at every boundary of a call
//! (exactly one remote task, the caller completes), the callee stopped and restarted mid-call, and
//! the official Python SDK's server as the remote peer (`tests/python/sdk_server.py`; ignored
//! without `RADKIT_PYTHON1` or the workspace's `.venv1`). Callees that offer one binding only
//! (`ServerConfig::bindings`: JSON-RPC, HTTP+JSON, gRPC) are called over it, picked from their card,
//! with the same crash guarantees on each.

use std::future::Future;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use radkit::client::{Binding, ProtocolVersion};
use radkit::engine::EngineBuilder;
use radkit::engine::{AgentSpec, Boundary, Caller, Fault, PushSettings, Request};
use radkit::flow::AgentError;
use radkit::journal::Entry;
use radkit::model::{Artifact, TaskId, TaskState};
use radkit::prelude::*;
use radkit::store::{MemoryStore, SqliteStore, Store, TaskQuery};

use crate::support::agent::{serve_on, Agent};
use crate::support::services;

const PATIENCE: Duration = Duration::from_secs(60);

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    crate::support::common::within(PATIENCE, what, fut).await
}

/// The callee: `ask ...` asks for input and completes with the answer; `fail ...` fails;
/// `wait ...` sleeps an hour; `slow ...` works 1.5 s; anything else is echoed after 200 ms.
#[derive(Default)]
struct Peer;

#[flow_skill(id = "peer", name = "Peer", register = false)]
impl Peer {
    #[step(start)]
    async fn start(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let text = msg.joined_texts();
        if text.starts_with("ask") {
            return await_input!(slot = "answer", message = "Your answer?");
        }
        if text.starts_with("fail") {
            return ctx.fail("the peer cannot do that");
        }
        if text.starts_with("artifacts") {
            for n in 1..=2 {
                ctx.emit_artifact(Artifact::from_text(
                    format!("part-{n}.txt"),
                    format!("part {n}"),
                ))
                .await?;
                ctx.sleep(Duration::from_millis(500)).await?;
            }
        }
        if text.starts_with("progress") {
            for n in 1..=3 {
                ctx.progress(format!("step {n} of 3")).await?;
                ctx.sleep(Duration::from_millis(500)).await?;
            }
        }
        let pause = match text.split_whitespace().next() {
            Some("wait") => Duration::from_secs(3600),
            Some("slow") => Duration::from_millis(1500),
            _ => Duration::from_millis(200),
        };
        ctx.sleep(pause).await?;
        ctx.complete(format!("Echo: {text}"), vec![])
    }

    #[step(resume_from = "start")]
    async fn answered(&self, ctx: &StepCtx, reply: Content) -> StepResult {
        ctx.complete(format!("Got {}", reply.joined_texts()), vec![])
    }
}

/// The caller: `<agent>: <question>` sends the question to the agent; a question back is answered
/// `42`; a failure is reported as the task's completion text.
#[derive(Default)]
struct Delegator;

#[flow_skill(id = "delegator", name = "Delegator", register = false)]
impl Delegator {
    #[step(start)]
    async fn start(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let text = msg.joined_texts();
        if let Some(question) = text.strip_prefix("both: ") {
            let (one, other) = futures::join!(
                ctx.agent("peer").send(format!("slow {question}")),
                ctx.agent("peer03").send(question),
            );
            return ctx.complete(format!("{} | {}", one?.text(), other?.text()), vec![]);
        }
        if let Some(rest) = text.strip_prefix("impatient ") {
            let (agent, question) = rest.split_once(": ").unwrap_or(("peer", rest));
            let call = ctx.agent(agent).timeout(Duration::from_secs(3));
            return match call.send(question).await {
                Err(e) => ctx.complete(format!("gave up: {e}"), vec![]),
                Ok(reply) => ctx.fail(format!("expected a timeout, got {reply:?}")),
            };
        }
        let (streamed, text) = match text.strip_prefix("stream ") {
            Some(rest) => (true, rest.to_owned()),
            None => (false, text),
        };
        let (agent, question) = text.split_once(": ").unwrap_or(("peer", text.as_str()));
        let call = match streamed {
            true => ctx.agent(agent).stream(),
            false => ctx.agent(agent),
        };
        let mut reply = match call.send(question).await {
            Ok(reply) => reply,
            Err(AgentError::Failed { reply, .. }) => {
                return ctx.complete(format!("remote failed: {}", reply.text()), vec![])
            }
            Err(e) => return Err(e.into()),
        };
        if reply.needs_input() {
            reply = ctx.agent(agent).reply(&reply, "42").await?;
        }
        ctx.complete(reply.text(), vec![])
    }
}

/// `builder`'s engine started and served on `listener`.
async fn serve(builder: EngineBuilder, listener: tokio::net::TcpListener) -> Agent {
    let engine = builder.start().await.expect("start the engine");
    serve_on(listener, engine, |c| c)
}

async fn callee(store: impl Store) -> Agent {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    callee_on(store, listener).await
}

async fn callee_on(store: impl Store, listener: tokio::net::TcpListener) -> Agent {
    callee_offering(store, listener, &Binding::ALL).await
}

/// A callee that offers (lists on its card, and serves) `bindings` only.
async fn callee_offering(
    store: impl Store,
    listener: tokio::net::TcpListener,
    bindings: &[Binding],
) -> Agent {
    let builder = Engine::builder(store)
        .without_registered_skills()
        .skill(Peer);
    let engine = builder.start().await.expect("start the engine");
    let bindings = bindings.to_vec();
    serve_on(listener, engine, move |mut config| {
        config.bindings = bindings;
        config
    })
}

/// Each binding a callee may offer alone.
const ONLY: [Binding; 3] = [Binding::JsonRpc, Binding::HttpJson, Binding::Grpc];

/// A callee on a fresh port that offers `binding` only.
async fn callee_only(store: impl Store, binding: Binding) -> Agent {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    callee_offering(store, listener, &[binding]).await
}

/// The caller's engine (not served: the test talks to it directly), with `peer` (the card's
/// choice), `peer03` (0.3 forced) and `peer_rpc` (JSON-RPC forced) declared at `url`.
fn caller(store: impl Store, url: &str) -> EngineBuilder {
    Engine::builder(store)
        .without_registered_skills()
        .skill(Delegator)
        .agent("peer", AgentSpec::new(url))
        .agent("peer03", AgentSpec::new(url).version(ProtocolVersion::V0_3))
        .agent("peer_rpc", AgentSpec::new(url).binding(Binding::JsonRpc))
        .check_fold(true)
}

async fn ask(engine: &Engine, text: &str) -> TaskId {
    engine
        .send(Request::operator(Message::user_text(text)))
        .await
        .expect("send")
}

/// Wait until the task ends (not merely settles: a caller waiting on a callee is `working`).
async fn ended(engine: &Engine, id: &TaskId) -> radkit::model::Task {
    within(&format!("task {id} to end"), async {
        loop {
            let task = engine.task(&Caller::Operator, id, None).await.unwrap();
            if task.status.state.is_terminal() {
                return task;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

fn text_of(task: &radkit::model::Task) -> String {
    task.status
        .message
        .as_ref()
        .map(|m| m.joined_texts())
        .unwrap_or_default()
}

/// The callee tasks of an agent's store.
async fn remote_tasks(store: &dyn Store) -> Vec<radkit::store::TaskRecord> {
    store.list(TaskQuery::default()).await.unwrap()
}

/// The callee task the caller's latest call was bound to, once it is.
async fn bound_callee(store: &dyn Store, id: &TaskId) -> TaskId {
    within("the call to be bound", async {
        loop {
            if let Some(b) = bound(store, id).await.pop() {
                return TaskId::from(b);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

/// The callee task ids the caller's journal bound its calls to.
async fn bound(store: &dyn Store, id: &TaskId) -> Vec<String> {
    store
        .journal(id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| match r.entry {
            Entry::CallStarted { task_id, .. } => Some(task_id),
            _ => None,
        })
        .collect()
}

#[test(multi_thread)]
async fn a_step_gets_a_remote_agents_reply_over_1_0_and_0_3() {
    let remote_store = MemoryStore::new();
    let remote = callee(remote_store.clone()).await;
    let store = MemoryStore::new();
    let engine = caller(store.clone(), &remote.url).start().await.unwrap();
    for agent in ["peer", "peer03"] {
        let id = ask(&engine, &format!("{agent}: hello {agent}")).await;
        let done = ended(&engine, &id).await;
        assert_eq!(done.status.state, TaskState::Completed, "{done:?}");
        assert_eq!(text_of(&done), format!("Echo: hello {agent}"));
        let bound = bound(&store, &id).await;
        assert_eq!(bound.len(), 1);
        let remote_task = remote
            .engine
            .task(&Caller::Operator, &TaskId::from(bound[0].clone()), None)
            .await
            .unwrap();
        assert_eq!(remote_task.status.state, TaskState::Completed);
    }
    assert_eq!(remote_tasks(&remote_store).await.len(), 2);
    assert!(engine.fold_divergences().is_empty());
}

#[test(multi_thread)]
async fn a_remote_question_is_answered_by_the_calling_step() {
    let remote = callee(MemoryStore::new()).await;
    let store = MemoryStore::new();
    let engine = caller(store.clone(), &remote.url).start().await.unwrap();
    for agent in ["peer", "peer03"] {
        let id = ask(&engine, &format!("{agent}: ask me")).await;
        let done = ended(&engine, &id).await;
        assert_eq!(text_of(&done), "Got 42", "{agent}: {done:?}");
        let bound = bound(&store, &id).await;
        assert_eq!(bound.len(), 2, "the send and the reply");
        assert_eq!(
            bound[0], bound[1],
            "{agent}: the reply went to the same remote task"
        );
    }
}

#[test(multi_thread)]
async fn a_streamed_call_relays_the_remote_progress_as_the_callers_own() {
    let remote = callee(MemoryStore::new()).await;
    let store = MemoryStore::new();
    let engine = caller(store.clone(), &remote.url).start().await.unwrap();
    for agent in ["peer", "peer03"] {
        let id = ask(&engine, &format!("stream {agent}: progress please")).await;
        let done = ended(&engine, &id).await;
        assert_eq!(text_of(&done), "Echo: progress please", "{agent}: {done:?}");
        let relayed: Vec<String> = store
            .journal(&id, 0)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|r| match r.entry {
                Entry::Progress { message } => Some(message.joined_texts()),
                _ => None,
            })
            .collect();
        // The first step may be done before the caller subscribes (it then opens the stream as
        // the task's status); the later ones come live.
        for n in 2..=3 {
            assert!(
                relayed.contains(&format!("step {n} of 3")),
                "{agent}: the caller's progress {relayed:?}"
            );
        }
        assert!(
            !relayed.iter().any(|r| r.starts_with("Echo")),
            "{agent}: the answer is the reply, not progress: {relayed:?}"
        );
    }
}

/// A callee that offers only HTTP+JSON, or only gRPC, is called over it (the caller's spec names
/// no binding: the card's is picked): the answer, the question round trip (a reply to the same
/// remote task), a remote failure as a typed error, and cancel cascading to the remote task.
#[test(multi_thread)]
async fn a_callee_offering_one_binding_is_called_over_it_from_its_card() {
    for binding in [Binding::HttpJson, Binding::Grpc] {
        let remote_store = MemoryStore::new();
        let remote = callee_only(remote_store.clone(), binding).await;
        let store = MemoryStore::new();
        let engine = caller(store.clone(), &remote.url).start().await.unwrap();
        let id = ask(&engine, "peer: hello").await;
        let done = ended(&engine, &id).await;
        assert_eq!(text_of(&done), "Echo: hello", "{binding}: {done:?}");
        let id = ask(&engine, "peer: ask me").await;
        let done = ended(&engine, &id).await;
        assert_eq!(text_of(&done), "Got 42", "{binding}: {done:?}");
        let bound = bound(&store, &id).await;
        assert!(
            bound.len() == 2 && bound[0] == bound[1],
            "{binding}: the reply went to the same remote task: {bound:?}"
        );
        let id = ask(&engine, "peer: fail now").await;
        let done = ended(&engine, &id).await;
        assert_eq!(
            text_of(&done),
            "remote failed: the peer cannot do that",
            "{binding}: {done:?}"
        );
        // 0.3 has neither binding, and JSON-RPC forced is not offered: a clear error naming what
        // the card offers, not a hang.
        for agent in ["peer03", "peer_rpc"] {
            let id = ask(&engine, &format!("{agent}: hello")).await;
            let done = ended(&engine, &id).await;
            assert_eq!(done.status.state, TaskState::Failed, "{binding}: {done:?}");
            assert!(
                text_of(&done).contains(&format!("{} 1.0", binding.name())),
                "{binding}, {agent}: the error names what the card offers: {}",
                text_of(&done)
            );
        }
        // Cancel cascades over the binding too.
        let id = ask(&engine, "peer: wait for an hour").await;
        let remote_id = bound_callee(&store, &id).await;
        engine.cancel(&Caller::Operator, &id).await.unwrap();
        let remote_task = ended(&remote.engine, &remote_id).await;
        assert_eq!(remote_task.status.state, TaskState::Canceled, "{binding}");
        assert!(engine.fold_divergences().is_empty());
    }
}

/// A streamed call relays the callee's artifacts as they come, journaled as the caller's own
/// (`artifact_emitted`), over every binding.
#[test(multi_thread)]
async fn a_streamed_call_relays_the_remote_artifacts_as_the_callers_own() {
    for binding in ONLY {
        let remote = callee_only(MemoryStore::new(), binding).await;
        let store = MemoryStore::new();
        let engine = caller(store.clone(), &remote.url).start().await.unwrap();
        let id = ask(&engine, "stream peer: artifacts please").await;
        let done = ended(&engine, &id).await;
        assert!(
            text_of(&done).starts_with("Echo: artifacts please"),
            "{binding}: {done:?}"
        );
        let relayed: Vec<String> = store
            .journal(&id, 0)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|r| match r.entry {
                Entry::ArtifactEmitted { artifact, .. } => Some(artifact.name.unwrap_or_default()),
                _ => None,
            })
            .collect();
        // The first may be sent before the caller subscribes (the task it opens with holds it);
        // the second comes live.
        assert!(
            relayed.contains(&"part-2.txt".to_owned()),
            "{binding}: the caller's artifacts {relayed:?}"
        );
        let names: Vec<String> = done
            .artifacts
            .iter()
            .filter_map(|a| a.name.clone())
            .collect();
        assert!(
            names.contains(&"part-2.txt".to_owned()),
            "{binding}: the caller's task holds the relayed artifact: {names:?}"
        );
        assert!(engine.fold_divergences().is_empty());
    }
}

#[test(multi_thread)]
async fn two_calls_joined_in_one_step_wait_together_and_both_answer() {
    let remote_store = MemoryStore::new();
    let remote = callee(remote_store.clone()).await;
    let store = MemoryStore::new();
    let engine = caller(store.clone(), &remote.url).start().await.unwrap();
    let id = ask(&engine, "both: twins").await;
    let done = ended(&engine, &id).await;
    assert_eq!(text_of(&done), "Echo: slow twins | Echo: twins", "{done:?}");
    assert_eq!(bound(&store, &id).await.len(), 2);
    assert_eq!(remote_tasks(&remote_store).await.len(), 2);
    assert!(engine.fold_divergences().is_empty());
}

#[test(multi_thread)]
async fn a_failed_remote_task_is_a_typed_error_the_step_handles() {
    let remote = callee(MemoryStore::new()).await;
    let engine = caller(MemoryStore::new(), &remote.url)
        .start()
        .await
        .unwrap();
    let id = ask(&engine, "peer: fail now").await;
    let done = ended(&engine, &id).await;
    assert_eq!(done.status.state, TaskState::Completed);
    assert_eq!(text_of(&done), "remote failed: the peer cannot do that");
}

#[test(multi_thread)]
async fn an_undeclared_agent_fails_the_step_naming_the_declared_ones() {
    let remote = callee(MemoryStore::new()).await;
    let engine = caller(MemoryStore::new(), &remote.url)
        .start()
        .await
        .unwrap();
    let id = ask(&engine, "planner: hi").await;
    let done = ended(&engine, &id).await;
    assert_eq!(done.status.state, TaskState::Failed);
    let text = text_of(&done);
    assert!(
        text.contains("no agent named `planner`")
            && text.contains("declared agents are peer, peer03"),
        "{text}"
    );
}

#[test(multi_thread)]
async fn the_caller_waits_for_a_remote_task_with_no_step_in_memory() {
    let remote = callee(MemoryStore::new()).await;
    let store = MemoryStore::new();
    let engine = caller(store.clone(), &remote.url).start().await.unwrap();
    let id = ask(&engine, "peer: slow work").await;
    within(
        "the call to be bound and the caller's run to close",
        async {
            while bound(&store, &id).await.is_empty() || engine.tasks_in_hand() != 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        },
    )
    .await;
    assert_eq!(
        engine.state(&Caller::Operator, &id).await.unwrap(),
        TaskState::Working
    );
    let done = ended(&engine, &id).await;
    assert_eq!(text_of(&done), "Echo: slow work");
}

#[test(multi_thread)]
async fn canceling_the_caller_cancels_the_remote_task() {
    let remote = callee(MemoryStore::new()).await;
    let store = MemoryStore::new();
    let engine = caller(store.clone(), &remote.url).start().await.unwrap();
    for agent in ["peer", "peer03"] {
        let id = ask(&engine, &format!("{agent}: wait for an hour")).await;
        let remote_id = bound_callee(&store, &id).await;
        let canceled = engine.cancel(&Caller::Operator, &id).await.unwrap();
        assert_eq!(canceled.status.state, TaskState::Canceled);
        let remote_task = ended(&remote.engine, &remote_id).await;
        assert_eq!(remote_task.status.state, TaskState::Canceled, "{agent}");
    }
}

#[test(multi_thread)]
async fn canceling_a_caller_that_streams_its_call_cancels_the_remote_task() {
    let remote = callee(MemoryStore::new()).await;
    let store = MemoryStore::new();
    let engine = caller(store.clone(), &remote.url).start().await.unwrap();
    let id = ask(&engine, "stream peer: wait for an hour").await;
    let remote_id = bound_callee(&store, &id).await;
    let canceled = within("the cancel", engine.cancel(&Caller::Operator, &id))
        .await
        .unwrap();
    assert_eq!(canceled.status.state, TaskState::Canceled);
    let remote_task = ended(&remote.engine, &remote_id).await;
    assert_eq!(remote_task.status.state, TaskState::Canceled);
}

/// A remote task that waits an hour, called with `.timeout(3 s)` over 1.0 and 0.3: at the deadline
/// the caller's step gets an error naming the agent and the timeout, and the remote task is
/// canceled.
#[test(multi_thread)]
async fn a_remote_call_past_its_deadline_fails_the_step_and_cancels_the_remote_task() {
    let remote = callee(MemoryStore::new()).await;
    let store = MemoryStore::new();
    let engine = caller(store.clone(), &remote.url).start().await.unwrap();
    for agent in ["peer", "peer03"] {
        let id = ask(&engine, &format!("impatient {agent}: wait for an hour")).await;
        let done = ended(&engine, &id).await;
        let text = text_of(&done);
        assert!(
            text.starts_with(&format!(
                "gave up: agent `{agent}` failed: agent `{agent}` did not finish within the call's timeout of 3s; its task "
            )),
            "{text}"
        );
        let remote_id = TaskId::from(bound(&store, &id).await.remove(0));
        let remote_task = ended(&remote.engine, &remote_id).await;
        assert_eq!(remote_task.status.state, TaskState::Canceled, "{agent}");
    }
    assert!(engine.fold_divergences().is_empty());
}

/// Crash the caller at `boundary` of its call to `agent`, after the call was journaled and before
/// the remote task's id was (the remote task exists, or is being made), then cancel the caller on
/// the next engine before anything resumes the call: the remote task, which the caller's journal
/// does not name, is found by the call's `messageId` (sent again: radkit deduplicates it) and
/// canceled. Before, such a call canceled nothing and the remote task ran on.
async fn cancel_a_caller_cut_off_before_the_binding(boundary: Boundary) {
    let remote_store = MemoryStore::new();
    let remote = callee(remote_store.clone()).await;
    for agent in ["peer", "peer03"] {
        let store = MemoryStore::new();
        let what = format!("agent `{agent}`");
        let crashed = caller(store.clone(), &remote.url)
            .fault_hook(move |f: &Fault| f.boundary == boundary && f.what.as_deref() == Some(&what))
            .start()
            .await
            .unwrap();
        let before: Vec<String> = remote_tasks(&remote_store)
            .await
            .into_iter()
            .map(|t| t.id)
            .collect();
        let id = ask(&crashed, &format!("{agent}: wait for an hour")).await;
        within("the caller to crash", async {
            while !crashed.is_halted() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        crashed.shutdown().await;
        assert!(bound(&store, &id).await.is_empty(), "the call is not bound");
        // The request in flight at the crash makes its task.
        let new_tasks = || async {
            remote_tasks(&remote_store)
                .await
                .into_iter()
                .map(|t| t.id)
                .filter(|t| !before.contains(t))
                .collect::<Vec<_>>()
        };
        let made = within("the remote task to be made", async {
            loop {
                let made = new_tasks().await;
                if !made.is_empty() {
                    return made;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;

        // Built without recovery: nothing resumes the call before the cancel.
        let engine = caller(store.clone(), &remote.url).build().unwrap();
        let canceled = within("the caller's cancel", engine.cancel(&Caller::Operator, &id))
            .await
            .unwrap();
        assert_eq!(canceled.status.state, TaskState::Canceled);
        assert_eq!(
            new_tasks().await,
            made,
            "{agent}: exactly the one remote task the crashed call made"
        );
        let remote_id = TaskId::from(made[0].clone());
        let remote_task = ended(&remote.engine, &remote_id).await;
        assert_eq!(
            remote_task.status.state,
            TaskState::Canceled,
            "{agent} at {boundary:?}"
        );
    }
}

#[test(multi_thread)]
async fn canceling_a_caller_cut_off_with_its_start_in_flight_cancels_the_remote_task() {
    cancel_a_caller_cut_off_before_the_binding(Boundary::DuringEffect).await;
}

#[test(multi_thread)]
async fn canceling_a_caller_cut_off_after_the_remote_made_its_task_cancels_it() {
    cancel_a_caller_cut_off_before_the_binding(Boundary::EffectReturned).await;
}

/// Crash the caller at `boundary` of its call to `peer`, restart it on the same store, and check
/// that exactly one remote task exists and the caller completes with its answer: over each binding,
/// with a callee that offers that binding alone.
async fn crash_the_caller_at(boundary: Boundary) {
    for binding in ONLY {
        crash_the_caller_over(boundary, binding).await;
    }
}

async fn crash_the_caller_over(boundary: Boundary, binding: Binding) {
    let remote_store = MemoryStore::new();
    let remote = callee_only(remote_store.clone(), binding).await;
    let store = MemoryStore::new();
    let crashed = caller(store.clone(), &remote.url)
        .fault_hook(move |f: &Fault| {
            f.boundary == boundary && f.what.as_deref() == Some("agent `peer`")
        })
        .start()
        .await
        .unwrap();
    let id = ask(&crashed, "peer: slow hello").await;
    within("the caller to crash", async {
        while !crashed.is_halted() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    crashed.shutdown().await;
    // Let a request that was in flight at the crash reach the callee.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let engine = caller(store.clone(), &remote.url).start().await.unwrap();
    let done = ended(&engine, &id).await;
    assert_eq!(
        text_of(&done),
        "Echo: slow hello",
        "{boundary:?} over {binding}: {done:?}"
    );
    let tasks = remote_tasks(&remote_store).await;
    assert_eq!(
        tasks.len(),
        1,
        "{boundary:?} over {binding}: exactly one remote task: {tasks:?}"
    );
    assert_eq!(bound(&store, &id).await, vec![tasks[0].id.clone()]);
    assert!(engine.fold_divergences().is_empty());
}

#[test(multi_thread)]
async fn caller_crashed_before_sending_sends_once_after_the_restart() {
    crash_the_caller_at(Boundary::CommandJournaled).await;
}

#[test(multi_thread)]
async fn caller_crashed_with_the_request_in_flight_makes_one_remote_task() {
    crash_the_caller_at(Boundary::DuringEffect).await;
}

#[test(multi_thread)]
async fn caller_crashed_after_the_remote_created_the_task_resumes_it_and_makes_no_second_one() {
    crash_the_caller_at(Boundary::EffectReturned).await;
}

#[test(multi_thread)]
async fn caller_crashed_while_waiting_resumes_the_same_remote_task() {
    crash_the_caller_at(Boundary::AwaitingInput).await;
}

/// The `timer_set` entries of the caller's journal: its calls' rechecks.
async fn rechecks(store: &dyn Store, id: &TaskId) -> usize {
    store
        .journal(id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| matches!(r.entry, Entry::TimerSet { .. }))
        .count()
}

/// The caller's engine dies while it waits on a remote task, and the remote task ends while the
/// caller is down. The caller's recheck lies ten minutes ahead, beyond the test's patience: the
/// restarted caller completes in time only because recovery asks the callee at once. Before, it
/// armed the row's wake time (the recheck) like a sleep's.
#[test(multi_thread)]
async fn a_restarted_caller_asks_a_remote_task_that_ended_meanwhile_at_once() {
    let remote = callee(MemoryStore::new()).await;
    let store = MemoryStore::new();
    let recheck = Duration::from_secs(600);
    let crashed = caller(store.clone(), &remote.url)
        .call_recheck(recheck)
        .fault_hook(|f: &Fault| {
            f.boundary == Boundary::AwaitingInput && f.what.as_deref() == Some("agent `peer`")
        })
        .start()
        .await
        .unwrap();
    let id = ask(&crashed, "peer: slow while the caller is down").await;
    within("the caller to crash while it waits", async {
        while !crashed.is_halted() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    crashed.shutdown().await;
    let remote_id = TaskId::from(bound(&store, &id).await.remove(0));
    let remote_task = ended(&remote.engine, &remote_id).await;
    assert_eq!(remote_task.status.state, TaskState::Completed);
    assert_eq!(rechecks(&store, &id).await, 1, "the wait's recheck");

    let engine = caller(store.clone(), &remote.url)
        .call_recheck(recheck)
        .start()
        .await
        .unwrap();
    let done = ended(&engine, &id).await;
    assert_eq!(text_of(&done), "Echo: slow while the caller is down");
    assert_eq!(
        rechecks(&store, &id).await,
        1,
        "no recheck fired: recovery asked the callee"
    );
    assert_eq!(bound(&store, &id).await.len(), 1);
}

#[test(multi_thread)]
async fn the_callee_stopped_and_restarted_mid_call_still_answers_the_caller() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("callee.db");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let remote = callee_on(SqliteStore::open_default(&path).unwrap(), listener).await;
    let store = MemoryStore::new();
    let engine = caller(store.clone(), &remote.url).start().await.unwrap();
    let id = ask(&engine, "peer: slow while the callee restarts").await;
    bound_callee(&store, &id).await;
    remote.crash();
    remote.engine.shutdown().await;
    drop(remote);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let listener = within("the callee's port to be free again", async {
        loop {
            match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => return l,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await;
    let _remote = callee_on(SqliteStore::open_default(&path).unwrap(), listener).await;
    let done = ended(&engine, &id).await;
    assert_eq!(text_of(&done), "Echo: slow while the callee restarts");
    assert_eq!(bound(&store, &id).await.len(), 1);
}

/// A callee whose webhook posts may go to loopback (the caller's webhook in these tests).
async fn pushing_callee(store: impl Store) -> Agent {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let builder = Engine::builder(store)
        .without_registered_skills()
        .skill(Peer)
        .push_settings(PushSettings {
            allow_private: true,
            ..PushSettings::default()
        });
    serve(builder, listener).await
}

/// A caller served on loopback with its call webhook, and a first recheck far beyond the test's
/// patience: only the callee's post can wake it in time.
async fn caller_with_webhook(url_of_callee: &str) -> (Agent, MemoryStore) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let store = MemoryStore::new();
    let builder = caller(store.clone(), url_of_callee)
        .call_webhook(url)
        .call_recheck(Duration::from_secs(600));
    (serve(builder, listener).await, store)
}

#[test(multi_thread)]
async fn a_callee_that_pushes_wakes_its_caller_through_the_call_webhook() {
    let remote = pushing_callee(MemoryStore::new()).await;
    let (caller, store) = caller_with_webhook(&remote.url).await;
    for agent in ["peer", "peer03"] {
        let id = ask(&caller.engine, &format!("{agent}: slow push")).await;
        let done = ended(&caller.engine, &id).await;
        assert_eq!(text_of(&done), "Echo: slow push", "{agent}: {done:?}");
        let timers = store
            .journal(&id, 0)
            .await
            .unwrap()
            .into_iter()
            .filter(|r| matches!(r.entry, Entry::TimerSet { .. }))
            .count();
        assert_eq!(
            timers, 1,
            "{agent}: one wait, woken by the post, not by a recheck"
        );
        // The run lets its task go once the end is journaled: waited for, not asserted at once.
        within("the caller's run to let its task go", async {
            while caller.engine.tasks_in_hand() != 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
    }
}

/// A radkit callee that refuses a loopback webhook (its default rule) still takes the call; the
/// caller follows it instead.
#[test(multi_thread)]
async fn a_callee_that_refuses_the_webhook_is_called_without_it() {
    let remote_store = MemoryStore::new();
    let remote = callee(remote_store.clone()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let store = MemoryStore::new();
    // Only the watcher the refusal brings back can wake it in time.
    let builder = caller(store.clone(), &remote.url)
        .call_webhook(url)
        .call_recheck(Duration::from_secs(600));
    let caller = serve(builder, listener).await;
    let id = ask(&caller.engine, "peer: slow refusal").await;
    let done = ended(&caller.engine, &id).await;
    assert_eq!(text_of(&done), "Echo: slow refusal", "{done:?}");
    assert_eq!(remote_tasks(&remote_store).await.len(), 1);
}

#[test(multi_thread)]
async fn the_call_webhook_refuses_a_wrong_token_and_is_absent_when_not_configured() {
    let remote = callee(MemoryStore::new()).await;
    let (caller, _) = caller_with_webhook(&remote.url).await;
    let http = reqwest::Client::new();
    let post = |url: String, token: &'static str| {
        let http = http.clone();
        async move {
            http.post(url)
                .header("X-A2A-Notification-Token", token)
                .body("{}")
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(
        post(
            format!("{}/radkit/calls/some-task/some-call", caller.url),
            "00ff"
        )
        .await,
        401
    );
    assert_eq!(
        post(
            format!("{}/radkit/calls/some-task/some-call", caller.url),
            ""
        )
        .await,
        401
    );
    assert_eq!(
        post(
            format!("{}/radkit/calls/some-task/some-call", remote.url),
            "00ff"
        )
        .await,
        404
    );
}

/// A callee's question goes through the webhook both ways: its post wakes the caller, whose
/// reply (a second call, with its own URL and token) is answered through the webhook too.
#[test(multi_thread)]
async fn a_remote_question_is_answered_through_the_call_webhook() {
    let remote = pushing_callee(MemoryStore::new()).await;
    let (caller, _) = caller_with_webhook(&remote.url).await;
    for agent in ["peer", "peer03"] {
        let id = ask(&caller.engine, &format!("{agent}: ask me")).await;
        let done = ended(&caller.engine, &id).await;
        assert_eq!(text_of(&done), "Got 42", "{agent}: {done:?}");
    }
}

/// The URL and token the caller gave the callee task of its call `id`, once the call waits (its
/// recheck journaled): what the callee posts with.
async fn webhook_of(remote: &Agent, store: &MemoryStore, id: &TaskId) -> (String, String) {
    let callee_task = bound_callee(store, id).await;
    within("the call to wait", async {
        while !journal(store, id)
            .await
            .iter()
            .any(|e| matches!(e, Entry::TimerSet { .. }))
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let configs = remote
        .engine
        .push_configs(&Caller::Operator, &callee_task, None, 16)
        .await
        .unwrap();
    let config = configs
        .into_iter()
        .find(|c| c.url.contains("/radkit/calls/"))
        .expect("the callee keeps the caller's webhook");
    (config.url, config.token.expect("a token"))
}

async fn journal(store: &MemoryStore, id: &TaskId) -> Vec<Entry> {
    store
        .journal(id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.entry)
        .collect()
}

/// POST a settled callee's update to `url` with `token`; the status.
async fn post_update(http: &reqwest::Client, url: &str, token: &str) -> u16 {
    http.post(url)
        .header("X-A2A-Notification-Token", token)
        .header("Content-Type", "application/json")
        .body(r#"{"kind":"task","status":{"state":"completed"}}"#)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// 500 posts with the callee's own URL and token, each saying the callee completed, while it
/// works: every post is accepted, and the caller's journal is what it was (a post only says "look
/// now": the wakes are coalesced, and one that finds the callee working leaves the recheck
/// journaled before). The cancel that ends the caller queues behind whatever the posts started.
#[test(multi_thread)]
async fn a_flood_of_good_posts_for_a_waiting_call_journals_nothing() {
    let remote = pushing_callee(MemoryStore::new()).await;
    let (caller, store) = caller_with_webhook(&remote.url).await;
    let id = ask(&caller.engine, "peer: wait through a flood").await;
    let (url, token) = webhook_of(&remote, &store, &id).await;
    let before = journal(&store, &id).await.len();
    let http = reqwest::Client::new();
    for _ in 0..10 {
        let batch = (0..50).map(|_| post_update(&http, &url, &token));
        for status in futures::future::join_all(batch).await {
            assert_eq!(status, 204);
        }
    }
    let canceled = within("the cancel", caller.engine.cancel(&Caller::Operator, &id))
        .await
        .unwrap();
    assert_eq!(canceled.status.state, TaskState::Canceled);
    let entries = journal(&store, &id).await;
    let grown: Vec<&str> = entries[before..]
        .iter()
        .take_while(|e| !matches!(e, Entry::CancelRequested))
        .map(|e| e.kind_name())
        .collect();
    assert!(
        grown.is_empty(),
        "500 posts for a waiting call journaled {grown:?}"
    );
    let timers = entries
        .iter()
        .filter(|e| matches!(e, Entry::TimerSet { .. }))
        .count();
    assert_eq!(timers, 1, "one wait, one recheck journaled");
}

/// A token is good only as made, for its call, until it expires: upper case, another call's URL
/// and an expired token are 401, and none wakes anything.
#[test(multi_thread)]
async fn the_call_webhook_refuses_an_upper_case_token_another_calls_and_an_expired_one() {
    let remote = pushing_callee(MemoryStore::new()).await;
    let (waiting, store) = caller_with_webhook(&remote.url).await;
    let id = ask(&waiting.engine, "peer: wait for refusals").await;
    let (url, token) = webhook_of(&remote, &store, &id).await;
    let http = reqwest::Client::new();
    assert_ne!(
        token,
        token.to_ascii_uppercase(),
        "the token has lower-case hex"
    );
    assert_eq!(
        post_update(&http, &url, &token.to_ascii_uppercase()).await,
        401
    );
    let (base, call) = url.rsplit_once('/').unwrap();
    let another = "00000000-0000-5000-8000-000000000000";
    assert_ne!(call, another);
    assert_eq!(
        post_update(&http, &format!("{base}/{another}"), &token).await,
        401,
        "another call's URL"
    );
    let (task_base, _) = base.rsplit_once('/').unwrap();
    assert_eq!(
        post_update(&http, &format!("{task_base}/another-task/{call}"), &token).await,
        401,
        "another task's URL"
    );
    assert_eq!(post_update(&http, &url, &token).await, 204);

    // A caller whose tokens expire at once: its callee's posts are refused.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}", listener.local_addr().unwrap());
    let expiring_store = MemoryStore::new();
    let builder = caller(expiring_store.clone(), &remote.url)
        .call_webhook(hook)
        .call_webhook_ttl(Duration::ZERO)
        .call_recheck(Duration::from_secs(600));
    let expiring = serve(builder, listener).await;
    let id = ask(&expiring.engine, "peer: wait for an expiry").await;
    let (url, token) = webhook_of(&remote, &expiring_store, &id).await;
    assert_eq!(post_update(&http, &url, &token).await, 401, "expired");
}

/// The official Python SDK 1.x server, killed when dropped.
struct SdkServer {
    child: Child,
    url: String,
}

impl Drop for SdkServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn sdk_server() -> SdkServer {
    sdk_server_with(&[]).await
}

/// The SDK server, started with `args` after its port.
async fn sdk_server_with(args: &[&str]) -> SdkServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = format!("{}/tests/python/sdk_server.py", env!("CARGO_MANIFEST_DIR"));
    let child = Command::new(services::python1())
        .arg(script)
        .arg(port.to_string())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start tests/python/sdk_server.py");
    let server = SdkServer {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    within("the Python SDK server to serve its card", async {
        let card = format!("{}/.well-known/agent-card.json", server.url);
        while !reqwest::get(&card)
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    server
}

#[test(multi_thread, needs = Python1Server)]
async fn the_official_python_sdk_server_is_a_remote_peer() {
    let server = sdk_server().await;
    let store = MemoryStore::new();
    let engine = caller(store.clone(), &server.url).start().await.unwrap();
    // Echo (about a second of work: the caller waits), over 1.0 (the card) and 0.3 (forced).
    for agent in ["peer", "peer03"] {
        let id = ask(&engine, &format!("{agent}: slow work for {agent}")).await;
        let done = ended(&engine, &id).await;
        assert_eq!(done.status.state, TaskState::Completed, "{agent}: {done:?}");
        assert!(
            text_of(&done).contains(&format!("Echo: slow work for {agent}")),
            "{agent}: {}",
            text_of(&done)
        );
        assert_eq!(bound(&store, &id).await.len(), 1);
        // The question round trip.
        let id = ask(&engine, &format!("{agent}: ask me")).await;
        let done = ended(&engine, &id).await;
        assert!(text_of(&done).contains("42"), "{agent}: {done:?}");
    }
    let _ = Arc::new(());
}

/// The official SDK's server offering HTTP+JSON only, then gRPC only (its card lists that one
/// binding): the caller picks it from the card, gets the answer of a call and of the question
/// round trip, and follows a streamed call.
#[test(multi_thread, needs = Python1Server)]
async fn the_official_python_sdk_server_is_a_remote_peer_over_rest_and_grpc() {
    let grpc_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    for args in [vec!["--rest"], vec!["--grpc", grpc_port.as_str()]] {
        let server = sdk_server_with(&args).await;
        let store = MemoryStore::new();
        let engine = caller(store.clone(), &server.url).start().await.unwrap();
        let id = ask(&engine, "peer: slow work").await;
        let done = ended(&engine, &id).await;
        assert_eq!(
            done.status.state,
            TaskState::Completed,
            "{args:?}: {done:?}"
        );
        assert!(
            text_of(&done).contains("Echo: slow work"),
            "{args:?}: {}",
            text_of(&done)
        );
        let id = ask(&engine, "peer: ask me").await;
        let done = ended(&engine, &id).await;
        assert!(text_of(&done).contains("42"), "{args:?}: {done:?}");
        let bound = bound(&store, &id).await;
        assert!(
            bound.len() == 2 && bound[0] == bound[1],
            "{args:?}: the reply went to the same remote task: {bound:?}"
        );
        let id = ask(&engine, "stream peer: slow stream").await;
        let done = ended(&engine, &id).await;
        assert!(
            text_of(&done).contains("Echo: slow stream"),
            "{args:?}: {done:?}"
        );
        // The SDK's artifact comes while its task works: relayed as the caller's own.
        assert!(
            done.artifacts
                .iter()
                .any(|a| a.name.as_deref() == Some("echo.txt")),
            "{args:?}: {:?}",
            done.artifacts
        );
    }
}

/// The SDK's own push sender stores the call's webhook URL and token and posts the callee's
/// updates with them: the caller, whose first recheck is far beyond the test's patience, is woken
/// by a post, over 1.0 and 0.3, for a call and for the reply that answers a question.
#[test(multi_thread, needs = Python1Server)]
async fn the_official_python_sdk_server_wakes_its_caller_through_the_call_webhook() {
    let server = sdk_server_with(&["--push"]).await;
    let (caller, store) = caller_with_webhook(&server.url).await;
    for agent in ["peer", "peer03"] {
        let id = ask(&caller.engine, &format!("{agent}: slow push for {agent}")).await;
        let done = ended(&caller.engine, &id).await;
        assert_eq!(done.status.state, TaskState::Completed, "{agent}: {done:?}");
        let timers = journal(&store, &id)
            .await
            .iter()
            .filter(|e| matches!(e, Entry::TimerSet { .. }))
            .count();
        assert_eq!(timers, 1, "{agent}: woken by the post, not by a recheck");
        // The question round trip: the reply is a second call with its own URL and token.
        let id = ask(&caller.engine, &format!("{agent}: ask me")).await;
        let done = ended(&caller.engine, &id).await;
        assert!(text_of(&done).contains("42"), "{agent}: {done:?}");
    }
}
