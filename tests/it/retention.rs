//! `radkit serve --retain-journals … --retain-tasks …`: a real server compacts a finished task's
//! journal (the console's journal shows the gap), answers `tasks/get` and a 0.3 resubscribe to it as
//! before, then deletes it (`tasks/get`: task not found).

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::common::{self, rpc, within, PATIENCE};

/// The seqs of the task's journal, as the console serves it.
async fn seqs(client: &reqwest::Client, url: &str, id: &str) -> Vec<u64> {
    let journal: Vec<Value> = client
        .get(format!("{url}/console/tasks/{id}/journal.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    journal.iter().filter_map(|r| r["seq"].as_u64()).collect()
}

#[test]
async fn a_server_with_retention_compacts_then_deletes_a_finished_task() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let server = common::serve(&[
        "--data-dir",
        data,
        "--retain-journals",
        "0s",
        "--retain-tasks",
        "15s",
    ]);
    let client = reqwest::Client::new();
    let mut message = common::user("Retention");
    message["metadata"] = json!({ "skillId": "report" });
    let sent = rpc(
        &client,
        &server.url,
        None,
        "message/send",
        json!({ "message": message, "configuration": { "blocking": true } }),
    )
    .await;
    let task = sent["result"].clone();
    assert_eq!(task["status"]["state"], "completed", "{sent}");
    let id = task["id"].as_str().expect("a task id").to_owned();

    // Compacted within a few pruner periods (one second each): a gap after the first append.
    let kept = within(PATIENCE, "the journal to be compacted", async {
        loop {
            let seqs = seqs(&client, &server.url, &id).await;
            if seqs.windows(2).any(|w| w[1] > w[0] + 1) {
                return seqs;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert_eq!(kept[0], 1, "the first append stays: {kept:?}");

    // What a client reads is as it was.
    let got = rpc(&client, &server.url, None, "tasks/get", json!({ "id": id })).await;
    assert_eq!(got["result"]["status"], task["status"], "{got}");
    assert_eq!(got["result"]["artifacts"], task["artifacts"], "{got}");
    let resp = client
        .post(format!("{}/", server.url))
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tasks/resubscribe", "params": { "id": id } }))
        .send()
        .await
        .unwrap();
    let events = common::read_events(resp, |_| false).await;
    let last = events.last().expect("the resubscribe streams the task");
    assert_eq!(last["result"]["final"], true, "{events:?}");
    assert_eq!(last["result"]["status"]["state"], "completed", "{events:?}");

    // Then, fifteen seconds after it finished, it is deleted.
    within(Duration::from_secs(60), "the task to be deleted", async {
        loop {
            let got = rpc(&client, &server.url, None, "tasks/get", json!({ "id": id })).await;
            if got["error"]["code"] == -32001 {
                return;
            }
            assert_eq!(got["result"]["id"], id.as_str(), "{got}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
    // `/metrics` counts what the pruner did: the journal compacted, then the task deleted.
    let metrics = client
        .get(format!("{}/metrics", server.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let scrape = crate::metrics::parse(&metrics);
    for what in ["journal", "task"] {
        let count = crate::metrics::value(&scrape, "radkit_tasks_pruned_total", &[("what", what)])
            .unwrap_or_else(|| panic!("no radkit_tasks_pruned_total{{what={what}}} in {metrics}"));
        assert!(count >= 1.0, "{what}: {count}");
    }
}
