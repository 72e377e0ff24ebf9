//! The `conformance` demo skill served by `radkit serve --default-skill conformance`, driven over
//! A2A 0.3 JSON-RPC: its text contract (`ask …` and any other text) and the A2A TCK's `messageId`
//! prefixes (`src/demo/conformance.rs` lists them; `docs/a2a-tck/` holds the scenarios).

use crate::support::common;

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use common::{read_events, rpc, within, Server, PATIENCE};

/// `radkit serve --default-skill conformance` over a fresh data directory, with `env` set.
fn serve(env: &[(&str, &str)]) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .args(["--default-skill", "conformance"]);
    for (key, value) in env {
        cmd.env(key, value);
    }
    (common::serve_command(cmd), dir)
}

/// A user message with this `messageId` and text (the TCK appends a session suffix to its prefixes).
fn message(message_id: &str, text: &str) -> Value {
    json!({ "role": "user", "parts": [{ "kind": "text", "text": text }], "messageId": message_id, "kind": "message" })
}

/// The same message as a reply on `task_id`.
fn reply(message_id: &str, text: &str, task_id: &str) -> Value {
    let mut m = message(message_id, text);
    m["taskId"] = json!(task_id);
    m
}

/// A fresh id starting with `prefix`, as the TCK's `tck_id` makes them.
fn tck_id(prefix: &str) -> String {
    format!("{prefix}-{}", common::uuid())
}

/// `message/send`, blocking; the result, or a panic showing the error.
async fn send(server: &Server, message: Value) -> Value {
    let client = reqwest::Client::new();
    let answer = rpc(
        &client,
        &server.url,
        None,
        "message/send",
        json!({ "message": message, "configuration": { "blocking": true } }),
    )
    .await;
    assert!(answer.get("error").is_none(), "{answer}");
    answer["result"].clone()
}

/// Every event of a `method` stream (`message/stream`, `tasks/resubscribe`) up to its final one: the
/// `result`s, in order.
async fn stream(server: &Server, method: &str, params: Value) -> Vec<Value> {
    let client = reqwest::Client::new();
    let resp = within(
        PATIENCE,
        &format!("the {method} stream to open"),
        client
            .post(format!("{}/", server.url))
            .json(&json!({ "jsonrpc": "2.0", "id": "s", "method": method, "params": params }))
            .send(),
    )
    .await
    .unwrap();
    let events = read_events(resp, |_| false).await;
    events
        .into_iter()
        .map(|e| {
            assert!(e.get("error").is_none(), "{e}");
            e["result"].clone()
        })
        .collect()
}

/// The text of a status's message.
fn status_text(task_or_event: &Value) -> &str {
    task_or_event["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// The kinds and states of a stream's events: `task:submitted`, `status:working`, `artifact`, ….
fn shape(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e["kind"].as_str().unwrap_or_default() {
            "task" => format!("task:{}", e["status"]["state"].as_str().unwrap_or_default()),
            "status-update" => format!(
                "status:{}",
                e["status"]["state"].as_str().unwrap_or_default()
            ),
            other => other.to_owned(),
        })
        .collect()
}

fn artifact_updates(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["kind"] == "artifact-update")
        .collect()
}

fn millis(timestamp: &Value) -> i64 {
    let text = timestamp.as_str().expect("a timestamp");
    chrono::DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("`{text}` is not RFC 3339: {e}"))
        .timestamp_millis()
}

/// Milliseconds between the first event's status timestamp and the last one's.
fn span_ms(events: &[Value]) -> i64 {
    let first = events.first().expect("events");
    let last = events.last().expect("events");
    millis(&last["status"]["timestamp"]) - millis(&first["status"]["timestamp"])
}

// ---- the text contract ----

#[test(multi_thread)]
async fn ask_goes_to_input_required_with_a_question_and_the_reply_completes_with_answer_txt() {
    let (server, _dir) = serve(&[]);
    let asked = send(&server, message(&common::uuid(), "ask me something")).await;
    assert_eq!(asked["kind"], "task", "{asked}");
    assert_eq!(asked["status"]["state"], "input-required", "{asked}");
    assert_eq!(
        status_text(&asked),
        "What should the answer say?",
        "{asked}"
    );
    let task_id = asked["id"].as_str().unwrap();

    let answered = send(
        &server,
        reply(&common::uuid(), "Forty-two, of course.", task_id),
    )
    .await;
    assert_eq!(answered["id"], task_id);
    assert_eq!(answered["status"]["state"], "completed", "{answered}");
    let artifacts = answered["artifacts"].as_array().expect("artifacts");
    assert_eq!(artifacts.len(), 1, "{answered}");
    assert_eq!(artifacts[0]["name"], "answer.txt");
    assert_eq!(artifacts[0]["parts"][0]["text"], "Forty-two, of course.");
}

#[test(multi_thread)]
async fn other_text_streams_working_then_one_artifact_in_two_chunks_then_completed_after_300_ms() {
    let (server, _dir) = serve(&[]);
    let streamed = stream(
        &server,
        "message/stream",
        json!({ "message": message(&common::uuid(), "hello there") }),
    )
    .await;
    // The stream opens with the task as it is at that moment (how far the skill got by then depends
    // on the machine) and follows it to its end.
    assert_eq!(streamed[0]["kind"], "task", "{streamed:#?}");
    let end = streamed.last().expect("events");
    assert_eq!(end["status"]["state"], "completed", "{streamed:#?}");
    assert_eq!(end["final"], true, "{streamed:#?}");
    // The whole story, replayed from the journal, is the same on every machine: the engine's
    // `working` as the task starts, then the skill's progress update, the chunks, the end.
    let task_id = streamed[0]["id"].as_str().expect("a task id");
    let events = stream(&server, "tasks/resubscribe", json!({ "id": task_id })).await;
    assert_eq!(
        shape(&events),
        [
            "status:submitted",
            "status:working",
            "status:working",
            "artifact-update",
            "artifact-update",
            "status:completed"
        ],
        "{events:#?}"
    );
    assert_eq!(status_text(&events[2]), "Echoing.", "{:#}", events[2]);
    let chunks = artifact_updates(&events);
    let (first, second) = (chunks[0], chunks[1]);
    assert_eq!(
        first["artifact"]["artifactId"], second["artifact"]["artifactId"],
        "one artifact"
    );
    assert_eq!(first["artifact"]["name"], "echo.txt");
    assert_eq!(first["artifact"]["parts"][0]["text"], "Echo: ");
    assert_ne!(first["append"], true, "{first}");
    assert_ne!(first["lastChunk"], true, "{first}");
    assert_eq!(second["artifact"]["parts"][0]["text"], "hello there");
    assert_eq!(second["append"], true, "{second}");
    assert_eq!(second["lastChunk"], true, "{second}");
    assert_eq!(events[5]["final"], true);
    let span = span_ms(&events);
    assert!(
        span >= 300,
        "the task ran {span} ms from its first event to its last"
    );

    // The same text sent (blocking) answers with the completed Task and the whole artifact.
    let task = send(&server, message(&common::uuid(), "hello there")).await;
    assert_eq!(task["kind"], "task", "{task}");
    assert_eq!(task["status"]["state"], "completed", "{task}");
    let parts: Vec<&str> = task["artifacts"][0]["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(parts.concat(), "Echo: hello there");
}

#[test]
fn an_unknown_default_skill_is_an_error_listing_the_served_skills_and_opens_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--default-skill", "nope"])
        .arg("--data-dir")
        .arg(&data);
    let out = common::output_within(cmd, PATIENCE, "radkit serve --default-skill nope");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--default-skill `nope` is not a skill this program serves; it serves research_loop_v2, ticker, research_table, research_reducer, report, conformance"),
        "{err}"
    );
    assert!(!data.exists(), "no data directory was created");
}

// ---- the TCK's messageId prefixes ----

#[test(multi_thread)]
async fn tck_unary_prefixes_complete_with_their_message_or_artifact() {
    let (server, _dir) = serve(&[]);
    let task = send(&server, message(&tck_id("tck-complete-task"), "Hello")).await;
    assert_eq!(task["status"]["state"], "completed", "{task}");
    assert_eq!(status_text(&task), "Hello from TCK");

    let artifact_of = |task: &Value| {
        assert_eq!(task["status"]["state"], "completed", "{task}");
        let artifacts = task["artifacts"].as_array().expect("artifacts");
        assert_eq!(artifacts.len(), 1, "{task}");
        assert!(artifacts[0]["artifactId"].is_string());
        artifacts[0]["parts"][0].clone()
    };
    let text = send(&server, message(&tck_id("tck-artifact-text"), "x")).await;
    assert_eq!(
        artifact_of(&text),
        json!({ "kind": "text", "text": "Generated text content" })
    );
    let file = send(&server, message(&tck_id("tck-artifact-file"), "x")).await;
    assert_eq!(
        artifact_of(&file),
        json!({ "kind": "file", "file": { "bytes": "dGNr", "mimeType": "text/plain", "name": "output.txt" } })
    );
    let url = send(&server, message(&tck_id("tck-artifact-file-url"), "x")).await;
    assert_eq!(
        artifact_of(&url),
        json!({ "kind": "file", "file": { "uri": "https://example.com/output.txt", "mimeType": "text/plain", "name": "output.txt" } })
    );
    let data = send(&server, message(&tck_id("tck-artifact-data"), "x")).await;
    assert_eq!(
        artifact_of(&data),
        json!({ "kind": "data", "data": { "key": "value", "count": 42 } })
    );

    // A direct message answer: the completion message, naming no task.
    let said = send(&server, message(&tck_id("tck-message-response"), "x")).await;
    assert_eq!(said["kind"], "message", "{said}");
    assert_eq!(said["role"], "agent");
    assert_eq!(
        said["parts"],
        json!([{ "kind": "text", "text": "Direct message response" }])
    );
    assert!(said.get("taskId").is_none(), "{said}");
}

#[test(multi_thread)]
async fn tck_reject_task_ends_rejected_and_tck_input_required_waits_until_tck_complete_task() {
    let (server, _dir) = serve(&[]);
    let rejected = send(&server, message(&tck_id("tck-reject-task"), "x")).await;
    assert_eq!(rejected["status"]["state"], "rejected", "{rejected}");
    assert_eq!(status_text(&rejected), "rejected");

    // The TCK's multi-turn helper: input-required, two more input-required replies, then complete.
    let waiting = send(&server, message(&tck_id("tck-input-required"), "start")).await;
    assert_eq!(waiting["status"]["state"], "input-required", "{waiting}");
    let task_id = waiting["id"].as_str().unwrap();
    for text in ["TCK history message 1", "TCK history message 2"] {
        let again = send(&server, reply(&tck_id("tck-input-required"), text, task_id)).await;
        assert_eq!(again["id"], task_id);
        assert_eq!(again["status"]["state"], "input-required", "{again}");
    }
    let done = send(
        &server,
        reply(&tck_id("tck-complete-task"), "done", task_id),
    )
    .await;
    assert_eq!(done["status"]["state"], "completed", "{done}");
    assert_eq!(status_text(&done), "Hello from TCK");
    let history: Vec<&str> = done["history"]
        .as_array()
        .expect("history")
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["parts"][0]["text"].as_str())
        .collect();
    assert!(
        history.ends_with(&["TCK history message 1", "TCK history message 2", "done"]),
        "{history:?}"
    );

    // A task waiting for input can be canceled (the TCK's CancelTask setup).
    let cancelable = send(&server, message(&tck_id("tck-input-required"), "x")).await;
    let client = reqwest::Client::new();
    let canceled = rpc(
        &client,
        &server.url,
        None,
        "tasks/cancel",
        json!({ "id": cancelable["id"] }),
    )
    .await;
    assert_eq!(
        canceled["result"]["status"]["state"], "canceled",
        "{canceled}"
    );
}

#[test(multi_thread)]
async fn tck_stream_prefixes_stream_working_their_artifact_and_completed() {
    let (server, _dir) = serve(&[]);
    for (prefix, text) in [
        ("tck-stream-001", "Stream hello from TCK"),
        ("tck-stream-003", "Stream task lifecycle"),
        ("tck-stream-ordering-001", "Ordered output"),
        ("tck-stream-artifact-text", "Streamed text content"),
    ] {
        let events = stream(
            &server,
            "message/stream",
            json!({ "message": message(&tck_id(prefix), "Stream") }),
        )
        .await;
        assert_eq!(
            shape(&events),
            [
                "task:submitted",
                "status:working",
                "artifact-update",
                "status:completed"
            ],
            "{prefix}: {events:#?}"
        );
        assert_eq!(
            events[2]["artifact"]["parts"],
            json!([{ "kind": "text", "text": text }]),
            "{prefix}"
        );
        assert_eq!(events[3]["final"], true, "{prefix}");
    }

    let events = stream(
        &server,
        "message/stream",
        json!({ "message": message(&tck_id("tck-stream-002"), "Stream") }),
    )
    .await;
    // Nothing but completed from the skill; the engine's `working` as every task starts comes first.
    assert_eq!(
        shape(&events),
        ["task:submitted", "status:working", "status:completed"],
        "{events:#?}"
    );

    let events = stream(
        &server,
        "message/stream",
        json!({ "message": message(&tck_id("tck-stream-artifact-file"), "Stream") }),
    )
    .await;
    assert_eq!(
        shape(&events),
        [
            "task:submitted",
            "status:working",
            "artifact-update",
            "status:completed"
        ],
        "{events:#?}"
    );
    assert_eq!(
        events[2]["artifact"]["parts"][0]["file"],
        json!({ "bytes": "dGNr", "mimeType": "text/plain", "name": "output.txt" })
    );
}

#[test(multi_thread)]
async fn tck_stream_artifact_chunked_streams_chunk_1_then_the_last_chunk_2_both_appended() {
    let (server, _dir) = serve(&[]);
    let events = stream(
        &server,
        "message/stream",
        json!({ "message": message(&tck_id("tck-stream-artifact-chunked"), "Stream") }),
    )
    .await;
    assert_eq!(
        shape(&events),
        [
            "task:submitted",
            "status:working",
            "artifact-update",
            "artifact-update",
            "status:completed"
        ],
        "{events:#?}"
    );
    let chunks = artifact_updates(&events);
    assert_eq!(
        chunks[0]["artifact"]["artifactId"],
        chunks[1]["artifact"]["artifactId"]
    );
    let seen: Vec<(Value, Value, Value)> = chunks
        .iter()
        .map(|c| {
            (
                c["artifact"]["parts"][0]["text"].clone(),
                c["append"].clone(),
                c["lastChunk"].clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (json!("chunk-1 "), json!(true), json!(false)),
            (json!("chunk-2"), json!(true), json!(true))
        ]
    );
}

#[test(multi_thread)]
async fn test_resubscribe_message_id_runs_twice_tck_streaming_timeout_and_can_be_resubscribed_or_canceled(
) {
    // TCK_STREAMING_TIMEOUT=0.4: the task runs at least 0.8 s.
    let (server, _dir) = serve(&[("TCK_STREAMING_TIMEOUT", "0.4")]);
    let client = reqwest::Client::new();
    let started = rpc(
        &client,
        &server.url,
        None,
        "message/send",
        json!({ "message": message(&tck_id("test-resubscribe-message-id"), "long"), "configuration": { "blocking": false } }),
    )
    .await;
    let task_id = started["result"]["id"]
        .as_str()
        .expect("task id")
        .to_owned();
    assert!(
        !matches!(
            started["result"]["status"]["state"].as_str(),
            Some("completed" | "failed" | "canceled" | "rejected")
        ),
        "still running: {started}"
    );
    let events = stream(&server, "tasks/resubscribe", json!({ "id": task_id })).await;
    let last = events.last().expect("events");
    assert_eq!(last["status"]["state"], "completed", "{events:#?}");
    assert!(
        shape(&events).contains(&"status:working".to_owned()),
        "{events:#?}"
    );
    let span = span_ms(&events);
    assert!(span >= 800, "the task ran {span} ms, not 2 x 0.4 s");

    // Long enough to be canceled while it runs.
    let running = rpc(
        &client,
        &server.url,
        None,
        "message/send",
        json!({ "message": message(&tck_id("test-resubscribe-message-id"), "long"), "configuration": { "blocking": false } }),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let canceled = rpc(
        &client,
        &server.url,
        None,
        "tasks/cancel",
        json!({ "id": running["result"]["id"] }),
    )
    .await;
    assert_eq!(
        canceled["result"]["status"]["state"], "canceled",
        "{canceled}"
    );
}
