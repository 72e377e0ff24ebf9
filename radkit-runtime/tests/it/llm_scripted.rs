//! The scripted model: answers from a closure, a list or a JSON file, per registered model name, with
//! scripted failures; through the engine, a structured answer decodes and usage lands on the receipt.

use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::Engine;
use radkit_runtime::engine::{Caller, Request};
use radkit_runtime::flow::step_table::{Step, StepInput, StepTable};
use radkit_runtime::flow::{ErrorKind, InvocationId, RetryPolicy, SkillInfo, StepCtx, StepResult};
use radkit_runtime::journal::Entry;
use radkit_runtime::llm::{LlmRequest, Model, ScriptError, ScriptedModel};
use radkit_runtime::model::{Message, TaskState};
use radkit_runtime::store::MemoryStore;
use serde_json::{json, Value};

fn ask(model: &str) -> LlmRequest {
    LlmRequest {
        model: model.into(),
        input: json!("go"),
        schema: None,
        invocation_id: InvocationId::derive("t", 1, 0),
        tools: Vec::new(),
        turns: Vec::new(),
    }
}

async fn answer(
    m: &ScriptedModel,
    model: &str,
) -> Result<Value, radkit_runtime::flow::EffectError> {
    m.complete(ask(model)).await.map(|r| r.output)
}

#[test]
async fn a_list_answers_in_order_and_repeats_the_last() {
    let m = ScriptedModel::from_json(r#"["one", {"two": 2}]"#).unwrap();
    assert_eq!(answer(&m, "any").await.unwrap(), json!("one"));
    assert_eq!(answer(&m, "other").await.unwrap(), json!({ "two": 2 }));
    assert_eq!(answer(&m, "any").await.unwrap(), json!({ "two": 2 }));
    assert_eq!(m.calls(), 3);
}

#[test]
async fn a_file_scripts_each_model_and_its_failures() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.json");
    std::fs::write(
        &path,
        r#"{ "research": ["draft 1", "draft 2"],
             "critic": [{"$error": "rate limited", "transient": true}, {"$error": "bad key"}, {"verdict": "approve"}],
             "*": ["fallback"] }"#,
    )
    .unwrap();
    let m = ScriptedModel::from_file(&path).unwrap();
    assert_eq!(answer(&m, "research").await.unwrap(), json!("draft 1"));
    let e = answer(&m, "critic").await.unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::Transient, "rate limited")
    );
    assert_eq!(
        answer(&m, "critic").await.unwrap_err().kind,
        ErrorKind::Permanent
    );
    assert_eq!(
        answer(&m, "critic").await.unwrap(),
        json!({ "verdict": "approve" })
    );
    assert_eq!(answer(&m, "research").await.unwrap(), json!("draft 2"));
    assert_eq!(answer(&m, "summary").await.unwrap(), json!("fallback"));
}

#[test]
fn a_bad_script_is_a_clear_error() {
    match ScriptedModel::from_file("/nonexistent/script.json") {
        Err(ScriptError::Read { path, .. }) => assert_eq!(path, "/nonexistent/script.json"),
        other => panic!("{:?}", other.err()),
    }
    let dir = tempfile::tempdir().unwrap();
    for (text, expected) in [
        ("{ not json", "is not valid"),
        ("42", "expected an array of answers"),
        (
            r#"{"critic": "yes"}"#,
            "the answers of model `critic` must be an array",
        ),
        (r#"{"critic": []}"#, "model `critic` has no answers"),
    ] {
        let path = dir.path().join("bad.json");
        std::fs::write(&path, text).unwrap();
        let message = ScriptedModel::from_file(&path).err().unwrap().to_string();
        assert!(
            message.contains(expected) && message.contains("bad.json"),
            "{message}"
        );
    }
    let m = ScriptedModel::from_json(r#"{"critic": ["ok"]}"#).unwrap();
    let e = futures::executor::block_on(answer(&m, "research")).unwrap_err();
    assert!(
        e.message.contains("no answers for model `research`"),
        "{}",
        e.message
    );
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
            max_backoff_ms: 2,
        };
        let c: Critique = ctx.llm("critic").retry(retry).run(input.message()).await?;
        ctx.complete(c.verdict, vec![])
    })
}

static STEPS: &[Step<Critic>] = &[Step::new("critique", critique).start().takes_user_message()];

#[test]
async fn a_scripted_structured_answer_runs_through_the_engine_with_usage_on_the_receipt() {
    let model = ScriptedModel::from_json(
        r#"{"critic": [{"$error": "overloaded", "transient": true}, {"verdict": "approve"}]}"#,
    )
    .unwrap();
    let engine = Engine::builder(MemoryStore::new())
        .skill(StepTable::new(SkillInfo::new("critic", "Critic"), Critic, STEPS).unwrap())
        .effects(Effects::new().model("critic", model.clone()))
        .start()
        .await
        .unwrap();
    let id = engine
        .send(Request::operator(Message::user_text("a draft")))
        .await
        .unwrap();
    let task = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        engine.wait_settled(&Caller::Operator, &id),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(task.status.state, TaskState::Completed);
    assert_eq!(model.calls(), 2, "the transient failure was retried");
    let journal = engine.journal(&Caller::Operator, &id).await.unwrap();
    let schema = journal.iter().find_map(|r| match &r.entry {
        Entry::CommandIssued { cmd, .. } => match &cmd.kind {
            radkit_runtime::flow::CmdKind::Llm { schema, .. } => schema.clone(),
            _ => None,
        },
        _ => None,
    });
    assert_eq!(
        schema.unwrap()["properties"]["verdict"]["type"],
        "string",
        "the schema of `Critique` was sent"
    );
    let receipt = journal
        .iter()
        .find_map(|r| match &r.entry {
            Entry::ReceiptRecorded { receipt } => Some(receipt.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(receipt.attempt, 2);
    assert!(receipt.usage.unwrap()["output_tokens"].as_u64().is_some());
}
