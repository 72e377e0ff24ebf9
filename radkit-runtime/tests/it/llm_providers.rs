//! The native providers (OpenAI Chat Completions and Responses, Anthropic Messages, Gemini
//! generateContent, Ollama /api/chat) against a local server on loopback that answers with each
//! provider's documented wire shapes: the request each sends (path, auth header, where the schema
//! goes), text and structured answers, usage, tool calls, a 429 with its retry hint (transient) and
//! a 401 (permanent); one run through the engine, whose receipt keeps the usage. And each wire
//! shape streamed (`Model::stream`), the server writing the documented stream in small chunks
//! that split lines: the pieces of text sent as they arrive, the same answer `complete` returns
//! (text, usage, tool calls, structured output), the stream flag and path, errors before the
//! stream (429 with its hint, 401) and in it (a cut before the end marker, Anthropic's
//! `overloaded_error` event) classified for the engine's retries.

use crate::support::common;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::Router;
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::{Caller, Engine, Request};
use radkit_runtime::flow::step_table::{Step, StepInput, StepTable};
use radkit_runtime::flow::{InvocationId, SkillInfo, StepCtx, StepResult};
use radkit_runtime::journal::Entry;
use radkit_runtime::llm::{
    from_spec, AnthropicModel, GeminiModel, LlmRequest, Model, OllamaModel, OpenAiModel, Tokens,
};
use radkit_runtime::model::{Message, TaskState};
use radkit_runtime::store::MemoryStore;
use serde_json::{json, Value};

/// A status, extra headers and a JSON body.
type Plain = (u16, Vec<(&'static str, &'static str)>, Value);

/// A scripted answer: a JSON body, or a body streamed in small chunks.
struct Reply {
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    body: Body,
}

enum Body {
    Json(Value),
    /// `text` written a few bytes at a time (splitting lines and events), `pace` apart; with
    /// `abort`, the connection is then broken, `stall` later, instead of the body ending.
    Streamed {
        content_type: &'static str,
        text: String,
        abort: bool,
        pace: Duration,
        stall: Duration,
    },
}

impl From<Plain> for Reply {
    fn from((status, headers, body): Plain) -> Self {
        Reply {
            status,
            headers,
            body: Body::Json(body),
        }
    }
}

/// What the server received: the path and query, the headers, the body.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    query: Option<String>,
    headers: HeaderMap,
    body: Value,
}

#[derive(Clone, Default)]
struct Provider {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// How many bytes each write of a streamed body carries.
const CHUNK: usize = 23;

async fn answer(
    State(p): State<Provider>,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> axum::response::Response {
    p.seen.lock().unwrap().push(Seen {
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        headers,
        body: serde_json::from_str(&body).unwrap_or(Value::Null),
    });
    let reply = p
        .replies
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| (500, vec![], json!("no scripted reply")).into());
    let mut out =
        axum::http::Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
    for (k, v) in reply.headers {
        out = out.header(k, v);
    }
    let body = match reply.body {
        Body::Json(value) => {
            out = out.header("content-type", "application/json");
            axum::body::Body::from(value.to_string())
        }
        Body::Streamed {
            content_type,
            text,
            abort,
            pace,
            stall,
        } => {
            out = out.header("content-type", content_type);
            // Small writes; a large body in at most ~64 of them.
            let chunks: Vec<axum::body::Bytes> = text
                .as_bytes()
                .chunks(CHUNK.max(text.len() / 64))
                .map(axum::body::Bytes::copy_from_slice)
                .collect();
            use futures::StreamExt;
            let written = futures::stream::iter(chunks).then(move |chunk| async move {
                tokio::time::sleep(pace).await;
                Ok::<_, std::io::Error>(chunk)
            });
            // The written bytes reach the client before the connection breaks.
            let broken = futures::stream::iter(abort.then_some(())).then(move |()| async move {
                tokio::time::sleep(stall).await;
                Err(std::io::Error::other("connection cut"))
            });
            axum::body::Body::from_stream(written.chain(broken))
        }
    };
    out.body(body).unwrap()
}

/// A server answering `replies` in order, at any path.
async fn serve<R: Into<Reply>>(replies: Vec<R>) -> (String, Provider) {
    let provider = Provider {
        replies: Arc::new(Mutex::new(replies.into_iter().map(Into::into).collect())),
        ..Provider::default()
    };
    let app = Router::new().fallback(answer).with_state(provider.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, provider)
}

fn ok(body: Value) -> Plain {
    (200, vec![], body)
}

/// An SSE body, as written.
fn sse(text: &str) -> Reply {
    Reply {
        status: 200,
        headers: vec![],
        body: Body::Streamed {
            content_type: "text/event-stream",
            text: text.to_owned(),
            abort: false,
            pace: Duration::from_millis(1),
            stall: Duration::from_millis(50),
        },
    }
}

/// An NDJSON body (Ollama's stream), as written.
fn ndjson(text: &str) -> Reply {
    Reply {
        status: 200,
        headers: vec![],
        body: Body::Streamed {
            content_type: "application/x-ndjson",
            text: text.to_owned(),
            abort: false,
            pace: Duration::from_millis(1),
            stall: Duration::from_millis(50),
        },
    }
}

/// `reply`'s streamed body up to (not including) `before`, then the connection broken.
fn cut(reply: Reply, before: &str) -> Reply {
    let mut reply = reply;
    let Body::Streamed { text, abort, .. } = &mut reply.body else {
        panic!("only a streamed body is cut");
    };
    let at = text.find(before).expect("the cut point is in the body");
    text.truncate(at);
    *abort = true;
    reply
}

/// `reply`'s streamed body up to (not including) `before`, then ended cleanly.
fn ended(reply: Reply, before: &str) -> Reply {
    let mut reply = cut(reply, before);
    if let Body::Streamed { abort, .. } = &mut reply.body {
        *abort = false;
    }
    reply
}

/// `reply`'s streamed body written `pace` apart, broken (if cut) `stall` after its last byte.
fn paced(mut reply: Reply, pace: Duration, stall: Duration) -> Reply {
    if let Body::Streamed {
        pace: p, stall: s, ..
    } = &mut reply.body
    {
        (*p, *s) = (pace, stall);
    }
    reply
}

/// Tokens that keep each piece sent, in order.
fn tokens() -> (Tokens, Arc<Mutex<Vec<String>>>) {
    let pieces = Arc::new(Mutex::new(Vec::new()));
    let sink = pieces.clone();
    (
        Tokens::new(move |piece| sink.lock().unwrap().push(piece.to_owned())),
        pieces,
    )
}

fn pieces(kept: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    kept.lock().unwrap().clone()
}

fn request(schema: Option<Value>) -> LlmRequest {
    LlmRequest {
        model: "critic".into(),
        input: json!("Is this good?"),
        schema,
        invocation_id: InvocationId::derive("t", 1, 0),
        tools: Vec::new(),
        turns: Vec::new(),
    }
}

fn verdict_schema() -> Value {
    json!({ "title": "Verdict", "type": "object", "properties": { "ok": { "type": "boolean" } }, "required": ["ok"] })
}

impl Provider {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn header<'a>(seen: &'a Seen, name: &str) -> Option<&'a str> {
    seen.headers.get(name).and_then(|v| v.to_str().ok())
}

#[test(multi_thread)]
async fn anthropic_asks_for_structure_with_a_forced_tool_and_reads_its_input() {
    let (url, server) = serve(vec![
        ok(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{ "type": "tool_use", "id": "toolu_1", "name": "Verdict", "input": { "ok": true } }],
            "stop_reason": "tool_use", "usage": { "input_tokens": 21, "output_tokens": 9 }
        })),
        ok(json!({
            "id": "msg_2", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{ "type": "text", "text": "Quite good." }],
            "stop_reason": "end_turn", "usage": { "input_tokens": 5, "output_tokens": 3 }
        })),
        ok(json!({
            "type": "message", "content": [{ "type": "tool_use", "name": "answer", "input": { "value": ["a", "b"] } }],
            "stop_reason": "tool_use", "usage": { "input_tokens": 1, "output_tokens": 1 }
        })),
    ])
    .await;
    let model = AnthropicModel::new("claude-x")
        .base_url(&url)
        .api_key("sk-ant")
        .system("Be brief.");
    let structured = model
        .complete(request(Some(verdict_schema())))
        .await
        .unwrap();
    assert_eq!(structured.output, json!({ "ok": true }));
    assert_eq!(
        structured.usage,
        Some(json!({ "input_tokens": 21, "output_tokens": 9 }))
    );
    let text = model.complete(request(None)).await.unwrap();
    assert_eq!(text.output, json!("Quite good."));
    // A schema that is not an object travels wrapped, and comes back unwrapped.
    let list = model
        .complete(request(Some(
            json!({ "type": "array", "items": { "type": "string" } }),
        )))
        .await
        .unwrap();
    assert_eq!(list.output, json!(["a", "b"]));

    let seen = server.seen();
    assert_eq!(seen[0].path, "/v1/messages");
    assert_eq!(header(&seen[0], "x-api-key"), Some("sk-ant"));
    assert_eq!(header(&seen[0], "anthropic-version"), Some("2023-06-01"));
    let body = &seen[0].body;
    assert_eq!(body["system"], "Be brief.");
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(body["tools"][0]["input_schema"], verdict_schema());
    assert_eq!(
        body["tool_choice"],
        json!({ "type": "tool", "name": "Verdict" })
    );
    assert!(seen[1].body.get("tools").is_none());
    assert_eq!(
        seen[2].body["tools"][0]["input_schema"]["properties"]["value"]["type"],
        "array"
    );
}

#[test(multi_thread)]
async fn gemini_sends_the_schema_as_response_json_schema_and_honours_retry_info() {
    let (url, server) = serve(vec![
        (
            429,
            vec![],
            json!({ "error": { "code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED",
                "details": [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s" }] } }),
        ),
        ok(json!({
            "candidates": [{ "content": { "role": "model", "parts": [{ "text": "{\"ok\": false}" }] }, "finishReason": "STOP" }],
            "usageMetadata": { "promptTokenCount": 12, "candidatesTokenCount": 4, "totalTokenCount": 16 }
        })),
        ok(json!({ "promptFeedback": { "blockReason": "SAFETY" } })),
        (
            400,
            vec![],
            json!({ "error": { "code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT" } }),
        ),
    ])
    .await;
    let model = GeminiModel::new("gemini-2.5-flash")
        .base_url(&url)
        .api_key("AIza")
        .max_tokens(100);
    let busy = model
        .complete(request(Some(verdict_schema())))
        .await
        .unwrap_err();
    assert!(busy.is_transient(), "{busy:?}");
    assert_eq!(busy.retry_after_ms, Some(7_000));
    let answered = model
        .complete(request(Some(verdict_schema())))
        .await
        .unwrap();
    assert_eq!(answered.output, json!({ "ok": false }));
    assert_eq!(answered.usage.unwrap()["totalTokenCount"], 16);
    let blocked = model.complete(request(None)).await.unwrap_err();
    assert!(
        !blocked.is_transient() && blocked.message.contains("SAFETY"),
        "{blocked:?}"
    );
    assert!(!model
        .complete(request(None))
        .await
        .unwrap_err()
        .is_transient());

    let seen = server.seen();
    assert_eq!(
        seen[1].path,
        "/v1beta/models/gemini-2.5-flash:generateContent"
    );
    assert_eq!(header(&seen[1], "x-goog-api-key"), Some("AIza"));
    let config = &seen[1].body["generationConfig"];
    assert_eq!(config["responseMimeType"], "application/json");
    assert_eq!(config["responseJsonSchema"], verdict_schema());
    assert_eq!(config["maxOutputTokens"], 100);
    assert_eq!(
        seen[1].body["contents"][0]["parts"][0]["text"],
        "Is this good?"
    );
}

#[test(multi_thread)]
async fn ollama_sends_the_schema_as_format_and_reports_its_counts_as_usage() {
    let (url, server) = serve(vec![
        ok(json!({
            "model": "llama3.2", "message": { "role": "assistant", "content": "{\"ok\":true}" },
            "done": true, "done_reason": "stop", "prompt_eval_count": 26, "eval_count": 8
        })),
        (
            404,
            vec![],
            json!({ "error": "model \"nope\" not found, try pulling it first" }),
        ),
    ])
    .await;
    let model = OllamaModel::new("llama3.2").base_url(&url);
    let answered = model
        .complete(request(Some(verdict_schema())))
        .await
        .unwrap();
    assert_eq!(answered.output, json!({ "ok": true }));
    assert_eq!(
        answered.usage,
        Some(json!({ "prompt_eval_count": 26, "eval_count": 8 }))
    );
    let missing = model.complete(request(None)).await.unwrap_err();
    assert!(!missing.is_transient() && missing.message.contains("not found"));
    let seen = server.seen();
    assert_eq!(seen[0].path, "/api/chat");
    assert_eq!(seen[0].body["format"], verdict_schema());
    assert_eq!(seen[0].body["stream"], false);
}

#[test(multi_thread)]
async fn openai_responses_sends_text_format_and_reads_output_text_and_a_401_is_permanent() {
    let (url, server) = serve(vec![
        ok(json!({
            "id": "resp_1", "object": "response", "status": "completed",
            "output": [
                { "type": "reasoning", "id": "rs_1", "summary": [] },
                { "type": "message", "id": "msg_1", "role": "assistant",
                  "content": [{ "type": "output_text", "text": "{\"ok\":true}", "annotations": [] }] }
            ],
            "usage": { "input_tokens": 30, "output_tokens": 6, "total_tokens": 36 }
        })),
        (
            429,
            vec![("retry-after", "2")],
            json!({ "error": { "message": "Rate limit reached", "type": "requests" } }),
        ),
        (
            401,
            vec![],
            json!({ "error": { "message": "Incorrect API key provided", "type": "invalid_request_error" } }),
        ),
    ])
    .await;
    let model = OpenAiModel::new(format!("{url}/v1"), "gpt-5-mini")
        .api_key("sk-o")
        .system("Be brief.")
        .responses();
    let answered = model
        .complete(request(Some(verdict_schema())))
        .await
        .unwrap();
    assert_eq!(answered.output, json!({ "ok": true }));
    assert_eq!(answered.usage.unwrap()["total_tokens"], 36);
    let limited = model.complete(request(None)).await.unwrap_err();
    assert!(limited.is_transient());
    assert_eq!(limited.retry_after_ms, Some(2_000));
    let denied = model.complete(request(None)).await.unwrap_err();
    assert!(!denied.is_transient() && denied.message.contains("check the API key"));

    let seen = server.seen();
    assert_eq!(seen[0].path, "/v1/responses");
    assert_eq!(header(&seen[0], "authorization"), Some("Bearer sk-o"));
    assert_eq!(header(&seen[0], "idempotency-key"), Some("t:1:0"));
    let body = &seen[0].body;
    assert_eq!(body["input"], "Is this good?");
    assert!(body["instructions"]
        .as_str()
        .unwrap()
        .starts_with("Be brief."));
    assert_eq!(body["text"]["format"]["type"], "json_schema");
    assert_eq!(body["text"]["format"]["name"], "Verdict");
    assert_eq!(body["text"]["format"]["schema"], verdict_schema());
}

struct Judge;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Verdict {
    ok: bool,
}

fn judge<'a>(_: &'a Judge, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let verdict: Verdict = ctx
            .llm("critic")
            .run(input.message().joined_texts())
            .await?;
        ctx.complete(format!("ok: {}", verdict.ok), vec![])
    })
}

static JUDGE: &[Step<Judge>] = &[Step::new("judge", judge).start().takes_user_message()];

/// Through the engine, with the model chosen by a spec as the CLI's `RADKIT_LLM_<NAME>` does: an
/// overloaded answer (529) is retried after its hint, and the receipt keeps the usage.
#[test(multi_thread)]
async fn a_model_from_a_spec_is_retried_when_overloaded_and_its_receipt_keeps_the_usage() {
    let (url, server) = serve(vec![
        (
            529,
            vec![("retry-after", "0")],
            json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } }),
        ),
        ok(json!({
            "type": "message", "content": [{ "type": "tool_use", "name": "Verdict", "input": { "ok": true } }],
            "stop_reason": "tool_use", "usage": { "input_tokens": 3, "output_tokens": 2 }
        })),
    ])
    .await;
    let vars = move |name: &str| match name {
        "ANTHROPIC_API_KEY" => Some("sk-ant".to_owned()),
        "ANTHROPIC_BASE_URL" => Some(url.clone()),
        _ => None,
    };
    let model = from_spec("anthropic:claude-x", &vars).unwrap();
    let engine = Engine::builder(MemoryStore::new())
        .without_registered_skills()
        .skill(StepTable::new(SkillInfo::new("judge", "Judge"), Judge, JUDGE).unwrap())
        .effects(Effects::new().model("critic", model))
        .start()
        .await
        .unwrap();
    let task = engine
        .send(Request::operator(Message::user_text("a haiku")))
        .await
        .unwrap();
    let done = tokio::time::timeout(
        Duration::from_secs(20),
        engine.wait_settled(&Caller::Operator, &task),
    )
    .await
    .expect("settles")
    .unwrap();
    assert_eq!(done.status.state, TaskState::Completed, "{done:?}");
    let journal = engine.journal(&Caller::Operator, &task).await.unwrap();
    let failed = journal
        .iter()
        .filter(|r| matches!(r.entry, Entry::AttemptFailed { .. }))
        .count();
    assert_eq!(failed, 1, "the overloaded answer was one failed attempt");
    let usage = journal.iter().find_map(|r| match &r.entry {
        Entry::ReceiptRecorded { receipt } => receipt.usage.clone(),
        _ => None,
    });
    assert_eq!(
        usage,
        Some(json!({ "input_tokens": 3, "output_tokens": 2 }))
    );
    assert_eq!(server.seen().len(), 2);
}

/// Asks its model with the `lookup` and `broken` tools offered, and completes with the answer.
struct Asker;

fn ask<'a>(_: &'a Asker, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let answer: String = ctx
            .llm("agent")
            .tools(["lookup", "broken"])
            .run(input.message().joined_texts())
            .await?;
        ctx.complete(answer, vec![])
    })
}

static ASKER: &[Step<Asker>] = &[Step::new("ask", ask).start().takes_user_message()];

/// `lookup` counts its calls and echoes its query; `broken` always fails (permanently).
fn tool_effects(model: impl Model, lookups: Arc<std::sync::atomic::AtomicU32>) -> Effects {
    let lookup = radkit_runtime::tools::FnTool::new(
        radkit_runtime::flow::EffectPolicy::Idempotent,
        move |args, _| {
            let lookups = lookups.clone();
            async move {
                lookups.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(json!({ "found": args["q"] }))
            }
        },
    );
    let broken = radkit_runtime::tools::FnTool::new(
        radkit_runtime::flow::EffectPolicy::Idempotent,
        |_, _| async {
            Err(radkit_runtime::flow::EffectError::permanent(
                "the index is down",
            ))
        },
    );
    let schema =
        json!({ "type": "object", "properties": { "q": { "type": "string" } }, "required": ["q"] });
    Effects::new()
        .model("agent", model)
        .tool("lookup", lookup)
        .describe("lookup", "Look a term up.", schema.clone())
        .tool("broken", broken)
        .describe("broken", "A tool that fails.", schema)
}

fn asker(effects: Effects, store: MemoryStore) -> radkit_runtime::engine::EngineBuilder {
    Engine::builder(store)
        .without_registered_skills()
        .skill(StepTable::new(SkillInfo::new("asker", "Asker"), Asker, ASKER).unwrap())
        .effects(effects)
}

async fn settled(
    engine: &Engine,
    task: &radkit_runtime::model::TaskId,
) -> radkit_runtime::model::Task {
    tokio::time::timeout(
        Duration::from_secs(20),
        engine.wait_settled(&Caller::Operator, task),
    )
    .await
    .expect("settles")
    .unwrap()
}

/// OpenAI Chat Completions: the model asks for two tools, then answers. Each round is one `llm`
/// command and each call one `tool` command, with ids in that order; the failed call is told to the
/// model; the second request carries the calls and their results as the API wants them.
#[test(multi_thread)]
async fn a_model_calls_tools_each_call_its_own_journaled_command_and_a_failure_is_told_to_it() {
    let (url, server) = serve(vec![
        ok(json!({ "choices": [{ "message": { "role": "assistant", "content": null, "tool_calls": [
            { "id": "call_a", "type": "function", "function": { "name": "lookup", "arguments": "{\"q\":\"otters\"}" } },
            { "id": "call_b", "type": "function", "function": { "name": "broken", "arguments": "{\"q\":\"x\"}" } }
        ] }, "finish_reason": "tool_calls" }], "usage": { "total_tokens": 10 } })),
        ok(json!({ "choices": [{ "message": { "role": "assistant", "content": "Otters hold hands." }, "finish_reason": "stop" }] })),
    ])
    .await;
    let lookups = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let model = OpenAiModel::new(format!("{url}/v1"), "gpt-x");
    let engine = asker(tool_effects(model, lookups.clone()), MemoryStore::new())
        .start()
        .await
        .unwrap();
    let task = engine
        .send(Request::operator(Message::user_text(
            "tell me about otters",
        )))
        .await
        .unwrap();
    let done = settled(&engine, &task).await;
    assert_eq!(
        done.status.message.map(|m| m.joined_texts()).as_deref(),
        Some("Otters hold hands.")
    );
    assert_eq!(lookups.load(std::sync::atomic::Ordering::SeqCst), 1);
    let journal = engine.journal(&Caller::Operator, &task).await.unwrap();
    let issued: Vec<(String, String)> = journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::CommandIssued { id, cmd, .. } => Some((id.to_string(), cmd.kind.fingerprint())),
            _ => None,
        })
        .collect();
    let ids: Vec<String> = (0..4).map(|i| format!("{task}:1:{i}")).collect();
    assert_eq!(
        issued,
        vec![
            (ids[0].clone(), "llm `agent`".to_owned()),
            (ids[1].clone(), "tool `lookup`".to_owned()),
            (ids[2].clone(), "tool `broken`".to_owned()),
            (ids[3].clone(), "llm `agent`".to_owned()),
        ]
    );
    let seen = server.seen();
    let first = &seen[0].body;
    assert_eq!(first["tools"][0]["function"]["name"], "lookup");
    assert_eq!(
        first["tools"][0]["function"]["description"],
        "Look a term up."
    );
    let messages = seen[1].body["messages"].as_array().unwrap().clone();
    let n = messages.len();
    assert_eq!(messages[n - 3]["tool_calls"][0]["id"], "call_a");
    assert_eq!(
        messages[n - 2],
        json!({ "role": "tool", "tool_call_id": "call_a", "content": "{\"found\":\"otters\"}" })
    );
    assert_eq!(messages[n - 1]["tool_call_id"], "call_b");
    assert!(messages[n - 1]["content"]
        .as_str()
        .unwrap()
        .contains("the index is down"));
}

/// A crash after a tool's receipt is written: the restarted engine does not call the tool again,
/// and the model's next round gets the journaled result.
#[test(multi_thread)]
async fn crash_after_a_tool_calls_receipt_does_not_call_the_tool_again() {
    let replies = || {
        vec![
            ok(json!({ "type": "message", "content": [
                { "type": "text", "text": "Let me look." },
                { "type": "tool_use", "id": "toolu_1", "name": "lookup", "input": { "q": "otters" } }
            ], "stop_reason": "tool_use", "usage": { "input_tokens": 1, "output_tokens": 1 } })),
            ok(
                json!({ "type": "message", "content": [{ "type": "text", "text": "Found them." }],
                "stop_reason": "end_turn", "usage": { "input_tokens": 2, "output_tokens": 2 } }),
            ),
        ]
    };
    let (url, _) = serve(replies()).await;
    let store = MemoryStore::new();
    let lookups = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let fired = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let crash = {
        let fired = fired.clone();
        move |f: &radkit_runtime::engine::Fault| {
            f.boundary == radkit_runtime::engine::Boundary::ReceiptWritten
                && f.what.as_deref().is_some_and(|w| w.contains("lookup"))
                && !fired.swap(true, std::sync::atomic::Ordering::SeqCst)
        }
    };
    let engine = asker(
        tool_effects(
            AnthropicModel::new("claude-x").base_url(&url),
            lookups.clone(),
        ),
        store.clone(),
    )
    .fault_hook(crash)
    .start()
    .await
    .unwrap();
    let task = engine
        .send(Request::operator(Message::user_text("otters?")))
        .await
        .unwrap();
    common::wait_halted(&engine).await;
    drop(engine);
    assert_eq!(lookups.load(std::sync::atomic::Ordering::SeqCst), 1);

    // The restarted engine's model server answers the second round only.
    let (url, server) = serve(replies().split_off(1)).await;
    let engine = asker(
        tool_effects(
            AnthropicModel::new("claude-x").base_url(&url),
            lookups.clone(),
        ),
        store,
    )
    .start()
    .await
    .unwrap();
    let done = settled(&engine, &task).await;
    assert_eq!(
        done.status.message.map(|m| m.joined_texts()).as_deref(),
        Some("Found them.")
    );
    assert_eq!(
        lookups.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the tool ran once"
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let messages = seen[0].body["messages"].as_array().unwrap();
    assert_eq!(
        messages[1]["content"][0],
        json!({ "type": "text", "text": "Let me look." })
    );
    assert_eq!(messages[1]["content"][1]["type"], "tool_use");
    assert_eq!(
        messages[2]["content"][0],
        json!({ "type": "tool_result", "tool_use_id": "toolu_1", "content": "{\"found\":\"otters\"}", "is_error": false })
    );
}

/// Gemini, Ollama and OpenAI Responses render the offered tools and an earlier round their own way
/// and read the calls they answer with; a dotted MCP-style name travels sanitized and comes back.
#[test(multi_thread)]
async fn gemini_ollama_and_responses_speak_tool_calls_in_their_own_wire_shapes() {
    use radkit_runtime::flow::{ToolCallRequest, Turn};
    use radkit_runtime::tools::ToolSchema;
    let tool = ToolSchema {
        name: "notes.read".into(),
        description: Some("Read a note.".into()),
        input_schema: json!({ "type": "object" }),
    };
    let turns = vec![
        Turn::Calls {
            calls: vec![ToolCallRequest {
                id: "c1".into(),
                name: "notes.read".into(),
                arguments: json!({ "id": 1 }),
            }],
            text: String::new(),
        },
        Turn::Result {
            id: "c1".into(),
            name: "notes.read".into(),
            output: json!("milk"),
            error: false,
        },
    ];
    let request = || {
        let mut r = request(None);
        r.tools = vec![tool.clone()];
        r.turns = turns.clone();
        r
    };
    let (url, server) = serve(vec![
        ok(json!({ "candidates": [{ "content": { "role": "model", "parts": [
            { "functionCall": { "name": "notes_read", "args": { "id": 2 } } }] }, "finishReason": "STOP" }] })),
        ok(json!({ "message": { "role": "assistant", "content": "", "tool_calls": [
            { "function": { "name": "notes_read", "arguments": { "id": 3 } } }] }, "done": true })),
        ok(json!({ "status": "completed", "output": [
            { "type": "function_call", "call_id": "fc_9", "name": "notes_read", "arguments": "{\"id\":4}" }] })),
    ])
    .await;
    let gemini = GeminiModel::new("g")
        .base_url(&url)
        .complete(request())
        .await
        .unwrap();
    assert_eq!(gemini.tool_calls[0].name, "notes.read");
    assert_eq!(gemini.tool_calls[0].arguments, json!({ "id": 2 }));
    let ollama = OllamaModel::new("o")
        .base_url(&url)
        .complete(request())
        .await
        .unwrap();
    assert_eq!(
        (
            ollama.tool_calls[0].id.as_str(),
            ollama.tool_calls[0].name.as_str()
        ),
        ("call-0", "notes.read")
    );
    let responses = OpenAiModel::new(format!("{url}/v1"), "r")
        .responses()
        .complete(request())
        .await
        .unwrap();
    assert_eq!(responses.tool_calls[0].id, "fc_9");
    assert_eq!(responses.tool_calls[0].arguments, json!({ "id": 4 }));

    let seen = server.seen();
    let g = &seen[0].body;
    assert_eq!(
        g["tools"][0]["functionDeclarations"][0]["name"],
        "notes_read"
    );
    assert_eq!(
        g["contents"][1]["parts"][0]["functionCall"]["name"],
        "notes_read"
    );
    assert_eq!(
        g["contents"][2]["parts"][0]["functionResponse"]["response"]["output"],
        "milk"
    );
    let o = &seen[1].body;
    assert_eq!(o["tools"][0]["function"]["name"], "notes_read");
    assert_eq!(
        o["messages"][2],
        json!({ "role": "tool", "tool_name": "notes_read", "content": "milk" })
    );
    let r = &seen[2].body;
    assert_eq!(r["tools"][0]["name"], "notes_read");
    assert_eq!(r["input"][1]["type"], "function_call");
    assert_eq!(
        r["input"][2],
        json!({ "type": "function_call_output", "call_id": "c1", "output": "milk" })
    );
}

// ---- Streamed calls (`Model::stream`), each wire shape as its provider documents it ----

/// A request offering the `lookup` tool.
fn tool_request() -> LlmRequest {
    let mut r = request(None);
    r.tools = vec![radkit_runtime::tools::ToolSchema {
        name: "notes.lookup".into(),
        description: Some("Look a term up.".into()),
        input_schema: json!({ "type": "object", "properties": { "q": { "type": "string" } } }),
    }];
    r
}

/// OpenAI Chat Completions' stream (the API reference's chunk objects), answering "Hello there".
const CHAT_TEXT: &str = r#"data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}

data: [DONE]

"#;

#[test(multi_thread)]
async fn openai_chat_stream_sends_each_content_delta_and_returns_what_complete_would() {
    let structured = r#"data: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"{\"ok\":"},"finish_reason":null}]}

data: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"true}"},"finish_reason":null}]}

data: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: {"id":"c2","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":4,"total_tokens":24}}

data: [DONE]

"#;
    let (url, server) = serve(vec![
        sse(CHAT_TEXT),
        ok(json!({ "id": "chatcmpl-123", "object": "chat.completion", "choices": [{ "index": 0,
            "message": { "role": "assistant", "content": "Hello there", "refusal": null }, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11 } }))
        .into(),
        sse(structured),
    ])
    .await;
    let model = OpenAiModel::new(format!("{url}/v1"), "gpt-4o-mini").api_key("sk-o");
    let (live, kept) = tokens();
    let streamed = model.stream(request(None), &live).await.unwrap();
    assert_eq!(pieces(&kept), ["Hello", " there"]);
    assert_eq!(streamed.output, json!("Hello there"));
    assert_eq!(pieces(&kept).concat(), "Hello there");
    assert_eq!(
        streamed.usage,
        Some(json!({ "prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11 }))
    );
    assert_eq!(streamed, model.complete(request(None)).await.unwrap());

    let (live, kept) = tokens();
    let answer = model
        .stream(request(Some(verdict_schema())), &live)
        .await
        .unwrap();
    assert_eq!(answer.output, json!({ "ok": true }));
    assert_eq!(pieces(&kept).concat(), r#"{"ok":true}"#);

    let seen = server.seen();
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(header(&seen[0], "authorization"), Some("Bearer sk-o"));
    assert_eq!(seen[0].body["stream"], true);
    assert_eq!(
        seen[0].body["stream_options"],
        json!({ "include_usage": true })
    );
    assert!(
        seen[1].body.get("stream").is_none(),
        "complete does not stream"
    );
    assert_eq!(
        seen[2].body["response_format"]["json_schema"]["schema"],
        verdict_schema()
    );
}

#[test(multi_thread)]
async fn openai_chat_stream_joins_tool_call_fragments_into_the_calls_complete_returns() {
    let stream = r#"data: {"id":"chatcmpl-9","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"notes_lookup","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-9","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\""}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-9","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"q\":\"ot"}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-9","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"notes_lookup","arguments":""}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-9","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ters\"}"}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-9","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"q\":\"seals\"}"}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-9","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}

data: {"id":"chatcmpl-9","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42}}

data: [DONE]

"#;
    let (url, _server) = serve(vec![
        sse(stream),
        ok(json!({ "choices": [{ "index": 0, "message": { "role": "assistant", "content": null, "tool_calls": [
            { "id": "call_DdmO9pD3xa9XTPNJ32zg2hcA", "type": "function", "function": { "name": "notes_lookup", "arguments": "{\"q\":\"otters\"}" } },
            { "id": "call_b", "type": "function", "function": { "name": "notes_lookup", "arguments": "{\"q\":\"seals\"}" } }
        ] }, "finish_reason": "tool_calls" }], "usage": { "prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42 } }))
        .into(),
    ])
    .await;
    let model = OpenAiModel::new(format!("{url}/v1"), "gpt-x");
    let (live, kept) = tokens();
    let streamed = model.stream(tool_request(), &live).await.unwrap();
    assert!(pieces(&kept).is_empty(), "arguments are not answer text");
    assert_eq!(streamed.tool_calls.len(), 2);
    assert_eq!(streamed.tool_calls[0].name, "notes.lookup");
    assert_eq!(streamed.tool_calls[0].arguments, json!({ "q": "otters" }));
    assert_eq!(streamed, model.complete(tool_request()).await.unwrap());
}

#[test(multi_thread)]
async fn openai_chat_stream_cut_before_done_is_transient_and_the_sent_tokens_stay_sent() {
    let (url, _server) = serve(vec![
        cut(sse(CHAT_TEXT), r#"data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{},"#),
        ended(sse(CHAT_TEXT), "data: [DONE]"),
    ])
    .await;
    let model = OpenAiModel::new(format!("{url}/v1"), "gpt-x");
    let (live, kept) = tokens();
    let broken = model.stream(request(None), &live).await.unwrap_err();
    assert!(broken.is_transient(), "{broken:?}");
    assert_eq!(pieces(&kept), ["Hello", " there"]);
    let (live, kept) = tokens();
    let short = model.stream(request(None), &live).await.unwrap_err();
    assert!(
        short.is_transient() && short.message.contains("[DONE]"),
        "{short:?}"
    );
    assert_eq!(pieces(&kept), ["Hello", " there"]);
}

/// The Responses API's stream (the streaming guide's events), answering `text` in two deltas.
fn responses_text(first: &str, second: &str, usage: Value) -> String {
    let text = format!("{first}{second}");
    let item = json!({ "id": "msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654", "type": "message",
        "status": "completed", "role": "assistant",
        "content": [{ "type": "output_text", "text": text, "annotations": [] }] });
    let events = [
        json!({ "type": "response.created", "sequence_number": 0, "response": { "id": "resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654",
            "object": "response", "created_at": 1741290958, "status": "in_progress", "error": null, "output": [], "usage": null } }),
        json!({ "type": "response.in_progress", "sequence_number": 1, "response": { "id": "resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654",
            "object": "response", "created_at": 1741290958, "status": "in_progress", "error": null, "output": [], "usage": null } }),
        json!({ "type": "response.output_item.added", "sequence_number": 2, "output_index": 0,
            "item": { "id": "msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654", "type": "message", "status": "in_progress", "role": "assistant", "content": [] } }),
        json!({ "type": "response.content_part.added", "sequence_number": 3, "item_id": "msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654",
            "output_index": 0, "content_index": 0, "part": { "type": "output_text", "text": "", "annotations": [] } }),
        json!({ "type": "response.output_text.delta", "sequence_number": 4, "item_id": "msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654",
            "output_index": 0, "content_index": 0, "delta": first }),
        json!({ "type": "response.output_text.delta", "sequence_number": 5, "item_id": "msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654",
            "output_index": 0, "content_index": 0, "delta": second }),
        json!({ "type": "response.output_text.done", "sequence_number": 6, "item_id": "msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654",
            "output_index": 0, "content_index": 0, "text": text }),
        json!({ "type": "response.content_part.done", "sequence_number": 7, "item_id": "msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654",
            "output_index": 0, "content_index": 0, "part": { "type": "output_text", "text": text, "annotations": [] } }),
        json!({ "type": "response.output_item.done", "sequence_number": 8, "output_index": 0, "item": item }),
        json!({ "type": "response.completed", "sequence_number": 9, "response": { "id": "resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654",
            "object": "response", "created_at": 1741290958, "status": "completed", "error": null, "output": [item], "usage": usage } }),
    ];
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

#[test(multi_thread)]
async fn openai_responses_stream_sends_output_text_deltas_and_reads_response_completed() {
    let usage = json!({ "input_tokens": 37, "output_tokens": 11, "output_tokens_details": { "reasoning_tokens": 0 }, "total_tokens": 48 });
    let calls = r#"event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"type":"function_call","id":"fc_12345xyz","call_id":"call_12345xyz","name":"notes_lookup","arguments":""}}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_12345xyz","output_index":0,"delta":"{\"q\":\"ot"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":4,"item_id":"fc_12345xyz","output_index":0,"delta":"ters\"}"}

event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","sequence_number":5,"item_id":"fc_12345xyz","output_index":0,"arguments":"{\"q\":\"otters\"}"}

event: response.completed
data: {"type":"response.completed","sequence_number":6,"response":{"id":"resp_2","object":"response","status":"completed","error":null,"output":[{"type":"function_call","id":"fc_12345xyz","call_id":"call_12345xyz","name":"notes_lookup","arguments":"{\"q\":\"otters\"}","status":"completed"}],"usage":{"input_tokens":50,"output_tokens":9,"total_tokens":59}}}

"#;
    let (url, server) = serve(vec![
        sse(&responses_text("Hi there!", " How can I help?", usage.clone())),
        sse(&responses_text("{\"ok\":", "false}", json!({ "total_tokens": 5 }))),
        sse(calls),
        ok(json!({ "status": "completed", "output": [{ "type": "function_call", "id": "fc_12345xyz",
            "call_id": "call_12345xyz", "name": "notes_lookup", "arguments": "{\"q\":\"otters\"}", "status": "completed" }],
            "usage": { "input_tokens": 50, "output_tokens": 9, "total_tokens": 59 } }))
        .into(),
    ])
    .await;
    let model = OpenAiModel::new(format!("{url}/v1"), "gpt-5-mini")
        .api_key("sk-o")
        .responses();
    let (live, kept) = tokens();
    let text = model.stream(request(None), &live).await.unwrap();
    assert_eq!(pieces(&kept), ["Hi there!", " How can I help?"]);
    assert_eq!(text.output, json!("Hi there! How can I help?"));
    assert_eq!(text.usage, Some(usage));
    let (live, kept) = tokens();
    let structured = model
        .stream(request(Some(verdict_schema())), &live)
        .await
        .unwrap();
    assert_eq!(structured.output, json!({ "ok": false }));
    assert_eq!(pieces(&kept).concat(), "{\"ok\":false}");
    let (live, kept) = tokens();
    let called = model.stream(tool_request(), &live).await.unwrap();
    assert!(pieces(&kept).is_empty());
    assert_eq!(called.tool_calls[0].id, "call_12345xyz");
    assert_eq!(called.tool_calls[0].name, "notes.lookup");
    assert_eq!(called, model.complete(tool_request()).await.unwrap());

    let seen = server.seen();
    assert_eq!(seen[0].path, "/v1/responses");
    assert_eq!(seen[0].body["stream"], true);
    assert!(seen[0].body.get("stream_options").is_none());
    assert_eq!(seen[1].body["text"]["format"]["schema"], verdict_schema());
}

#[test(multi_thread)]
async fn openai_responses_stream_failed_or_cut_before_response_completed_is_classified() {
    let failed = r#"event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_3","object":"response","status":"in_progress","output":[]}}

event: response.failed
data: {"type":"response.failed","sequence_number":1,"response":{"id":"resp_3","object":"response","status":"failed","error":{"code":"server_error","message":"The model failed to generate a response."},"output":[]}}

"#;
    let invalid = r#"event: error
data: {"type":"error","code":"invalid_prompt","message":"Invalid prompt.","param":null,"sequence_number":1}

"#;
    let (url, _server) = serve(vec![
        sse(failed),
        sse(invalid),
        ended(
            sse(&responses_text("Hi", " there", json!({}))),
            "event: response.completed",
        ),
    ])
    .await;
    let model = OpenAiModel::new(format!("{url}/v1"), "r").responses();
    let server_error = model
        .stream(request(None), &Tokens::none())
        .await
        .unwrap_err();
    assert!(
        server_error.is_transient() && server_error.message.contains("server_error"),
        "{server_error:?}"
    );
    let invalid = model
        .stream(request(None), &Tokens::none())
        .await
        .unwrap_err();
    assert!(!invalid.is_transient(), "{invalid:?}");
    let (live, kept) = tokens();
    let short = model.stream(request(None), &live).await.unwrap_err();
    assert!(
        short.is_transient() && short.message.contains("response.completed"),
        "{short:?}"
    );
    assert_eq!(pieces(&kept), ["Hi", " there"]);
}

/// Anthropic's stream (the streaming guide's basic example), answering "Hello!".
const ANTHROPIC_TEXT: &str = r#"event: message_start
data: {"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant", "content": [], "model": "claude-opus-4-6", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}

event: content_block_start
data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 0}

event: message_delta
data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence":null}, "usage": {"output_tokens": 15}}

event: message_stop
data: {"type": "message_stop"}

"#;

#[test(multi_thread)]
async fn anthropic_stream_sends_text_deltas_and_reassembles_the_message() {
    let (url, server) = serve(vec![
        sse(ANTHROPIC_TEXT),
        ok(json!({ "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-opus-4-6",
            "content": [{ "type": "text", "text": "Hello!" }], "stop_reason": "end_turn", "stop_sequence": null,
            "usage": { "input_tokens": 25, "output_tokens": 15 } }))
        .into(),
    ])
    .await;
    let model = AnthropicModel::new("claude-opus-4-6")
        .base_url(&url)
        .api_key("sk-ant");
    let (live, kept) = tokens();
    let streamed = model.stream(request(None), &live).await.unwrap();
    assert_eq!(pieces(&kept), ["Hello", "!"]);
    assert_eq!(streamed.output, json!("Hello!"));
    assert_eq!(
        streamed.usage,
        Some(json!({ "input_tokens": 25, "output_tokens": 15 }))
    );
    assert_eq!(streamed, model.complete(request(None)).await.unwrap());
    let seen = server.seen();
    assert_eq!(seen[0].path, "/v1/messages");
    assert_eq!(seen[0].body["stream"], true);
    assert_eq!(header(&seen[0], "x-api-key"), Some("sk-ant"));
}

#[test(multi_thread)]
async fn anthropic_stream_tool_use_and_a_structured_answer_read_as_complete_reads_them() {
    let tool_use = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-opus-4-6","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2},"content":[],"stop_reason":null}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me look."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"notes_lookup","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"q\": \"ot"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"ters\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"#;
    let structured = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-opus-4-6","stop_sequence":null,"usage":{"input_tokens":40,"output_tokens":1},"content":[],"stop_reason":null}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_2","name":"Verdict","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"ok\": "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"true}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":7}}

event: message_stop
data: {"type":"message_stop"}

"#;
    let (url, _server) = serve(vec![
        sse(tool_use),
        ok(json!({ "id": "msg_014p7gG3wDgGV9EUtLvnow3U", "type": "message", "role": "assistant", "model": "claude-opus-4-6",
            "content": [{ "type": "text", "text": "Let me look." },
                { "type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "notes_lookup", "input": { "q": "otters" } }],
            "stop_reason": "tool_use", "stop_sequence": null, "usage": { "input_tokens": 472, "output_tokens": 89 } }))
        .into(),
        sse(structured),
    ])
    .await;
    let model = AnthropicModel::new("claude-opus-4-6").base_url(&url);
    let (live, kept) = tokens();
    let streamed = model.stream(tool_request(), &live).await.unwrap();
    assert_eq!(
        pieces(&kept),
        ["Let me look."],
        "a tool's arguments are not sent"
    );
    assert_eq!(streamed.tool_calls[0].name, "notes.lookup");
    assert_eq!(streamed.tool_calls[0].arguments, json!({ "q": "otters" }));
    assert_eq!(streamed, model.complete(tool_request()).await.unwrap());

    // The answer tool's input is the structured answer: its JSON pieces are its text.
    let (live, kept) = tokens();
    let answer = model
        .stream(request(Some(verdict_schema())), &live)
        .await
        .unwrap();
    assert_eq!(answer.output, json!({ "ok": true }));
    assert_eq!(pieces(&kept).concat(), "{\"ok\": true}");
    assert_eq!(
        answer.usage,
        Some(json!({ "input_tokens": 40, "output_tokens": 7 }))
    );
}

#[test(multi_thread)]
async fn anthropic_stream_overloaded_error_event_is_transient() {
    let overloaded = ANTHROPIC_TEXT.replace(
        "event: content_block_stop",
        "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\nevent: content_block_stop",
    );
    let denied = r#"event: error
data: {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}

"#;
    let (url, _server) = serve(vec![sse(&overloaded), sse(denied)]).await;
    let model = AnthropicModel::new("claude-x").base_url(&url);
    let (live, kept) = tokens();
    let busy = model.stream(request(None), &live).await.unwrap_err();
    assert!(
        busy.is_transient() && busy.message.contains("overloaded_error"),
        "{busy:?}"
    );
    assert_eq!(pieces(&kept), ["Hello", "!"]);
    let denied = model
        .stream(request(None), &Tokens::none())
        .await
        .unwrap_err();
    assert!(
        !denied.is_transient() && denied.message.contains("check the API key"),
        "{denied:?}"
    );
}

#[test(multi_thread)]
async fn anthropic_stream_cut_before_message_stop_is_transient() {
    let (url, _server) = serve(vec![
        cut(sse(ANTHROPIC_TEXT), "event: content_block_stop"),
        ended(sse(ANTHROPIC_TEXT), "event: message_stop"),
    ])
    .await;
    let model = AnthropicModel::new("claude-x").base_url(&url);
    let (live, kept) = tokens();
    let broken = model.stream(request(None), &live).await.unwrap_err();
    assert!(broken.is_transient(), "{broken:?}");
    assert_eq!(pieces(&kept), ["Hello", "!"]);
    let short = model
        .stream(request(None), &Tokens::none())
        .await
        .unwrap_err();
    assert!(
        short.is_transient() && short.message.contains("message_stop"),
        "{short:?}"
    );
}

/// Gemini's stream with `alt=sse` (the API reference's chunks, Google's `\r\n` line endings).
fn gemini_chunks(chunks: &[Value]) -> String {
    chunks
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect()
}

fn gemini_text() -> String {
    gemini_chunks(&[
        json!({ "candidates": [{ "content": { "parts": [{ "text": "Once" }], "role": "model" }, "index": 0 }],
            "usageMetadata": { "promptTokenCount": 8, "totalTokenCount": 8 }, "modelVersion": "gemini-2.5-flash" }),
        json!({ "candidates": [{ "content": { "parts": [{ "text": " upon a time" }], "role": "model" }, "index": 0 }],
            "usageMetadata": { "promptTokenCount": 8, "totalTokenCount": 8 }, "modelVersion": "gemini-2.5-flash" }),
        json!({ "candidates": [{ "content": { "parts": [{ "text": "." }], "role": "model" }, "finishReason": "STOP", "index": 0 }],
            "usageMetadata": { "promptTokenCount": 8, "candidatesTokenCount": 5, "totalTokenCount": 13 }, "modelVersion": "gemini-2.5-flash" }),
    ])
}

#[test(multi_thread)]
async fn gemini_stream_uses_stream_generate_content_with_alt_sse_and_reads_its_chunks() {
    let call = gemini_chunks(&[
        json!({ "candidates": [{ "content": { "parts": [{ "functionCall": { "name": "notes_lookup", "args": { "q": "otters" } } }],
            "role": "model" }, "finishReason": "STOP", "index": 0 }],
            "usageMetadata": { "promptTokenCount": 30, "candidatesTokenCount": 6, "totalTokenCount": 36 } }),
    ]);
    let structured = gemini_chunks(&[
        json!({ "candidates": [{ "content": { "parts": [{ "text": "{\"ok\": " }], "role": "model" }, "index": 0 }] }),
        json!({ "candidates": [{ "content": { "parts": [{ "text": "false}" }], "role": "model" }, "finishReason": "STOP", "index": 0 }],
            "usageMetadata": { "promptTokenCount": 12, "candidatesTokenCount": 4, "totalTokenCount": 16 } }),
    ]);
    let (url, server) = serve(vec![
        sse(&gemini_text()),
        sse(&call),
        ok(json!({ "candidates": [{ "content": { "parts": [{ "functionCall": { "name": "notes_lookup", "args": { "q": "otters" } } }],
            "role": "model" }, "finishReason": "STOP", "index": 0 }],
            "usageMetadata": { "promptTokenCount": 30, "candidatesTokenCount": 6, "totalTokenCount": 36 } }))
        .into(),
        sse(&structured),
    ])
    .await;
    let model = GeminiModel::new("gemini-2.5-flash")
        .base_url(&url)
        .api_key("AIza");
    let (live, kept) = tokens();
    let text = model.stream(request(None), &live).await.unwrap();
    assert_eq!(pieces(&kept), ["Once", " upon a time", "."]);
    assert_eq!(text.output, json!("Once upon a time."));
    assert_eq!(text.usage.unwrap()["totalTokenCount"], 13);
    let (live, kept) = tokens();
    let called = model.stream(tool_request(), &live).await.unwrap();
    assert!(pieces(&kept).is_empty());
    assert_eq!(called.tool_calls[0].name, "notes.lookup");
    assert_eq!(called, model.complete(tool_request()).await.unwrap());
    let answer = model
        .stream(request(Some(verdict_schema())), &Tokens::none())
        .await
        .unwrap();
    assert_eq!(answer.output, json!({ "ok": false }));

    let seen = server.seen();
    assert_eq!(
        seen[0].path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    );
    assert_eq!(seen[0].query.as_deref(), Some("alt=sse"));
    assert_eq!(header(&seen[0], "x-goog-api-key"), Some("AIza"));
    assert_eq!(
        seen[2].path,
        "/v1beta/models/gemini-2.5-flash:generateContent"
    );
}

#[test(multi_thread)]
async fn gemini_stream_ending_or_cut_before_a_finish_reason_is_transient() {
    let text = gemini_text();
    let last = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\".\"}]";
    let (url, _server) = serve(vec![ended(sse(&text), last), cut(sse(&text), last)]).await;
    let model = GeminiModel::new("g").base_url(&url);
    for _ in 0..2 {
        let (live, kept) = tokens();
        let short = model.stream(request(None), &live).await.unwrap_err();
        assert!(short.is_transient(), "{short:?}");
        assert_eq!(pieces(&kept), ["Once", " upon a time"]);
    }
}

/// Ollama's stream (the API docs' NDJSON lines), answering "The sky is blue.".
const OLLAMA_TEXT: &str = r#"{"model":"llama3.2","created_at":"2023-08-04T08:52:19.385406455-07:00","message":{"role":"assistant","content":"The","images":null},"done":false}
{"model":"llama3.2","created_at":"2023-08-04T08:52:19.385406455-07:00","message":{"role":"assistant","content":" sky is","images":null},"done":false}
{"model":"llama3.2","created_at":"2023-08-04T08:52:19.385406455-07:00","message":{"role":"assistant","content":" blue.","images":null},"done":false}
{"model":"llama3.2","created_at":"2023-08-04T19:22:45.499127Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":4883583458,"load_duration":1334875,"prompt_eval_count":26,"prompt_eval_duration":342546000,"eval_count":282,"eval_duration":4535599000}
"#;

#[test(multi_thread)]
async fn ollama_stream_reads_ndjson_lines_to_the_answer_complete_gives() {
    let call = r#"{"model":"llama3.2","created_at":"2025-05-30T19:00:00Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"notes_lookup","arguments":{"q":"otters"}}}]},"done":false}
{"model":"llama3.2","created_at":"2025-05-30T19:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":40,"eval_count":12}"#;
    let structured = r#"{"model":"llama3.2","created_at":"2025-05-30T19:00:00Z","message":{"role":"assistant","content":"{\"ok\":"},"done":false}
{"model":"llama3.2","created_at":"2025-05-30T19:00:00Z","message":{"role":"assistant","content":"true}"},"done":false}
{"model":"llama3.2","created_at":"2025-05-30T19:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":20,"eval_count":5}
"#;
    let (url, server) = serve(vec![
        ndjson(OLLAMA_TEXT),
        ndjson(call),
        ok(json!({ "model": "llama3.2", "message": { "role": "assistant", "content": "",
            "tool_calls": [{ "function": { "name": "notes_lookup", "arguments": { "q": "otters" } } }] },
            "done": true, "done_reason": "stop", "prompt_eval_count": 40, "eval_count": 12 }))
        .into(),
        ndjson(structured),
    ])
    .await;
    let model = OllamaModel::new("llama3.2").base_url(&url);
    let (live, kept) = tokens();
    let text = model.stream(request(None), &live).await.unwrap();
    assert_eq!(pieces(&kept), ["The", " sky is", " blue."]);
    assert_eq!(text.output, json!("The sky is blue."));
    assert_eq!(
        text.usage,
        Some(json!({ "prompt_eval_count": 26, "eval_count": 282 }))
    );
    let called = model.stream(tool_request(), &Tokens::none()).await.unwrap();
    assert_eq!(called.tool_calls[0].name, "notes.lookup");
    assert_eq!(called, model.complete(tool_request()).await.unwrap());
    let (live, kept) = tokens();
    let answer = model
        .stream(request(Some(verdict_schema())), &live)
        .await
        .unwrap();
    assert_eq!(answer.output, json!({ "ok": true }));
    assert_eq!(pieces(&kept).concat(), "{\"ok\":true}");

    let seen = server.seen();
    assert_eq!(seen[0].path, "/api/chat");
    assert_eq!(seen[0].body["stream"], true);
    assert_eq!(seen[2].body["stream"], false);
    assert_eq!(seen[3].body["format"], verdict_schema());
}

#[test(multi_thread)]
async fn ollama_stream_cut_before_done_or_an_error_line_is_transient() {
    let error = r#"{"model":"llama3.2","created_at":"2023-08-04T08:52:19Z","message":{"role":"assistant","content":"The"},"done":false}
{"error":"an error was encountered while running the model: unexpected EOF"}
"#;
    let (url, _server) = serve(vec![
        cut(
            ndjson(OLLAMA_TEXT),
            r#"{"model":"llama3.2","created_at":"2023-08-04T19:22:45"#,
        ),
        ended(
            ndjson(OLLAMA_TEXT),
            r#"{"model":"llama3.2","created_at":"2023-08-04T19:22:45"#,
        ),
        ndjson(error),
    ])
    .await;
    let model = OllamaModel::new("llama3.2").base_url(&url);
    for _ in 0..2 {
        let (live, kept) = tokens();
        let short = model.stream(request(None), &live).await.unwrap_err();
        assert!(short.is_transient(), "{short:?}");
        assert_eq!(pieces(&kept), ["The", " sky is", " blue."]);
    }
    let failed = model
        .stream(request(None), &Tokens::none())
        .await
        .unwrap_err();
    assert!(
        failed.is_transient() && failed.message.contains("unexpected EOF"),
        "{failed:?}"
    );
}

/// Before any stream, a streamed request's status is classified as a whole one's: 429 transient
/// with its hint, 401 permanent; on every wire shape.
#[test(multi_thread)]
async fn every_streaming_request_refused_with_429_is_transient_with_its_hint_and_401_is_permanent()
{
    let refusals = || {
        vec![
            (
                429,
                vec![("retry-after", "3")],
                json!({ "error": { "message": "Rate limit reached", "type": "rate_limit_error" } }),
            ),
            (
                401,
                vec![],
                json!({ "error": { "message": "Incorrect API key provided" } }),
            ),
        ]
    };
    let (url, server) = serve((0..5).flat_map(|_| refusals()).collect::<Vec<_>>()).await;
    let models: Vec<Box<dyn Model>> = vec![
        Box::new(OpenAiModel::new(format!("{url}/v1"), "gpt-x")),
        Box::new(OpenAiModel::new(format!("{url}/v1"), "gpt-x").responses()),
        Box::new(AnthropicModel::new("claude-x").base_url(&url)),
        Box::new(GeminiModel::new("g").base_url(&url)),
        Box::new(OllamaModel::new("o").base_url(&url)),
    ];
    for model in &models {
        let (live, kept) = tokens();
        let limited = model.stream(request(None), &live).await.unwrap_err();
        assert!(limited.is_transient(), "{limited:?}");
        assert_eq!(limited.retry_after_ms, Some(3_000));
        let denied = model.stream(request(None), &live).await.unwrap_err();
        assert!(
            !denied.is_transient() && denied.message.contains("check the API key"),
            "{denied:?}"
        );
        assert!(pieces(&kept).is_empty());
    }
    let streamed: Vec<bool> = server
        .seen()
        .iter()
        .map(|s| s.body["stream"] == true)
        .collect();
    assert_eq!(
        streamed,
        [true, true, true, true, true, true, false, false, true, true]
    );
}

/// A streamed call's timeout bounds each silence, not the whole stream: a stream longer than the
/// timeout but never silent that long is read whole; one that goes silent is cut (transient).
#[test(multi_thread)]
async fn a_stream_longer_than_the_timeout_is_read_but_a_silent_one_is_cut() {
    let slow = paced(sse(CHAT_TEXT), Duration::from_millis(15), Duration::ZERO);
    let silent = paced(
        cut(sse(CHAT_TEXT), "data: [DONE]"),
        Duration::from_millis(1),
        Duration::from_secs(5),
    );
    let (url, _server) = serve(vec![slow, silent]).await;
    let model = OpenAiModel::new(format!("{url}/v1"), "gpt-x").timeout(Duration::from_millis(400));
    let started = std::time::Instant::now();
    let answer = model.stream(request(None), &Tokens::none()).await.unwrap();
    assert!(
        started.elapsed() > Duration::from_millis(400),
        "the stream outlasted the timeout"
    );
    assert_eq!(answer.output, json!("Hello there"));
    let (live, kept) = tokens();
    let silent = model.stream(request(None), &live).await.unwrap_err();
    assert!(
        silent.is_transient() && silent.message.contains("silent"),
        "{silent:?}"
    );
    assert_eq!(pieces(&kept), ["Hello", " there"]);
}

/// One SSE event over 1 MiB (or an NDJSON line) is refused, permanently, saying so.
#[test(multi_thread)]
async fn an_event_over_the_limit_is_refused_with_a_clear_error() {
    let huge = "x".repeat((1 << 20) + 10);
    let event =
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{huge}\"}}}}]}}\n\n");
    let line = format!(
        "{{\"message\":{{\"role\":\"assistant\",\"content\":\"{huge}\"}},\"done\":false}}\n"
    );
    let (url, _server) = serve(vec![sse(&event), ndjson(&line)]).await;
    let chat = OpenAiModel::new(format!("{url}/v1"), "gpt-x");
    let refused = chat
        .stream(request(None), &Tokens::none())
        .await
        .unwrap_err();
    assert!(
        !refused.is_transient() && refused.message.contains("limit"),
        "{refused:?}"
    );
    let ollama = OllamaModel::new("o").base_url(&url);
    let refused = ollama
        .stream(request(None), &Tokens::none())
        .await
        .unwrap_err();
    assert!(
        !refused.is_transient() && refused.message.contains("limit"),
        "{refused:?}"
    );
}
