//! Property: whatever a client sends — valid requests of every A2A 0.3 and 1.0 method, mutated at random
//! (fields dropped, values replaced by other JSON, deep nesting, long strings, wrong types, broken
//! JSON) — the real server (radkit::server on a SQLite store) answers with a well-formed JSON-RPC
//! envelope or SSE stream, never a 5xx, stays up, and every task it acknowledged reads back.
//!
//! `RADKIT_FUZZ_CASES` sets the number of cases (default 48, a few seconds).

use crate::support::agent::{client, only, start};
use crate::support::skills::Ask;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use radkit::store::{Durability, SqliteStore};
use serde_json::{json, Value};

/// What to do to a valid request.
#[derive(Debug, Clone)]
enum Mutation {
    /// Send it as it is.
    Keep,
    /// Remove the field at this path (indices pick among the fields present).
    Drop(Vec<usize>),
    /// Replace the value at this path.
    Replace(Vec<usize>, Value),
    /// Cut the serialized request at this fraction of its length.
    Truncate(u8),
    /// Send these bytes instead.
    Bytes(Vec<u8>),
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,40}".prop_map(Value::String),
        (1usize..20_000).prop_map(|n| Value::String("x".repeat(n))),
        (1usize..200).prop_map(|depth| {
            let mut v = json!(0);
            for _ in 0..depth {
                v = json!([v]);
            }
            v
        }),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let path = proptest::collection::vec(0usize..8, 1..4);
    prop_oneof![
        2 => Just(Mutation::Keep),
        3 => path.clone().prop_map(Mutation::Drop),
        5 => (path, any_json()).prop_map(|(p, v)| Mutation::Replace(p, v)),
        1 => (1u8..100).prop_map(Mutation::Truncate),
        1 => proptest::collection::vec(any::<u8>(), 0..64).prop_map(Mutation::Bytes),
    ]
}

/// The value at `path` (each index picks among the children present), and its parent's key.
fn apply(value: &mut Value, path: &[usize], replace: Option<Value>) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    match value {
        Value::Object(map) if !map.is_empty() => {
            let key = map
                .keys()
                .nth(first % map.len())
                .cloned()
                .unwrap_or_default();
            if rest.is_empty() {
                match replace {
                    Some(v) => {
                        map.insert(key, v);
                    }
                    None => {
                        map.remove(&key);
                    }
                }
            } else if let Some(child) = map.get_mut(&key) {
                apply(child, rest, replace);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let i = first % items.len();
            if rest.is_empty() {
                match replace {
                    Some(v) => items[i] = v,
                    None => {
                        items.remove(i);
                    }
                }
            } else {
                apply(&mut items[i], rest, replace);
            }
        }
        _ => {}
    }
}

fn message(text: &str, task: Option<&str>) -> Value {
    let mut m = json!({ "role": "user", "parts": [{ "kind": "text", "text": text }],
                        "messageId": radkit::model::new_id(), "kind": "message",
                        "metadata": { "skillId": "ask" } });
    if let Some(task) = task {
        m["taskId"] = json!(task);
    }
    m
}

/// A 1.0 user message.
fn message_v1(text: &str, task: Option<&str>) -> Value {
    let mut m = json!({ "messageId": radkit::model::new_id(), "role": "ROLE_USER",
                        "parts": [{ "text": text }], "metadata": { "skillId": "ask" } });
    if let Some(task) = task {
        m["taskId"] = json!(task);
    }
    m
}

/// Methods [`valid`] knows: 0.3's, then 1.0's.
const METHODS: usize = 17;

/// A valid request of method number `which` (below 8: 0.3, else 1.0 with its `A2A-Version`), about
/// `task` where one is needed.
fn valid(which: usize, task: &str) -> (Value, Option<&'static str>) {
    if which % METHODS >= 8 {
        let (method, params) = match which % METHODS {
            8 => (
                "SendMessage",
                json!({ "message": message_v1("hi", None), "configuration": { "returnImmediately": true } }),
            ),
            9 => (
                "SendMessage",
                json!({ "message": message_v1("answer", Some(task)), "configuration": { "historyLength": 3 } }),
            ),
            10 => (
                "SendStreamingMessage",
                json!({ "message": message_v1("hi", None) }),
            ),
            11 => ("GetTask", json!({ "id": task, "historyLength": 2 })),
            12 => ("CancelTask", json!({ "id": task })),
            13 => ("SubscribeToTask", json!({ "id": task })),
            14 => ("ListTasks", json!({ "pageSize": 5 })),
            15 => (
                "CreateTaskPushNotificationConfig",
                json!({ "taskId": task, "url": "https://example.com/hook" }),
            ),
            _ => ("GetExtendedAgentCard", json!({})),
        };
        let request = json!({ "jsonrpc": "2.0", "id": which, "method": method, "params": params });
        return (request, Some("1.0"));
    }
    let (method, params) = match which % 8 {
        0 => ("message/send", json!({ "message": message("hi", None) })),
        1 => (
            "message/send",
            json!({ "message": message("answer", Some(task)), "configuration": { "blocking": true, "historyLength": 3 } }),
        ),
        2 => ("message/stream", json!({ "message": message("hi", None) })),
        3 => ("tasks/get", json!({ "id": task, "historyLength": 2 })),
        4 => ("tasks/cancel", json!({ "id": task })),
        5 => ("tasks/resubscribe", json!({ "id": task })),
        6 => ("tasks/pushNotificationConfig/get", json!({ "id": task })),
        _ => ("agent/getAuthenticatedExtendedCard", json!({})),
    };
    let request = json!({ "jsonrpc": "2.0", "id": which, "method": method, "params": params });
    (request, None)
}

/// The id of the task an answer (or a stream event) acknowledges, in either version's shape.
fn acknowledged_task(result: &Value) -> Option<&str> {
    let task = match &result["kind"] {
        Value::String(kind) if kind == "task" => &result["id"],
        _ => &result["task"]["id"],
    };
    task.as_str()
}

/// What the server said, checked: a JSON-RPC envelope (or an SSE stream whose events are), never a
/// 5xx. Returns the ids of the tasks it acknowledged.
async fn check(
    client: &reqwest::Client,
    url: &str,
    version: Option<&str>,
    body: Vec<u8>,
) -> Result<Vec<String>, String> {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    if let Some(version) = version {
        request = request.header("A2A-Version", version);
    }
    let resp = request
        .send()
        .await
        .map_err(|e| format!("the server did not answer: {e}"))?;
    let status = resp.status().as_u16();
    if status >= 500 && status != 503 {
        return Err(format!("HTTP {status}"));
    }
    let sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let mut acknowledged = Vec::new();
    if sse {
        // The first events (the stream may wait for a human): each is a JSON-RPC envelope.
        let mut resp = resp;
        let mut text = String::new();
        let until = tokio::time::Instant::now() + Duration::from_millis(300);
        while let Ok(Ok(Some(chunk))) = tokio::time::timeout_at(until, resp.chunk()).await {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        for data in text.lines().filter_map(|l| l.strip_prefix("data:")) {
            let event: Value = serde_json::from_str(data.trim())
                .map_err(|e| format!("an SSE event is not JSON ({e}): {data}"))?;
            envelope(&event)?;
            if let Some(id) = event["result"]["taskId"]
                .as_str()
                .or(event["result"]["id"].as_str())
                .or(acknowledged_task(&event["result"]))
                .or(event["result"]["statusUpdate"]["taskId"].as_str())
            {
                acknowledged.push(id.to_owned());
            }
        }
        return Ok(acknowledged);
    }
    let text = resp.text().await.map_err(|e| format!("the body: {e}"))?;
    let answer: Value = serde_json::from_str(&text)
        .map_err(|e| format!("HTTP {status}, not JSON ({e}): {text}"))?;
    envelope(&answer)?;
    if let Some(id) = acknowledged_task(&answer["result"]) {
        acknowledged.push(id.to_owned());
    }
    Ok(acknowledged)
}

/// A JSON-RPC 2.0 response: `jsonrpc`, an `id`, and exactly one of `result` and `error` (an error
/// with an integer code and a message).
fn envelope(v: &Value) -> Result<(), String> {
    let ok = v["jsonrpc"] == "2.0"
        && v.get("id").is_some()
        && (v.get("result").is_some() != v.get("error").is_some())
        && v.get("error")
            .is_none_or(|e| e["code"].is_i64() && e["message"].is_string());
    if ok {
        Ok(())
    } else {
        Err(format!("not a JSON-RPC response: {v}"))
    }
}

#[test]
fn mutated_requests_get_well_formed_answers_and_every_acknowledged_task_reads_back() {
    let cases = std::env::var("RADKIT_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(48);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = rt.block_on(async {
        let store = SqliteStore::open(dir.path().join("fuzz.sqlite"), Durability::Normal).unwrap();
        start(only(store, Ask), |c| c).await
    });
    let (url, engine) = (format!("{}/", agent.url), agent.engine.clone());
    let client = client();
    // A task that waits, for the methods that need one.
    let waiting = rt.block_on(async {
        let body = json!({ "jsonrpc": "2.0", "id": 0, "method": "message/send",
                           "params": { "message": message("start", None), "configuration": { "blocking": true } } });
        let answer: Value = client.post(&url).json(&body).send().await.unwrap().json().await.unwrap();
        answer["result"]["id"].as_str().expect("a task").to_owned()
    });

    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let acknowledged = std::sync::Mutex::new(Vec::new());
    runner
        .run(&(0usize..METHODS, mutation()), |(which, mutation)| {
            let (request, version) = valid(which, &waiting);
            let body = match mutation {
                Mutation::Keep => request.to_string().into_bytes(),
                Mutation::Drop(path) => {
                    let mut r = request;
                    apply(&mut r, &path, None);
                    r.to_string().into_bytes()
                }
                Mutation::Replace(path, value) => {
                    let mut r = request;
                    apply(&mut r, &path, Some(value));
                    r.to_string().into_bytes()
                }
                Mutation::Truncate(percent) => {
                    let text = request.to_string();
                    let cut = text.len() * usize::from(percent) / 100;
                    text.as_bytes()[..cut].to_vec()
                }
                Mutation::Bytes(bytes) => bytes,
            };
            let ids = rt
                .block_on(check(&client, &url, version, body))
                .map_err(TestCaseError::fail)?;
            acknowledged.lock().unwrap().extend(ids);
            Ok(())
        })
        .unwrap();

    // The server is up, and every task it acknowledged reads back.
    let ids = acknowledged.into_inner().unwrap();
    rt.block_on(async {
        for id in ids.iter().chain([&waiting]) {
            let body =
                json!({ "jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": { "id": id } });
            let answer: Value = client
                .post(&url)
                .json(&body)
                .send()
                .await
                .expect("the server is up")
                .json()
                .await
                .unwrap();
            assert_eq!(
                answer["result"]["id"],
                id.as_str(),
                "task {id} reads back: {answer}"
            );
        }
    });
    engine.halt();
}
