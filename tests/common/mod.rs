//! What the tests that drive `radkit serve` over HTTP share: starting a server, JSON-RPC calls, SSE.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use futures::StreamExt;
use serde_json::{json, Value};

/// A `radkit serve` child process.
pub struct Server {
    /// The process.
    pub child: Child,
    /// Its base URL, without the trailing slash.
    pub url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `radkit serve` on a free port with `args`; killed when dropped.
pub fn serve(args: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_radkit"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start radkit serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("banner");
    let url = line
        .split(" on ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .expect("url in banner")
        .trim_end_matches('/')
        .to_owned();
    Server { child, url }
}

/// One JSON-RPC call; the response envelope.
pub async fn rpc(
    client: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    method: &str,
    params: Value,
) -> Value {
    let mut req = client
        .post(format!("{url}/"))
        .json(&json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params }));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    req.send().await.unwrap().json().await.unwrap()
}

/// A user message with `text`.
pub fn user(text: &str) -> Value {
    json!({ "role": "user", "parts": [{ "kind": "text", "text": text }], "messageId": uuid(), "kind": "message" })
}

/// A fresh message id.
pub fn uuid() -> String {
    format!(
        "m-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// Read SSE `data:` payloads until a `final: true` status (or the stream ends).
pub async fn read_events(
    resp: reqwest::Response,
    stop_early: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let mut events = Vec::new();
    let mut buf = String::new();
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else { break };
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let frame: String = buf.drain(..end + 2).collect();
            for line in frame.lines() {
                if let Some(data) = line.strip_prefix("data: ") {
                    let v: Value = serde_json::from_str(data).unwrap();
                    let is_final = v["result"]["final"] == true;
                    events.push(v);
                    if is_final || stop_early(&events) {
                        return events;
                    }
                }
            }
        }
    }
    events
}
