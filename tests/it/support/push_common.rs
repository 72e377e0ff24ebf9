//! What the push-notification tests share: an agent (engine + server in this process) serving the
//! `Ask` skill with push settings, JSON-RPC and REST calls, and a webhook receiver (axum on
//! 127.0.0.1) that records every post and answers as the test tells it.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use radkit::engine::PushSettings;
use radkit::prelude::*;
use radkit::store::Store;
use serde_json::{json, Value};
use tokio::sync::Notify;

use super::agent;
pub use super::agent::{client, Agent, PATIENCE};
use super::skills::Ask;

/// Fast retries, so a test sees several attempts without waiting long (no test asserts on time).
pub fn settings(allow_private: bool) -> PushSettings {
    PushSettings {
        allow_private,
        poll: Duration::from_millis(20),
        retry_base: Duration::from_millis(20),
        retry_max: Duration::from_millis(200),
        ..PushSettings::default()
    }
}

/// An agent over `store`; webhooks on loopback allowed when `allow_private`; bearer `tokens`
/// (token, principal) when not empty.
pub async fn agent_on(
    store: Arc<dyn Store>,
    allow_private: bool,
    tokens: &[(&str, &str)],
) -> Agent {
    agent_with(store, settings(allow_private), tokens).await
}

/// An agent over `store` with push `settings` and bearer `tokens`.
pub async fn agent_with(
    store: Arc<dyn Store>,
    settings: PushSettings,
    tokens: &[(&str, &str)],
) -> Agent {
    let builder = Engine::builder_arc(store)
        .without_registered_skills()
        .skill(Ask)
        .push_settings(settings);
    let bearer = agent::tokens(tokens);
    agent::start(builder, |mut config| {
        config.tokens = bearer;
        config
    })
    .await
}

/// An agent over a fresh memory store.
pub async fn agent(allow_private: bool) -> Agent {
    agent_on(
        Arc::new(radkit::store::MemoryStore::new()),
        allow_private,
        &[],
    )
    .await
}

/// A JSON-RPC call (`version` as `A2A-Version`, `token` as bearer); the envelope.
pub async fn call(
    url: &str,
    version: Option<&str>,
    token: Option<&str>,
    method: &str,
    params: Value,
) -> Value {
    let mut request = client()
        .post(format!("{url}/"))
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }));
    if let Some(version) = version {
        request = request.header("A2A-Version", version);
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let resp = request.send().await.unwrap();
    assert_eq!(resp.status(), 200, "{method}");
    resp.json().await.unwrap()
}

/// The error code of a JSON-RPC envelope (panics on a result).
pub fn error_code(envelope: &Value) -> i64 {
    envelope["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error: {envelope}"))
}

/// A 1.0 user message.
pub fn message(text: &str, task: Option<&str>) -> Value {
    let mut m = json!({ "messageId": format!("m-{}", radkit::model::new_id()), "role": "ROLE_USER", "parts": [{ "text": text }] });
    if let Some(task) = task {
        m["taskId"] = json!(task);
    }
    m
}

/// A 0.3 user message.
pub fn message_v03(text: &str, task: Option<&str>) -> Value {
    let mut m = json!({ "kind": "message", "messageId": format!("m-{}", radkit::model::new_id()), "role": "user", "parts": [{ "kind": "text", "text": text }] });
    if let Some(task) = task {
        m["taskId"] = json!(task);
    }
    m
}

/// Start a 1.0 task (it waits for input); its id.
pub async fn waiting_task(url: &str, token: Option<&str>) -> String {
    let sent = call(
        url,
        Some("1.0"),
        token,
        "SendMessage",
        json!({ "message": message("hello", None) }),
    )
    .await;
    sent["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {sent}"))
        .to_owned()
}

/// One post the receiver got: its headers, its body, and the status it answered.
#[derive(Debug, Clone)]
pub struct Post {
    pub headers: HeaderMap,
    pub body: Value,
    pub answered: u16,
}

impl Post {
    /// The journal seq the post carries (`X-A2A-Event-Id`).
    pub fn seq(&self) -> u64 {
        self.headers
            .get("x-a2a-event-id")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("a post without X-A2A-Event-Id: {self:?}"))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn acknowledged(&self) -> bool {
        (200..300).contains(&self.answered)
    }
}

#[derive(Default)]
struct Inbox {
    posts: Vec<Post>,
    /// Statuses to answer before answering 200 again.
    failures: VecDeque<u16>,
    /// Answer this to everything while set.
    down: Option<u16>,
    /// Acknowledge this many more posts, then go down with the status.
    down_after: Option<(usize, u16)>,
    /// Answer nothing (hold each request) while set.
    hang: bool,
}

/// A webhook receiver on 127.0.0.1.
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    inbox: Arc<Mutex<Inbox>>,
    arrived: Arc<Notify>,
}

impl Receiver {
    /// Start a receiver on a free port.
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::serve(listener).await
    }

    /// Start a receiver on `listener`.
    pub async fn serve(listener: tokio::net::TcpListener) -> Receiver {
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let receiver = Receiver {
            url,
            inbox: Arc::default(),
            arrived: Arc::new(Notify::new()),
        };
        let state = receiver.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
                let state = state.clone();
                async move {
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let hang = {
                        let mut inbox = state.inbox.lock().unwrap();
                        if inbox.hang {
                            // Recorded as never answered; the sender gives up or dies first.
                            inbox.posts.push(Post {
                                headers: headers.clone(),
                                body: body.clone(),
                                answered: 0,
                            });
                        }
                        inbox.hang
                    };
                    if hang {
                        state.arrived.notify_waiters();
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                    }
                    let answered = {
                        let mut inbox = state.inbox.lock().unwrap();
                        if let Some((0, status)) = inbox.down_after {
                            inbox.down = Some(status);
                            inbox.down_after = None;
                        }
                        let answered = match inbox.down {
                            Some(status) => status,
                            None => inbox.failures.pop_front().unwrap_or(200),
                        };
                        if let (Some((left, _)), 200) = (&mut inbox.down_after, answered) {
                            *left -= 1;
                        }
                        inbox.posts.push(Post {
                            headers,
                            body,
                            answered,
                        });
                        answered
                    };
                    state.arrived.notify_waiters();
                    StatusCode::from_u16(answered).unwrap()
                }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        receiver
    }

    /// Answer the next posts with these statuses, then 200 again.
    pub fn fail_next(&self, statuses: &[u16]) {
        self.inbox.lock().unwrap().failures.extend(statuses);
    }

    /// Acknowledge the next `posts` posts, then answer `status` to every post until `up`: a
    /// webhook that goes down at an exact point of the stream, however fast the sender is.
    pub fn down_after(&self, posts: usize, status: u16) {
        self.inbox.lock().unwrap().down_after = Some((posts, status));
    }

    /// Answer `status` to every post until `up`.
    pub fn down(&self, status: u16) {
        self.inbox.lock().unwrap().down = Some(status);
    }

    pub fn up(&self) {
        let mut inbox = self.inbox.lock().unwrap();
        inbox.down = None;
        inbox.down_after = None;
        inbox.hang = false;
    }

    /// Hold every post unanswered until `up`.
    pub fn hang(&self) {
        self.inbox.lock().unwrap().hang = true;
    }

    pub fn posts(&self) -> Vec<Post> {
        self.inbox.lock().unwrap().posts.clone()
    }

    /// Wait until the posts satisfy `done` (each post wakes the check).
    pub async fn wait_for(&self, what: &str, done: impl Fn(&[Post]) -> bool) -> Vec<Post> {
        let wait = async {
            loop {
                let arrived = self.arrived.notified();
                let posts = self.posts();
                if done(&posts) {
                    return posts;
                }
                // A post may land between the check and the wait: look again now and then.
                let _ = tokio::time::timeout(Duration::from_millis(200), arrived).await;
            }
        };
        match tokio::time::timeout(PATIENCE, wait).await {
            Ok(posts) => posts,
            Err(_) => panic!("timed out waiting for {what}; posts: {:#?}", self.posts()),
        }
    }
}

/// True when a 1.0 post reports the task's end in `state`.
pub fn is_status(post: &Post, state: &str) -> bool {
    post.body["statusUpdate"]["status"]["state"] == state
}

/// The seqs of the task's journal records that are stream updates (what a 1.0 webhook gets).
pub async fn update_seqs(engine: &Engine, task: &str) -> Vec<u64> {
    let records = engine
        .journal(&radkit::engine::Caller::Operator, &task.to_owned().into())
        .await
        .expect("journal");
    records
        .into_iter()
        .filter_map(|record| {
            let seq = record.seq;
            let update = radkit::engine::Update {
                record,
                is_final: false,
            };
            radkit::engine::stream_event(task, "ctx", &update).map(|_| seq)
        })
        .collect()
}
