//! A push delivery pending when `radkit serve` is killed with SIGKILL is sent by the server restarted
//! on the same SQLite file: the webhook is down while the task runs, the server dies, the webhook
//! comes back, and the restarted server posts every update, each acknowledged once, in seq order.

use crate::support::common;
use crate::support::push_common;

use push_common::{is_status, message, Post, Receiver};
use serde_json::json;

async fn call(url: &str, method: &str, params: serde_json::Value) -> serde_json::Value {
    push_common::call(url, Some("1.0"), None, method, params).await
}

#[test(multi_thread)]
async fn a_delivery_pending_when_radkit_serve_is_killed_is_sent_by_the_restarted_server() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().expect("utf-8 path");
    let args = [
        "--data-dir",
        data,
        "--default-skill",
        "conformance",
        "--push-allow-private",
    ];
    let receiver = Receiver::start().await;
    receiver.down(503);
    let mut server = common::serve(&args);
    let sent = call(
        &server.url,
        "SendMessage",
        json!({ "message": message("ask me", None),
                "configuration": { "taskPushNotificationConfig": { "url": receiver.url, "token": "k9" } } }),
    )
    .await;
    let task = sent["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {sent}"))
        .to_owned();
    let done = call(
        &server.url,
        "SendMessage",
        json!({ "message": message("forty-two", Some(&task)) }),
    )
    .await;
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    receiver
        .wait_for("a refused post", |posts| !posts.is_empty())
        .await;
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();
    assert!(
        receiver.posts().iter().all(|p| !p.acknowledged()),
        "nothing was acknowledged before the kill"
    );
    receiver.up();
    let restarted = common::serve(&args);
    let posts = receiver
        .wait_for("the completed update from the restarted server", |posts| {
            posts
                .iter()
                .any(|p| p.acknowledged() && is_status(p, "TASK_STATE_COMPLETED"))
        })
        .await;
    let acked: Vec<&Post> = posts.iter().filter(|p| p.acknowledged()).collect();
    let seqs: Vec<u64> = acked.iter().map(|p| p.seq()).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "each update acknowledged once, in seq order: {seqs:?}"
    );
    assert!(
        is_status(acked[0], "TASK_STATE_SUBMITTED"),
        "from the task's first update: {:?}",
        acked[0].body
    );
    assert!(acked
        .iter()
        .all(|p| p.header("x-a2a-notification-token") == Some("k9")));
    assert!(
        acked
            .iter()
            .any(|p| p.body["artifactUpdate"]["artifact"]["name"] == "answer.txt"),
        "the artifact was pushed too"
    );
    drop(restarted);
}
