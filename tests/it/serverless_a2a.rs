//! The A2A surface of an engine in serverless mode (`EngineBuilder::serverless`): every request is
//! one pass, and nothing runs between requests. A blocking send answers with the task as its pass
//! left it; a stream sends what its pass journaled and ends; a resubscribe with `Last-Event-ID` in a
//! later "invocation" (a new engine over the same store, after a sweep ran the due timer) continues
//! exactly after what the client saw.

use std::sync::Arc;
use std::time::{Duration, Instant};

use radkit::engine::Engine;
use radkit::model::TaskState;
use radkit::prelude::*;
use radkit::serverless::{Passes, Rest};
use radkit::store::{Durability, SqliteStore, Store};
use serde_json::{json, Value};

use crate::support::agent::{self, Agent};
use crate::support::common::{read_sse, rpc, user};
use crate::support::skills::Ask;

/// Sleeps half a second on a durable timer, then completes.
#[derive(Default)]
struct Doze;

#[flow_skill(id = "doze", name = "Doze", register = false)]
impl Doze {
    #[step(start)]
    async fn doze(&self, ctx: &StepCtx, _: Content) -> StepResult {
        ctx.progress("dozing off").await?;
        ctx.sleep(Duration::from_millis(500)).await?;
        ctx.complete("awake", vec![])
    }
}

fn builder(store: Arc<dyn Store>) -> radkit::engine::EngineBuilder {
    Engine::builder_arc(store)
        .without_registered_skills()
        .skill(Ask)
        .skill(Doze)
        .default_skill("ask")
        .serverless(Duration::from_secs(10))
}

/// A fresh "invocation": a new engine in serverless mode over `store`, served on loopback.
async fn invocation(store: &Arc<dyn Store>) -> Agent {
    agent::start(builder(store.clone()), agent::lasting).await
}

fn sqlite() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("a2a.sqlite"), Durability::Full).unwrap();
    (dir, Arc::new(store))
}

#[test]
async fn each_request_is_one_pass_and_a_blocking_send_answers_with_the_task_as_it_left_it() {
    let (_dir, store) = sqlite();
    let client = agent::client();
    let first = invocation(&store).await;
    let asked = rpc(
        &client,
        &first.url,
        None,
        "message/send",
        json!({"message": user("hi")}),
    )
    .await;
    assert_eq!(
        asked["result"]["status"]["state"], "input-required",
        "{asked}"
    );
    let task_id = asked["result"]["id"].as_str().unwrap().to_owned();
    drop(first);
    // The reply reaches another invocation (1.0 JSON-RPC this time).
    let second = invocation(&store).await;
    let mut reply = user("Ada");
    reply["taskId"] = json!(task_id);
    let reply = json!({"messageId": reply["messageId"], "role": "ROLE_USER", "parts": [{"text": "Ada"}], "taskId": task_id});
    let done = client
        .post(format!("{}/", second.url))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": reply}}))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    let got = rpc(
        &client,
        &second.url,
        None,
        "tasks/get",
        json!({"id": task_id}),
    )
    .await;
    assert_eq!(
        got["result"]["status"]["message"]["parts"][0]["text"], "Got Ada",
        "{got}"
    );
    // A blocking send whose pass rests on a timer answers at once with the working task.
    let started = Instant::now();
    let mut nap = user("go");
    nap["metadata"] = json!({"skillId": "doze"});
    let napping = rpc(
        &client,
        &second.url,
        None,
        "message/send",
        json!({"message": nap}),
    )
    .await;
    assert_eq!(napping["result"]["status"]["state"], "working", "{napping}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "it did not wait for the timer"
    );
    let canceled = rpc(
        &client,
        &second.url,
        None,
        "tasks/cancel",
        json!({"id": napping["result"]["id"]}),
    )
    .await;
    assert_eq!(
        canceled["result"]["status"]["state"], "canceled",
        "{canceled}"
    );
}

#[test(multi_thread)]
async fn a_stream_sends_what_its_pass_journaled_and_a_later_resubscribe_continues_after_it() {
    let (_dir, store) = sqlite();
    let client = agent::client();
    let first = invocation(&store).await;
    let mut message = user("go");
    message["metadata"] = json!({"skillId": "doze"});
    let resp = client
        .post(format!("{}/", first.url))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": message}}))
        .send()
        .await
        .unwrap();
    let seen = read_sse(resp, |_| false).await;
    let last = seen
        .last()
        .and_then(|(id, _)| *id)
        .expect("events with ids");
    let task_id = seen[0].1["result"]["id"].as_str().unwrap().to_owned();
    assert!(
        seen.iter().all(|(_, e)| e["result"]["final"] != true),
        "the pass rests on the timer: nothing final yet: {seen:#?}"
    );
    assert!(
        seen.iter()
            .any(|(_, e)| e.to_string().contains("dozing off")),
        "the progress the pass journaled: {seen:#?}"
    );
    drop(first);
    // The scheduled sweep runs the timer once it is due (its own invocation).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let passes = Passes::from_builder(builder(store.clone())).unwrap();
        let swept = passes
            .sweep(Instant::now() + Duration::from_secs(10), 8)
            .await
            .unwrap();
        if swept
            .iter()
            .any(|p| p.rest == Rest::Ended(TaskState::Completed))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the timer never came due: {swept:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let later = invocation(&store).await;
    let resp = client
        .post(format!("{}/", later.url))
        .header("Last-Event-ID", last.to_string())
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/resubscribe", "params": {"id": task_id}}))
        .send()
        .await
        .unwrap();
    let rest = read_sse(resp, |_| false).await;
    assert!(
        rest.iter().all(|(id, _)| id.is_some_and(|id| id > last)),
        "only what came after the last event seen: {rest:#?}"
    );
    let end = rest.last().expect("the rest of the task");
    assert_eq!(end.1["result"]["final"], true, "{rest:#?}");
    assert_eq!(end.1["result"]["status"]["state"], "completed", "{rest:#?}");
}

#[test]
async fn push_notifications_are_refused_in_serverless_mode_and_the_card_says_so() {
    let (_dir, store) = sqlite();
    let client = agent::client();
    let agent = invocation(&store).await;
    let card: Value = client
        .get(format!("{}/.well-known/agent-card.json", agent.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["capabilities"]["pushNotifications"], false, "{card}");
    let asked = rpc(
        &client,
        &agent.url,
        None,
        "message/send",
        json!({"message": user("hi")}),
    )
    .await;
    let task_id = asked["result"]["id"].clone();
    let set = rpc(
        &client,
        &agent.url,
        None,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": task_id, "pushNotificationConfig": {"url": "https://example.com/hook"}}),
    )
    .await;
    assert_eq!(
        set["error"]["code"], -32003,
        "PushNotificationNotSupported: {set}"
    );
}
