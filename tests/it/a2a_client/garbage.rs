//! A peer that answers wrongly on purpose, for the client's error paths: under `/<mode>/` it serves a
//! card pointing at `/<mode>/rpc` (JSON-RPC for 0.3 and 1.0), and there answers as `mode` says —
//! not JSON, another request's id, a result of the wrong shape, a body over [`LIMIT`], HTTP 503,
//! nothing at all, or an SSE stream that is split oddly, cut short, an `error` event, garbage,
//! oversized or stalled. Stream items are written in the version the request spoke.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Path;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures::stream::{self, StreamExt};
use radkit::model::{self, v0_3, v1, StatusUpdate, TaskState, TaskStatus};
use serde_json::{json, Value};

/// The size limit the tests give their clients; `huge` answers are larger.
pub const LIMIT: usize = 64 * 1024;

/// The running peer; stopped when dropped.
pub struct Peer {
    base: String,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Peer {
    /// The base URL of `mode`.
    pub fn url(&self, mode: &str) -> String {
        format!("{}/{mode}", self.base)
    }
}

pub async fn serve() -> Peer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let card_base = base.clone();
    let app = Router::new()
        .route(
            "/{mode}/.well-known/agent-card.json",
            get(move |Path(mode): Path<String>| {
                let base = card_base.clone();
                async move { axum::Json(card(&base, &mode)) }
            }),
        )
        .route("/{mode}/rpc", post(rpc));
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Peer { base, server }
}

fn card(base: &str, mode: &str) -> Value {
    let url = format!("{base}/{mode}/rpc");
    match mode {
        "not-a-card" => json!(["not", "a", "card"]),
        "nothing-spoken" => json!({
            "name": "g", "description": "d", "version": "1", "capabilities": {},
            "supportedInterfaces": [
                {"url": "https://h:443", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
                {"url": url, "protocolBinding": "CARRIER-PIGEON", "protocolVersion": "1.0"}
            ]
        }),
        _ => json!({
            "name": mode, "description": "answers wrongly", "version": "1", "capabilities": {"streaming": true},
            "supportedInterfaces": [
                {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
            ],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"], "skills": []
        }),
    }
}

/// The task `t` in `state`, written as `version` writes a stream item.
fn task_item(v1_0: bool, state: TaskState) -> Value {
    let task = model::Task {
        id: "t".into(),
        context_id: "c".into(),
        status: TaskStatus {
            state,
            message: None,
            timestamp: None,
        },
        history: Vec::new(),
        artifacts: Vec::new(),
        metadata: None,
    };
    if v1_0 {
        serde_json::to_value(v1::StreamResponse::Task(task.into())).unwrap()
    } else {
        serde_json::to_value(v0_3::Task::from(task)).unwrap()
    }
}

fn status_item(v1_0: bool, state: TaskState) -> Value {
    let event = StatusUpdate {
        task_id: "t".into(),
        context_id: "c".into(),
        status: TaskStatus {
            state,
            message: None,
            timestamp: None,
        },
        is_final: state.is_terminal(),
        metadata: None,
    };
    if v1_0 {
        serde_json::to_value(v1::StreamResponse::StatusUpdate(event.into())).unwrap()
    } else {
        serde_json::to_value(v0_3::TaskStatusUpdateEvent::from(event)).unwrap()
    }
}

fn artifact_item(v1_0: bool) -> Value {
    let event = model::ArtifactUpdate {
        task_id: "t".into(),
        context_id: "c".into(),
        artifact: model::Artifact::from_text("a.txt", "split"),
        append: false,
        last_chunk: true,
        metadata: None,
    };
    if v1_0 {
        serde_json::to_value(v1::StreamResponse::ArtifactUpdate(event.into())).unwrap()
    } else {
        serde_json::to_value(v0_3::TaskArtifactUpdateEvent::from(event)).unwrap()
    }
}

fn ok(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

fn sse(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

async fn rpc(Path(mode): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let v1_0 = headers.get("a2a-version").is_some_and(|v| v == "1.0");
    match mode.as_str() {
        "not-json" => (
            [(header::CONTENT_TYPE, "text/html")],
            "<html>a proxy's error page</html>",
        )
            .into_response(),
        "wrong-id" => ok(&json!("someone-else"), json!({})).into_response(),
        "wrong-shape" => ok(&id, json!({"id": 3, "kind": "task", "task": 5})).into_response(),
        "no-result" => json!({"jsonrpc": "2.0", "id": id})
            .to_string()
            .into_response(),
        "huge" => ok(&id, Value::String("x".repeat(LIMIT + 1))).into_response(),
        "busy" => (StatusCode::SERVICE_UNAVAILABLE, "busy; retry later").into_response(),
        "silent" => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            StatusCode::NO_CONTENT.into_response()
        }
        "sse-split" => {
            // The task pretty-printed, one `data:` line per line of JSON, a comment among them and
            // CRLF line ends; then two events with LF ends and a ping comment between them.
            let task =
                json!({"jsonrpc": "2.0", "id": id, "result": task_item(v1_0, TaskState::Working)});
            let lines: Vec<String> = serde_json::to_string_pretty(&task)
                .unwrap()
                .lines()
                .enumerate()
                .map(|(i, line)| match i {
                    1 => format!(": a comment\r\ndata:{line}\r\n"),
                    _ => format!("data: {line}\r\n"),
                })
                .collect();
            sse(format!(
                ": keep-alive\r\n\r\n{}\r\nevent: message\ndata: {}\n\n: ping\n\ndata: {}\n\n",
                lines.concat(),
                ok(&id, artifact_item(v1_0)),
                ok(&id, status_item(v1_0, TaskState::Completed)),
            ))
        }
        "sse-cut" => sse(format!(
            "data: {}\n\n",
            ok(&id, task_item(v1_0, TaskState::Working))
        )),
        "sse-error" => sse(format!(
            "event: error\ndata: {}\n\n",
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32001, "message": "task t not found"}})
        )),
        "sse-garbage" => sse("data: this is not json\n\n".to_owned()),
        "sse-huge" => sse(format!("data: \"{}\"\n\n", "x".repeat(LIMIT + 1))),
        "sse-stall" => {
            let first = format!("data: {}\n\n", ok(&id, task_item(v1_0, TaskState::Working)));
            let chunks = stream::once(async move { Ok::<_, Infallible>(Bytes::from(first)) })
                .chain(stream::pending());
            (
                [(header::CONTENT_TYPE, "text/event-stream")],
                Body::from_stream(chunks),
            )
                .into_response()
        }
        other => (StatusCode::NOT_FOUND, format!("no mode {other}")).into_response(),
    }
}
