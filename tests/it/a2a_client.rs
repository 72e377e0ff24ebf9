//! radkit's A2A client (`radkit::client`) against real peers on loopback: a radkit server in this
//! process, spoken to in the version its card offers (1.0) and in each version forced; the official
//! Python SDK 1.x's server (`tests/python/sdk_server.py`, A2A 1.0 and the SDK's 0.3 compatibility on
//! one endpoint); a server that is down; and a peer that answers garbage. The Python peer needs
//! `RADKIT_PYTHON1` (else the workspace's `.venv1`, see `services`); without it its test is reported
//! ignored.

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use radkit::client::{
    A2aClient, Binding, ClientAuth, ClientError, ProtocolVersion, Reply, StreamEvent,
};
use radkit::model::{Part, Task, TaskState};
use radkit::prelude::*;
use radkit::store::MemoryStore;

use crate::support::agent::{only, start, Agent};
use crate::support::services;

mod garbage;
mod sdk_peer;

/// How long a test waits for any one thing before it fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// The durable pause of every task that is not asked to wait for input, so that a non-blocking
/// send sees the task before it ends.
const PAUSE: Duration = Duration::from_millis(300);

/// How long a `slow` task runs: long enough for a subscription to catch it working.
const SLOW: Duration = Duration::from_millis(1200);

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    crate::support::common::within(PATIENCE, what, fut).await
}

/// `ask ...` waits for input and completes with the answer; `slow ...` runs [`SLOW`]; anything else
/// is echoed after [`PAUSE`].
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
        let pause = if text.starts_with("slow") {
            SLOW
        } else {
            PAUSE
        };
        ctx.sleep(pause).await?;
        let echo = format!("Echo: {text}");
        ctx.complete(
            echo.clone(),
            vec![Artifact::from_text("echo.txt", echo).with_id("echo")],
        )
    }

    #[step(resume_from = "start")]
    async fn answered(&self, ctx: &StepCtx, reply: Content) -> StepResult {
        let text = reply.joined_texts();
        ctx.complete(
            format!("Got {text}"),
            vec![Artifact::from_text("answer.txt", text).with_id("answer")],
        )
    }
}

/// A radkit agent serving [`Peer`] on a free loopback port, with bearer `tokens`; stopped when
/// dropped.
async fn agent_with(tokens: Vec<(String, String)>) -> Agent {
    start(only(MemoryStore::new(), Peer), |mut config| {
        config.tokens = tokens;
        config
    })
    .await
}

async fn agent() -> Agent {
    agent_with(Vec::new()).await
}

/// How a test's client chose its version and binding.
#[derive(Debug, Clone, Copy)]
enum Pick {
    /// From the card.
    Card,
    /// The version forced.
    Forced(ProtocolVersion),
    /// The binding forced (`ClientBuilder::bindings` with one).
    Binding(Binding),
}

/// Every way a client of a radkit agent is made: from the card (which offers 1.0 JSON-RPC first),
/// forced to each version, and forced to HTTP+JSON and to gRPC (which radkit offers as well).
const PICKS: [Pick; 5] = [
    Pick::Card,
    Pick::Forced(ProtocolVersion::V0_3),
    Pick::Forced(ProtocolVersion::V1_0),
    Pick::Binding(Binding::HttpJson),
    Pick::Binding(Binding::Grpc),
];

async fn client(url: &str, pick: Pick) -> A2aClient {
    let connected = match pick {
        Pick::Card => A2aClient::connect(url, ClientAuth::None).await,
        Pick::Forced(version) => A2aClient::connect_version(url, ClientAuth::None, version).await,
        Pick::Binding(binding) => A2aClient::builder().bindings([binding]).connect(url).await,
    };
    let client = connected.unwrap_or_else(|e| panic!("connect to {url} ({pick:?}): {e}"));
    match pick {
        Pick::Forced(version) => assert_eq!(client.version(), version),
        Pick::Binding(binding) => assert_eq!(client.binding(), binding),
        Pick::Card => {}
    }
    client
}

fn task_of(reply: Reply) -> Task {
    match reply {
        Reply::Task(task) => task,
        other => panic!("expected a task, got {other:?}"),
    }
}

/// A user message with a fresh id, answering `task` when given.
fn message(text: &str, task: Option<&str>) -> Message {
    let mut message = Message::user_text(text);
    message.task_id = task.map(str::to_owned);
    message
}

/// Poll `get` until the task is in `state`.
async fn until(client: &A2aClient, task_id: &str, state: TaskState) -> Task {
    within(&format!("task {task_id} to be {state:?}"), async {
        loop {
            let task = client.get(task_id).await.expect("get the task");
            if task.status.state == state {
                return task;
            }
            assert!(
                !task.status.state.is_terminal(),
                "task {task_id} ended {:?}, not {state:?}",
                task.status.state
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

/// The text parts of `parts`, joined.
fn text_of(parts: &[Part]) -> String {
    parts.iter().filter_map(Part::as_text).collect()
}

/// The texts of a task's artifacts.
fn artifact_texts(task: &Task) -> Vec<String> {
    task.artifacts.iter().map(|a| text_of(&a.parts)).collect()
}

/// Every item of `stream`, within [`PATIENCE`].
async fn drain(
    stream: futures::stream::BoxStream<'static, Result<StreamEvent, ClientError>>,
) -> Vec<Result<StreamEvent, ClientError>> {
    within("the end of a stream", stream.collect::<Vec<_>>()).await
}

/// The events of a stream that must end without an error.
fn events_of(items: Vec<Result<StreamEvent, ClientError>>) -> Vec<StreamEvent> {
    items
        .into_iter()
        .map(|item| item.unwrap_or_else(|e| panic!("the stream failed: {e}")))
        .collect()
}

/// The state the last event of a stream shows.
fn last_state(events: &[StreamEvent]) -> Option<TaskState> {
    match events.last()? {
        StreamEvent::Status(s) => Some(s.status.state),
        StreamEvent::Task(t) => Some(t.status.state),
        _ => None,
    }
}

/// The texts of the artifact events of a stream (and of the artifacts of its task snapshots).
fn streamed_texts(events: &[StreamEvent]) -> Vec<String> {
    let mut out = Vec::new();
    for event in events {
        match event {
            StreamEvent::Artifact(a) => out.push(text_of(&a.artifact.parts)),
            StreamEvent::Task(t) => out.extend(artifact_texts(t)),
            _ => {}
        }
    }
    out
}

#[test(multi_thread)]
async fn connect_picks_1_0_from_a_radkit_card_and_forcing_speaks_the_version_asked() {
    let agent = agent().await;
    let picked = A2aClient::connect(&agent.url, ClientAuth::None)
        .await
        .unwrap();
    assert_eq!(picked.version(), ProtocolVersion::V1_0);
    assert_eq!(picked.endpoint(), format!("{}/", agent.url));
    assert_eq!(picked.card().name, "radkit agent");
    assert!(picked.card_json()["protocolVersion"].is_string());
    // The card URL itself works as well as the base URL.
    let card_url = format!("{}/.well-known/agent-card.json", agent.url);
    let old = A2aClient::connect_version(&card_url, ClientAuth::None, ProtocolVersion::V0_3)
        .await
        .unwrap();
    assert_eq!(old.version(), ProtocolVersion::V0_3);
    assert_eq!(old.endpoint(), format!("{}/", agent.url));
}

#[test(multi_thread)]
async fn send_returns_immediately_with_the_remote_task_id_and_get_follows_it_to_completed() {
    let agent = agent().await;
    for pick in PICKS {
        let client = client(&agent.url, pick).await;
        let sent = task_of(client.send(message("hello", None), true).await.unwrap());
        assert!(!sent.id.is_empty(), "{pick:?}");
        assert!(
            !sent.status.state.is_terminal(),
            "{pick:?}: a non-blocking send answers before the {PAUSE:?} task ends, got {:?}",
            sent.status.state
        );
        let done = until(&client, &sent.id, TaskState::Completed).await;
        assert_eq!(done.id, sent.id);
        assert_eq!(artifact_texts(&done), ["Echo: hello"], "{pick:?}");
        // A blocking send waits for the end.
        let blocking = task_of(client.send(message("again", None), false).await.unwrap());
        assert_eq!(blocking.status.state, TaskState::Completed, "{pick:?}");
    }
}

#[test(multi_thread)]
async fn a_repeated_message_id_returns_the_same_task() {
    let agent = agent().await;
    for pick in PICKS {
        let client = client(&agent.url, pick).await;
        let first = message("hello", None);
        let id = first.message_id.clone();
        let task = task_of(client.send(first.clone(), true).await.unwrap());
        // The retry of a send whose answer was lost: the same message, the same task.
        let again = task_of(client.send(first, true).await.unwrap());
        assert_eq!(again.id, task.id, "{pick:?}");
        // The client sent the messageId it was given: the peer's history holds it.
        let done = until(&client, &task.id, TaskState::Completed).await;
        let ids: Vec<&str> = done.history.iter().map(|m| m.message_id.as_str()).collect();
        assert!(ids.contains(&id.as_str()), "{pick:?}: {ids:?}");
    }
}

#[test(multi_thread)]
async fn an_input_required_task_completes_when_answered_with_its_task_id() {
    let agent = agent().await;
    for pick in PICKS {
        let client = client(&agent.url, pick).await;
        let asked = task_of(client.send(message("ask me", None), false).await.unwrap());
        assert_eq!(asked.status.state, TaskState::InputRequired, "{pick:?}");
        let question = asked.status.message.as_ref().map(Message::joined_texts);
        assert_eq!(question.as_deref(), Some("Your answer?"), "{pick:?}");
        let answer = message("forty-two", Some(&asked.id));
        let answered = task_of(client.send(answer, true).await.unwrap());
        assert_eq!(answered.id, asked.id, "{pick:?}");
        let done = until(&client, &asked.id, TaskState::Completed).await;
        assert_eq!(artifact_texts(&done), ["forty-two"], "{pick:?}");
    }
}

#[test(multi_thread)]
async fn cancel_ends_a_waiting_task_and_a_second_cancel_is_not_cancelable() {
    let agent = agent().await;
    for pick in PICKS {
        let client = client(&agent.url, pick).await;
        let asked = task_of(client.send(message("ask me", None), false).await.unwrap());
        let canceled = client.cancel(&asked.id).await.unwrap();
        assert_eq!(canceled.id, asked.id);
        assert_eq!(canceled.status.state, TaskState::Canceled, "{pick:?}");
        let again = client.cancel(&asked.id).await.unwrap_err();
        assert!(again.is_not_cancelable(), "{pick:?}: {again}");
        assert!(!again.is_transient());
    }
}

#[test(multi_thread)]
async fn subscribe_follows_a_task_until_it_completes_or_waits_for_input() {
    let agent = agent().await;
    for pick in PICKS {
        let client = client(&agent.url, pick).await;
        let slow = task_of(client.send(message("slow one", None), true).await.unwrap());
        let events = events_of(drain(client.subscribe(&slow.id)).await);
        assert_eq!(
            last_state(&events),
            Some(TaskState::Completed),
            "{pick:?}: {events:#?}"
        );
        assert_eq!(streamed_texts(&events), ["Echo: slow one"], "{pick:?}");
        // A task waiting for input: the subscription shows it and ends (a 1.0 radkit server would
        // follow it further; the client stops where the task waits for its caller).
        let asked = task_of(client.send(message("ask", None), false).await.unwrap());
        let events = events_of(drain(client.subscribe(&asked.id)).await);
        assert_eq!(
            last_state(&events),
            Some(TaskState::InputRequired),
            "{pick:?}: {events:#?}"
        );
    }
}

#[test(multi_thread)]
async fn send_streaming_yields_the_task_its_artifact_and_the_completion() {
    let agent = agent().await;
    for pick in PICKS {
        let client = client(&agent.url, pick).await;
        let events = events_of(drain(client.send_streaming(message("hello", None))).await);
        assert!(
            matches!(events.first(), Some(StreamEvent::Task(_))),
            "{pick:?}: {events:#?}"
        );
        assert_eq!(streamed_texts(&events), ["Echo: hello"], "{pick:?}");
        assert!(
            matches!(events.last(), Some(StreamEvent::Status(s)) if s.is_final && s.status.state == TaskState::Completed),
            "{pick:?}: {events:#?}"
        );
        // The answer to a waiting task, streamed: its snapshot may still show input-required, and
        // the stream goes on to the completion.
        let asked = task_of(client.send(message("ask", None), false).await.unwrap());
        let events =
            events_of(drain(client.send_streaming(message("streamed", Some(&asked.id)))).await);
        assert_eq!(
            last_state(&events),
            Some(TaskState::Completed),
            "{pick:?}: {events:#?}"
        );
    }
}

#[test(multi_thread)]
async fn an_unknown_task_id_is_task_not_found() {
    let agent = agent().await;
    for pick in PICKS {
        let client = client(&agent.url, pick).await;
        let e = client.get("no-such-task").await.unwrap_err();
        assert!(e.is_task_not_found(), "{pick:?}: {e}");
        assert!(!e.is_transient());
        let e = client.cancel("no-such-task").await.unwrap_err();
        assert!(e.is_task_not_found(), "{pick:?}: {e}");
        let items = drain(client.subscribe("no-such-task")).await;
        assert!(
            matches!(items.as_slice(), [Err(e)] if e.is_task_not_found()),
            "{pick:?}: {items:?}"
        );
    }
}

#[test(multi_thread)]
async fn bearer_credentials_are_sent_and_their_absence_is_a_permanent_http_error() {
    let agent = agent_with(vec![("s3cret".to_owned(), "alice".to_owned())]).await;
    let authed = A2aClient::connect(&agent.url, ClientAuth::Bearer("s3cret".into()))
        .await
        .unwrap();
    let task = task_of(authed.send(message("hello", None), false).await.unwrap());
    assert_eq!(task.status.state, TaskState::Completed);
    let anonymous = A2aClient::connect(&agent.url, ClientAuth::None)
        .await
        .unwrap();
    let e = anonymous.get(&task.id).await.unwrap_err();
    assert!(
        matches!(e, ClientError::Http { status: 401, .. }) && !e.is_transient(),
        "{e}"
    );
    // A credential that cannot be a header is refused before anything is sent.
    let e = A2aClient::connect(&agent.url, ClientAuth::Bearer("a\nb".into()))
        .await
        .unwrap_err();
    assert!(matches!(e, ClientError::Invalid(_)), "{e}");
}

#[test(multi_thread)]
async fn a_server_that_is_down_gives_a_transient_error() {
    // Nothing listens on a port just released.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let e = A2aClient::connect(&url, ClientAuth::None)
        .await
        .unwrap_err();
    assert!(
        matches!(e, ClientError::Transport { .. }) && e.is_transient(),
        "{e}"
    );
    // A peer that goes down after the clients connected, one of them in the middle of a stream.
    let agent = agent().await;
    let mut clients = Vec::new();
    for pick in PICKS {
        clients.push((pick, client(&agent.url, pick).await));
    }
    let (_, first) = &clients[0];
    let slow = task_of(first.send(message("slow", None), true).await.unwrap());
    let mut stream = first.subscribe(&slow.id);
    let opened = within("the first event", stream.next()).await;
    assert!(
        matches!(opened, Some(Ok(StreamEvent::Task(_)))),
        "{opened:?}"
    );
    drop(agent);
    let rest = drain(stream).await;
    assert!(
        matches!(rest.as_slice(), [.., Err(e)] if e.is_transient()),
        "a stream cut by the peer's end fails transiently: {rest:?}"
    );
    for (pick, client) in &clients {
        let e = client.get(&slow.id).await.unwrap_err();
        assert!(e.is_transient(), "{pick:?}: {e}");
    }
}

#[test(multi_thread)]
async fn a_peer_answering_garbage_gives_protocol_errors() {
    let peer = garbage::serve().await;
    for version in [ProtocolVersion::V0_3, ProtocolVersion::V1_0] {
        for mode in ["not-json", "wrong-id", "wrong-shape", "no-result", "huge"] {
            let client = A2aClient::builder()
                .version(version)
                .max_body_bytes(garbage::LIMIT)
                .connect(&peer.url(mode))
                .await
                .unwrap();
            let e = client.get("t").await.unwrap_err();
            assert!(
                matches!(e, ClientError::Protocol(_)) && !e.is_transient(),
                "{mode} {version:?}: {e}"
            );
            let items = drain(client.subscribe("t")).await;
            assert!(
                matches!(items.as_slice(), [Err(ClientError::Protocol(_))]),
                "{mode} {version:?} stream: {items:?}"
            );
        }
        let busy = A2aClient::connect_version(&peer.url("busy"), ClientAuth::None, version)
            .await
            .unwrap();
        let e = busy.get("t").await.unwrap_err();
        assert!(
            matches!(e, ClientError::Http { status: 503, .. }) && e.is_transient(),
            "{e}"
        );
    }
    // A document that is not a card, and a card with no interface the client speaks (gRPC over
    // TLS, an unknown binding): the error names what it offers.
    for mode in ["not-a-card", "nothing-spoken"] {
        let e = A2aClient::connect(&peer.url(mode), ClientAuth::None)
            .await
            .unwrap_err();
        assert!(matches!(e, ClientError::Card(_)), "{mode}: {e}");
        if mode == "nothing-spoken" {
            let said = e.to_string();
            assert!(
                said.contains("GRPC 1.0 at https://h:443") && said.contains("CARRIER-PIGEON"),
                "{said}"
            );
        }
    }
}

#[test(multi_thread)]
async fn a_stream_closed_early_or_an_sse_error_event_ends_the_stream_with_an_error() {
    let peer = garbage::serve().await;
    for version in [ProtocolVersion::V0_3, ProtocolVersion::V1_0] {
        let connect = |mode: &'static str| {
            let url = peer.url(mode);
            async move {
                A2aClient::builder()
                    .version(version)
                    .max_body_bytes(garbage::LIMIT)
                    .connect(&url)
                    .await
            }
        };
        // Events split over several `data:` lines, with comments between them, are read whole.
        let split = connect("sse-split").await.unwrap();
        let events = events_of(drain(split.subscribe("t")).await);
        assert_eq!(
            last_state(&events),
            Some(TaskState::Completed),
            "{events:?}"
        );
        assert_eq!(events.len(), 3, "{version:?}: {events:#?}");
        // Closed after a working task: the caller must poll.
        let cut = connect("sse-cut").await.unwrap();
        let items = drain(cut.subscribe("t")).await;
        assert!(
            matches!(items.as_slice(), [Ok(StreamEvent::Task(_)), Err(e @ ClientError::StreamClosed { .. })] if e.is_transient()),
            "{version:?}: {items:?}"
        );
        // An `error` event holding a JSON-RPC error: that error.
        let error = connect("sse-error").await.unwrap();
        let items = drain(error.subscribe("t")).await;
        assert!(
            matches!(items.as_slice(), [Err(e)] if e.is_task_not_found()),
            "{version:?}: {items:?}"
        );
        // An event that is not JSON, or one over the limit.
        for mode in ["sse-garbage", "sse-huge"] {
            let bad = connect(mode).await.unwrap();
            let items = drain(bad.send_streaming(message("x", None))).await;
            assert!(
                matches!(items.as_slice(), [Err(ClientError::Protocol(_))]),
                "{mode} {version:?}: {items:?}"
            );
        }
    }
}

#[test(multi_thread)]
async fn a_silent_peer_times_out_as_a_transient_error() {
    let peer = garbage::serve().await;
    let client = A2aClient::builder()
        .request_timeout(Duration::from_millis(300))
        .stream_idle_timeout(Duration::from_millis(300))
        .connect(&peer.url("silent"))
        .await
        .unwrap();
    let e = within("a request timeout", client.get("t"))
        .await
        .unwrap_err();
    assert!(
        matches!(e, ClientError::Transport { .. }) && e.is_transient(),
        "{e}"
    );
    // A stream whose peer sends one event and then nothing, not even a keep-alive.
    let stalled = A2aClient::builder()
        .stream_idle_timeout(Duration::from_millis(300))
        .connect(&peer.url("sse-stall"))
        .await
        .unwrap();
    let items = drain(stalled.subscribe("t")).await;
    assert!(
        matches!(items.as_slice(), [Ok(_), Err(e @ ClientError::Transport { .. })] if e.is_transient()),
        "{items:?}"
    );
}

#[test(multi_thread, needs = Python1Server)]
async fn the_official_python_sdk_1_x_server_is_driven_over_1_0_and_0_3() {
    let server = sdk_peer::start(services::python1(), "sdk_server.py").await;
    // Its card lists 1.0 first; forced, the client speaks 0.3 to the SDK's compatibility layer.
    let picked = client(&server.url, Pick::Card).await;
    assert_eq!(picked.version(), ProtocolVersion::V1_0);
    sdk_peer::drive(&picked, Pick::Card).await;
    let forced = Pick::Forced(ProtocolVersion::V0_3);
    sdk_peer::drive(&client(&server.url, forced).await, forced).await;
}

/// The SDK's server offering HTTP+JSON alone, then gRPC alone: the client picks it from the card
/// and does everything it does over JSON-RPC, the SDK's typed errors (not cancelable, not found)
/// read as the same `ClientError`s.
#[test(multi_thread, needs = Python1Server)]
async fn the_official_python_sdk_1_x_server_is_driven_over_http_json_and_grpc() {
    let grpc_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    for (args, binding) in [
        (vec!["--rest"], Binding::HttpJson),
        (vec!["--grpc", grpc_port.as_str()], Binding::Grpc),
    ] {
        let server = sdk_peer::start_with(services::python1(), "sdk_server.py", &args).await;
        let picked = client(&server.url, Pick::Card).await;
        assert_eq!(picked.binding(), binding);
        sdk_peer::drive(&picked, Pick::Binding(binding)).await;
    }
}

/// An agent configured to offer one binding lists it alone, a client picks it from the card, and
/// the others are refused in their own shapes, naming what is offered.
#[test(multi_thread)]
async fn an_agent_offering_one_binding_lists_it_alone_and_refuses_the_others() {
    let agent = start(only(MemoryStore::new(), Peer), |mut config| {
        config.bindings = vec![Binding::HttpJson];
        config
    })
    .await;
    let picked = client(&agent.url, Pick::Card).await;
    assert_eq!(picked.binding(), Binding::HttpJson);
    let listed: Vec<&str> = picked
        .card()
        .supported_interfaces
        .iter()
        .map(|i| i.protocol_binding.as_str())
        .collect();
    assert_eq!(listed, ["HTTP+JSON"]);
    let done = task_of(picked.send(message("hello", None), false).await.unwrap());
    assert_eq!(done.status.state, TaskState::Completed);
    // A client that speaks only what the card lacks gets a card error naming what it offers.
    let e = A2aClient::builder()
        .bindings([Binding::JsonRpc, Binding::Grpc])
        .connect(&agent.url)
        .await
        .unwrap_err();
    assert!(
        matches!(e, ClientError::Card(ref m) if m.contains("HTTP+JSON 1.0")),
        "{e}"
    );
    // JSON-RPC sent anyway: 404 with a JSON-RPC error saying what is offered.
    let http = reqwest::Client::new();
    let response = http
        .post(format!("{}/", agent.url))
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32601, "{body}");
    let said = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("does not offer JSONRPC") && said.contains("HTTP+JSON"),
        "{said}"
    );
    // gRPC sent anyway: UNIMPLEMENTED with the same message.
    let channel = tonic::transport::Endpoint::from_shared(agent.url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = radkit::server::grpc::proto::a2a_service_client::A2aServiceClient::new(channel);
    let status = grpc
        .get_task(radkit::server::grpc::proto::GetTaskRequest {
            id: "x".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unimplemented);
    assert!(
        status.message().contains("does not offer GRPC"),
        "{status:?}"
    );
    // And an agent offering JSON-RPC alone refuses HTTP+JSON with a `google.rpc.Status`.
    let rpc_only = start(only(MemoryStore::new(), Peer), |mut config| {
        config.bindings = vec![Binding::JsonRpc];
        config
    })
    .await;
    let response = http
        .get(format!("{}/tasks/x", rpc_only.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(
        body["error"]["details"][0]["reason"], "METHOD_NOT_FOUND",
        "{body}"
    );
}

#[test(multi_thread, needs = PythonServer)]
async fn the_official_python_sdk_0_3_server_is_driven_over_0_3() {
    let server = sdk_peer::start(services::python(), "sdk_server_0_3.py").await;
    // A 0.3 card (no `supportedInterfaces`): its `url` is the endpoint.
    let picked = client(&server.url, Pick::Card).await;
    assert_eq!(picked.version(), ProtocolVersion::V0_3);
    assert_eq!(picked.endpoint(), format!("{}/", server.url));
    sdk_peer::drive(&picked, Pick::Card).await;
}
