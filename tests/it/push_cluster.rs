//! Push notifications on one Postgres store shared by two engines: each webhook has one sender at a
//! time (claims lease a config; the other engine skips it), so every update is acknowledged once,
//! whichever engine drives the task. The server is `RADKIT_TEST_POSTGRES_URL`, else the local one
//! (see `services`); when it does not answer the test is reported ignored. It works in a fresh
//! schema.

use std::sync::Arc;
use std::time::Duration;

use radkit::prelude::*;
use radkit::store::{PostgresStore, Store};
use serde_json::json;

use crate::support::push_common;
use crate::support::services;
use crate::support::skills::Ask;
use push_common::*;

async fn store(url: &str) -> Arc<dyn Store> {
    Arc::new(
        PostgresStore::connect(url)
            .await
            .expect("connect the store"),
    )
}

#[test(multi_thread, needs = Postgres)]
async fn two_engines_on_one_postgres_acknowledge_every_update_once() {
    let (_, url) =
        radkit::store::PostgresStore::create_schema(&services::postgres_url(), "radkit_push")
            .await
            .expect("create a test schema");
    let receiver = Receiver::start().await;
    let agent = agent_on(store(&url).await, true, &[]).await;
    let other = Engine::builder_arc(store(&url).await)
        .without_registered_skills()
        .skill(Ask)
        .push_settings(settings(true))
        .worker_id("other")
        .poll_interval(Duration::from_millis(20))
        .start()
        .await
        .expect("start the second engine");
    let mut tasks = Vec::new();
    for i in 0..6 {
        let sent = call(
            &agent.url,
            Some("1.0"),
            None,
            "SendMessage",
            json!({ "message": message(&format!("task {i}"), None),
                    "configuration": { "taskPushNotificationConfig": { "url": receiver.url } } }),
        )
        .await;
        tasks.push(
            sent["result"]["task"]["id"]
                .as_str()
                .expect("task")
                .to_owned(),
        );
    }
    for task in &tasks {
        let done = call(
            &agent.url,
            Some("1.0"),
            None,
            "SendMessage",
            json!({ "message": message("yes", Some(task)) }),
        )
        .await;
        assert_eq!(
            done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{done}"
        );
    }
    let posts = receiver
        .wait_for("every task's completed update", |posts| {
            tasks.iter().all(|task| {
                posts.iter().any(|p| {
                    p.header("x-a2a-task-id") == Some(task.as_str())
                        && is_status(p, "TASK_STATE_COMPLETED")
                })
            })
        })
        .await;
    for task in &tasks {
        let seqs: Vec<u64> = posts
            .iter()
            .filter(|p| p.header("x-a2a-task-id") == Some(task.as_str()))
            .map(Post::seq)
            .collect();
        assert_eq!(
            seqs,
            update_seqs(&agent.engine, task).await,
            "task {task}: each update posted once, in order, by one of the two engines"
        );
    }
    other.halt();
}

#[test(multi_thread, needs = Postgres)]
async fn a_dead_senders_webhook_is_taken_over_when_its_claim_expires() {
    let (_, url) =
        radkit::store::PostgresStore::create_schema(&services::postgres_url(), "radkit_push")
            .await
            .expect("create a test schema");
    let receiver = Receiver::start().await;
    receiver.hang();
    let mut short = settings(true);
    short.lease = Duration::from_millis(300);
    short.timeout = Duration::from_secs(25);
    let first = agent_with(store(&url).await, short.clone(), &[]).await;
    let sent = call(
        &first.url,
        Some("1.0"),
        None,
        "SendMessage",
        json!({ "message": message("hello", None),
                "configuration": { "taskPushNotificationConfig": { "url": receiver.url } } }),
    )
    .await;
    let task = sent["result"]["task"]["id"]
        .as_str()
        .expect("task")
        .to_owned();
    // The first engine's post hangs: it holds the claim when it dies.
    receiver
        .wait_for("a post held", |posts| !posts.is_empty())
        .await;
    first.crash();
    receiver.up();
    let second = Engine::builder_arc(store(&url).await)
        .without_registered_skills()
        .skill(Ask)
        .push_settings(short)
        .worker_id("second")
        .poll_interval(Duration::from_millis(20))
        .start()
        .await
        .expect("start the second engine");
    let posts = receiver
        .wait_for(
            "the input-required update from the second engine",
            |posts| {
                posts
                    .iter()
                    .any(|p| p.acknowledged() && is_status(p, "TASK_STATE_INPUT_REQUIRED"))
            },
        )
        .await;
    let acked: Vec<u64> = posts
        .iter()
        .filter(|p| p.acknowledged())
        .map(Post::seq)
        .collect();
    assert_eq!(
        acked,
        update_seqs(&second, &task).await,
        "the second engine took the claim over and posted every update once"
    );
    assert_eq!(
        posts[0].answered, 0,
        "the dead engine's post was never answered"
    );
    second.halt();
}
