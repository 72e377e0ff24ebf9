//! The OpenAI-compatible client against a local chat-completions server on loopback: text and
//! structured answers, token usage on the receipt, 429 with Retry-After, 5xx, 4xx and malformed answers.

use radkit_runtime::engine::{Caller, Request};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::Engine;
use radkit_runtime::flow::step_table::{Step, StepInput, StepTable};
use radkit_runtime::flow::{ErrorKind, InvocationId, RetryPolicy, SkillInfo, StepCtx, StepResult};
use radkit_runtime::journal::Entry;
use radkit_runtime::llm::{LlmRequest, Model, OpenAiModel};
use radkit_runtime::model::{Message, TaskState};
use radkit_runtime::store::MemoryStore;
use serde_json::{json, Value};

type Reply = (u16, Vec<(&'static str, &'static str)>, String);
/// A request the fake server received: its `Authorization` header and its body.
type Seen = (Option<String>, Value);

#[derive(Clone, Default)]
struct Fake {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

async fn completions(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, HeaderMap, String) {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    fake.seen.lock().unwrap().push((auth, body));
    let (status, extra, text) = fake.replies.lock().unwrap().pop_front().unwrap_or((
        500,
        vec![],
        "no scripted reply".into(),
    ));
    let mut out = HeaderMap::new();
    for (k, v) in extra {
        out.insert(k, v.parse().unwrap());
    }
    (StatusCode::from_u16(status).unwrap(), out, text)
}

async fn fake_server(replies: Vec<Reply>) -> (String, Fake) {
    let fake = Fake {
        replies: Arc::new(Mutex::new(replies.into())),
        ..Fake::default()
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, fake)
}

fn answer(content: &str) -> Reply {
    let body = json!({ "choices": [{ "message": { "role": "assistant", "content": content } }], "usage": { "prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18 } });
    (200, vec![], body.to_string())
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

#[test]
async fn text_answer_with_usage_and_bearer_key() {
    let (url, fake) = fake_server(vec![answer("Looks good.")]).await;
    let model = OpenAiModel::new(url, "gpt-test").api_key("sk-test");
    let response = model.complete(request(None)).await.unwrap();
    assert_eq!(response.output, json!("Looks good."));
    assert_eq!(response.usage.unwrap()["total_tokens"], 18);
    let seen = fake.seen.lock().unwrap();
    assert_eq!(seen[0].0.as_deref(), Some("Bearer sk-test"));
    assert_eq!(seen[0].1["model"], "gpt-test");
    assert_eq!(
        seen[0].1["messages"].as_array().unwrap().last().unwrap()["content"],
        "Is this good?"
    );
    assert!(seen[0].1.get("response_format").is_none());
}

#[test]
async fn structured_output_sends_the_schema_and_returns_json() {
    let (url, fake) = fake_server(vec![answer("```json\n{\"verdict\": \"approve\"}\n```")]).await;
    let schema = json!({ "type": "object", "properties": { "verdict": { "type": "string" } } });
    let response = OpenAiModel::new(url, "m")
        .complete(request(Some(schema.clone())))
        .await
        .unwrap();
    assert_eq!(response.output, json!({ "verdict": "approve" }));
    let seen = fake.seen.lock().unwrap();
    assert_eq!(seen[0].1["response_format"]["type"], "json_schema");
    assert_eq!(
        seen[0].1["response_format"]["json_schema"]["schema"],
        schema
    );
}

#[test]
async fn errors_are_classified_for_retries() {
    let (url, _) = fake_server(vec![
        (429, vec![("retry-after", "2")], "slow down".into()),
        (503, vec![], "overloaded".into()),
        (400, vec![], "{\"error\": \"bad model\"}".into()),
        (200, vec![], "not json at all".into()),
        (200, vec![], "{\"choices\": []}".into()),
        answer("definitely not json"),
    ])
    .await;
    let model = OpenAiModel::new(url, "m");
    let rate = model.complete(request(None)).await.unwrap_err();
    assert_eq!(
        (rate.kind, rate.retry_after_ms),
        (ErrorKind::Transient, Some(2000))
    );
    assert!(
        rate.message.contains("429") && rate.message.contains("slow down"),
        "{}",
        rate.message
    );
    assert_eq!(
        model.complete(request(None)).await.unwrap_err().kind,
        ErrorKind::Transient
    );
    let bad = model.complete(request(None)).await.unwrap_err();
    assert_eq!(bad.kind, ErrorKind::Permanent);
    assert!(bad.message.contains("400") && bad.message.contains("bad model"));
    assert_eq!(
        model.complete(request(None)).await.unwrap_err().kind,
        ErrorKind::Transient,
        "a body that is not JSON"
    );
    let empty = model.complete(request(None)).await.unwrap_err();
    assert_eq!(empty.kind, ErrorKind::Permanent);
    assert!(empty.message.contains("choices[0].message.content"));
    let not_json = model
        .complete(request(Some(json!({ "type": "object" }))))
        .await
        .unwrap_err();
    assert_eq!(
        not_json.kind,
        ErrorKind::Transient,
        "a structured answer that is not JSON is asked again"
    );
}

#[test]
async fn unreachable_server_is_transient() {
    let err = OpenAiModel::new("http://127.0.0.1:9/v1", "m")
        .complete(request(None))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Transient);
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct Critique {
    verdict: String,
}

struct Critic;

fn critique<'a>(_: &'a Critic, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let retry = RetryPolicy {
            max_attempts: 3,
            initial_backoff_ms: 1,
            max_backoff_ms: 5,
        };
        let c: Critique = ctx.llm("critic").retry(retry).run(input.message()).await?;
        ctx.complete(c.verdict, vec![])
    })
}

static STEPS: &[Step<Critic>] = &[Step::new("critique", critique).start().takes_user_message()];

async fn run_critic(
    replies: Vec<Reply>,
) -> (
    radkit_runtime::model::Task,
    Vec<radkit_runtime::journal::JournalRecord>,
) {
    let (url, _) = fake_server(replies).await;
    let skill = StepTable::new(SkillInfo::new("critic", "Critic"), Critic, STEPS).unwrap();
    let engine = Engine::builder(MemoryStore::new())
        .skill(skill)
        .effects(Effects::new().model("critic", OpenAiModel::new(url, "m")))
        .start()
        .await
        .unwrap();
    let id = engine
        .send(Request::operator(Message::user_text("draft")))
        .await
        .unwrap();
    let task = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        engine.wait_settled(&Caller::Operator, &id),
    )
    .await
    .unwrap()
    .unwrap();
    (task, engine.journal(&Caller::Operator, &id).await.unwrap())
}

#[test]
async fn a_rate_limited_call_is_retried_and_its_usage_lands_on_the_receipt() {
    let (task, journal) = run_critic(vec![
        (429, vec![("retry-after", "0.05")], "busy".into()),
        answer("{\"verdict\": \"approve\"}"),
    ])
    .await;
    assert_eq!(task.status.state, TaskState::Completed, "{:?}", task.status);
    let failed: Vec<_> = journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::AttemptFailed { error, .. } => Some(error.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].retry_after_ms, Some(50));
    let usage = journal.iter().find_map(|r| match &r.entry {
        Entry::ReceiptRecorded { receipt } => receipt.usage.clone(),
        _ => None,
    });
    assert_eq!(usage.unwrap()["total_tokens"], 18);
}

#[test]
async fn an_answer_of_the_wrong_shape_fails_the_step_with_a_decode_error() {
    let (task, _) = run_critic(vec![answer("{\"score\": 3}")]).await;
    assert_eq!(task.status.state, TaskState::Failed);
    let text = task.status.message.unwrap().joined_texts();
    assert!(
        text.contains("decode error") && text.contains("model `critic`"),
        "{text}"
    );
}

#[test]
async fn a_slow_server_times_out_as_a_transient_error() {
    let app = Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            // Never answers: only the client's own timeout ends the call.
            futures::future::pending::<()>().await;
            "never"
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let model = OpenAiModel::new(url, "m").timeout(std::time::Duration::from_millis(200));
    let call = model.complete(request(None));
    let err = tokio::time::timeout(std::time::Duration::from_secs(60), call)
        .await
        .expect("the client's timeout ends a call the server never answers")
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Transient);
    assert!(err.message.contains("timed out"), "{}", err.message);
}

#[test]
async fn retry_after_is_read_as_seconds_an_http_date_or_retry_after_ms() {
    let soon = (chrono::Utc::now() + chrono::Duration::seconds(30))
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string();
    let soon: &'static str = Box::leak(soon.into_boxed_str());
    let (url, _) = fake_server(vec![
        (429, vec![("retry-after", soon)], "later".into()),
        (503, vec![("retry-after-ms", "250")], "busy".into()),
        (
            429,
            vec![("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")],
            "past".into(),
        ),
        (429, vec![("retry-after", "99999")], "capped".into()),
        (500, vec![], "no hint".into()),
    ])
    .await;
    let model = OpenAiModel::new(url, "m");
    let date = model.complete(request(None)).await.unwrap_err();
    let ms = date.retry_after_ms.unwrap();
    assert!((28_000..=30_000).contains(&ms), "{ms}");
    let hint = |e: radkit_runtime::flow::EffectError| e.retry_after_ms;
    assert_eq!(
        hint(model.complete(request(None)).await.unwrap_err()),
        Some(250)
    );
    assert_eq!(
        hint(model.complete(request(None)).await.unwrap_err()),
        Some(0),
        "a date in the past"
    );
    assert_eq!(
        hint(model.complete(request(None)).await.unwrap_err()),
        Some(3_600_000),
        "capped at an hour"
    );
    assert_eq!(hint(model.complete(request(None)).await.unwrap_err()), None);
}

#[test]
async fn the_request_names_the_schema_after_the_type_and_sends_the_configured_options() {
    let (url, fake) = fake_server(vec![answer("{\"verdict\": \"ok\"}"), answer("{}")]).await;
    let schema = serde_json::to_value(schemars::schema_for!(Critique)).unwrap();
    let model = OpenAiModel::new(url, "m")
        .strict(true)
        .temperature(0.0)
        .max_tokens(64)
        .system("Be brief.");
    model.complete(request(Some(schema.clone()))).await.unwrap();
    let mut odd = schema.clone();
    odd["title"] = json!("Vec<my::Thing>");
    model.complete(request(Some(odd))).await.unwrap();
    let seen = fake.seen.lock().unwrap();
    let format = &seen[0].1["response_format"]["json_schema"];
    assert_eq!(format["name"], "Critique");
    assert_eq!(format["strict"], true);
    assert_eq!(seen[0].1["temperature"], 0.0);
    assert_eq!(seen[0].1["max_tokens"], 64);
    assert_eq!(seen[0].1["messages"][0]["content"], "Be brief.");
    assert_eq!(
        seen[1].1["response_format"]["json_schema"]["name"],
        "Vec_my__Thing_"
    );
}

#[test]
async fn the_invocation_id_is_sent_as_the_idempotency_key() {
    let keys = Arc::new(Mutex::new(Vec::new()));
    let k = keys.clone();
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move |headers: HeaderMap| {
            let k = k.clone();
            async move {
                k.lock().unwrap().push(
                    headers
                        .get("idempotency-key")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned),
                );
                answer("fine").2
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    OpenAiModel::new(url, "m")
        .complete(request(None))
        .await
        .unwrap();
    assert_eq!(*keys.lock().unwrap(), vec![Some("t:1:0".to_owned())]);
}

#[test]
async fn refusals_are_permanent_and_truncated_answers_say_so() {
    let refusal = json!({ "choices": [{ "message": { "role": "assistant", "content": null, "refusal": "I can't help with that." } }] });
    let cut = json!({ "choices": [{ "finish_reason": "length", "message": { "role": "assistant", "content": "{\"verdict\": \"appr" } }] });
    let (url, _) = fake_server(vec![
        (200, vec![], refusal.to_string()),
        (200, vec![], cut.to_string()),
    ])
    .await;
    let model = OpenAiModel::new(url, "m");
    let schema = Some(json!({ "type": "object" }));
    let refused = model.complete(request(schema.clone())).await.unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Permanent);
    assert!(
        refused.message.contains("refused: I can't help"),
        "{}",
        refused.message
    );
    let truncated = model.complete(request(schema)).await.unwrap_err();
    assert_eq!(truncated.kind, ErrorKind::Transient);
    assert!(
        truncated.message.contains("token limit"),
        "{}",
        truncated.message
    );
}

#[test]
async fn configuration_comes_from_radkit_or_openai_variables() {
    use radkit_runtime::llm::ConfigError;
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    assert_eq!(
        OpenAiModel::from_vars(vars(&[])).unwrap_err(),
        ConfigError::MissingModel
    );
    let openai = OpenAiModel::from_vars(vars(&[("OPENAI_MODEL", "gpt-4o-mini")])).unwrap();
    assert_eq!(openai.base_url(), "https://api.openai.com/v1");
    assert_eq!(openai.model_name(), "gpt-4o-mini");
    let (url, fake) = fake_server(vec![answer("hi")]).await;
    let url: &'static str = Box::leak(format!("{url}/").into_boxed_str());
    let pairs: &'static [(&'static str, &'static str)] = Box::leak(Box::new([
        ("RADKIT_LLM_MODEL", "llama3.2"),
        ("OPENAI_MODEL", "gpt-4o-mini"),
        ("RADKIT_LLM_BASE_URL", url),
        ("OPENAI_BASE_URL", "https://elsewhere/v1"),
        ("RADKIT_LLM_API_KEY", " "),
        ("OPENAI_API_KEY", "sk-fallback"),
        ("RADKIT_LLM_TIMEOUT_SECS", "5"),
    ]));
    let local = OpenAiModel::from_vars(vars(pairs)).unwrap();
    assert_eq!(local.base_url(), url.trim_end_matches('/'));
    assert_eq!(local.model_name(), "llama3.2");
    assert!(
        !format!("{local:?}").contains("sk-fallback"),
        "Debug never shows the key"
    );
    local.complete(request(None)).await.unwrap();
    let seen = fake.seen.lock().unwrap();
    assert_eq!(
        seen[0].0.as_deref(),
        Some("Bearer sk-fallback"),
        "a blank RADKIT_ key falls back to OPENAI_API_KEY"
    );
    assert_eq!(seen[0].1["model"], "llama3.2");
    let bad = OpenAiModel::from_vars(vars(&[
        ("RADKIT_LLM_MODEL", "m"),
        ("RADKIT_LLM_BASE_URL", "localhost:8000"),
    ]))
    .unwrap_err();
    assert!(bad
        .to_string()
        .contains("`localhost:8000` is not an http:// or https:// base URL"));
}
