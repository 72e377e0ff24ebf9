//! The A2A JSON-RPC error surface, checked from Rust: every error code `docs/a2a-server.md` lists,
//! each with its exact code (and the request's id where the request had a readable one), 413 for
//! bodies over 1 MiB, 401 with `radkit serve --token`, no internal detail in an internal error, and
//! a task of another skill version refused with -32004 and left as it was. Most tests run the engine and
//! `radkit::server::serve` in-process on a loopback listener; the token test starts `radkit serve`.

use crate::support::agent::{client, serving, start, Agent, PATIENCE};
use crate::support::common;
use crate::support::skills::{Ask, Nap};

use radkit::engine::Caller;
use radkit::model::TaskId;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use radkit::journal::JournalRecord;
use radkit::prelude::*;
use radkit::store::{
    Append, Durability, MemoryStore, SqliteStore, Store, StoreError, TaskQuery, TaskRecord,
};
use serde_json::{json, Value};

// ---- skills ----

/// Version 1 of `greeter`: asks for a name, then greets.
#[derive(Default)]
struct GreeterV1;

#[flow_skill(id = "greeter", name = "Greeter", version = "1", register = false)]
impl GreeterV1 {
    #[step(start)]
    async fn ask(&self, _: Content) -> StepResult {
        await_input!(slot = "name", message = "What is your name?")
    }

    #[step(resume_from = "ask")]
    async fn greet(&self, ctx: &StepCtx, reply: Content) -> StepResult {
        ctx.complete(format!("Hello, {}!", reply.joined_texts().trim()), vec![])
    }
}

/// Version 2 of `greeter`, the same id: its question carries a greeting into `greet`, so a task
/// waiting before version 1's `greet` (which carries nothing) cannot move to it.
#[derive(Default)]
struct GreeterV2;

#[flow_skill(id = "greeter", name = "Greeter", version = "2", register = false)]
impl GreeterV2 {
    #[step(start)]
    async fn ask(&self, _: Content) -> StepResult {
        let greeting = "Hi".to_owned();
        await_input!(
            slot = "name",
            message = "Your name, please?",
            carry = greeting
        )
    }

    #[step(resume_from = "ask")]
    async fn greet(&self, ctx: &StepCtx, greeting: String, reply: Content) -> StepResult {
        ctx.complete(
            format!("{greeting}, {}.", reply.joined_texts().trim()),
            vec![],
        )
    }
}

// ---- an in-process agent ----

/// The `ask` skill over a memory store, default server settings.
async fn ask_agent() -> Agent {
    serving(Ask).await
}

/// POST `body` as it is to the agent's JSON-RPC endpoint: the HTTP status and the body (JSON when it
/// is JSON, else a string).
async fn post(client: &reqwest::Client, url: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
    let resp = client
        .post(format!("{url}/"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}/: {e}"));
    let status = resp.status().as_u16();
    let stream = resp
        .headers()
        .get("content-type")
        .is_some_and(|c| c.as_bytes().starts_with(b"text/event-stream"));
    let text = resp
        .text()
        .await
        .unwrap_or_else(|e| panic!("the body of the answer from {url}/: {e}"));
    // A stream that cannot start is one SSE event holding the error: its envelope is the answer.
    let json = match stream {
        true => text
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap_or_default()
            .to_owned(),
        false => text.clone(),
    };
    let body = serde_json::from_str(&json).unwrap_or(Value::String(text));
    (status, body)
}

/// One JSON-RPC call with id `"req"`; the envelope (which must come with HTTP 200).
async fn call(client: &reqwest::Client, url: &str, method: &str, params: Value) -> Value {
    let request = json!({ "jsonrpc": "2.0", "id": "req", "method": method, "params": params });
    let (status, body) = post(client, url, request.to_string()).await;
    assert_eq!(status, 200, "{method}: {body}");
    body
}

/// The error of `envelope`, which must carry `code` and no result; returns its message.
#[track_caller]
fn error(envelope: &Value, code: i64, what: &str) -> String {
    assert_eq!(envelope["jsonrpc"], "2.0", "{what}: {envelope}");
    assert!(envelope.get("result").is_none(), "{what}: {envelope}");
    assert_eq!(envelope["error"]["code"], code, "{what}: {envelope}");
    envelope["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: an error message: {envelope}"))
        .to_owned()
}

/// A JSON-RPC method error: `code`, and the request's id echoed.
#[track_caller]
fn method_error(envelope: &Value, code: i64, what: &str) -> String {
    assert_eq!(
        envelope["id"], "req",
        "{what}: the request id is echoed: {envelope}"
    );
    error(envelope, code, what)
}

/// A user message answering `task`.
fn answer(task: &str, text: &str) -> Value {
    let mut message = common::user(text);
    message["taskId"] = json!(task);
    message
}

/// A new `ask` task, waiting for its answer; returns its id.
async fn waiting_task(client: &reqwest::Client, url: &str) -> String {
    let sent = call(
        client,
        url,
        "message/send",
        json!({ "message": common::user("hello"), "configuration": { "blocking": true } }),
    )
    .await;
    assert_eq!(
        sent["result"]["status"]["state"], "input-required",
        "{sent}"
    );
    sent["result"]["id"].as_str().expect("a task id").to_owned()
}

/// A finished (`completed`) `ask` task; returns its id.
async fn completed_task(client: &reqwest::Client, url: &str) -> String {
    let task = waiting_task(client, url).await;
    let done = call(
        client,
        url,
        "message/send",
        json!({ "message": answer(&task, "42"), "configuration": { "blocking": true } }),
    )
    .await;
    assert_eq!(done["result"]["status"]["state"], "completed", "{done}");
    task
}

// ---- -32700, -32600, -32601 ----

#[test(multi_thread)]
async fn a_body_that_is_not_json_is_a_parse_error_with_a_null_id() {
    let agent = ask_agent().await;
    let client = client();
    for body in [
        "{",
        "not json",
        r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get""#,
        "",
    ] {
        let (status, envelope) = post(&client, &agent.url, body).await;
        assert_eq!(status, 200, "{body:?}: {envelope}");
        assert_eq!(envelope["id"], Value::Null, "{body:?}: {envelope}");
        error(&envelope, -32700, body);
    }
}

#[test(multi_thread)]
async fn a_body_that_is_not_a_request_object_is_an_invalid_request() {
    let agent = ask_agent().await;
    let client = client();
    let cases = [
        // Not an object (batches are not supported): no id can be read.
        ("[]", Value::Null),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}]"#,
            Value::Null,
        ),
        (r#""tasks/get""#, Value::Null),
        ("42", Value::Null),
        // An id that is neither a string, a number nor null.
        (
            r#"{"jsonrpc":"2.0","id":{"n":1},"method":"tasks/get"}"#,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":[1],"method":"tasks/get"}"#,
            Value::Null,
        ),
        // A readable id, but no `jsonrpc: "2.0"` or no string `method`.
        (
            r#"{"id":3,"method":"tasks/get","params":{"id":"x"}}"#,
            json!(3),
        ),
        (r#"{"jsonrpc":"1.0","id":3,"method":"tasks/get"}"#, json!(3)),
        (
            r#"{"jsonrpc":2.0,"id":"three","method":"tasks/get"}"#,
            json!("three"),
        ),
        (r#"{"jsonrpc":"2.0","id":3}"#, json!(3)),
        (r#"{"jsonrpc":"2.0","id":3,"method":7}"#, json!(3)),
    ];
    let mut cases: Vec<(String, Value)> = cases
        .into_iter()
        .map(|(body, id)| (body.to_owned(), id))
        .collect();
    // Valid JSON with a number no JSON value here can hold: an invalid request, not a parse error.
    cases.push((
        format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tasks/get","params":{{"id":"x"}}}}"#,
            "9".repeat(5_000)
        ),
        Value::Null,
    ));
    cases.push((
        r#"{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"id":"x","historyLength":1e999}}"#
            .to_owned(),
        Value::Null,
    ));
    for (body, id) in cases {
        let (status, envelope) = post(&client, &agent.url, body.clone()).await;
        // The 5,000-digit id, shortened in messages.
        let body: String = body.chars().take(120).collect();
        assert_eq!(status, 200, "{body}: {envelope}");
        assert_eq!(envelope["id"], id, "{body}: {envelope}");
        error(&envelope, -32600, &body);
    }
}

#[test(multi_thread)]
async fn an_unknown_method_is_method_not_found_naming_it() {
    let agent = ask_agent().await;
    let client = client();
    for method in ["tasks/list", "message/sendd", "Message/Send", ""] {
        let envelope = call(&client, &agent.url, method, json!({})).await;
        let message = method_error(&envelope, -32601, method);
        assert!(message.contains(&format!("`{method}`")), "{message}");
    }
}

// ---- -32602 ----

#[test(multi_thread)]
async fn bad_params_are_invalid_params() {
    let agent = ask_agent().await;
    let client = client();
    let empty_parts =
        json!({ "role": "user", "parts": [], "messageId": common::uuid(), "kind": "message" });
    let from_agent = json!({ "role": "agent", "parts": [{ "kind": "text", "text": "hi" }],
                             "messageId": common::uuid(), "kind": "message" });
    let mut unknown_skill = common::user("hello");
    unknown_skill["metadata"] = json!({ "skillId": "no_such_skill" });
    let mut unknown_mode = common::user("hello");
    unknown_mode["metadata"] = json!({ "permissionMode": "yolo" });
    // Deeper than the journal could read back (radkit::journal::MAX_MESSAGE_DEPTH is 64).
    let mut too_deep = common::user("hello");
    let mut deep = json!(1);
    for _ in 0..70 {
        deep = json!([deep]);
    }
    too_deep["metadata"] = json!({ "deep": deep });
    let mut skill_not_text = common::user("hello");
    skill_not_text["metadata"] = json!({ "skillId": 7 });
    let with_file = |file: Value| {
        let mut message = common::user("hello");
        message["parts"]
            .as_array_mut()
            .expect("parts")
            .push(json!({ "kind": "file", "file": file }));
        message
    };
    let cases = [
        // `params` that is not an object.
        (
            "tasks/get",
            json!([{ "id": "x" }]),
            "`params` must be an object",
        ),
        ("message/send", json!("hello"), "`params` must be an object"),
        // Empty parts.
        (
            "message/send",
            json!({ "message": empty_parts }),
            "must not be empty",
        ),
        (
            "message/stream",
            json!({ "message": empty_parts }),
            "must not be empty",
        ),
        // A negative historyLength.
        (
            "message/send",
            json!({ "message": common::user("hi"), "configuration": { "historyLength": -1 } }),
            "`historyLength` must not be negative",
        ),
        (
            "tasks/get",
            json!({ "id": "x", "historyLength": -5 }),
            "`historyLength` must not be negative",
        ),
        // Wrong types and missing fields.
        (
            "message/send",
            json!({ "message": "hello" }),
            "invalid params",
        ),
        ("message/send", json!({}), "invalid params"),
        (
            "message/send",
            json!({ "message": common::user("hi"), "configuration": { "historyLength": "ten" } }),
            "invalid params",
        ),
        (
            "message/send",
            json!({ "message": common::user("hi"), "configuration": { "blocking": "yes" } }),
            "invalid params",
        ),
        (
            "message/stream",
            json!({ "message": { "role": "user", "parts": [{ "kind": "text" }] } }),
            "invalid params",
        ),
        ("tasks/get", json!({ "id": 42 }), "invalid params"),
        ("tasks/get", json!({}), "invalid params"),
        ("tasks/cancel", json!({ "id": ["x"] }), "invalid params"),
        (
            "tasks/resubscribe",
            json!({ "taskId": "x" }),
            "invalid params",
        ),
        // What the engine refuses as input.
        (
            "message/send",
            json!({ "message": from_agent }),
            "role must be `user`",
        ),
        (
            "message/send",
            json!({ "message": unknown_skill }),
            "no skill `no_such_skill`",
        ),
        (
            "message/send",
            json!({ "message": too_deep }),
            "the limit is 64",
        ),
        // What the server reads from metadata, once, for the engine.
        (
            "message/send",
            json!({ "message": unknown_mode }),
            "unknown permissionMode \"yolo\"",
        ),
        (
            "message/stream",
            json!({ "message": common::user("hi"), "metadata": { "permissionMode": 3 } }),
            "unknown permissionMode 3",
        ),
        (
            "message/send",
            json!({ "message": skill_not_text }),
            "metadata `skillId` must be a string",
        ),
        // A file part: base64 `bytes` or a `uri`, exactly one of them.
        (
            "message/send",
            json!({ "message": with_file(json!({ "bytes": "!!notbase64" })) }),
            "`message.parts[1].file.bytes` is not valid base64",
        ),
        (
            "message/stream",
            json!({ "message": with_file(json!({ "bytes": "aGVsbG8=\n", "mimeType": "text/plain" })) }),
            "`message.parts[1].file.bytes` is not valid base64",
        ),
        (
            "message/send",
            json!({ "message": with_file(json!({ "bytes": "aGVsbG8=", "uri": "https://example.com/f" })) }),
            "`file` has both `bytes` and `uri`; send one of them",
        ),
        (
            "message/send",
            json!({ "message": with_file(json!({ "name": "f.txt" })) }),
            "`file` has neither `bytes` nor `uri`",
        ),
    ];
    for (method, params, says) in cases {
        let what = format!("{method} {params}");
        let envelope = call(&client, &agent.url, method, params).await;
        let message = method_error(&envelope, -32602, &what);
        assert!(message.contains(says), "{what}: {message}");
    }
    assert_eq!(
        agent
            .engine
            .store()
            .list(TaskQuery::default())
            .await
            .unwrap()
            .len(),
        0,
        "no invalid request created a task"
    );
}

#[test(multi_thread)]
async fn a_message_to_a_finished_task_is_invalid_params() {
    let agent = ask_agent().await;
    let client = client();
    let task = completed_task(&client, &agent.url).await;
    for method in ["message/send", "message/stream"] {
        let envelope = call(
            &client,
            &agent.url,
            method,
            json!({ "message": answer(&task, "again") }),
        )
        .await;
        let message = method_error(&envelope, -32602, method);
        assert_eq!(
            message,
            format!("task {task} is already completed and cannot be changed")
        );
    }
}

#[test(multi_thread)]
async fn an_answer_naming_another_context_is_invalid_params_and_changes_nothing() {
    let agent = ask_agent().await;
    let client = client();
    let task = waiting_task(&client, &agent.url).await;
    let got = call(&client, &agent.url, "tasks/get", json!({ "id": task })).await;
    let context = got["result"]["contextId"]
        .as_str()
        .expect("a context id")
        .to_owned();
    for method in ["message/send", "message/stream"] {
        let mut message = answer(&task, "42");
        message["contextId"] = json!("ctx-of-something-else");
        let envelope = call(&client, &agent.url, method, json!({ "message": message })).await;
        let said = method_error(&envelope, -32602, method);
        for id in ["ctx-of-something-else", task.as_str(), context.as_str()] {
            assert!(said.contains(id), "{method}: `{id}` in {said}");
        }
    }
    let got = call(&client, &agent.url, "tasks/get", json!({ "id": task })).await;
    assert_eq!(got["result"]["status"]["state"], "input-required", "{got}");
    // The task's own context, or none, is an answer.
    let mut message = answer(&task, "42");
    message["contextId"] = json!(context);
    let done = call(
        &client,
        &agent.url,
        "message/send",
        json!({ "message": message, "configuration": { "blocking": true } }),
    )
    .await;
    assert_eq!(done["result"]["status"]["state"], "completed", "{done}");
}

#[test(multi_thread)]
async fn a_message_to_a_task_that_waits_for_no_input_is_invalid_params() {
    let builder = Engine::builder(MemoryStore::new())
        .without_registered_skills()
        .skill(Nap);
    let agent = start(builder, |c| c).await;
    let client = client();
    let sent = call(
        &client,
        &agent.url,
        "message/send",
        json!({ "message": common::user("nap") }),
    )
    .await;
    let task = sent["result"]["id"].as_str().expect("a task id").to_owned();
    // A non-blocking send can answer before the run starts (`submitted`): wait for `working`.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let got = call(&client, &agent.url, "tasks/get", json!({ "id": task })).await;
        if got["result"]["status"]["state"] == "working" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never working: {got}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for method in ["message/send", "message/stream"] {
        let envelope = call(
            &client,
            &agent.url,
            method,
            json!({ "message": answer(&task, "wake up") }),
        )
        .await;
        let message = method_error(&envelope, -32602, method);
        assert_eq!(
            message,
            format!("task {task} is working and does not wait for input")
        );
    }
}

// ---- -32001, -32002, -32003, -32004 ----

#[test(multi_thread)]
async fn a_stream_that_cannot_start_is_one_sse_error_event_not_a_json_body() {
    let agent = ask_agent().await;
    let client = client();
    let waiting = waiting_task(&client, &agent.url).await;
    let cases = [
        (
            "tasks/resubscribe",
            json!({ "id": "no-such-task" }),
            None,
            -32001,
        ),
        (
            "message/stream",
            json!({ "message": answer("no-such-task", "hi") }),
            None,
            -32001,
        ),
        (
            "tasks/resubscribe",
            json!({ "id": waiting }),
            Some("seven"),
            -32602,
        ),
        (
            "tasks/resubscribe",
            json!({ "id": waiting }),
            Some("100000"),
            -32602,
        ),
    ];
    for (method, params, last_event_id, code) in cases {
        let what = format!("{method} {params} Last-Event-ID {last_event_id:?}");
        let mut request = client
            .post(format!("{}/", agent.url))
            .json(&json!({ "jsonrpc": "2.0", "id": "req", "method": method, "params": params }));
        if let Some(last) = last_event_id {
            request = request.header("last-event-id", last);
        }
        let resp = request.send().await.unwrap();
        assert_eq!(resp.status(), 200, "{what}");
        assert_eq!(
            resp.headers()["content-type"],
            "text/event-stream",
            "{what}: a streaming client reads the error as an event"
        );
        let text = resp.text().await.unwrap();
        let events: Vec<Value> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        assert_eq!(events.len(), 1, "{what}: one event: {text}");
        let message = method_error(&events[0], code, &what);
        if code == -32602 {
            assert!(message.contains("Last-Event-ID"), "{what}: {message}");
        }
    }
}

#[test(multi_thread)]
async fn an_unknown_task_is_task_not_found() {
    let agent = ask_agent().await;
    let client = client();
    let missing = "no-such-task";
    let cases = [
        ("tasks/get", json!({ "id": missing })),
        ("tasks/cancel", json!({ "id": missing })),
        ("tasks/resubscribe", json!({ "id": missing })),
        ("message/send", json!({ "message": answer(missing, "hi") })),
        (
            "message/stream",
            json!({ "message": answer(missing, "hi") }),
        ),
    ];
    for (method, params) in cases {
        let envelope = call(&client, &agent.url, method, params).await;
        let message = method_error(&envelope, -32001, method);
        assert_eq!(message, format!("task {missing} not found"), "{method}");
    }
}

#[test(multi_thread)]
async fn canceling_a_finished_task_is_task_not_cancelable() {
    let agent = ask_agent().await;
    let client = client();
    let completed = completed_task(&client, &agent.url).await;
    let waiting = waiting_task(&client, &agent.url).await;
    let canceled = call(
        &client,
        &agent.url,
        "tasks/cancel",
        json!({ "id": waiting }),
    )
    .await;
    assert_eq!(
        canceled["result"]["status"]["state"], "canceled",
        "{canceled}"
    );
    for (task, state) in [(&completed, "completed"), (&waiting, "canceled")] {
        let envelope = call(&client, &agent.url, "tasks/cancel", json!({ "id": task })).await;
        let message = method_error(&envelope, -32002, state);
        assert_eq!(
            message,
            format!("task {task} is already {state} and cannot be changed")
        );
    }
}

#[test(multi_thread)]
async fn a_loopback_push_webhook_is_refused_and_starts_no_task() {
    let agent = ask_agent().await;
    let client = client();
    let task = waiting_task(&client, &agent.url).await;
    let config = json!({ "url": "http://127.0.0.1:9/hook" });
    let params = json!({ "taskId": task, "pushNotificationConfig": config });
    let envelope = call(
        &client,
        &agent.url,
        "tasks/pushNotificationConfig/set",
        params,
    )
    .await;
    let message = method_error(&envelope, -32602, "a loopback webhook");
    assert!(message.contains("127.0.0.1"), "{message}");
    let params = json!({ "id": task, "pushNotificationConfigId": "none" });
    let envelope = call(
        &client,
        &agent.url,
        "tasks/pushNotificationConfig/get",
        params,
    )
    .await;
    method_error(&envelope, -32001, "a config that does not exist");
    let envelope = call(
        &client,
        &agent.url,
        "message/send",
        json!({ "message": common::user("hi"), "configuration": { "pushNotificationConfig": config } }),
    )
    .await;
    method_error(&envelope, -32602, "message/send with a loopback webhook");
    let tasks = agent
        .engine
        .store()
        .list(TaskQuery::default())
        .await
        .unwrap();
    assert_eq!(tasks.len(), 1, "the refused message started no task");
}

#[test(multi_thread)]
async fn an_authenticated_extended_card_not_configured_is_32007() {
    let agent = ask_agent().await;
    let client = client();
    let envelope = call(
        &client,
        &agent.url,
        "agent/getAuthenticatedExtendedCard",
        json!({}),
    )
    .await;
    let message = method_error(&envelope, -32007, "agent/getAuthenticatedExtendedCard");
    assert!(message.contains("extended card"), "{message}");
}

// ---- HTTP: 413 and 401 ----

#[test(multi_thread)]
async fn a_body_over_one_mib_gets_413_before_it_is_parsed() {
    let agent = ask_agent().await;
    let client = client();
    const MIB: usize = 1024 * 1024;
    // Not JSON at all: a parse would answer -32700, the limit answers first.
    let (status, body) = post(&client, &agent.url, vec![b'x'; MIB + 1]).await;
    assert_eq!(status, 413, "{body}");
    // Still a JSON-RPC answer: an invalid request with a null id, naming the limit.
    assert_eq!(body["id"], Value::Null, "{body}");
    let message = error(&body, -32600, "a body over the limit");
    assert!(message.contains("1048576 bytes"), "{message}");
    // A well-formed message/send one byte over the limit starts no task.
    let request = |size: usize| {
        let mut envelope = json!({ "jsonrpc": "2.0", "id": "big", "method": "message/send",
                                   "params": { "message": common::user("") } });
        let overhead = envelope.to_string().len();
        envelope["params"]["message"]["parts"][0]["text"] = json!("a".repeat(size - overhead));
        let body = envelope.to_string();
        assert_eq!(body.len(), size);
        body
    };
    let (status, body) = post(&client, &agent.url, request(MIB + 1)).await;
    assert_eq!(status, 413, "{body}");
    error(&body, -32600, "a message/send over the limit");
    assert!(agent
        .engine
        .store()
        .list(TaskQuery::default())
        .await
        .unwrap()
        .is_empty());
    // Exactly 1 MiB is accepted.
    let (status, body) = post(&client, &agent.url, request(MIB)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["kind"], "task", "{body}");
}

#[test(multi_thread)]
async fn with_a_token_requests_without_a_valid_bearer_token_get_401() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_str().expect("a UTF-8 path");
    let server = common::serve(&["--data-dir", data_dir, "--token", "s3cret=alice"]);
    let client = client();
    let request =
        json!({ "jsonrpc": "2.0", "id": "req", "method": "tasks/get", "params": { "id": "x" } });
    let cases: [(&str, Option<&str>); 5] = [
        ("no Authorization header", None),
        ("a wrong token", Some("Bearer s3cret2")),
        ("a token prefix", Some("Bearer s3c")),
        ("another scheme", Some("Basic czNjcmV0")),
        ("a bare token", Some("s3cret")),
    ];
    for (what, authorization) in cases {
        let mut req = client.post(format!("{}/", server.url)).json(&request);
        if let Some(value) = authorization {
            req = req.header("authorization", value);
        }
        let resp = req.send().await.unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(resp.status().as_u16(), 401, "{what}");
        assert_eq!(
            resp.headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok()),
            Some("Bearer"),
            "{what}"
        );
        let body: Value = resp.json().await.unwrap_or_else(|e| panic!("{what}: {e}"));
        error(&body, -32600, what);
    }
    let card = client
        .get(format!("{}/.well-known/agent-card.json", server.url))
        .send()
        .await
        .expect("the card");
    assert_eq!(card.status().as_u16(), 200, "the card needs no token");
    let card: Value = card.json().await.expect("the card is JSON");
    // Both versions' shapes of one scheme (0.3 `type`/`scheme`, 1.0 `httpAuthSecurityScheme`).
    assert_eq!(card["securitySchemes"]["bearer"]["scheme"], "Bearer");
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    let ok = client
        .post(format!("{}/", server.url))
        .bearer_auth("s3cret")
        .json(&request)
        .send()
        .await
        .expect("an authorized request");
    assert_eq!(ok.status().as_u16(), 200);
    let body: Value = ok.json().await.expect("JSON");
    method_error(&body, -32001, "an authorized request for an unknown task");
}

// ---- internal errors ----

/// What a broken store says: text that must never reach a client.
const SECRET: &str = "could not connect to db-primary.internal:5432 as radkit (password=hunter2)";

/// A memory store that fails every call with [`SECRET`] once `broken` is set.
#[derive(Clone, Default)]
struct BreakableStore {
    inner: MemoryStore,
    broken: Arc<AtomicBool>,
}

impl BreakableStore {
    fn check(&self) -> Result<(), StoreError> {
        if self.broken.load(Ordering::SeqCst) {
            Err(StoreError::backend("connecting", SECRET))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl Store for BreakableStore {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
        self.check()?;
        self.inner.append(append).await
    }

    async fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        self.check()?;
        self.inner.task(task_id).await
    }

    async fn journal(
        &self,
        task_id: &str,
        after_seq: u64,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        self.check()?;
        self.inner.journal(task_id, after_seq).await
    }

    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        self.check()?;
        self.inner.list(query).await
    }
}

/// The generic internal error, and none of the secret's words.
#[track_caller]
fn generic_internal_error(envelope: &Value, what: &str) {
    generic_error(
        envelope,
        -32603,
        "internal error; the server log has the details",
        what,
    );
}

/// The documented storage error (`-32050`), and none of the secret's words.
#[track_caller]
fn generic_storage_error(envelope: &Value, what: &str) {
    generic_error(
        envelope,
        -32050,
        "storage unavailable; retry later (the server log has the details)",
        what,
    );
}

/// `code` with the generic `message`, and none of the secret's words.
#[track_caller]
fn generic_error(envelope: &Value, code: i64, says: &str, what: &str) {
    let message = method_error(envelope, code, what);
    assert_eq!(message, says, "{what}");
    let text = envelope.to_string();
    for word in [
        "db-primary",
        "5432",
        "hunter2",
        "password",
        "store backend error",
    ] {
        assert!(!text.contains(word), "{what} leaks `{word}`: {text}");
    }
}

#[test(multi_thread)]
async fn a_store_failure_is_the_storage_error_without_its_details() {
    let store = BreakableStore::default();
    let builder = Engine::builder(store.clone())
        .without_registered_skills()
        .skill(Ask);
    let agent = start(builder, |c| c).await;
    let client = client();
    let task = waiting_task(&client, &agent.url).await;

    store.broken.store(true, Ordering::SeqCst);
    let cases = [
        ("tasks/get", json!({ "id": task })),
        ("tasks/cancel", json!({ "id": task })),
        ("tasks/resubscribe", json!({ "id": task })),
        ("message/send", json!({ "message": common::user("new") })),
        ("message/send", json!({ "message": answer(&task, "42") })),
        ("message/stream", json!({ "message": common::user("new") })),
        ("message/stream", json!({ "message": answer(&task, "42") })),
    ];
    for (method, params) in cases {
        let what = format!("{method} {params}");
        let envelope = call(&client, &agent.url, method, params).await;
        generic_storage_error(&envelope, &what);
    }

    // Repaired, the store shows the task as it was: nothing above changed it.
    store.broken.store(false, Ordering::SeqCst);
    let got = call(&client, &agent.url, "tasks/get", json!({ "id": task })).await;
    assert_eq!(got["result"]["status"]["state"], "input-required", "{got}");
}

#[test(multi_thread)]
async fn a_halted_engine_answers_a_generic_internal_error() {
    let agent = ask_agent().await;
    let client = client();
    agent.engine.halt();
    let envelope = call(
        &client,
        &agent.url,
        "message/send",
        json!({ "message": common::user("hi") }),
    )
    .await;
    generic_internal_error(&envelope, "message/send to a halted engine");
    assert!(!envelope.to_string().contains("halted"), "{envelope}");
}

// ---- skill versions ----

/// `greeter` served at `version` over the SQLite file `path`.
async fn greeter_agent(path: &std::path::Path, version: u32) -> Agent {
    let store = SqliteStore::open(path, Durability::Full).expect("open the SQLite store");
    let builder = Engine::builder(store).without_registered_skills();
    let builder = match version {
        1 => builder.skill(GreeterV1),
        _ => builder.skill(GreeterV2),
    };
    start(builder, |c| c).await
}

#[test(multi_thread)]
async fn a_task_of_another_skill_version_is_refused_with_unsupported_operation_and_left_as_it_was()
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("greeter.sqlite");
    let client = client();

    // Version 1 creates the task and asks for a name.
    let v1 = greeter_agent(&path, 1).await;
    let task = waiting_task(&client, &v1.url).await;
    let before = call(&client, &v1.url, "tasks/get", json!({ "id": task })).await;
    let journal_before = v1
        .engine
        .journal(&Caller::Operator, &TaskId::from(&task))
        .await
        .unwrap();
    drop(v1);

    // Version 2 of the same skill id, whose `greet` changed its shape, refuses to continue it,
    // over every path that would.
    let v2 = greeter_agent(&path, 2).await;
    let refusal = format!(
        "task {task} runs on version 1 of skill `greeter`, which this agent does not serve, and \
         cannot move to version 2: step `greet` changed its shape (its payload type, or whether it \
         answers a question) between version 1 and version 2 (declare a migration from version 1 \
         in version 2 to move it); serve version 1 beside version 2 (`version = N` on each), or let \
         a binary that has it finish the task"
    );
    for method in ["message/send", "message/stream"] {
        let envelope = call(
            &client,
            &v2.url,
            method,
            json!({ "message": answer(&task, "Ada"), "configuration": { "blocking": true } }),
        )
        .await;
        assert_eq!(method_error(&envelope, -32004, method), refusal);
    }
    let after = call(&client, &v2.url, "tasks/get", json!({ "id": task })).await;
    assert_eq!(after, before, "the task reads the same");
    assert_eq!(
        v2.engine
            .journal(&Caller::Operator, &TaskId::from(&task))
            .await
            .unwrap(),
        journal_before,
        "the journal is untouched"
    );
    drop(v2);

    // Version 1 can still finish it.
    let v1 = greeter_agent(&path, 1).await;
    let done = call(
        &client,
        &v1.url,
        "message/send",
        json!({ "message": answer(&task, "Ada"), "configuration": { "blocking": true } }),
    )
    .await;
    assert_eq!(done["result"]["status"]["state"], "completed", "{done}");
    assert_eq!(
        done["result"]["status"]["message"]["parts"][0]["text"],
        "Hello, Ada!"
    );
}
