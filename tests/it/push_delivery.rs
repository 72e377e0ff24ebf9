//! Push-notification delivery to a local webhook receiver: every update the stream carries reaches
//! the webhook in journal order, with its seq (`X-A2A-Event-Id`), the config's token and
//! authentication; a webhook that fails or refuses connections gets the same update again until it
//! acknowledges it; a delivery pending when the engine dies is sent by the next engine on the same
//! store, and what was acknowledged before is not sent again; a 0.3 webhook gets the task as the
//! 0.3 SDK posts it.

use crate::support::push_common;

use std::sync::Arc;

use push_common::*;
use radkit::store::{SqliteStore, Store};
use serde_json::json;

const V1: Option<&str> = Some("1.0");

/// Send a 1.0 message with a webhook, answer the task's question, and return the task id.
async fn run_task_with_webhook(agent: &Agent, hook: &str) -> String {
    let sent = call(
        &agent.url,
        V1,
        None,
        "SendMessage",
        json!({ "message": message("hello", None),
                "configuration": { "taskPushNotificationConfig": {
                    "url": hook, "token": "tok",
                    "authentication": { "scheme": "Bearer", "credentials": "secret" } } } }),
    )
    .await;
    let task = sent["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {sent}"))
        .to_owned();
    let done = call(
        &agent.url,
        V1,
        None,
        "SendMessage",
        json!({ "message": message("forty-two", Some(&task)) }),
    )
    .await;
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    task
}

/// The seqs of the acknowledged posts, in arrival order.
fn acknowledged(posts: &[Post]) -> Vec<u64> {
    posts
        .iter()
        .filter(|p| p.acknowledged())
        .map(Post::seq)
        .collect()
}

#[test(multi_thread)]
async fn every_update_reaches_the_webhook_in_seq_order_with_token_and_authentication() {
    let receiver = Receiver::start().await;
    let agent = agent(true).await;
    let task = run_task_with_webhook(&agent, &receiver.url).await;
    let posts = receiver
        .wait_for("the completed update", |posts| {
            posts.iter().any(|p| is_status(p, "TASK_STATE_COMPLETED"))
        })
        .await;
    let expected = update_seqs(&agent.engine, &task).await;
    assert_eq!(
        acknowledged(&posts),
        expected,
        "each update once, in journal order"
    );
    for post in &posts {
        assert_eq!(post.header("x-a2a-notification-token"), Some("tok"));
        assert_eq!(post.header("authorization"), Some("Bearer secret"));
        assert_eq!(post.header("content-type"), Some("application/a2a+json"));
        assert_eq!(post.header("x-a2a-task-id"), Some(task.as_str()));
        let kinds: Vec<&String> = post.body.as_object().expect("object").keys().collect();
        assert_eq!(kinds.len(), 1, "one StreamResponse member: {}", post.body);
    }
    let states: Vec<&str> = posts
        .iter()
        .filter_map(|p| p.body["statusUpdate"]["status"]["state"].as_str())
        .collect();
    assert_eq!(states.first(), Some(&"TASK_STATE_SUBMITTED"), "{states:?}");
    assert!(states.contains(&"TASK_STATE_INPUT_REQUIRED"), "{states:?}");
    assert_eq!(states.last(), Some(&"TASK_STATE_COMPLETED"), "{states:?}");
    let artifact = posts
        .iter()
        .find_map(|p| p.body.get("artifactUpdate"))
        .expect("an artifact update");
    assert_eq!(artifact["artifact"]["name"], "answer.txt", "{artifact}");
    assert_eq!(artifact["taskId"], task.as_str());
}

#[test(multi_thread)]
async fn a_commit_of_a_task_with_a_webhook_wakes_the_sender_without_its_poll() {
    let receiver = Receiver::start().await;
    // A poll that never comes within the test: only wake-ups deliver.
    let mut never = settings(true);
    never.poll = std::time::Duration::from_secs(3600);
    let agent = agent_with(Arc::new(radkit::store::MemoryStore::new()), never, &[]).await;
    let task = run_task_with_webhook(&agent, &receiver.url).await;
    let posts = receiver
        .wait_for("the completed update", |posts| {
            posts.iter().any(|p| is_status(p, "TASK_STATE_COMPLETED"))
        })
        .await;
    assert_eq!(
        acknowledged(&posts),
        update_seqs(&agent.engine, &task).await
    );
}

#[test(multi_thread)]
async fn a_webhook_given_with_a_reply_gets_what_the_reply_causes_and_nothing_before() {
    let receiver = Receiver::start().await;
    let agent = agent(true).await;
    let task = waiting_task(&agent.url, None).await;
    let before = update_seqs(&agent.engine, &task).await;
    let done = call(
        &agent.url,
        V1,
        None,
        "SendMessage",
        json!({ "message": message("forty-two", Some(&task)),
                "configuration": { "taskPushNotificationConfig": { "url": receiver.url } } }),
    )
    .await;
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    let posts = receiver
        .wait_for("the completed update", |posts| {
            posts.iter().any(|p| is_status(p, "TASK_STATE_COMPLETED"))
        })
        .await;
    let after: Vec<u64> = update_seqs(&agent.engine, &task)
        .await
        .into_iter()
        .filter(|seq| !before.contains(seq))
        .collect();
    assert_eq!(
        acknowledged(&posts),
        after,
        "the updates after the reply, once each"
    );
    let config = call(
        &agent.url,
        V1,
        None,
        "GetTaskPushNotificationConfig",
        json!({ "taskId": task, "id": task }),
    )
    .await;
    assert_eq!(
        config["result"]["url"],
        receiver.url.as_str(),
        "a send's config takes the task's id: {config}"
    );
}

#[test(multi_thread)]
async fn a_failing_webhook_gets_the_same_update_again_until_it_acknowledges() {
    let receiver = Receiver::start().await;
    receiver.fail_next(&[500, 503, 500]);
    let agent = agent(true).await;
    let task = run_task_with_webhook(&agent, &receiver.url).await;
    let posts = receiver
        .wait_for("the completed update", |posts| {
            posts
                .iter()
                .any(|p| p.acknowledged() && is_status(p, "TASK_STATE_COMPLETED"))
        })
        .await;
    let expected = update_seqs(&agent.engine, &task).await;
    let first = expected[0];
    let tries: Vec<u16> = posts
        .iter()
        .filter(|p| p.seq() == first)
        .map(|p| p.answered)
        .collect();
    assert_eq!(
        tries,
        vec![500, 503, 500, 200],
        "the first update is posted until acknowledged, nothing after it before"
    );
    assert_eq!(acknowledged(&posts), expected);
}

#[test(multi_thread)]
async fn a_webhook_that_refuses_connections_gets_every_update_once_it_listens() {
    // A port nobody listens on (yet).
    let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let agent = agent(true).await;
    let task = run_task_with_webhook(&agent, &format!("http://{addr}/hook")).await;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("rebind the webhook's port");
    let receiver = Receiver::serve(listener).await;
    let posts = receiver
        .wait_for("the completed update", |posts| {
            posts.iter().any(|p| is_status(p, "TASK_STATE_COMPLETED"))
        })
        .await;
    assert_eq!(
        acknowledged(&posts),
        update_seqs(&agent.engine, &task).await
    );
}

#[test(multi_thread)]
async fn a_delivery_pending_at_a_crash_is_sent_after_restart_and_nothing_acknowledged_is_resent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("push.db");
    let receiver = Receiver::start().await;
    // Two updates get through, then the webhook is down (set before the task runs: the sender
    // may deliver every update before a test that flips it afterwards gets there).
    receiver.down_after(2, 503);
    let (task, expected) = {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open_default(&path).unwrap());
        let agent = agent_on(store, true, &[]).await;
        let task = run_task_with_webhook(&agent, &receiver.url).await;
        let expected = update_seqs(&agent.engine, &task).await;
        // Down now: at least one post refused, so the rest is pending when the engine dies.
        receiver
            .wait_for("a refused post", |posts| {
                posts.iter().any(|p| !p.acknowledged())
            })
            .await;
        agent.crash();
        (task, expected)
    };
    let acked_before_crash = acknowledged(&receiver.posts());
    assert!(
        acked_before_crash.len() < expected.len(),
        "the crash left updates pending: {acked_before_crash:?} of {expected:?}"
    );
    receiver.up();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open_default(&path).unwrap());
    let _restarted = agent_on(store, true, &[]).await;
    let posts = receiver
        .wait_for("the completed update after the restart", |posts| {
            posts
                .iter()
                .any(|p| p.acknowledged() && is_status(p, "TASK_STATE_COMPLETED"))
        })
        .await;
    assert_eq!(
        acknowledged(&posts),
        expected,
        "every update acknowledged exactly once across the crash (task {task})"
    );
}

/// A task started over 0.3 that asks for input, with the 0.3 push config `config` set on it.
/// Sent blocking, so that the task waits for its answer before it gets one (a non-blocking send
/// could leave it `submitted`, and the answer would be refused).
async fn asking_0_3_task_with_webhook(url: &str, config: serde_json::Value) -> String {
    let sent = call(
        url,
        None,
        None,
        "message/send",
        json!({ "message": message_v03("hi", None), "configuration": { "blocking": true } }),
    )
    .await;
    assert_eq!(
        sent["result"]["status"]["state"], "input-required",
        "{sent}"
    );
    let task = sent["result"]["id"].as_str().expect("task").to_owned();
    let set = call(
        url,
        None,
        None,
        "tasks/pushNotificationConfig/set",
        json!({ "taskId": task, "pushNotificationConfig": config }),
    )
    .await;
    assert!(set.get("error").is_none(), "{set}");
    task
}

#[test(multi_thread)]
async fn a_0_3_webhook_receives_the_task_as_the_0_3_sdk_posts_it() {
    let receiver = Receiver::start().await;
    let agent = agent(true).await;
    let task =
        asking_0_3_task_with_webhook(&agent.url, json!({ "url": receiver.url, "token": "t03" }))
            .await;
    let done = call(
        &agent.url,
        None,
        None,
        "message/send",
        json!({ "message": message_v03("yes", Some(&task)), "configuration": { "blocking": true } }),
    )
    .await;
    assert_eq!(done["result"]["status"]["state"], "completed", "{done}");
    let posts = receiver
        .wait_for("the completed task", |posts| {
            posts
                .iter()
                .any(|p| p.body["status"]["state"] == "completed")
        })
        .await;
    let last = posts.last().expect("a post");
    assert_eq!(last.body["kind"], "task", "{}", last.body);
    assert_eq!(last.body["id"], task.as_str());
    assert_eq!(last.header("x-a2a-notification-token"), Some("t03"));
    assert_eq!(last.header("content-type"), Some("application/json"));
    let seqs: Vec<u64> = posts.iter().map(Post::seq).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "each post is newer than the last: {seqs:?}"
    );
}

/// A 0.3 webhook's delivery is recorded only once the receiver acknowledged it: the task posted while
/// the receiver refuses everything (its end included) is posted again, as it is then, until a post is
/// acknowledged, and the completed task is among the posts acknowledged.
#[test(multi_thread)]
async fn a_0_3_webhook_that_refuses_the_task_gets_it_again_until_it_acknowledges() {
    let receiver = Receiver::start().await;
    receiver.down(503);
    let agent = agent(true).await;
    let task = asking_0_3_task_with_webhook(&agent.url, json!({ "url": receiver.url })).await;
    let done = call(
        &agent.url,
        None,
        None,
        "message/send",
        json!({ "message": message_v03("yes", Some(&task)), "configuration": { "blocking": true } }),
    )
    .await;
    assert_eq!(done["result"]["status"]["state"], "completed", "{done}");
    receiver
        .wait_for("the completed task, refused", |posts| {
            posts
                .iter()
                .any(|p| !p.acknowledged() && p.body["status"]["state"] == "completed")
        })
        .await;
    receiver.up();
    let posts = receiver
        .wait_for("the completed task, acknowledged", |posts| {
            posts
                .iter()
                .any(|p| p.acknowledged() && p.body["status"]["state"] == "completed")
        })
        .await;
    let acknowledged: Vec<&Post> = posts.iter().filter(|p| p.acknowledged()).collect();
    assert_eq!(
        acknowledged.len(),
        1,
        "one acknowledged post: the task as it ended ({posts:#?})"
    );
}

/// A receiver that accepts connections and never answers: how many it holds open at once, at most.
struct Silent {
    url: String,
    most_open: Arc<std::sync::atomic::AtomicUsize>,
}

impl Silent {
    async fn start() -> Silent {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let open = Arc::new(AtomicUsize::new(0));
        let most_open = Arc::new(AtomicUsize::new(0));
        let (open2, most2) = (open.clone(), most_open.clone());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let now = open2.fetch_add(1, Ordering::SeqCst) + 1;
                most2.fetch_max(now, Ordering::SeqCst);
                let open = open2.clone();
                // Read (and drop) whatever comes until the sender gives up; never answer.
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {}
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Silent { url, most_open }
    }

    fn most_open(&self) -> usize {
        self.most_open.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// 72 tasks with webhooks at a receiver that never answers (posts hang for their whole timeout,
/// claims run out meanwhile), and one task with a webhook elsewhere: the silent receiver never holds
/// more than its share of deliveries (8) — nothing claimed waits in memory for a slot, and a config
/// being delivered is not claimed a second time — and the other webhook gets its updates
/// meanwhile.
#[test(multi_thread)]
async fn a_receiver_that_never_answers_holds_its_share_of_deliveries_and_delays_no_other() {
    let silent = Silent::start().await;
    let receiver = Receiver::start().await;
    let mut patient = settings(true);
    patient.timeout = std::time::Duration::from_secs(600);
    patient.lease = std::time::Duration::from_secs(1);
    let agent = agent_with(Arc::new(radkit::store::MemoryStore::new()), patient, &[]).await;
    for _ in 0..72 {
        run_task_with_webhook(&agent, &silent.url).await;
    }
    let task = run_task_with_webhook(&agent, &receiver.url).await;
    let posts = receiver
        .wait_for("the other webhook's completed update", |posts| {
            posts.iter().any(|p| is_status(p, "TASK_STATE_COMPLETED"))
        })
        .await;
    assert_eq!(
        acknowledged(&posts),
        update_seqs(&agent.engine, &task).await
    );
    // Claims of the silent configs ran out many times meanwhile (1 s leases).
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert!(
        silent.most_open() <= 8,
        "the silent receiver held {} deliveries at once",
        silent.most_open()
    );
    assert!(silent.most_open() > 0, "the silent receiver was posted to");
}
