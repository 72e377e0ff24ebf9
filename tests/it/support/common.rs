//! What the tests that drive `radkit serve` over HTTP share: starting a server, JSON-RPC calls, SSE.
#![allow(dead_code)]

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{json, Value};

/// How long a test waits for a server, a response or a stream before it fails.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// `fut`, or a panic naming `what` was awaited when it takes longer than `limit`: a regression fails
/// the test instead of hanging it.
pub async fn within<T>(limit: Duration, what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, fut).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {limit:?} waiting for {what}"),
    }
}

/// Run `cmd` to its end and return its output; when it takes longer than `limit` it is killed with
/// SIGKILL and the test fails, naming `what` and showing what it printed. Its exit is awaited on a
/// thread, so the wait is an event, not polling.
pub fn output_within(mut cmd: Command, limit: Duration, what: &str) -> std::process::Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap_or_else(|e| panic!("wait for {what}: {e}")),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            let printed = match rx.recv_timeout(Duration::from_secs(10)) {
                Ok(Ok(out)) => format!(
                    "{}\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
                _ => String::new(),
            };
            panic!("timed out after {limit:?} waiting for {what}; killed it:\n{printed}");
        }
    }
}

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
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args(["serve", "--addr", "127.0.0.1:0"]).args(args);
    serve_command(cmd)
}

/// Start `cmd`, which runs `radkit serve` (through a shell, say), and read the address it prints;
/// killed when dropped.
pub fn serve_command(mut cmd: Command) -> Server {
    let mut child = cmd
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start radkit serve");
    let stdout = child.stdout.take().expect("stdout");
    // The banner is read on a thread so that a server that never prints it fails the test.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line).map(|_| line);
        let _ = tx.send(read);
    });
    let line = match rx.recv_timeout(PATIENCE) {
        Ok(Ok(line)) => line,
        Ok(Err(e)) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("reading the banner of radkit serve failed: {e}");
        }
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("timed out after {PATIENCE:?} waiting for radkit serve to print its address");
        }
    };
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
    within(
        PATIENCE,
        &format!("the answer to `{method}` from {url}"),
        async { req.send().await.unwrap().json().await.unwrap() },
    )
    .await
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

/// Read SSE `data:` payloads until a `final: true` status (or the stream ends); fails the test when
/// that takes longer than [`PATIENCE`], showing the events read so far.
pub async fn read_events(
    resp: reqwest::Response,
    stop_early: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    read_sse(resp, |events: &[(Option<u64>, Value)]| {
        let values: Vec<Value> = events.iter().map(|(_, v)| v.clone()).collect();
        stop_early(&values)
    })
    .await
    .into_iter()
    .map(|(_, v)| v)
    .collect()
}

/// Like [`read_events`], with each event's SSE `id:` (a journal seq) beside its payload.
pub async fn read_sse(
    resp: reqwest::Response,
    stop_early: impl Fn(&[(Option<u64>, Value)]) -> bool,
) -> Vec<(Option<u64>, Value)> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut events = Vec::new();
    let mut buf = String::new();
    let mut body = resp.bytes_stream();
    loop {
        let Ok(next) = tokio::time::timeout_at(deadline, body.next()).await else {
            panic!(
                "timed out after {PATIENCE:?} waiting for the end of an SSE stream; {} events so far: {events:#?}",
                events.len()
            );
        };
        let Some(chunk) = next else { break };
        let Ok(chunk) = chunk else { break };
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let frame: String = buf.drain(..end + 2).collect();
            let id = frame
                .lines()
                .find_map(|l| l.strip_prefix("id: "))
                .map(|id| id.parse::<u64>().expect("an event id is a journal seq"));
            for line in frame.lines() {
                if let Some(data) = line.strip_prefix("data: ") {
                    let v: Value = serde_json::from_str(data).unwrap();
                    let is_final = v["result"]["final"] == true;
                    events.push((id, v));
                    if is_final || stop_early(&events) {
                        return events;
                    }
                }
            }
        }
    }
    events
}

/// The artifact chunks' texts of A2A 1.0 SSE events (as [`read_sse`] gives them): JSON-RPC's
/// `result.artifactUpdate` or REST's bare `artifactUpdate`.
pub fn v1_chunk_texts(events: &[(Option<u64>, Value)]) -> Vec<String> {
    events
        .iter()
        .filter_map(|(_, e)| e.get("result").unwrap_or(e).get("artifactUpdate"))
        .map(|u| {
            u["artifact"]["parts"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// The reason and domain of the `google.rpc.ErrorInfo` among an A2A 1.0 error's `details` (JSON-RPC
/// `error.data`, HTTP+JSON `error.details`); a panic naming the details when there is none.
pub fn error_info(details: &Value) -> (&str, &str) {
    let info = details
        .as_array()
        .and_then(|d| {
            d.iter()
                .find(|d| d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo")
        })
        .unwrap_or_else(|| panic!("no ErrorInfo in {details}"));
    (
        info["reason"].as_str().unwrap(),
        info["domain"].as_str().unwrap(),
    )
}

/// A child process killed (SIGKILL) and reaped when dropped: a failing test leaves no process
/// behind.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
