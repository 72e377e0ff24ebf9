//! Token streaming as A2A clients see it. A skill streams its model's answer into an artifact
//! (`ctx.llm(..).stream_artifact(..)`): every binding radkit serves (A2A 0.3 JSON-RPC, 1.0
//! JSON-RPC, HTTP+JSON, gRPC) carries the pieces as artifact chunks while the model generates
//! them, then the journaled whole. And a real process killed by SIGKILL while an OpenAI-compatible
//! model streams (a local server speaking Chat Completions' SSE): the restarted process reissues
//! the call with the same InvocationId, and the client that resubscribes sees the reissued call's
//! text from its start and then the answer whole: what it holds is the answer, never the cut half
//! followed by it.
//!
//! The processes are this test binary run again (the ignored entry point
//! `child_process_serves_a_streaming_writer`).
#![cfg(unix)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::HeaderMap;
use futures::StreamExt;
use radkit::client::{A2aClient, Binding, ClientAuth, ProtocolVersion, StreamEvent};
use radkit::effects::Effects;
use radkit::engine::Engine;
use radkit::flow::EffectError;
use radkit::journal::Entry;
use radkit::llm::{LlmRequest, LlmResponse, Model, OpenAiModel, Tokens};
use radkit::model::{Part, TaskState};
use radkit::prelude::*;
use radkit::store::{Durability, MemoryStore, SqliteStore, Store};
use serde_json::json;
use tokio::sync::Semaphore;

use crate::support::agent::{serve, start as start_agent};
use crate::support::common::{within, PATIENCE};

/// The answer, in the pieces the models stream it in.
const PIECES: [&str; 3] = ["Old ", "pond, ", "a frog"];

/// Streams its model's answer into the artifact `poem`, then completes.
#[derive(Default)]
struct Poet;

#[flow_skill(id = "poet", name = "Poet", register = false)]
impl Poet {
    #[step(start)]
    async fn start(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let poem: String = ctx
            .llm("writer")
            .stream_artifact("poem")
            .run(msg.joined_texts())
            .await?;
        ctx.complete(format!("wrote {} characters", poem.chars().count()), vec![])
    }
}

/// A model that streams [`PIECES`] once the test lets a call start (`go`).
#[derive(Clone)]
struct Gated {
    go: Arc<Semaphore>,
}

#[async_trait]
impl Model for Gated {
    async fn complete(&self, _: LlmRequest) -> Result<LlmResponse, EffectError> {
        Err(EffectError::permanent("a streamed call must be streamed"))
    }

    async fn stream(&self, _: LlmRequest, tokens: &Tokens) -> Result<LlmResponse, EffectError> {
        self.go.acquire().await.unwrap().forget();
        for piece in PIECES {
            tokens.send(piece);
        }
        Ok(LlmResponse::answer(json!(PIECES.concat()), None))
    }
}

/// The artifact events of `events` as (append, last chunk, text).
fn chunks(events: &[StreamEvent]) -> Vec<(bool, bool, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Artifact(a) => Some((
                a.append,
                a.last_chunk,
                a.artifact.parts.iter().filter_map(Part::as_text).collect(),
            )),
            _ => None,
        })
        .collect()
}

/// What a client applying A2A's `append` rule holds of the artifact after `chunks`, starting from
/// `held`.
fn apply(mut held: String, chunks: &[(bool, bool, String)]) -> String {
    for (append, _, text) in chunks {
        if !append {
            held.clear();
        }
        held.push_str(text);
    }
    held
}

#[test(multi_thread)]
async fn every_binding_streams_the_pieces_then_the_journaled_whole() {
    let go = Arc::new(Semaphore::new(0));
    let engine = Engine::builder(MemoryStore::new())
        .without_registered_skills()
        .skill(Poet)
        .effects(Effects::new().model("writer", Gated { go: go.clone() }));
    let agent = start_agent(engine, |c| c).await;
    let picks: [(&str, Option<ProtocolVersion>, Option<Binding>); 4] = [
        ("0.3 JSON-RPC", Some(ProtocolVersion::V0_3), None),
        ("1.0 JSON-RPC", Some(ProtocolVersion::V1_0), None),
        ("HTTP+JSON", None, Some(Binding::HttpJson)),
        ("gRPC", None, Some(Binding::Grpc)),
    ];
    for (name, version, binding) in picks {
        let client = match (version, binding) {
            (Some(v), _) => A2aClient::connect_version(&agent.url, ClientAuth::None, v).await,
            (None, Some(b)) => A2aClient::builder().bindings([b]).connect(&agent.url).await,
            (None, None) => unreachable!(),
        }
        .unwrap_or_else(|e| panic!("{name}: connect: {e}"));
        let mut stream = client.send_streaming(Message::user_text("a haiku"));
        let mut events = Vec::new();
        within(PATIENCE, "the stream's first event", async {
            events.push(stream.next().await.unwrap().unwrap());
        })
        .await;
        // The model starts once the client follows the task: every piece reaches it.
        go.add_permits(1);
        within(PATIENCE, "the end of the stream", async {
            while let Some(event) = stream.next().await {
                events.push(event.unwrap_or_else(|e| panic!("{name}: {e}")));
            }
        })
        .await;
        let chunks = chunks(&events);
        let expected: Vec<(bool, bool, String)> = vec![
            (false, false, "Old ".into()),
            (true, false, "pond, ".into()),
            (true, false, "a frog".into()),
            (false, true, "Old pond, a frog".into()),
        ];
        assert_eq!(chunks, expected, "{name}");
        let last = events.last().unwrap();
        assert!(
            matches!(last, StreamEvent::Status(s) if s.status.state == TaskState::Completed),
            "{name}: {last:?}"
        );
    }
}

const ARGS_VAR: &str = "RADKIT_TOKEN_WRITER_ARGS";

#[test]
#[ignore = "entry point of the processes the kill test starts and kills"]
fn child_process_serves_a_streaming_writer() {
    let Ok(args) = std::env::var(ARGS_VAR) else {
        return; // run by hand with --ignored: nothing to serve
    };
    let args: serde_json::Value = serde_json::from_str(&args).expect("the arguments as JSON");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let store = SqliteStore::open(args["db"].as_str().unwrap(), Durability::Full).unwrap();
        let model =
            OpenAiModel::new(args["model_url"].as_str().unwrap(), "gpt-test").api_key("sk-test");
        let engine = Engine::builder(store)
            .without_registered_skills()
            .skill(Poet)
            .effects(Effects::new().model("writer", model))
            .start()
            .await
            .unwrap();
        let agent = serve(engine, |c| c).await;
        println!("writer serving on {}", agent.url);
        std::future::pending::<()>().await;
    });
}

/// The process, killed with SIGKILL when dropped; its log is printed when the test fails.
struct Writer {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Writer {
    fn start(dir: &Path, model_url: &str, run: u32) -> Writer {
        let log = dir.join(format!("writer-{run}.log"));
        let args = json!({ "db": dir.join("radkit.sqlite"), "model_url": model_url });
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "token_streams::child_process_serves_a_streaming_writer",
                "--ignored",
                "--nocapture",
            ])
            .env(ARGS_VAR, args.to_string())
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start the child process");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some((_, url)) = line.split_once("writer serving on ") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(url.trim().to_owned());
                    }
                }
            }
        });
        let mut writer = Writer {
            child,
            url: String::new(),
            log,
        };
        writer.url = rx
            .recv_timeout(PATIENCE)
            .expect("the child printed no banner in time");
        writer
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            eprintln!("---- {} ----\n{log}", self.log.display());
        }
    }
}

/// An OpenAI-compatible model server that streams Chat Completions. Its first request sends two
/// pieces and then never ends (the process it streams to is killed meanwhile); later requests wait
/// until the test lets them (`go`), then stream the whole answer.
#[derive(Clone)]
struct Provider {
    /// The `Idempotency-Key` and `stream` flag of each request, in order.
    seen: Arc<Mutex<Vec<(String, bool)>>>,
    go: Arc<Semaphore>,
    half_sent: Arc<Semaphore>,
}

impl Provider {
    fn new() -> Self {
        Provider {
            seen: Arc::default(),
            go: Arc::new(Semaphore::new(0)),
            half_sent: Arc::new(Semaphore::new(0)),
        }
    }
}

fn chunk(delta: serde_json::Value, finish: Option<&str>) -> Bytes {
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }]
    });
    Bytes::from(format!("data: {body}\n\n"))
}

async fn completions(
    State(p): State<Provider>,
    headers: HeaderMap,
    body: String,
) -> axum::response::Response {
    let body: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let first = {
        let mut seen = p.seen.lock().unwrap();
        seen.push((key, body["stream"] == json!(true)));
        seen.len() == 1
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(16);
    tokio::spawn(async move {
        if first {
            let _ = tx
                .send(Ok(chunk(
                    json!({ "role": "assistant", "content": "Old " }),
                    None,
                )))
                .await;
            let _ = tx.send(Ok(chunk(json!({ "content": "po" }), None))).await;
            p.half_sent.add_permits(1);
            // Never ends: the connection stays open until the process reading it dies.
            std::future::pending::<()>().await;
        }
        p.go.acquire().await.unwrap().forget();
        let mut pieces: VecDeque<&str> = PIECES.into();
        let role = pieces.pop_front().unwrap();
        let _ = tx
            .send(Ok(chunk(
                json!({ "role": "assistant", "content": role }),
                None,
            )))
            .await;
        for piece in pieces {
            let _ = tx.send(Ok(chunk(json!({ "content": piece }), None))).await;
        }
        let _ = tx.send(Ok(chunk(json!({}), Some("stop")))).await;
        let usage = json!({ "id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
            "usage": { "prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8 } });
        let _ = tx.send(Ok(Bytes::from(format!("data: {usage}\n\n")))).await;
        let _ = tx.send(Ok(Bytes::from_static(b"data: [DONE]\n\n"))).await;
    });
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(futures::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|item| (item, rx)) },
        )))
        .unwrap()
}

#[test(multi_thread)]
async fn sigkill_mid_generation_resubscribed_client_sees_the_reissued_answer_once() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::new();
    let app = axum::Router::new()
        .route("/chat/completions", axum::routing::post(completions))
        .with_state(provider.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let model_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let writer = Writer::start(dir.path(), &model_url, 1);
    let client = A2aClient::connect_version(&writer.url, ClientAuth::None, ProtocolVersion::V1_0)
        .await
        .unwrap();
    let mut stream = client.send_streaming(Message::user_text("a haiku"));
    let mut before = Vec::new();
    within(PATIENCE, "the first half of the generation", async {
        while chunks(&before).len() < 2 {
            before.push(stream.next().await.unwrap().unwrap());
        }
    })
    .await;
    let _ = within(
        PATIENCE,
        "the provider's half",
        provider.half_sent.acquire(),
    )
    .await;
    let task_id = match &before[0] {
        StreamEvent::Task(task) => task.id.clone(),
        other => panic!("expected the task first, got {other:?}"),
    };
    let held = apply(String::new(), &chunks(&before));
    assert_eq!(held, "Old po");

    writer.kill();
    // The stream ends (an error or its end), never with more of the answer.
    let rest = within(
        PATIENCE,
        "the cut stream to end",
        stream.collect::<Vec<_>>(),
    )
    .await;
    assert!(rest
        .iter()
        .all(|e| !matches!(e, Ok(StreamEvent::Artifact(_)))));

    // The restarted process reissues the call; the client resubscribes before it may answer.
    let writer = Writer::start(dir.path(), &model_url, 2);
    let client = A2aClient::connect_version(&writer.url, ClientAuth::None, ProtocolVersion::V1_0)
        .await
        .unwrap();
    let mut stream = client.subscribe(&task_id);
    let mut after = Vec::new();
    within(PATIENCE, "the resubscription's first event", async {
        after.push(stream.next().await.unwrap().unwrap());
    })
    .await;
    provider.go.add_permits(1);
    within(PATIENCE, "the end of the resubscription", async {
        while let Some(event) = stream.next().await {
            after.push(event.unwrap());
        }
    })
    .await;
    let reissued = chunks(&after);
    assert_eq!(
        apply(held, &reissued),
        "Old pond, a frog",
        "what the client holds: {reissued:?}"
    );
    assert!(
        matches!(after.last(), Some(StreamEvent::Status(s)) if s.status.state == TaskState::Completed),
        "{after:?}"
    );
    let seen = provider.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen.iter().all(|(_, stream)| *stream), "streamed requests");
    assert_eq!(seen[0].0, seen[1].0, "the reissued call has the same id");
    assert!(!seen[0].0.is_empty());
    writer.kill();

    // The journal: one receipt for the model call, one artifact with the whole answer.
    let store = SqliteStore::open(dir.path().join("radkit.sqlite"), Durability::Full).unwrap();
    let journal = store.journal(&task_id, 0).await.unwrap();
    let llm = journal
        .iter()
        .find_map(|r| match &r.entry {
            Entry::CommandIssued { id, cmd, .. } if cmd.kind.kind_name() == "llm" => {
                Some(id.clone())
            }
            _ => None,
        })
        .expect("the model call's command");
    let receipts = journal
        .iter()
        .filter(|r| matches!(&r.entry, Entry::ReceiptRecorded { receipt } if receipt.id == llm))
        .count();
    let artifacts: Vec<_> = journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::ArtifactEmitted { artifact, .. } => Some(artifact.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(receipts, 1, "one receipt for the model call");
    assert_eq!(artifacts.len(), 1);
    assert_eq!(
        artifacts[0]
            .parts
            .iter()
            .filter_map(Part::as_text)
            .collect::<String>(),
        "Old pond, a frog"
    );
}
