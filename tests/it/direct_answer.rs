//! Direct message answers: a skill declared `answer = "message"` answers the send that starts a task
//! with the task's completion message, naming no task, on every binding and in streams; the task is
//! still journaled, so a retried send (the same `messageId`) gets the same answer and the skill runs
//! once. A task that does not complete is answered with the task, as A2A allows.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use radkit::model::Artifact;
use radkit::prelude::*;
use radkit::store::MemoryStore;
use serde_json::{json, Value};

use crate::support::agent::{self, Agent};
use crate::support::common::{read_events, rpc, uuid};

#[derive(Default)]
struct Oracle;

/// Answers at once, with a note as an artifact; asks back when told "ask".
#[flow_skill(id = "oracle", name = "Oracle", answer = "message", register = false)]
impl Oracle {
    #[step(start)]
    async fn answer(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let text = msg.joined_texts();
        if text == "ask" {
            return await_input!(slot = "what", message = "Ask what?");
        }
        let _: String = ctx.tool("think").call(&text).await?;
        ctx.complete(
            format!("the answer to {text} is 42"),
            vec![Artifact::from_text("note.txt", "computed once")],
        )
    }

    #[step(resume_from = "answer")]
    async fn asked(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        ctx.complete(msg.joined_texts(), vec![])
    }
}

async fn oracle() -> (Agent, Arc<AtomicU32>) {
    let thoughts = Arc::new(AtomicU32::new(0));
    let counted = thoughts.clone();
    let think = FnTool::new(EffectPolicy::Idempotent, move |args, _| {
        let counted = counted.clone();
        async move {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(args)
        }
    });
    let served = agent::start(
        agent::only(MemoryStore::new(), Oracle).effects(Effects::new().tool("think", think)),
        |c| c,
    )
    .await;
    (served, thoughts)
}

fn user_0_3(id: &str, text: &str) -> Value {
    json!({ "role": "user", "kind": "message", "messageId": id, "parts": [{ "kind": "text", "text": text }] })
}

fn user_1_0(id: &str, text: &str) -> Value {
    json!({ "role": "ROLE_USER", "messageId": id, "parts": [{ "text": text }] })
}

#[test(multi_thread)]
async fn a_skill_that_answers_with_a_message_answers_json_rpc_0_3_with_the_message_once() {
    let (served, thoughts) = oracle().await;
    let client = agent::client();
    let id = uuid();
    let params = json!({ "message": user_0_3(&id, "life") });
    let first = rpc(&client, &served.url, None, "message/send", params.clone()).await;
    let answer = &first["result"];
    assert_eq!(answer["kind"], "message", "{first}");
    assert_eq!(answer["role"], "agent");
    assert_eq!(
        answer["parts"],
        json!([
            { "kind": "text", "text": "the answer to life is 42" },
            { "kind": "text", "text": "computed once" }
        ])
    );
    assert!(answer.get("taskId").is_none(), "no task to get: {answer}");
    assert!(answer["contextId"].is_string());
    // The same send again (its answer was lost): the same answer, and the skill did not run again.
    let again = rpc(&client, &served.url, None, "message/send", params).await;
    assert_eq!(again["result"], first["result"]);
    assert_eq!(thoughts.load(Ordering::SeqCst), 1);
    // `returnImmediately` (0.3 `blocking: false`) still waits for the answer: it is the point.
    let quick = rpc(
        &client,
        &served.url,
        None,
        "message/send",
        json!({ "message": user_0_3(&uuid(), "speed"), "configuration": { "blocking": false } }),
    )
    .await;
    assert_eq!(quick["result"]["kind"], "message", "{quick}");
}

#[test(multi_thread)]
async fn a_direct_answer_is_a_send_message_response_message_over_json_rpc_1_0_and_rest() {
    let (served, _) = oracle().await;
    let client = agent::client();
    let rpc_1_0: Value = client
        .post(format!("{}/", served.url))
        .header("A2A-Version", "1.0")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": { "message": user_1_0(&uuid(), "rpc") } }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let message = &rpc_1_0["result"]["message"];
    assert_eq!(message["role"], "ROLE_AGENT", "{rpc_1_0}");
    assert_eq!(message["parts"][0]["text"], "the answer to rpc is 42");
    assert!(rpc_1_0["result"].get("task").is_none());

    let rest: Value = client
        .post(format!("{}/message:send", served.url))
        .header("content-type", "application/json")
        .body(json!({ "message": user_1_0(&uuid(), "rest") }).to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        rest["message"]["parts"][0]["text"], "the answer to rest is 42",
        "{rest}"
    );
}

#[test(multi_thread)]
async fn a_streamed_send_answered_with_a_message_is_a_stream_of_that_one_message() {
    let (served, _) = oracle().await;
    let client = agent::client();
    let resp = client
        .post(format!("{}/", served.url))
        .json(
            &json!({ "jsonrpc": "2.0", "id": 1, "method": "message/stream",
            "params": { "message": user_0_3(&uuid(), "streams") } }),
        )
        .send()
        .await
        .unwrap();
    let events = read_events(resp, |_| false).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["result"]["kind"], "message");
    assert_eq!(
        events[0]["result"]["parts"][0]["text"],
        "the answer to streams is 42"
    );

    let resp = client
        .post(format!("{}/message:stream", served.url))
        .header("content-type", "application/json")
        .body(json!({ "message": user_1_0(&uuid(), "rest streams") }).to_string())
        .send()
        .await
        .unwrap();
    let events = read_events(resp, |_| false).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(
        events[0]["message"]["parts"][0]["text"],
        "the answer to rest streams is 42"
    );
}

#[test(multi_thread)]
async fn a_task_that_asks_back_is_answered_with_the_task() {
    let (served, _) = oracle().await;
    let client = agent::client();
    let asked = rpc(
        &client,
        &served.url,
        None,
        "message/send",
        json!({ "message": user_0_3(&uuid(), "ask"), "configuration": { "blocking": true } }),
    )
    .await;
    assert_eq!(asked["result"]["kind"], "task", "{asked}");
    assert_eq!(asked["result"]["status"]["state"], "input-required");
    // Its reply is a reply to a task: answered with the task, which completes.
    let task = asked["result"]["id"].as_str().unwrap();
    let mut reply = user_0_3(&uuid(), "nothing");
    reply["taskId"] = json!(task);
    let done = rpc(
        &client,
        &served.url,
        None,
        "message/send",
        json!({ "message": reply, "configuration": { "blocking": true } }),
    )
    .await;
    assert_eq!(done["result"]["kind"], "task", "{done}");
    assert_eq!(done["result"]["status"]["state"], "completed");
}

#[derive(Default)]
struct Asker;

/// Asks the oracle over A2A (1.0 and 0.3) and completes with both answers.
#[flow_skill(id = "asker", name = "Asker", register = false)]
impl Asker {
    #[step(start)]
    async fn ask(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let question = msg.joined_texts();
        let one = ctx.agent("oracle").send(question.clone()).await?;
        let other = ctx.agent("oracle03").send(question).await?;
        ctx.complete(format!("{} / {}", one.text(), other.text()), vec![])
    }
}

/// radkit's own client takes a direct answer as the call's reply, in both versions.
#[test(multi_thread)]
async fn a_call_to_an_agent_that_answers_with_a_message_gets_that_message() {
    let (served, thoughts) = oracle().await;
    let engine = agent::only(MemoryStore::new(), Asker)
        .agent("oracle", radkit::engine::AgentSpec::new(&served.url))
        .agent(
            "oracle03",
            radkit::engine::AgentSpec::new(&served.url)
                .version(radkit::client::ProtocolVersion::V0_3),
        )
        .start()
        .await
        .unwrap();
    let task = engine
        .send(radkit::engine::Request::operator(Message::user_text("tea")))
        .await
        .unwrap();
    let done = crate::support::common::within(
        crate::support::common::PATIENCE,
        "the asker to finish",
        engine.wait_settled(&radkit::engine::Caller::Operator, &task),
    )
    .await
    .unwrap();
    assert_eq!(
        done.status.message.map(|m| m.joined_texts()).as_deref(),
        Some("the answer to tea is 42\ncomputed once / the answer to tea is 42\ncomputed once"),
        "{:?}",
        done.status.state
    );
    assert_eq!(thoughts.load(Ordering::SeqCst), 2);
}
