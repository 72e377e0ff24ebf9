//! The A2A surface of an engine in serverless mode (`EngineBuilder::serverless`): every request is
//! one pass, and nothing runs between requests. A blocking send answers with the task as its pass
//! left it; a stream sends what its pass journaled and ends; a resubscribe with `Last-Event-ID` in a
//! later "invocation" (a new engine over the same store, after a sweep ran the due timer) continues
//! exactly after what the client saw. Push notifications: a request delivers what its task
//! committed before it answers, and a sweep what is left.

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
use crate::support::push_common;
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

/// `builder` with webhooks on loopback allowed and fast retries.
fn push_builder(store: Arc<dyn Store>) -> radkit::engine::EngineBuilder {
    builder(store).push_settings(push_common::settings(true))
}

#[test]
async fn a_serverless_request_delivers_its_tasks_webhook_updates_before_it_answers_and_a_sweep_the_rest(
) {
    let (_dir, store) = sqlite();
    let client = agent::client();
    let hook = push_common::Receiver::start().await;
    let agent = agent::start(push_builder(store.clone()), agent::lasting).await;
    let card: Value = client
        .get(format!("{}/.well-known/agent-card.json", agent.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["capabilities"]["pushNotifications"], true, "{card}");

    // The send's request runs the pass, sets the webhook and delivers before it answers: the
    // question is at the webhook when the answer arrives.
    let sent = push_common::call(
        &agent.url,
        Some("1.0"),
        None,
        "SendMessage",
        json!({ "message": push_common::message("hello", None),
                "configuration": { "taskPushNotificationConfig": { "url": hook.url, "token": "tok" } } }),
    )
    .await;
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{sent}"
    );
    let task = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    let posts = hook.posts();
    assert!(
        posts.iter().any(|p| p.acknowledged()
            && push_common::is_status(p, "TASK_STATE_INPUT_REQUIRED")
            && p.header("x-a2a-notification-token") == Some("tok")),
        "the question was delivered before the send answered: {posts:#?}"
    );

    // The webhook is down when the answer's request runs: it tries once and answers anyway.
    hook.down(503);
    let done = push_common::call(
        &agent.url,
        Some("1.0"),
        None,
        "SendMessage",
        json!({ "message": push_common::message("forty-two", Some(&task)) }),
    )
    .await;
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    let posts = hook.posts();
    let asked_at = posts
        .iter()
        .find(|p| push_common::is_status(p, "TASK_STATE_INPUT_REQUIRED"))
        .map(push_common::Post::seq);
    assert!(
        posts
            .iter()
            .any(|p| !p.acknowledged() && Some(p.seq()) > asked_at),
        "the answer's request tried its first update before it answered: {posts:#?}"
    );
    let expected = push_common::update_seqs(&agent.engine, &task).await;
    drop(agent);

    // Scheduled sweeps (invocations of their own) deliver it once the webhook is back and the
    // retry is due.
    hook.up();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !hook
        .posts()
        .iter()
        .any(|p| p.acknowledged() && push_common::is_status(p, "TASK_STATE_COMPLETED"))
    {
        assert!(
            Instant::now() < deadline,
            "no sweep delivered the end: {:#?}",
            hook.posts()
        );
        let passes = Passes::from_builder(push_builder(store.clone())).unwrap();
        passes
            .sweep(Instant::now() + Duration::from_secs(10), 8)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let acknowledged: Vec<u64> = hook
        .posts()
        .iter()
        .filter(|p| p.acknowledged())
        .map(push_common::Post::seq)
        .collect();
    assert_eq!(
        acknowledged, expected,
        "each update acknowledged once, in journal order"
    );
}
