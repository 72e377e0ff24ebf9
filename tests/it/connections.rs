//! What `radkit::server::serve` promises about connections, whatever clients do: a request head
//! (or body) that trickles is cut after the header timeout, an idle keep-alive connection after the idle
//! timeout (a stream in progress is never idle), a connection over the limit is answered 503 with
//! the JSON-RPC error -32051 at once and closed, and a caller over its stream limit gets -32052
//! instead of a stream, and a send whose client hangs up still runs its task. Each test runs the
//! engine over a memory store (SQLite for the hang-ups) and the server in-process on a loopback
//! listener, with its limits set small and its timeouts short.

use crate::support::agent::{self, client, lasting, only, Agent, PATIENCE};
use crate::support::common;
use crate::support::skills::Nap;

use std::net::SocketAddr;
use std::time::Duration;

use radkit::engine::Caller;
use radkit::model::TaskState;
use radkit::prelude::*;
use radkit::server::grpc::proto::{self, a2a_service_client::A2aServiceClient};
use radkit::server::ServerConfig;
use radkit::store::{MemoryStore, TaskQuery};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Ends at once: a task that runs to its end as soon as it is driven.
#[derive(Default)]
struct Done;

#[flow_skill(id = "done", name = "Done", register = false)]
impl Done {
    #[step(start)]
    async fn done(&self, ctx: &StepCtx, _: Content) -> StepResult {
        ctx.complete("done", vec![])
    }
}

/// The `nap` skill (a stream on its task stays open) served with `config`'s changes to settings
/// whose timeouts do not fire.
async fn agent(config: impl FnOnce(ServerConfig) -> ServerConfig) -> Agent {
    let engine = only(MemoryStore::new(), Nap)
        .start()
        .await
        .expect("start the engine");
    serve(engine, config).await
}

/// `engine` served on a loopback port with `config`'s changes to settings whose timeouts do not
/// fire.
async fn serve(engine: Engine, config: impl FnOnce(ServerConfig) -> ServerConfig) -> Agent {
    agent::serve(engine, |c| config(lasting(c))).await
}

/// A JSON-RPC request as raw HTTP/1.1 bytes; `close` asks the server to close after answering.
fn raw_request(method: &str, params: Value, close: bool) -> Vec<u8> {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }).to_string();
    let connection = if close { "close" } else { "keep-alive" };
    format!(
        "POST / HTTP/1.1\r\nhost: radkit\r\ncontent-type: application/json\r\nconnection: {connection}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Read one HTTP/1.1 response with a `content-length` from `socket`: its status and its body.
async fn read_response(socket: &mut TcpStream) -> (u16, Value) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let status: u16 = head[9..12].parse().expect("a status code");
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().expect("a content length"))
                .unwrap_or_else(|| panic!("no content-length in {head}"));
            if buf.len() >= end + 4 + length {
                let body =
                    serde_json::from_slice(&buf[end + 4..end + 4 + length]).expect("a JSON body");
                return (status, body);
            }
        }
        let n = common::within(PATIENCE, "a response", socket.read(&mut chunk))
            .await
            .expect("read a response");
        assert!(n > 0, "closed before a whole response: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// How long `socket` stays open from now, reading (and dropping) whatever it sends; fails the test
/// after [`PATIENCE`].
async fn open_for(socket: &mut TcpStream) -> Duration {
    let start = Instant::now();
    let mut chunk = [0u8; 1024];
    common::within(PATIENCE, "the server to close the connection", async {
        loop {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return start.elapsed(),
                Ok(_) => {}
            }
        }
    })
    .await
}

/// A working task that waits for no input: a stream on it stays open.
async fn napping_task(client: &reqwest::Client, url: &str) -> String {
    let sent = common::rpc(
        client,
        url,
        None,
        "message/send",
        json!({ "message": common::user("nap") }),
    )
    .await;
    sent["result"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task id in {sent}"))
        .to_owned()
}

/// POST a `tasks/resubscribe` for `task`: the response as it starts (a stream, or a JSON error).
async fn resubscribe(client: &reqwest::Client, url: &str, task: &str) -> reqwest::Response {
    let body = json!({ "jsonrpc": "2.0", "id": 9, "method": "tasks/resubscribe", "params": { "id": task } });
    common::within(
        PATIENCE,
        "the start of a resubscribe",
        client.post(format!("{url}/")).json(&body).send(),
    )
    .await
    .expect("POST tasks/resubscribe")
}

/// How many tasks the store holds.
async fn task_count(agent: &Agent) -> usize {
    agent
        .engine
        .store()
        .list(TaskQuery::default())
        .await
        .expect("list the tasks")
        .len()
}

fn is_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// A streaming answer, read up to its first event: `Ok` with the stream (held open by whoever keeps
/// it) when the stream started, `Err` with the JSON-RPC error envelope of a stream refused (one SSE
/// event holding the error).
async fn opened(response: reqwest::Response) -> Result<impl futures::Stream + Send, Value> {
    use futures::StreamExt;
    assert!(is_stream(&response), "streaming methods answer SSE");
    let mut body = response.bytes_stream().boxed();
    let mut buf = String::new();
    while !buf.contains("\n\n") {
        let chunk = common::within(PATIENCE, "the first event of a stream", body.next())
            .await
            .expect("an event before the stream ends")
            .expect("a chunk");
        buf.push_str(&String::from_utf8_lossy(&chunk));
    }
    let data = buf
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .expect("a data line");
    let event: Value = serde_json::from_str(data).expect("a JSON-RPC envelope");
    match event.get("error") {
        Some(_) => Err(event),
        None => Ok(body),
    }
}

#[test(multi_thread)]
async fn a_request_head_or_body_that_trickles_is_cut_after_the_header_timeout() {
    let agent = agent(|mut c| {
        c.header_timeout = Duration::from_millis(300);
        c
    })
    .await;
    // Half a request line on a fresh connection, then nothing.
    let mut half = TcpStream::connect(agent.addr).await.expect("connect");
    half.write_all(b"POST / HT").await.expect("write");
    // Closed at all (`open_for` waits a bounded, generous time): nothing else would close it. A
    // timer never fires early, so not before the header timeout either.
    let open = open_for(&mut half).await;
    assert!(
        open >= Duration::from_millis(250),
        "closed after {open:?}, before the header timeout"
    );
    // A head that stops after the first header of a second request on a kept-alive connection.
    let mut kept = TcpStream::connect(agent.addr).await.expect("connect");
    kept.write_all(&raw_request("tasks/get", json!({ "id": "x" }), false))
        .await
        .expect("write");
    let (status, body) = read_response(&mut kept).await;
    assert_eq!((status, &body["error"]["code"]), (200, &json!(-32001)));
    kept.write_all(b"POST / HTTP/1.1\r\nhost: radkit\r\n")
        .await
        .expect("write");
    open_for(&mut kept).await;
    // A body that stops short of its `content-length`.
    let mut short = TcpStream::connect(agent.addr).await.expect("connect");
    short
        .write_all(b"POST / HTTP/1.1\r\nhost: radkit\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"jsonrpc\"")
        .await
        .expect("write");
    open_for(&mut short).await;
    // The server still answers.
    let card = client()
        .get(format!("{}/.well-known/agent-card.json", agent.url))
        .send()
        .await
        .expect("GET the card");
    assert_eq!(card.status(), 200);
}

#[test(multi_thread)]
async fn a_connection_over_the_limit_is_answered_503_at_once_and_one_freed_serves_again() {
    let agent = agent(|mut c| {
        c.max_connections = 8;
        c
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(TcpStream::connect(agent.addr).await.expect("connect"));
    }
    // The eighth is served (a full request on it is answered) before the ninth arrives.
    let last = held.last_mut().expect("eight connections");
    last.write_all(&raw_request("tasks/get", json!({ "id": "x" }), false))
        .await
        .expect("write");
    assert_eq!(read_response(last).await.0, 200);

    // The eight stay open until the end of the test: a ninth queued for a free slot would never be
    // answered, so an answer at all (within a generous bound) is the refusal "at once".
    let mut ninth = TcpStream::connect(agent.addr).await.expect("connect");
    ninth
        .write_all(&raw_request("tasks/get", json!({ "id": "x" }), true))
        .await
        .expect("write");
    let (status, body) = tokio::time::timeout(Duration::from_secs(30), read_response(&mut ninth))
        .await
        .expect("the ninth connection is answered while the eight are held, not queued");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert_eq!(body["id"], Value::Null, "{body}");
    assert_eq!(body["error"]["code"], -32051, "{body}");
    let message = body["error"]["message"].as_str().expect("a message");
    assert!(message.contains("at most 8"), "{message}");
    open_for(&mut ninth).await;

    // One closed, a new connection is served.
    drop(held.remove(0));
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut socket = TcpStream::connect(agent.addr).await.expect("connect");
        socket
            .write_all(&raw_request("tasks/get", json!({ "id": "x" }), true))
            .await
            .expect("write");
        let (status, body) = read_response(&mut socket).await;
        if status == 200 {
            assert_eq!(body["error"]["code"], -32001, "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "still refused: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test(multi_thread)]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let agent = agent(|mut c| {
        c.idle_timeout = Duration::from_millis(1000);
        c
    })
    .await;
    let mut socket = TcpStream::connect(agent.addr).await.expect("connect");
    // Two requests on one connection, a pause a tenth of the timeout between them: it is kept.
    let mut answered = Instant::now();
    for _ in 0..2 {
        socket
            .write_all(&raw_request("tasks/get", json!({ "id": "x" }), false))
            .await
            .expect("write");
        assert_eq!(read_response(&mut socket).await.0, 200);
        answered = Instant::now();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Closed at all (`open_for` waits a bounded, generous time): nothing but the idle timeout
    // closes it, and a timer never fires early (the server's started a moment before `answered`).
    open_for(&mut socket).await;
    let idle = answered.elapsed();
    assert!(
        idle >= Duration::from_millis(800),
        "closed {idle:?} after its last answer, before the idle timeout"
    );
}

#[test(multi_thread)]
async fn a_stream_outlives_the_idle_timeout() {
    let agent = agent(|mut c| {
        c.idle_timeout = Duration::from_millis(200);
        c.header_timeout = Duration::from_millis(200);
        c
    })
    .await;
    let client = client();
    let task = napping_task(&client, &agent.url).await;
    let stream = resubscribe(&client, &agent.url, &task).await;
    assert!(is_stream(&stream));
    // Well past both timeouts, the stream still delivers: the cancellation ends it.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let canceled = common::rpc(
        &client,
        &agent.url,
        None,
        "tasks/cancel",
        json!({ "id": task }),
    )
    .await;
    assert_eq!(
        canceled["result"]["status"]["state"], "canceled",
        "{canceled}"
    );
    let events = common::read_events(stream, |_| false).await;
    let last = events.last().expect("events after the idle timeout");
    assert_eq!(last["result"]["status"]["state"], "canceled", "{events:#?}");
    assert_eq!(last["result"]["final"], true, "{events:#?}");
}

#[test(multi_thread)]
async fn a_caller_over_its_stream_limit_gets_32052_until_a_stream_ends() {
    let agent = agent(|mut c| {
        c.max_streams_per_principal = 2;
        c
    })
    .await;
    let client = client();
    let task = napping_task(&client, &agent.url).await;
    let mut open = Vec::new();
    for _ in 0..2 {
        let stream = opened(resubscribe(&client, &agent.url, &task).await).await;
        open.push(stream.expect("a stream within the limit"));
    }
    let third = opened(resubscribe(&client, &agent.url, &task).await).await;
    let body = third.err().expect("a third stream was opened");
    assert_eq!(body["id"], 9, "{body}");
    assert_eq!(body["error"]["code"], -32052, "{body}");
    // A refused message/stream starts no task.
    let before = task_count(&agent).await;
    let body = json!({ "jsonrpc": "2.0", "id": 4, "method": "message/stream", "params": { "message": common::user("nap") } });
    let refused = client
        .post(format!("{}/", agent.url))
        .json(&body)
        .send()
        .await
        .expect("POST message/stream");
    let refused = opened(refused).await.err().expect("a refusal");
    assert_eq!(refused["error"]["code"], -32052, "{refused}");
    assert_eq!(task_count(&agent).await, before);

    // One stream dropped, a new one opens.
    drop(open.remove(0));
    let deadline = Instant::now() + PATIENCE;
    loop {
        if opened(resubscribe(&client, &agent.url, &task).await)
            .await
            .is_ok()
        {
            break;
        }
        assert!(Instant::now() < deadline, "still refused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test(multi_thread)]
async fn the_stream_limit_is_per_principal() {
    let agent = agent(|mut c| {
        c.max_streams_per_principal = 1;
        c.tokens = vec![
            ("alice-token".to_owned(), "alice".to_owned()),
            ("bob-token".to_owned(), "bob".to_owned()),
        ];
        c
    })
    .await;
    let client = client();
    let stream = |token: &'static str| {
        let body = json!({ "jsonrpc": "2.0", "id": 3, "method": "message/stream", "params": { "message": common::user("nap") } });
        let request = client
            .post(format!("{}/", agent.url))
            .bearer_auth(token)
            .json(&body)
            .send();
        async move {
            common::within(PATIENCE, "the start of a stream", request)
                .await
                .expect("POST message/stream")
        }
    };
    let _alice = opened(stream("alice-token").await)
        .await
        .expect("alice's first stream");
    let body = opened(stream("alice-token").await)
        .await
        .err()
        .expect("alice's second stream is refused");
    assert_eq!(body["error"]["code"], -32052, "{body}");
    // Alice's streams do not count against Bob's.
    let bob = opened(stream("bob-token").await).await;
    assert!(bob.is_ok(), "bob was refused");
}

#[test]
fn the_store_keeps_its_descriptors_when_clients_open_more_connections_than_the_process_may() {
    // `radkit serve` on SQLite with 128 file descriptors: 16 connections and 64 refusals in
    // progress fit, with room for the store's files; 200 clients do not.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut cmd = std::process::Command::new("sh");
    cmd.args([
        "-c",
        "ulimit -n 128 && exec \"$0\" serve --addr 127.0.0.1:0 \"$@\"",
        env!("CARGO_BIN_EXE_radkit"),
        "--data-dir",
    ])
    .arg(dir.path())
    .args(["--max-connections", "16"]);
    let server = common::serve_command(cmd);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let addr: SocketAddr = server
            .url
            .trim_start_matches("http://")
            .parse()
            .expect("the server's address");
        // A kept-alive connection opened first, then 200 that send nothing.
        let mut kept = TcpStream::connect(addr).await.expect("connect");
        kept.write_all(&raw_request("tasks/get", json!({ "id": "x" }), false))
            .await
            .expect("write");
        assert_eq!(read_response(&mut kept).await.0, 200);
        let mut idle = Vec::new();
        for _ in 0..200 {
            idle.push(TcpStream::connect(addr).await.expect("connect"));
        }
        // Past the time a refused connection is kept to deliver its answer: the refusals in
        // progress (64 at most; more were closed unanswered) are over.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        // Reads open store connections (new descriptors) while every slot is taken: they succeed.
        for i in 0..20 {
            kept.write_all(&raw_request(
                "tasks/get",
                json!({ "id": format!("missing-{i}") }),
                false,
            ))
            .await
            .expect("write");
            let (status, body) = read_response(&mut kept).await;
            assert_eq!(status, 200, "{body}");
            assert_eq!(body["error"]["code"], -32001, "the store failed: {body}");
        }
        // A new connection is refused while the others are held, and served once they close.
        let mut refused = TcpStream::connect(addr).await.expect("connect");
        refused
            .write_all(&raw_request("tasks/get", json!({ "id": "x" }), true))
            .await
            .expect("write");
        let (status, body) = read_response(&mut refused).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (503, &json!(-32051)),
            "{body}"
        );
        drop(idle);
        let deadline = Instant::now() + PATIENCE;
        loop {
            let mut socket = TcpStream::connect(addr).await.expect("connect");
            socket
                .write_all(&raw_request("tasks/get", json!({ "id": "x" }), true))
                .await
                .expect("write");
            let (status, body) = read_response(&mut socket).await;
            if status == 200 {
                assert_eq!(body["error"]["code"], -32001, "{body}");
                break;
            }
            assert!(Instant::now() < deadline, "still refused: {body}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

/// A client that hangs up mid-send, on every binding: a JSON-RPC 0.3 `message/send` and an
/// HTTP+JSON `message:send` written to a socket that is reset (RST) at once or after a few ms, and a
/// gRPC `SendMessage` whose deadline runs out after 0–9 ms. The engine is on SQLite, where a send
/// cut off after its creating append (and before its driver started) used to leave its task
/// `submitted` until a restart. Every task the sends created must run to its end.
#[test(multi_thread)]
async fn sends_whose_client_hangs_up_leave_no_task_stranded_on_any_binding() {
    let dir = tempfile::tempdir().unwrap();
    let store = radkit::store::SqliteStore::open_default(dir.path().join("radkit.db"))
        .expect("open the SQLite store");
    let engine = Engine::builder(store)
        .without_registered_skills()
        .skill(Done)
        .start()
        .await
        .expect("start the engine");
    let agent = serve(engine, |c| c).await;
    for i in 0..30u64 {
        let params = json!({
            "message": common::user("go"),
            "configuration": { "blocking": false },
        });
        hang_up(
            agent.addr,
            &raw_request("message/send", params, true),
            i / 3,
        )
        .await;
        let body = json!({ "message": {
            "messageId": format!("rest-{i}"), "role": "ROLE_USER", "parts": [{ "text": "go" }]
        } })
        .to_string();
        let rest = format!(
            "POST /message:send HTTP/1.1\r\nhost: radkit\r\na2a-version: 1.0\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        hang_up(agent.addr, rest.as_bytes(), i / 3).await;
    }
    let channel = common::within(PATIENCE, "a gRPC connection", async {
        tonic::transport::Endpoint::from_shared(agent.url.clone())
            .unwrap()
            .connect()
            .await
            .unwrap()
    })
    .await;
    let mut grpc = A2aServiceClient::new(channel);
    for i in 0..30u64 {
        let mut request = tonic::Request::new(proto::SendMessageRequest {
            message: Some(proto::Message {
                message_id: format!("grpc-{i}"),
                role: proto::Role::User as i32,
                parts: vec![proto::Part {
                    content: Some(proto::part::Content::Text("go".to_owned())),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        });
        request
            .metadata_mut()
            .insert("a2a-version", "1.0".parse().unwrap());
        request.set_timeout(Duration::from_millis(i / 3));
        let _ = grpc.send_message(request).await;
    }
    let store = agent.engine.store().clone();
    let created = store.list(TaskQuery::default()).await.unwrap();
    assert!(!created.is_empty(), "no send created its task");
    for task in created {
        let task_id = radkit::model::TaskId::from(task.id.clone());
        let done = common::within(
            Duration::from_secs(60),
            &format!("task {task_id} (its client hung up) to end"),
            agent.engine.wait_settled(&Caller::Operator, &task_id),
        )
        .await
        .expect("wait for the task");
        assert_eq!(done.status.state, TaskState::Completed, "{task_id}");
    }
}

/// Write `request` on a new connection, wait `after_ms`, then reset the connection (RST, no FIN):
/// what a client that crashed or timed out does.
async fn hang_up(addr: SocketAddr, request: &[u8], after_ms: u64) {
    let mut socket = TcpStream::connect(addr).await.expect("connect");
    socket.write_all(request).await.expect("write a request");
    if after_ms > 0 {
        tokio::time::sleep(Duration::from_millis(after_ms)).await;
    }
    socket.set_zero_linger().expect("SO_LINGER 0");
    drop(socket);
}
