//! A2A 1.0 over JSON-RPC and HTTP+JSON beside 0.3, from Rust over HTTP: PascalCase methods and
//! ProtoJSON payloads with `A2A-Version: 1.0`, version negotiation (a JSON-RPC request without the
//! header speaks 0.3; another version is -32009), the REST paths with `google.rpc.Status` errors, one
//! task reachable over every binding and version, 1.0 streams of `StreamResponse`s with journal seqs
//! as event ids.

use crate::support::agent::{client, only, serving, start, tokens, Agent};
use crate::support::common;
use crate::support::skills::Ask;

use std::time::Duration;

use radkit::store::MemoryStore;
use serde_json::{json, Value};

/// The `ask` skill over a memory store, default settings.
async fn agent() -> Agent {
    serving(Ask).await
}

/// A JSON-RPC call with `version` as `A2A-Version` (none: no header); the envelope.
async fn call(
    client: &reqwest::Client,
    url: &str,
    version: Option<&str>,
    method: &str,
    params: Value,
) -> Value {
    let mut request = client
        .post(format!("{url}/"))
        .json(&json!({ "jsonrpc": "2.0", "id": "req", "method": method, "params": params }));
    if let Some(version) = version {
        request = request.header("A2A-Version", version);
    }
    let resp = request.send().await.unwrap();
    assert_eq!(resp.status(), 200, "{method}");
    resp.json().await.unwrap()
}

/// A 1.0 user message.
fn message(text: &str, task: Option<&str>) -> Value {
    let mut m = json!({ "messageId": format!("m-{}", radkit::model::new_id()), "role": "ROLE_USER", "parts": [{ "text": text }] });
    if let Some(task) = task {
        m["taskId"] = json!(task);
    }
    m
}

/// Every object key in `value`, recursively.
fn keys(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                keys(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| keys(v, out)),
        _ => {}
    }
}

#[test(multi_thread)]
async fn a_1_0_client_sends_answers_and_reads_a_task_in_proto_json() {
    let agent = agent().await;
    let client = client();
    let sent = call(
        &client,
        &agent.url,
        Some("1.0"),
        "SendMessage",
        json!({ "message": message("hello", None) }),
    )
    .await;
    let task = &sent["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{sent}"
    );
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT", "{sent}");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"], "Your answer?",
        "{sent}"
    );
    let mut names = Vec::new();
    keys(&sent, &mut names);
    assert!(
        !names.iter().any(|k| k == "kind"),
        "no 0.3 `kind` in 1.0: {sent}"
    );
    let id = task["id"].as_str().unwrap().to_owned();

    let got = call(
        &client,
        &agent.url,
        Some("1.0"),
        "GetTask",
        json!({ "id": id, "historyLength": 1 }),
    )
    .await;
    assert_eq!(
        got["result"]["history"].as_array().map(Vec::len),
        Some(1),
        "{got}"
    );
    assert_eq!(got["result"]["contextId"], task["contextId"]);

    let done = call(
        &client,
        &agent.url,
        Some("1.0"),
        "SendMessage",
        json!({ "message": message("42", Some(&id)) }),
    )
    .await;
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(task["artifacts"][0]["name"], "answer.txt", "{done}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "42", "{done}");
}

#[test(multi_thread)]
async fn a_task_started_over_one_version_is_read_answered_and_canceled_over_the_other() {
    let agent = agent().await;
    let client = client();
    // Started over 0.3, answered over 1.0.
    let old = call(
        &client,
        &agent.url,
        None,
        "message/send",
        json!({ "message": common::user("hi"), "configuration": { "blocking": true } }),
    )
    .await;
    let id = old["result"]["id"].as_str().unwrap().to_owned();
    let read = call(
        &client,
        &agent.url,
        Some("1.0"),
        "GetTask",
        json!({ "id": id }),
    )
    .await;
    assert_eq!(
        read["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{read}"
    );
    let answered = call(
        &client,
        &agent.url,
        Some("1.0"),
        "SendMessage",
        json!({ "message": message("7", Some(&id)) }),
    )
    .await;
    assert_eq!(
        answered["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{answered}"
    );
    let read = call(
        &client,
        &agent.url,
        Some("0.3"),
        "tasks/get",
        json!({ "id": id }),
    )
    .await;
    assert_eq!(read["result"]["status"]["state"], "completed", "{read}");
    // Started over 1.0 without waiting, canceled over 0.3 and read over 1.0.
    let new = call(
        &client,
        &agent.url,
        Some("1.0"),
        "SendMessage",
        json!({ "message": message("hi", None), "configuration": { "returnImmediately": true } }),
    )
    .await;
    let id = new["result"]["task"]["id"].as_str().unwrap().to_owned();
    let canceled = call(
        &client,
        &agent.url,
        None,
        "tasks/cancel",
        json!({ "id": id }),
    )
    .await;
    assert_eq!(
        canceled["result"]["status"]["state"], "canceled",
        "{canceled}"
    );
    let read = call(
        &client,
        &agent.url,
        Some("1.0"),
        "CancelTask",
        json!({ "id": id }),
    )
    .await;
    assert_eq!(
        read["error"]["code"], -32002,
        "an ended task is not cancelable: {read}"
    );
}

#[test(multi_thread)]
async fn versions_are_negotiated_by_the_a2a_version_header() {
    let agent = agent().await;
    let client = client();
    let cases = [
        (Some("2.0"), "SendMessage", -32009, "not supported"),
        (Some("0.2"), "message/send", -32009, "0.3 and 1.0"),
        (Some("1.0"), "message/send", -32601, "call `SendMessage`"),
        (None, "SendMessage", -32601, "A2A-Version: 1.0"),
        (Some("1.0"), "NoSuchMethod", -32601, "not found"),
        (
            Some("1.0"),
            "GetExtendedAgentCard",
            -32004,
            "extended agent card",
        ),
        (
            None,
            "agent/getAuthenticatedExtendedCard",
            -32007,
            "extended card",
        ),
        (
            Some("1.0"),
            "CreateTaskPushNotificationConfig",
            -32602,
            "url",
        ),
    ];
    for (version, method, code, says) in cases {
        let answer = call(
            &client,
            &agent.url,
            version,
            method,
            json!({ "message": message("x", None) }),
        )
        .await;
        assert_eq!(answer["id"], "req", "{version:?} {method}: {answer}");
        assert_eq!(
            answer["error"]["code"], code,
            "{version:?} {method}: {answer}"
        );
        let text = answer["error"]["message"].as_str().unwrap();
        assert!(text.contains(says), "{version:?} {method}: {text}");
    }
    let via_query = client
        .post(format!("{}/?A2A-Version=1.0", agent.url))
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": { "message": message("q", None), "configuration": { "returnImmediately": true } } }))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert!(
        via_query["result"]["task"]["id"].is_string(),
        "the version as a query parameter: {via_query}"
    );
}

#[test(multi_thread)]
async fn a_1_0_stream_is_stream_responses_with_journal_seqs_as_ids() {
    let agent = agent().await;
    let client = client();
    let resp = client
        .post(format!("{}/", agent.url))
        .header("A2A-Version", "1.0")
        .json(&json!({ "jsonrpc": "2.0", "id": "s", "method": "SendStreamingMessage", "params": { "message": message("hi", None) } }))
        .send()
        .await
        .unwrap();
    let events = common::read_sse(resp, |events| {
        events.iter().any(|(_, e)| {
            e["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        })
    })
    .await;
    assert!(
        events[0].1["result"]["task"]["id"].is_string(),
        "the stream opens with the task: {events:?}"
    );
    let ids: Vec<u64> = events.iter().map(|(id, _)| id.expect("an id")).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let task_id = events[0].1["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // A 1.0 subscription opens with the task as it is now, and follows it to its end (spec 3.1.6):
    // it stays open while the task waits, through the answer below, to the completion.
    let resp = client
        .post(format!("{}/", agent.url))
        .header("A2A-Version", "1.0")
        .json(&json!({ "jsonrpc": "2.0", "id": "sub0", "method": "SubscribeToTask", "params": { "id": task_id } }))
        .send()
        .await
        .unwrap();
    let following = tokio::spawn(common::read_sse(resp, |_| false));

    // The answer arrives over 0.3 and the task ends; a 1.0 subscription resumed after the last
    // event it saw gets the rest (the end included), not a refusal.
    let seen = *ids.last().unwrap();
    let answered = call(&client, &agent.url, None, "message/send", json!({ "message": { "role": "user", "parts": [{ "kind": "text", "text": "5" }], "messageId": "answer-5", "taskId": task_id, "kind": "message" }, "configuration": { "blocking": true } })).await;
    assert_eq!(
        answered["result"]["status"]["state"], "completed",
        "{answered}"
    );
    let opened = following.await.unwrap();
    assert_eq!(
        opened[0].1["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{opened:?}"
    );
    assert_eq!(
        opened.last().unwrap().1["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED",
        "the subscription ends with the task: {opened:?}"
    );
    let resp = client
        .post(format!("{}/", agent.url))
        .header("A2A-Version", "1.0")
        .header("last-event-id", seen.to_string())
        .json(&json!({ "jsonrpc": "2.0", "id": "sub", "method": "SubscribeToTask", "params": { "id": task_id } }))
        .send()
        .await
        .unwrap();
    let rest = common::read_sse(resp, |_| false).await;
    assert!(
        rest.iter().all(|(id, _)| id.is_some_and(|id| id > seen)),
        "{rest:?}"
    );
    assert!(
        rest.iter()
            .any(|(_, e)| e["result"]["artifactUpdate"]["artifact"]["name"] == "answer.txt"),
        "{rest:?}"
    );
    assert_eq!(
        rest.last().unwrap().1["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED",
        "{rest:?}"
    );

    // A finished task cannot be subscribed to over 1.0 (it can be resubscribed to over 0.3).
    let resp = client
        .post(format!("{}/", agent.url))
        .header("A2A-Version", "1.0")
        .json(&json!({ "jsonrpc": "2.0", "id": "late", "method": "SubscribeToTask", "params": { "id": task_id } }))
        .send()
        .await
        .unwrap();
    let late = common::read_sse(resp, |_| false).await;
    assert_eq!(late.len(), 1, "{late:?}");
    assert_eq!(late[0].1["error"]["code"], -32004, "{late:?}");
}

#[test(multi_thread)]
async fn the_agent_card_lists_each_version_served_with_its_binding_and_url() {
    let agent = agent().await;
    let card: Value = client()
        .get(format!("{}/.well-known/agent-card.json", agent.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = format!("{}/", agent.url);
    assert_eq!(
        card["supportedInterfaces"],
        json!([
            { "url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0" },
            { "url": agent.url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0" },
            { "url": agent.url.trim_start_matches("http://"), "protocolBinding": "GRPC", "protocolVersion": "1.0" },
            { "url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3" },
        ]),
        "{card}"
    );
    // What a 0.3 client reads is still there.
    assert_eq!(card["protocolVersion"], "0.3.0", "{card}");
    assert_eq!(card["url"], url.as_str());
    assert_eq!(card["preferredTransport"], "JSONRPC");
    assert_eq!(card["capabilities"]["streaming"], true);
}

#[test(multi_thread)]
async fn a_retried_1_0_send_returns_the_task_its_first_send_created() {
    let agent = agent().await;
    let client = client();
    let mut first = message("hi", None);
    first["messageId"] = json!("retry-me");
    let params = json!({ "message": first, "configuration": { "returnImmediately": true } });
    let a = call(
        &client,
        &agent.url,
        Some("1.0"),
        "SendMessage",
        params.clone(),
    )
    .await;
    let b = call(&client, &agent.url, Some("1.0"), "SendMessage", params).await;
    let id = a["result"]["task"]["id"].as_str().expect("a task");
    assert_eq!(b["result"]["task"]["id"], id, "{a} {b}");
    // The same messageId over 0.3 (same caller) names the same task too.
    let old = call(&client, &agent.url, None, "message/send", json!({ "message": { "role": "user", "parts": [{ "kind": "text", "text": "hi" }], "messageId": "retry-me", "kind": "message" } })).await;
    assert_eq!(old["result"]["id"], id, "{old}");
}

/// A REST request's answer: status, content type, JSON body.
async fn rest(request: reqwest::RequestBuilder) -> (u16, String, Value) {
    let resp = request.send().await.unwrap();
    let status = resp.status().as_u16();
    let kind = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = resp.json().await.unwrap_or(Value::Null);
    (status, kind, body)
}

/// The `google.rpc.ErrorInfo` reason of a REST error body.
fn reason(body: &Value) -> &str {
    common::error_info(&body["error"]["details"]).0
}

#[test(multi_thread)]
async fn the_rest_binding_sends_reads_cancels_and_answers_errors_as_google_rpc_status() {
    let agent = agent().await;
    let client = client();
    let url = &agent.url;
    let (status, kind, sent) = rest(
        client
            .post(format!("{url}/message:send"))
            .header("content-type", "application/a2a+json")
            .body(json!({ "message": message("hi", None) }).to_string()),
    )
    .await;
    assert_eq!(
        (status, kind.as_str()),
        (200, "application/a2a+json"),
        "{sent}"
    );
    assert_eq!(
        sent["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{sent}"
    );
    let id = sent["task"]["id"].as_str().unwrap().to_owned();

    let (status, _, got) = rest(client.get(format!("{url}/tasks/{id}?historyLength=1"))).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["history"].as_array().map(Vec::len), Some(1), "{got}");
    // The same task over JSON-RPC 0.3.
    let old = call(&client, url, None, "tasks/get", json!({ "id": id })).await;
    assert_eq!(old["result"]["status"]["state"], "input-required", "{old}");

    let (status, _, canceled) = rest(client.post(format!("{url}/tasks/{id}:cancel"))).await;
    assert_eq!(status, 200, "{canceled}");
    assert_eq!(
        canceled["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );

    let cases = [
        (
            client.post(format!("{url}/tasks/{id}:cancel")),
            400,
            "TASK_NOT_CANCELABLE",
        ),
        (
            client.get(format!("{url}/tasks/no-such-task")),
            404,
            "TASK_NOT_FOUND",
        ),
        (
            client.get(format!("{url}/tasks/{id}:subscribe")),
            400,
            "UNSUPPORTED_OPERATION",
        ),
        (
            client.get(format!("{url}/tasks/no-such-task/pushNotificationConfigs")),
            404,
            "TASK_NOT_FOUND",
        ),
        (
            client.get(format!("{url}/tasks/{id}/pushNotificationConfigs/c1")),
            404,
            "TASK_NOT_FOUND",
        ),
        (
            client.get(format!("{url}/extendedAgentCard")),
            400,
            "UNSUPPORTED_OPERATION",
        ),
        (
            client
                .get(format!("{url}/tasks/{id}"))
                .header("A2A-Version", "0.3"),
            400,
            "VERSION_NOT_SUPPORTED",
        ),
        (
            client
                .get(format!("{url}/tasks/{id}"))
                .header("A2A-Version", "9.9"),
            400,
            "VERSION_NOT_SUPPORTED",
        ),
    ];
    for (request, want_status, want_reason) in cases {
        let (status, kind, body) = rest(request).await;
        assert_eq!(status, want_status, "{want_reason}: {body}");
        assert_eq!(kind, "application/a2a+json", "{want_reason}");
        assert_eq!(reason(&body), want_reason, "{body}");
        assert_eq!(body["error"]["code"], want_status, "{body}");
        assert_eq!(
            body["error"]["details"][0]["domain"], "a2a-protocol.org",
            "{body}"
        );
    }
    let (status, _, bad) = rest(
        client
            .post(format!("{url}/message:send"))
            .body("{\"message\": 7}"),
    )
    .await;
    assert_eq!(status, 400, "{bad}");
    assert_eq!(bad["error"]["status"], "INVALID_ARGUMENT", "{bad}");
}

#[test(multi_thread)]
async fn a_rest_stream_is_bare_stream_responses_and_resumes_from_last_event_id() {
    let agent = agent().await;
    let client = client();
    let url = &agent.url;
    let resp = client
        .post(format!("{url}/message:stream"))
        .json(&json!({ "message": message("hi", None) }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let events = common::read_sse(resp, |_| false).await;
    assert!(
        events[0].1["task"]["id"].is_string(),
        "no JSON-RPC envelope: {events:?}"
    );
    let last = &events.last().unwrap().1;
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{events:?}"
    );
    let task_id = events[0].1["task"]["id"].as_str().unwrap().to_owned();
    let seen = events.last().unwrap().0.expect("an id");

    // Answered over JSON-RPC 1.0; the REST subscription resumed after the last event sees the end
    // (or, if the task already ended, is refused as 1.0 says).
    call(&client, url, Some("1.0"), "SendMessage", json!({ "message": message("9", Some(&task_id)), "configuration": { "returnImmediately": true } })).await;
    let resp = client
        .get(format!("{url}/tasks/{task_id}:subscribe"))
        .header("last-event-id", seen.to_string())
        .send()
        .await
        .unwrap();
    if resp.status() == 200 {
        let rest = common::read_sse(resp, |_| false).await;
        assert!(
            rest.iter().all(|(id, _)| id.is_some_and(|id| id > seen)),
            "{rest:?}"
        );
        assert_eq!(
            rest.last().unwrap().1["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED",
            "{rest:?}"
        );
    } else {
        let body: Value = resp.json().await.unwrap();
        assert_eq!(reason(&body), "UNSUPPORTED_OPERATION", "{body}");
    }
}

#[test(multi_thread)]
async fn a_resumed_reply_stream_sends_nothing_again() {
    let agent = agent().await;
    let client = client();
    let asked = call(
        &client,
        &agent.url,
        None,
        "message/send",
        json!({ "message": common::user("hi"), "configuration": { "blocking": true } }),
    )
    .await;
    let id = asked["result"]["id"].as_str().unwrap().to_owned();
    let reply = json!({ "role": "user", "parts": [{ "kind": "text", "text": "42" }], "messageId": "reply-42", "taskId": id, "kind": "message" });
    let request = json!({ "jsonrpc": "2.0", "id": "s", "method": "message/stream", "params": { "message": reply } });
    let resp = client
        .post(format!("{}/", agent.url))
        .json(&request)
        .send()
        .await
        .unwrap();
    let first = common::read_sse(resp, |events| !events.is_empty()).await;
    let seen = first[0].0.expect("an id");
    // The same request again with the id it saw: the rest of the story, and the reply is not sent
    // a second time (it would be refused, or answer a later question).
    let resp = client
        .post(format!("{}/", agent.url))
        .header("last-event-id", seen.to_string())
        .json(&request)
        .send()
        .await
        .unwrap();
    let rest = common::read_sse(resp, |_| false).await;
    assert!(
        rest.iter().all(|(_, e)| e.get("error").is_none()),
        "{rest:?}"
    );
    assert!(
        rest.iter().all(|(id, _)| id.is_some_and(|id| id > seen)),
        "{rest:?}"
    );
    let got = call(&client, &agent.url, None, "tasks/get", json!({ "id": id })).await;
    assert_eq!(got["result"]["status"]["state"], "completed", "{got}");
    let replies = got["result"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["parts"][0]["text"] == "42")
        .count();
    assert_eq!(replies, 1, "the reply is in the history once: {got}");
}

#[test(multi_thread)]
async fn list_tasks_pages_a_callers_own_tasks_newest_first_over_json_rpc_and_rest() {
    let agent = start(only(MemoryStore::new(), Ask), |mut config| {
        config.tokens = tokens(&[("alice-token", "alice"), ("bob-token", "bob")]);
        config
    })
    .await;
    let url = agent.url.clone();
    let client = client();
    let rpc = |token: &'static str, method: &'static str, params: Value| {
        let request = client
            .post(format!("{url}/"))
            .bearer_auth(token)
            .header("A2A-Version", "1.0")
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }));
        async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let mut alice = Vec::new();
    for i in 0..3 {
        let sent = rpc(
            "alice-token",
            "SendMessage",
            json!({ "message": message(&format!("a{i}"), None) }),
        )
        .await;
        alice.push(
            sent["result"]["task"]["id"]
                .as_str()
                .expect("a task")
                .to_owned(),
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    rpc(
        "bob-token",
        "SendMessage",
        json!({ "message": message("b", None) }),
    )
    .await;

    let first = rpc("alice-token", "ListTasks", json!({ "pageSize": 2 })).await;
    let page = &first["result"];
    assert_eq!(page["totalSize"], 3, "{first}");
    assert_eq!(page["pageSize"], 2, "{first}");
    let ids: Vec<&str> = page["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [alice[2].as_str(), alice[1].as_str()],
        "newest status first: {first}"
    );
    assert!(
        page["tasks"][0].get("artifacts").is_none(),
        "no artifacts unless asked: {first}"
    );
    let token = page["nextPageToken"].as_str().unwrap();
    assert!(!token.is_empty(), "{first}");
    let second = rpc(
        "alice-token",
        "ListTasks",
        json!({ "pageSize": 2, "pageToken": token }),
    )
    .await;
    let ids: Vec<&str> = second["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [alice[0].as_str()], "{second}");
    assert_eq!(
        second["result"]["nextPageToken"], "",
        "the last page: {second}"
    );

    // Bob sees his task only; a filter on state works; bad input is -32602.
    let bob = rpc("bob-token", "ListTasks", json!({})).await;
    assert_eq!(bob["result"]["totalSize"], 1, "{bob}");
    let waiting = rpc(
        "alice-token",
        "ListTasks",
        json!({ "status": "TASK_STATE_INPUT_REQUIRED" }),
    )
    .await;
    assert_eq!(waiting["result"]["totalSize"], 3, "{waiting}");
    let done = rpc(
        "alice-token",
        "ListTasks",
        json!({ "status": "TASK_STATE_COMPLETED" }),
    )
    .await;
    assert_eq!(done["result"]["totalSize"], 0, "{done}");
    for params in [
        json!({ "pageSize": 0 }),
        json!({ "pageSize": 101 }),
        json!({ "pageToken": "not-ours" }),
        json!({ "statusTimestampAfter": "yesterday" }),
    ] {
        let bad = rpc("alice-token", "ListTasks", params.clone()).await;
        assert_eq!(bad["error"]["code"], -32602, "{params}: {bad}");
    }

    // The same over REST.
    let rest: Value = client
        .get(format!("{url}/tasks?pageSize=2&includeArtifacts=false"))
        .bearer_auth("alice-token")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(rest["tasks"][0]["id"], alice[2].as_str(), "{rest}");
    assert_eq!(rest["totalSize"], 3, "{rest}");
    drop(agent);
}

#[test(multi_thread)]
async fn a_message_to_a_finished_task_is_unsupported_operation_in_1_0_and_invalid_params_in_0_3() {
    let agent = agent().await;
    let client = client();
    let asked = call(
        &client,
        &agent.url,
        Some("1.0"),
        "SendMessage",
        json!({ "message": message("hi", None) }),
    )
    .await;
    let id = asked["result"]["task"]["id"].as_str().unwrap().to_owned();
    call(
        &client,
        &agent.url,
        Some("1.0"),
        "SendMessage",
        json!({ "message": message("1", Some(&id)) }),
    )
    .await;
    let late = call(
        &client,
        &agent.url,
        Some("1.0"),
        "SendMessage",
        json!({ "message": message("2", Some(&id)) }),
    )
    .await;
    assert_eq!(late["error"]["code"], -32004, "{late}");
    let (status, _, body) = rest(
        client
            .post(format!("{}/message:send", agent.url))
            .json(&json!({ "message": message("3", Some(&id)) })),
    )
    .await;
    assert_eq!(
        (status, reason(&body)),
        (400, "UNSUPPORTED_OPERATION"),
        "{body}"
    );
    let old = call(&client, &agent.url, None, "message/send", json!({ "message": { "role": "user", "parts": [{ "kind": "text", "text": "4" }], "messageId": "late-4", "taskId": id, "kind": "message" } })).await;
    assert_eq!(old["error"]["code"], -32602, "{old}");
}

#[test(multi_thread)]
async fn a_rest_body_over_the_limit_is_413_with_a_status_body() {
    let agent = agent().await;
    let (status, kind, body) = rest(
        client()
            .post(format!("{}/message:send", agent.url))
            .body(vec![b' '; 2 * 1024 * 1024]),
    )
    .await;
    assert_eq!(
        (status, kind.as_str()),
        (413, "application/a2a+json"),
        "{body}"
    );
    assert_eq!(body["error"]["code"], 413, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("limit"),
        "{body}"
    );
}

/// A stream resumed with `Last-Event-ID: <seq>` continues with the first event after `seq`, nothing
/// skipped and nothing repeated: for every seq of a finished task's journal, both a 0.3
/// `tasks/resubscribe` and the task's `message/stream` sent again give exactly the events of the
/// whole stream whose ids are greater (some records are no event, so resuming at every seq, not only
/// at event ids, makes the event right after each seq the one to check).
#[test(multi_thread)]
async fn a_stream_resumed_after_any_seq_continues_with_the_very_next_event() {
    let agent = agent().await;
    let client = client();
    let opening = common::user("hi");
    let asked = call(
        &client,
        &agent.url,
        None,
        "message/send",
        json!({ "message": opening, "configuration": { "blocking": true } }),
    )
    .await;
    let id = asked["result"]["id"].as_str().unwrap().to_owned();
    let answer = json!({ "role": "user", "parts": [{ "kind": "text", "text": "7" }], "messageId": format!("a-{}", radkit::model::new_id()), "taskId": id, "kind": "message" });
    let done = call(
        &client,
        &agent.url,
        None,
        "message/send",
        json!({ "message": answer, "configuration": { "blocking": true } }),
    )
    .await;
    assert_eq!(done["result"]["status"]["state"], "completed", "{done}");

    let stream = |method: &'static str, params: Value, seen: Option<u64>| {
        let mut request = client
            .post(format!("{}/", agent.url))
            .json(&json!({ "jsonrpc": "2.0", "id": "s", "method": method, "params": params }));
        if let Some(seen) = seen {
            request = request.header("last-event-id", seen.to_string());
        }
        async move {
            let resp = request.send().await.unwrap();
            let events = common::read_sse(resp, |_| false).await;
            events
                .iter()
                .map(|(seq, e)| seq.unwrap_or_else(|| panic!("an event without an id: {e}")))
                .collect::<Vec<u64>>()
        }
    };
    let resubscribe = json!({ "id": id });
    let all = stream("tasks/resubscribe", resubscribe.clone(), None).await;
    assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
    let last = *all.last().expect("events");
    for seen in 1..=last {
        let rest: Vec<u64> = all.iter().copied().filter(|seq| *seq > seen).collect();
        assert_eq!(
            stream("tasks/resubscribe", resubscribe.clone(), Some(seen)).await,
            rest,
            "tasks/resubscribe resumed after {seen}"
        );
        assert_eq!(
            stream("message/stream", json!({ "message": opening }), Some(seen)).await,
            rest,
            "message/stream resumed after {seen}"
        );
    }
}
