//! The native providers (Anthropic Messages, Gemini generateContent, Ollama /api/chat, OpenAI
//! Responses) against a local server on loopback that answers with each provider's documented wire
//! shapes: the request each sends (path, auth header, where the schema goes), text and structured
//! answers, usage, a 429 with its retry hint (transient) and a 401 (permanent); and one run through
//! the engine, whose receipt keeps the usage.

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
    from_spec, AnthropicModel, GeminiModel, LlmRequest, Model, OllamaModel, OpenAiModel,
};
use radkit_runtime::model::{Message, TaskState};
use radkit_runtime::store::MemoryStore;
use serde_json::{json, Value};

type Reply = (u16, Vec<(&'static str, &'static str)>, Value);

/// What the server received: the path, the headers, the body.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: HeaderMap,
    body: Value,
}

#[derive(Clone, Default)]
struct Provider {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

async fn answer(
    State(p): State<Provider>,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> (StatusCode, HeaderMap, String) {
    p.seen.lock().unwrap().push(Seen {
        path: uri.path().to_owned(),
        headers,
        body: serde_json::from_str(&body).unwrap_or(Value::Null),
    });
    let (status, extra, body) =
        p.replies
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or((500, vec![], json!("no scripted reply")));
    let mut out = HeaderMap::new();
    out.insert("content-type", "application/json".parse().unwrap());
    for (k, v) in extra {
        out.insert(k, v.parse().unwrap());
    }
    (StatusCode::from_u16(status).unwrap(), out, body.to_string())
}

/// A server answering `replies` in order, at any path.
async fn serve(replies: Vec<Reply>) -> (String, Provider) {
    let provider = Provider {
        replies: Arc::new(Mutex::new(replies.into())),
        ..Provider::default()
    };
    let app = Router::new().fallback(answer).with_state(provider.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, provider)
}

fn ok(body: Value) -> Reply {
    (200, vec![], body)
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
