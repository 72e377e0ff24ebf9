//! The OpenAI-compatible client against a local chat-completions server on loopback: text and
//! structured answers, token usage on the receipt, 429 with Retry-After, 5xx, 4xx and malformed answers.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::flow::step_table::{Step, StepInput, StepTable};
use radkit_runtime::flow::{ErrorKind, InvocationId, RetryPolicy, SkillInfo, StepCtx, StepResult};
use radkit_runtime::journal::Entry;
use radkit_runtime::llm::{LlmRequest, Model, OpenAiModel};
use radkit_runtime::model::{Message, TaskState};
use radkit_runtime::store::MemoryStore;
use radkit_runtime::Engine;
use serde_json::{json, Value};

type Reply = (u16, Vec<(&'static str, &'static str)>, String);

#[derive(Clone, Default)]
struct Fake {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    seen: Arc<Mutex<Vec<(Option<String>, Value)>>>,
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
    }
}

#[tokio::test]
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

#[tokio::test]
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

#[tokio::test]
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

#[tokio::test]
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
        .send(None, None, Message::user_text("draft"))
        .await
        .unwrap();
    let task = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        engine.wait_settled(None, &id),
    )
    .await
    .unwrap()
    .unwrap();
    (task, engine.journal(None, &id).await.unwrap())
}

#[tokio::test]
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

#[tokio::test]
async fn an_answer_of_the_wrong_shape_fails_the_step_with_a_decode_error() {
    let (task, _) = run_critic(vec![answer("{\"score\": 3}")]).await;
    assert_eq!(task.status.state, TaskState::Failed);
    let text = task.status.message.unwrap().joined_texts();
    assert!(
        text.contains("decode error") && text.contains("model `critic`"),
        "{text}"
    );
}
