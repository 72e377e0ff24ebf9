//! The `radkit serve` binary over real HTTP: the official A2A Python SDK as an external client, a Rust
//! client over reqwest, and a server killed with SIGKILL in the middle of a streamed task. The Python
//! client is `RADKIT_PYTHON`, else the workspace's `.venv` (see `services`); without it its tests are
//! reported ignored.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::common;
use crate::support::services;
use common::{read_events, read_sse, rpc, user, within, Server, PATIENCE};

/// Start `radkit serve` on a free port over `data_dir`.
fn serve(data_dir: &Path, extra: &[&str]) -> Server {
    let dir = data_dir.to_str().expect("utf-8 path");
    let mut args = vec!["--data-dir", dir];
    args.extend_from_slice(extra);
    common::serve(&args)
}

/// How long the Python client may run before it is killed and the test fails.
const SDK_LIMIT: Duration = Duration::from_secs(120);

fn run_sdk_check(url: &str, token: Option<&str>) {
    let python = services::python();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/a2a_sdk_check.py");
    let mut cmd = Command::new(python);
    cmd.arg(script).arg(url);
    if let Some(token) = token {
        cmd.arg(token);
    }
    let out = common::output_within(cmd, SDK_LIMIT, "the python SDK check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("ALL PASSED"),
        "python SDK check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The official `a2a-sdk` 1.x (`.venv1`, installed by `.ci/run`) over the three 1.0 bindings against the
/// conformance skill: `tests/python/a2a_sdk1_check.py`.
#[test(needs = Python1)]
fn official_python_sdk_1_x_drives_json_rpc_rest_and_grpc_1_0() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        &["--default-skill", "conformance", "--push-allow-private"],
    );
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/a2a_sdk1_check.py"
    );
    let mut cmd = Command::new(services::python1());
    cmd.arg(script).arg(&server.url);
    let out = common::output_within(cmd, SDK_LIMIT, "the python SDK 1.x check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("ALL PASSED"),
        "python SDK 1.x check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test(needs = Python)]
fn official_python_sdk_drives_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &["--push-allow-private"]);
    run_sdk_check(&server.url, None);
}

#[test(needs = Python)]
fn official_python_sdk_with_bearer_auth() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        &["--token", "s3cret=alice", "--push-allow-private"],
    );
    run_sdk_check(&server.url, Some("s3cret"));
}

#[test]
async fn a_task_is_visible_only_to_the_principal_that_created_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        &["--token", "a-token=alice", "--token", "b-token=bob"],
    );
    let client = reqwest::Client::new();
    let sent = rpc(
        &client,
        &server.url,
        Some("a-token"),
        "message/send",
        json!({ "message": user("topic"), "configuration": { "blocking": true } }),
    )
    .await;
    let id = sent["result"]["id"].as_str().expect("task id").to_owned();
    assert_eq!(sent["result"]["status"]["state"], "input-required");
    let mine = rpc(
        &client,
        &server.url,
        Some("a-token"),
        "tasks/get",
        json!({ "id": id }),
    )
    .await;
    assert_eq!(mine["result"]["id"], id.as_str());
    let theirs = rpc(
        &client,
        &server.url,
        Some("b-token"),
        "tasks/get",
        json!({ "id": id }),
    )
    .await;
    assert_eq!(theirs["error"]["code"], -32001, "{theirs}");
    let cancel = rpc(
        &client,
        &server.url,
        Some("b-token"),
        "tasks/cancel",
        json!({ "id": id }),
    )
    .await;
    assert_eq!(cancel["error"]["code"], -32001);
    let anon = within(
        PATIENCE,
        "the answer to an anonymous request",
        client
            .post(format!("{}/", server.url))
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": { "id": id } }))
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(anon.status(), 401);
    let card: Value = within(PATIENCE, "the agent card", async {
        client
            .get(format!("{}/.well-known/agent-card.json", server.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    })
    .await;
    assert_eq!(card["securitySchemes"]["bearer"]["scheme"], "Bearer");
    assert_eq!(
        card["url"].as_str().unwrap().trim_end_matches('/'),
        server.url
    );
}

/// The principal each task in `data_dir` was created for, from the journal.
async fn stored_principals(data_dir: &Path, tasks: &[&str]) -> Vec<Option<String>> {
    use radkit::journal::Entry;
    use radkit::store::{Durability, SqliteStore, Store};
    let store = SqliteStore::open(data_dir.join("radkit.sqlite"), Durability::Full).unwrap();
    let mut principals = Vec::new();
    for task in tasks {
        let journal = store.journal(task, 0).await.unwrap();
        principals.push(
            journal
                .iter()
                .find_map(|r| match &r.entry {
                    Entry::TaskCreated { principal, .. } => Some(principal.clone()),
                    _ => None,
                })
                .flatten(),
        );
    }
    principals
}

#[test]
async fn unnamed_tokens_are_distinct_principals_that_store_no_part_of_the_token() {
    let dir = tempfile::tempdir().unwrap();
    // Two unnamed tokens with one prefix, and a named token with a comma in it.
    let tokens = [
        "--token",
        "abcdSECRET1",
        "--token",
        "abcdOTHER2",
        "--token",
        "p,q=bob",
    ];
    let server = serve(dir.path(), &tokens);
    let client = reqwest::Client::new();
    let start = |token: &'static str| {
        let (client, url) = (client.clone(), server.url.clone());
        async move {
            let sent = rpc(
                &client,
                &url,
                Some(token),
                "message/send",
                json!({ "message": user("topic"), "configuration": { "blocking": true } }),
            )
            .await;
            assert_eq!(
                sent["result"]["status"]["state"], "input-required",
                "{token}: {sent}"
            );
            sent["result"]["id"].as_str().expect("task id").to_owned()
        }
    };
    let first = start("abcdSECRET1").await;
    let second = start("abcdOTHER2").await;
    // The second token neither reads nor answers the first one's task.
    let read = rpc(
        &client,
        &server.url,
        Some("abcdOTHER2"),
        "tasks/get",
        json!({ "id": first }),
    )
    .await;
    assert_eq!(read["error"]["code"], -32001, "{read}");
    let mut reply = user("Make it friendlier.");
    reply["taskId"] = json!(first);
    let answered = rpc(
        &client,
        &server.url,
        Some("abcdOTHER2"),
        "message/send",
        json!({ "message": reply }),
    )
    .await;
    assert_eq!(answered["error"]["code"], -32001, "{answered}");
    // A token with a comma in it is one token, for its named principal; its halves are no tokens.
    let bobs = start("p,q").await;
    for half in ["p", "q", "q=bob"] {
        let resp = within(PATIENCE, "an answer", client.post(format!("{}/", server.url)).bearer_auth(half)
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": { "id": bobs } })).send())
            .await
            .unwrap();
        assert_eq!(resp.status(), 401, "{half}");
    }
    drop(server);

    // No part of a secret anywhere in the database files (the WAL included), read while no process
    // has them open.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        for needle in ["SECRET1", "OTHER2", "token-abcd", "p,q"] {
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
                "`{needle}` in {}",
                path.display()
            );
        }
    }

    let principals = stored_principals(dir.path(), &[&first, &second, &bobs]).await;
    let [Some(one), Some(two), Some(bob)] = &principals[..] else {
        panic!("every task has a principal: {principals:?}");
    };
    assert_eq!(bob, "bob");
    assert_ne!(one, two);
    for principal in [one, two] {
        let hex = principal
            .strip_prefix("token-")
            .unwrap_or_else(|| panic!("{principal}"));
        assert!(
            hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
            "{principal}"
        );
    }
    // After a restart each token is still its own principal.
    let server = serve(dir.path(), &tokens);
    let mine = rpc(
        &client,
        &server.url,
        Some("abcdSECRET1"),
        "tasks/get",
        json!({ "id": first }),
    )
    .await;
    assert_eq!(mine["result"]["id"], first.as_str(), "{mine}");
    let theirs = rpc(
        &client,
        &server.url,
        Some("abcdOTHER2"),
        "tasks/get",
        json!({ "id": first }),
    )
    .await;
    assert_eq!(theirs["error"]["code"], -32001, "{theirs}");
    let own = rpc(
        &client,
        &server.url,
        Some("abcdOTHER2"),
        "tasks/get",
        json!({ "id": second }),
    )
    .await;
    assert_eq!(own["result"]["id"], second.as_str(), "{own}");
}

#[test]
async fn accepted_output_modes_filter_artifact_parts() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    let client = reqwest::Client::new();
    let sent = rpc(
        &client,
        &server.url,
        None,
        "message/send",
        json!({ "message": user("topic"), "configuration": { "blocking": true } }),
    )
    .await;
    let id = sent["result"]["id"].as_str().unwrap().to_owned();
    let mut reply = user("ok");
    reply["taskId"] = json!(id);
    let only_json = rpc(&client, &server.url, None, "message/send", json!({ "message": reply, "configuration": { "blocking": true, "acceptedOutputModes": ["application/json"] } })).await;
    assert_eq!(
        only_json["result"]["status"]["state"], "completed",
        "{only_json}"
    );
    assert!(
        only_json["result"].get("artifacts").is_none(),
        "text artifacts filtered out: {only_json}"
    );
    let all = rpc(&client, &server.url, None, "tasks/get", json!({ "id": id })).await;
    assert_eq!(all["result"]["artifacts"][0]["name"], "final.txt");
}

/// A blocking send's task is the task `tasks/get` reads, whatever `historyLength` asks: the wait
/// for a task the send started folds it from the records its run publishes, without reading the
/// store, and what it folds must be what the store keeps (status and its message and time,
/// history, artifacts). The answer's task too (that wait reads the store).
#[test]
async fn a_blocking_sends_task_is_the_task_tasks_get_reads() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    let client = reqwest::Client::new();
    let read = |id: String, history: Value| {
        let (client, url) = (&client, &server.url);
        async move {
            rpc(
                client,
                url,
                None,
                "tasks/get",
                json!({ "id": id, "historyLength": history }),
            )
            .await
        }
    };
    for history in [json!(null), json!(0), json!(1), json!(3)] {
        let configuration = json!({ "blocking": true, "historyLength": history });
        let sent = rpc(
            &client,
            &server.url,
            None,
            "message/send",
            json!({ "message": user("topic"), "configuration": configuration }),
        )
        .await;
        let task = &sent["result"];
        assert_eq!(task["status"]["state"], "input-required", "{sent}");
        let id = task["id"].as_str().unwrap().to_owned();
        let got = read(id.clone(), history.clone()).await;
        assert_eq!(*task, got["result"], "historyLength {history}");
        let mut reply = user("ok");
        reply["taskId"] = json!(id);
        let answered = rpc(
            &client,
            &server.url,
            None,
            "message/send",
            json!({ "message": reply, "configuration": configuration }),
        )
        .await;
        assert_eq!(
            answered["result"]["status"]["state"], "completed",
            "{answered}"
        );
        let got = read(id.clone(), history.clone()).await;
        assert_eq!(answered["result"], got["result"], "historyLength {history}");
    }
}

fn chunks(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["result"]["kind"] == "artifact-update")
        .map(|e| {
            e["result"]["artifact"]["parts"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
async fn server_killed_mid_stream_resumes_and_resubscribe_sees_every_event_once() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let mut server = serve(dir.path(), &[]);
    let mut message = user("Durable execution");
    message["metadata"] = json!({ "skillId": "report" });
    let resp = within(
        PATIENCE,
        "the stream to open",
        client.post(format!("{}/", server.url)).json(&json!({ "jsonrpc": "2.0", "id": "s", "method": "message/stream", "params": { "message": message } })).send(),
    )
    .await
    .unwrap();
    // Read until the second chunk: the skill is now in its durable pause.
    let before = read_events(resp, |events| chunks(events).len() >= 2).await;
    let task_id = before[0]["result"]["id"]
        .as_str()
        .expect("first event is the task")
        .to_owned();
    assert!(
        before.iter().all(|e| e["id"] == "s"),
        "every event carries the request id"
    );
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();

    let server = serve(dir.path(), &[]);
    let resp = within(
        PATIENCE,
        "the resubscription to open",
        client.post(format!("{}/", server.url)).json(&json!({ "jsonrpc": "2.0", "id": "r", "method": "tasks/resubscribe", "params": { "id": task_id } })).send(),
    )
    .await
    .unwrap();
    let story = read_events(resp, |_| false).await;
    let last = story.last().unwrap();
    assert_eq!(last["result"]["status"]["state"], "completed", "{last}");
    assert_eq!(last["result"]["final"], true);
    assert_eq!(
        chunks(&story),
        vec![
            "# Durable execution\n",
            "Durable steps journal every effect before it runs.\n",
            "A crash replays receipts instead of repeating effects.\n",
            "Waiting for a human costs nothing.\n"
        ],
        "every chunk once, in order"
    );
    let appends: Vec<bool> = story
        .iter()
        .filter(|e| e["result"]["kind"] == "artifact-update")
        .map(|e| e["result"]["append"] == true)
        .collect();
    assert_eq!(appends, vec![false, true, true, true]);
    let progress: Vec<&str> = story
        .iter()
        .filter_map(|e| e["result"]["status"]["message"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(
        progress.iter().filter(|t| **t == "Searching…").count(),
        1,
        "{progress:?}"
    );
    assert_eq!(
        progress
            .iter()
            .filter(|t| **t == "Writing the conclusion…")
            .count(),
        1,
        "{progress:?}"
    );
    let states: Vec<&str> = story
        .iter()
        .filter_map(|e| e["result"]["status"]["state"].as_str())
        .collect();
    assert_eq!(states.first(), Some(&"submitted"));
}

/// The artifact chunks' texts of SSE events (with ids).
fn chunk_texts(events: &[(Option<u64>, Value)]) -> Vec<String> {
    chunks(&events.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>())
}

#[test]
async fn a_stream_killed_with_its_server_resumes_from_last_event_id_with_nothing_repeated_or_lost()
{
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let mut server = serve(dir.path(), &[]);
    let mut message = user("Durable execution");
    message["metadata"] = json!({ "skillId": "report" });
    let request = json!({ "jsonrpc": "2.0", "id": "s", "method": "message/stream", "params": { "message": message } });
    let resp = within(
        PATIENCE,
        "the stream to open",
        client
            .post(format!("{}/", server.url))
            .json(&request)
            .send(),
    )
    .await
    .unwrap();
    let before = read_sse(resp, |events| chunk_texts(events).len() >= 2).await;
    let ids: Vec<u64> = before
        .iter()
        .map(|(id, e)| id.unwrap_or_else(|| panic!("every event has an id: {e}")))
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids are increasing journal seqs: {ids:?}"
    );
    let task_id = before[0].1["result"]["id"].as_str().unwrap().to_owned();
    let seen = *ids.last().unwrap();
    server.child.kill().unwrap(); // SIGKILL, mid-stream
    server.child.wait().unwrap();

    // The same send again (same messageId: the same task) with the last id seen: the rest of the
    // story, nothing of it twice.
    let server = serve(dir.path(), &[]);
    let resp = within(
        PATIENCE,
        "the resumed stream to open",
        client
            .post(format!("{}/", server.url))
            .header("last-event-id", seen.to_string())
            .json(&request)
            .send(),
    )
    .await
    .unwrap();
    let after = read_sse(resp, |_| false).await;
    assert!(
        after.iter().all(|(id, _)| id.is_some_and(|id| id > seen)),
        "only events after {seen}: {after:?}"
    );
    assert!(
        after
            .iter()
            .all(|(_, e)| e["result"]["taskId"] == task_id.as_str()),
        "the same task: {after:?}"
    );
    let mut story = chunk_texts(&before);
    story.extend(chunk_texts(&after));
    assert_eq!(
        story,
        vec![
            "# Durable execution\n",
            "Durable steps journal every effect before it runs.\n",
            "A crash replays receipts instead of repeating effects.\n",
            "Waiting for a human costs nothing.\n"
        ],
        "every chunk once, in order, across the kill"
    );
    let last = &after.last().unwrap().1;
    assert_eq!(last["result"]["status"]["state"], "completed", "{last}");
    let final_id = after.last().unwrap().0.unwrap();

    // tasks/resubscribe resumes the same way; after the final event there is nothing more.
    let resubscribe = |last_event_id: u64| {
        client
            .post(format!("{}/", server.url))
            .header("last-event-id", last_event_id.to_string())
            .json(&json!({ "jsonrpc": "2.0", "id": "r", "method": "tasks/resubscribe", "params": { "id": task_id } }))
            .send()
    };
    let resp = within(PATIENCE, "a resubscription", resubscribe(seen))
        .await
        .unwrap();
    let again = read_sse(resp, |_| false).await;
    let again_ids: Vec<Option<u64>> = again.iter().map(|(id, _)| *id).collect();
    let after_ids: Vec<Option<u64>> = after.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        again_ids, after_ids,
        "resubscribe after {seen} replays the same events"
    );
    let resp = within(
        PATIENCE,
        "a resubscription after the end",
        resubscribe(final_id),
    )
    .await
    .unwrap();
    assert!(
        read_sse(resp, |_| false).await.is_empty(),
        "a stream resumed after its final event ends at once"
    );
}

#[test]
async fn a_1_0_stream_killed_with_its_server_resumes_over_json_rpc_and_rest_with_nothing_repeated_or_lost(
) {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let mut server = serve(dir.path(), &[]);
    let message = json!({
        "messageId": format!("v1-kill-{}", common::uuid()),
        "role": "ROLE_USER",
        "parts": [{ "text": "Durable execution" }],
        "metadata": { "skillId": "report" },
    });
    let request = json!({ "jsonrpc": "2.0", "id": "s", "method": "SendStreamingMessage", "params": { "message": message } });
    let send = |url: &str, last_event_id: Option<u64>| {
        let mut request = client
            .post(format!("{url}/"))
            .header("A2A-Version", "1.0")
            .json(&request);
        if let Some(seen) = last_event_id {
            request = request.header("last-event-id", seen.to_string());
        }
        request.send()
    };
    let resp = within(PATIENCE, "the 1.0 stream to open", send(&server.url, None))
        .await
        .unwrap();
    let before = read_sse(resp, |events| common::v1_chunk_texts(events).len() >= 2).await;
    let task_id = before[0].1["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a 1.0 stream opens with the task: {:?}", before[0]))
        .to_owned();
    let seen = before.last().unwrap().0.expect("every 1.0 event has an id");
    server.child.kill().unwrap(); // SIGKILL, mid-stream
    server.child.wait().unwrap();

    // The same SendStreamingMessage after the restart, with the last id seen.
    let server = serve(dir.path(), &[]);
    let resp = within(
        PATIENCE,
        "the resumed 1.0 stream",
        send(&server.url, Some(seen)),
    )
    .await
    .unwrap();
    let after = read_sse(resp, |_| false).await;
    assert!(
        after.iter().all(|(id, _)| id.is_some_and(|id| id > seen)),
        "only events after {seen}: {after:?}"
    );
    let mut story = common::v1_chunk_texts(&before);
    story.extend(common::v1_chunk_texts(&after));
    assert_eq!(
        story,
        vec![
            "# Durable execution\n",
            "Durable steps journal every effect before it runs.\n",
            "A crash replays receipts instead of repeating effects.\n",
            "Waiting for a human costs nothing.\n"
        ],
        "every chunk once, in order, across the kill"
    );
    let last = &after.last().unwrap().1;
    assert_eq!(
        last["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{last}"
    );

    // The REST binding resumes the same task from the same id: the same events, bare.
    let resp = within(
        PATIENCE,
        "a REST subscription resumed",
        client
            .get(format!("{}/tasks/{task_id}:subscribe", server.url))
            .header("A2A-Version", "1.0")
            .header("last-event-id", seen.to_string())
            .send(),
    )
    .await
    .unwrap();
    let rest = read_sse(resp, |_| false).await;
    let ids =
        |events: &[(Option<u64>, Value)]| events.iter().map(|(id, _)| *id).collect::<Vec<_>>();
    assert_eq!(
        ids(&rest),
        ids(&after),
        "REST replays the same events after {seen}"
    );
    assert_eq!(
        common::v1_chunk_texts(&rest),
        common::v1_chunk_texts(&after)
    );
    assert!(
        rest.iter().all(|(_, e)| e.get("result").is_none()),
        "REST events are bare: {rest:?}"
    );
}

#[test]
async fn a_dropped_stream_connection_does_not_stop_the_task() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    let client = reqwest::Client::new();
    let mut message = user("Durable execution");
    message["metadata"] = json!({ "skillId": "report" });
    let resp = within(
        PATIENCE,
        "the stream to open",
        client.post(format!("{}/", server.url)).json(&json!({ "jsonrpc": "2.0", "id": "s", "method": "message/stream", "params": { "message": message } })).send(),
    )
    .await
    .unwrap();
    let first = read_events(resp, |events| !events.is_empty()).await; // the response is dropped here
    let task_id = first[0]["result"]["id"].as_str().unwrap().to_owned();
    // Follow the task on a new connection until its final status.
    let resp = within(
        PATIENCE,
        "the resubscription to open",
        client.post(format!("{}/", server.url)).json(&json!({ "jsonrpc": "2.0", "id": "r", "method": "tasks/resubscribe", "params": { "id": task_id } })).send(),
    )
    .await
    .unwrap();
    let rest = read_events(resp, |_| false).await;
    let last = rest.last().expect("events after the drop");
    assert_eq!(last["result"]["final"], true, "{last}");
    assert_eq!(
        last["result"]["status"]["state"], "completed",
        "the task stopped when its client left: {last}"
    );
    let got = rpc(
        &client,
        &server.url,
        None,
        "tasks/get",
        json!({ "id": task_id }),
    )
    .await;
    assert_eq!(
        got["result"]["artifacts"][0]["parts"]
            .as_array()
            .unwrap()
            .len(),
        4,
        "every chunk was still written: {got}"
    );
}
