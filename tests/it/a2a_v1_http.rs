//! What an A2A 1.0 client sees of HTTP, beside the payloads: errors carry their
//! `google.rpc.ErrorInfo` (JSON-RPC `data`, HTTP+JSON `details`), bodies declared as anything but
//! JSON are `ContentTypeNotSupportedError`, the agent card is cacheable and answers conditional
//! requests, and a stream that fails is an SSE `error` event. Each found by the A2A TCK (1.0-dev)
//! against `radkit serve`.

use crate::support::agent::{client, only, start, tokens, Agent};
use crate::support::common::error_info;

use radkit::prelude::*;
use radkit::store::MemoryStore;
use serde_json::{json, Value};

/// Completes at once with the text it got.
#[derive(Default)]
struct Echo;

#[flow_skill(id = "echo", name = "Echo", register = false)]
impl Echo {
    #[step(start)]
    async fn echo(&self, ctx: &StepCtx, input: Content) -> StepResult {
        ctx.complete(input.joined_texts(), vec![])
    }
}

async fn agent() -> Agent {
    agent_with_tokens(&[]).await
}

/// An agent whose callers authenticate with these bearer `tokens` (token, principal); none: open.
async fn agent_with_tokens(bearer: &[(&str, &str)]) -> Agent {
    start(only(MemoryStore::new(), Echo), |mut config| {
        config.tokens = tokens(bearer);
        config
    })
    .await
}

#[test(multi_thread)]
async fn a_1_0_json_rpc_error_carries_its_error_info_in_data_and_a_0_3_error_does_not() {
    let agent = agent().await;
    let params = json!({ "id": "no-such-task" });
    let v1: Value = client()
        .post(format!("{}/", agent.url))
        .header("A2A-Version", "1.0")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": params }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v1["error"]["code"], -32001, "{v1}");
    assert_eq!(
        error_info(&v1["error"]["data"]),
        ("TASK_NOT_FOUND", "a2a-protocol.org")
    );

    // An unsupported version is refused with VERSION_NOT_SUPPORTED in the same form.
    let other: Value = client()
        .post(format!("{}/", agent.url))
        .header("A2A-Version", "9.9")
        .json(&json!({ "jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": params }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(other["error"]["code"], -32009, "{other}");
    assert_eq!(other["id"], 2, "{other}");
    assert_eq!(
        error_info(&other["error"]["data"]).0,
        "VERSION_NOT_SUPPORTED"
    );

    // 0.3 errors are as they were.
    let v03: Value = client()
        .post(format!("{}/", agent.url))
        .json(&json!({ "jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": params }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v03["error"]["code"], -32001, "{v03}");
    assert!(v03["error"].get("data").is_none(), "{v03}");
}

#[test(multi_thread)]
async fn a_1_0_body_declared_as_another_media_type_is_content_type_not_supported() {
    let agent = agent().await;
    let send = json!({ "message": { "messageId": "ct-1", "role": "ROLE_USER", "parts": [{ "text": "hi" }] } });
    // JSON-RPC: refused before the body is read (a body of another type need not be JSON).
    let rpc: Value = client()
        .post(format!("{}/", agent.url))
        .header("A2A-Version", "1.0")
        .header("Content-Type", "text/plain")
        .body("{'jsonrpc': '2.0', 'id': 1, 'method': 'SendMessage'}")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(rpc["error"]["code"], -32005, "{rpc}");
    assert_eq!(
        error_info(&rpc["error"]["data"]).0,
        "CONTENT_TYPE_NOT_SUPPORTED"
    );

    // HTTP+JSON: 400 (spec §5.4) with the reason; nothing was started.
    let rest = client()
        .post(format!("{}/message:send", agent.url))
        .header("A2A-Version", "1.0")
        .header("Content-Type", "text/plain")
        .body(send.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 400);
    let body: Value = rest.json().await.unwrap();
    assert_eq!(
        error_info(&body["error"]["details"]).0,
        "CONTENT_TYPE_NOT_SUPPORTED"
    );

    // Both JSON types, with parameters, are read.
    for content_type in ["application/json; charset=utf-8", "application/a2a+json"] {
        let mut send = send.clone();
        send["message"]["messageId"] = json!(format!("ct-{content_type}"));
        let ok = client()
            .post(format!("{}/message:send", agent.url))
            .header("Content-Type", content_type)
            .body(send.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(ok.status(), 200, "{content_type}");
    }

    // 0.3 keeps reading any body as JSON (`curl -d` declares a form).
    let v03: Value = client()
        .post(format!("{}/", agent.url))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(json!({ "jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
            "message": { "kind": "message", "messageId": "ct-03", "role": "user", "parts": [{ "kind": "text", "text": "hi" }] },
            "configuration": { "blocking": true } } }).to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v03["result"]["status"]["state"], "completed", "{v03}");
}

#[test(multi_thread)]
async fn the_agent_card_is_cacheable_and_a_conditional_request_gets_304() {
    let agent = agent().await;
    let url = format!("{}/.well-known/agent-card.json", agent.url);
    let first = client().get(&url).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let header = |name: &str| {
        first
            .headers()
            .get(name)
            .unwrap_or_else(|| panic!("no {name}"))
            .to_str()
            .unwrap()
            .to_owned()
    };
    let (etag, modified, cache) = (
        header("etag"),
        header("last-modified"),
        header("cache-control"),
    );
    assert!(cache.contains("max-age="), "{cache}");
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    let card: Value = first.json().await.unwrap();
    assert_eq!(card["name"], "radkit agent");

    let again = client()
        .get(&url)
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);
    assert!(again.bytes().await.unwrap().is_empty());

    let since = client()
        .get(&url)
        .header("If-Modified-Since", &modified)
        .send()
        .await
        .unwrap();
    assert_eq!(since.status(), 304);

    // Another tag, or a date before the card was built, gets the card.
    let stale = client()
        .get(&url)
        .header("If-None-Match", "\"other\"")
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 200);
    let old = client()
        .get(&url)
        .header("If-Modified-Since", "Thu, 01 Jan 1970 00:00:00 GMT")
        .send()
        .await
        .unwrap();
    assert_eq!(old.status(), 200);

    // HTTP+JSON's base URL has no trailing slash: `{url}/message:send` is the path.
    let rest = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["protocolBinding"] == "HTTP+JSON")
        .unwrap();
    assert_eq!(rest["url"], agent.url.as_str());
}

#[test(multi_thread)]
async fn a_stream_that_cannot_start_is_one_sse_error_event_on_every_binding() {
    let agent = agent().await;
    let cases = [
        (
            format!("{}/", agent.url),
            Some("1.0"),
            json!({ "jsonrpc": "2.0", "id": 7, "method": "SubscribeToTask", "params": { "id": "nope" } }),
        ),
        (
            format!("{}/", agent.url),
            None,
            json!({ "jsonrpc": "2.0", "id": 7, "method": "tasks/resubscribe", "params": { "id": "nope" } }),
        ),
    ];
    for (url, version, body) in cases {
        let mut request = client().post(url).json(&body);
        if let Some(version) = version {
            request = request.header("A2A-Version", version);
        }
        let response = request.send().await.unwrap();
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        let text = response.text().await.unwrap();
        assert!(text.contains("event: error\n"), "{text}");
        let data: Value = serde_json::from_str(
            text.lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or_else(|| panic!("no data in {text}")),
        )
        .unwrap();
        assert_eq!(data["id"], 7, "{data}");
        assert_eq!(data["error"]["code"], -32001, "{data}");
        assert_eq!(
            data["error"].get("data").is_some(),
            version.is_some(),
            "1.0 errors carry ErrorInfo, 0.3 errors do not: {data}"
        );
    }
    // HTTP+JSON answers before the stream with a 404 status body.
    let rest = client()
        .post(format!("{}/tasks/nope:subscribe", agent.url))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 404);
}

/// `GET /tasks/{id}` reads the task as its caller, as every binding does: another principal gets
/// `TASK_NOT_FOUND` (404), the answer for a task that does not exist, and nothing of the task.
#[test(multi_thread)]
async fn a_rest_get_task_shows_a_task_only_to_the_principal_that_created_it() {
    let agent = agent_with_tokens(&[("alice-token", "alice"), ("bob-token", "bob")]).await;
    let send = json!({ "message": { "messageId": "scoped-1", "role": "ROLE_USER", "parts": [{ "text": "secret" }] } });
    let sent = client()
        .post(format!("{}/message:send", agent.url))
        .bearer_auth("alice-token")
        .json(&send)
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200);
    let sent: Value = sent.json().await.unwrap();
    let id = sent["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {sent}"))
        .to_owned();
    let get = |token: &'static str, id: String| {
        let request = client()
            .get(format!("{}/tasks/{id}", agent.url))
            .bearer_auth(token);
        async move {
            let resp = request.send().await.unwrap();
            let status = resp.status();
            (status, resp.json::<Value>().await.unwrap())
        }
    };

    let (status, mine) = get("alice-token", id.clone()).await;
    assert_eq!(status, 200, "{mine}");
    assert_eq!(mine["id"], id.as_str(), "{mine}");

    let (status, theirs) = get("bob-token", id.clone()).await;
    assert_eq!(status, 404, "{theirs}");
    assert_eq!(
        error_info(&theirs["error"]["details"]).0,
        "TASK_NOT_FOUND",
        "{theirs}"
    );
    assert!(
        !theirs.to_string().contains("secret"),
        "nothing of the task: {theirs}"
    );
    let (status, missing) = get("bob-token", "no-such-task".to_owned()).await;
    assert_eq!(status, 404, "{missing}");
    assert_eq!(error_info(&missing["error"]["details"]).0, "TASK_NOT_FOUND");
}
