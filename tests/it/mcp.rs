//! MCP tool servers (`radkit::tools::mcp`) against real servers: the `rmcp` server of
//! `support::mcp_server` over stdio (this binary re-executed) and streamable HTTP, and the official
//! Python SDK's time server (`mcp-server-time` from PyPI, on the `mcp` package). Each test reads what
//! the server logged (every call with its `_meta` idempotency key) and what the engine journaled.
//! The crash tests stop the engine with the fault hook while the call is in flight and recover on the
//! same store with a fresh engine and a fresh connection.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use radkit::effects::Effects;
use radkit::engine::{Boundary, Caller, Engine, Fault, Request};
use radkit::flow::{EffectPolicy, PermissionMode};
use radkit::journal::{Entry, JournalRecord};
use radkit::model::{Message, Task, TaskId, TaskState};
use radkit::prelude::*;
use radkit::store::{MemoryStore, Store};
use radkit::tools::mcp::{McpError, McpServer, McpTools};
use serde_json::{json, Value};

use crate::support::common::{within, PATIENCE};
use crate::support::mcp_server::{self, SERVE_ENV};
use crate::support::services;

/// Calls the tool its message names with the JSON arguments after the name, and completes with the
/// tool's output as JSON text.
#[derive(Default)]
struct McpCaller;

#[flow_skill(id = "mcp_caller", name = "MCP caller", register = false)]
impl McpCaller {
    #[step(start)]
    async fn call(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let text = msg.joined_texts();
        let (tool, args) = text.split_once(' ').unwrap_or((text.as_str(), "null"));
        let args: Value = serde_json::from_str(args).unwrap_or(Value::Null);
        let out: Value = ctx.tool(tool).call(&args).await?;
        ctx.complete(out.to_string(), vec![])
    }
}

/// A fault hook for the engine.
type Hook = Box<dyn Fn(&Fault) -> bool + Send + Sync>;

/// A log file in a fresh directory (kept for the test's life).
fn log_file() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("calls.jsonl");
    (dir, log)
}

/// The test server over stdio: this binary, re-executed in server mode.
fn stdio_server(log: &Path) -> McpServer {
    let exe = std::env::current_exe().expect("the test binary's path");
    McpServer::stdio("srv", exe.display().to_string(), Vec::<String>::new())
        .env(SERVE_ENV, log.display().to_string())
}

async fn connect(server: McpServer) -> McpTools {
    within(PATIENCE, "the MCP server to connect", server.connect())
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

async fn engine_with(
    store: &MemoryStore,
    tools: &McpTools,
    mode: PermissionMode,
    hook: Option<Hook>,
) -> Engine {
    let mut builder = Engine::builder(store.clone())
        .without_registered_skills()
        .skill(McpCaller)
        .effects(Effects::new().tools_from(tools.clone()))
        .permission_mode(mode);
    if let Some(hook) = hook {
        builder = builder.fault_hook(hook);
    }
    builder.start().await.expect("start the engine")
}

async fn send(engine: &Engine, text: &str) -> TaskId {
    engine
        .send(Request::operator(Message::user_text(text)))
        .await
        .expect("send")
}

async fn settled(engine: &Engine, task: &TaskId) -> Task {
    within(
        PATIENCE,
        "the task to settle",
        engine.wait_settled(&Caller::Operator, task),
    )
    .await
    .expect("wait for the task")
}

/// Everything the task's status says, as JSON text (its message and its parts).
fn status_json(task: &Task) -> String {
    serde_json::to_string(&task.status).unwrap_or_default()
}

fn assert_state(task: &Task, state: TaskState) {
    assert_eq!(task.status.state, state, "{}", status_json(task));
}

/// The output the skill completed with (the tool's output).
fn output(task: &Task) -> Value {
    let text = task
        .status
        .message
        .as_ref()
        .map(|m| m.joined_texts())
        .unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// The id of the first command of `tool` journaled for `task`.
fn issued(journal: &[JournalRecord], tool: &str) -> String {
    journal
        .iter()
        .find_map(|r| match &r.entry {
            Entry::CommandIssued { id, cmd, .. } if cmd.kind.fingerprint().contains(tool) => {
                Some(id.to_string())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no command of {tool} journaled"))
}

/// The calls of `tool` the server logged: (key, pid).
fn calls_of(log: &Path, tool: &str) -> Vec<(Value, Value)> {
    mcp_server::calls(log)
        .into_iter()
        .filter(|c| c["tool"] == tool)
        .map(|c| (c["key"].clone(), c["pid"].clone()))
        .collect()
}

/// Poll `check` until it holds (what the server logged, in another process, has no event).
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A fault hook crashing once, during the effect of a command of `tool`.
fn crash_during(tool: &'static str) -> Option<Hook> {
    let fired = Arc::new(AtomicBool::new(false));
    Some(Box::new(move |f: &Fault| {
        f.boundary == Boundary::DuringEffect
            && f.what.as_deref().is_some_and(|w| w.contains(tool))
            && !fired.swap(true, Ordering::SeqCst)
    }))
}

#[test(multi_thread)]
async fn tools_are_listed_with_schemas_and_policies_from_annotations() {
    let (_dir, log) = log_file();
    let tools = connect(stdio_server(&log).policy("send", EffectPolicy::AtLeastOnce)).await;
    assert_eq!(
        tools.names(),
        [
            "srv.delete",
            "srv.die_once",
            "srv.fail",
            "srv.grow",
            "srv.lookup",
            "srv.put",
            "srv.send"
        ]
    );
    use EffectPolicy::*;
    use PermissionMode::*;
    for (tool, treatment) in [
        ("srv.lookup", (Idempotent, Plan)),
        ("srv.put", (Idempotent, AcceptEdits)),
        ("srv.delete", (AtMostOnce, Bypass)),
        // No annotations: destructive and not idempotent by MCP's defaults, the policy overridden.
        ("srv.send", (AtLeastOnce, Bypass)),
        ("srv.die_once", (AtMostOnce, Bypass)),
    ] {
        assert_eq!(tools.treatment(tool), Some(treatment), "{tool}");
    }
    let effects = Effects::new().tools_from(tools.clone());
    let schemas = effects.tool_schemas();
    let lookup = schemas
        .iter()
        .find(|s| s.name == "srv.lookup")
        .expect("srv.lookup has a schema");
    assert_eq!(lookup.description.as_deref(), Some("Read a value"));
    assert_eq!(
        lookup.input_schema,
        json!({ "type": "object", "properties": { "name": { "type": "string" } } })
    );
    assert!(
        effects.find_tool("srv.missing").is_none() && effects.find_tool("lookup").is_none(),
        "only listed tools, under the server's prefix"
    );
}

/// A call from a step over `server` completes with the tool's output, and the server saw the
/// journaled InvocationId as the `_meta` key.
async fn call_sends_invocation_id_in_meta(tools: McpTools, log: &Path) {
    let store = MemoryStore::new();
    let engine = engine_with(&store, &tools, PermissionMode::Default, None).await;
    let task = send(&engine, r#"srv.lookup {"name": "a"}"#).await;
    let done = settled(&engine, &task).await;
    assert_state(&done, TaskState::Completed);
    let journal = store.journal(&task, 0).await.expect("the journal");
    let id = issued(&journal, "srv.lookup");
    assert_eq!(output(&done)["key"], json!(id), "{}", status_json(&done));
    assert_eq!(output(&done)["name"], json!("a"));
    let keys: Vec<Value> = calls_of(log, "lookup").into_iter().map(|c| c.0).collect();
    assert_eq!(keys, [json!(id)], "one call, keyed by the InvocationId");
}

#[test(multi_thread)]
async fn stdio_call_sends_invocation_id_in_meta() {
    let (_dir, log) = log_file();
    let tools = connect(stdio_server(&log)).await;
    call_sends_invocation_id_in_meta(tools, &log).await;
}

#[test(multi_thread)]
async fn http_call_sends_invocation_id_in_meta() {
    let (_dir, log) = log_file();
    let url = mcp_server::serve_http(&log).await;
    let tools = connect(McpServer::http("srv", url)).await;
    call_sends_invocation_id_in_meta(tools, &log).await;
}

/// Over HTTPS: the server's certificate is checked (a client that does not trust its authority is
/// refused with a connect error), and trusted with `root_certificate_pem` the call goes through,
/// with the bearer token and the extra header on every request.
#[test(multi_thread)]
async fn https_server_is_verified_and_called_with_its_credentials() {
    let (_dir, log) = log_file();
    let (url, ca) = mcp_server::serve_https(&log).await;
    let untrusted = McpServer::http("srv", url.clone()).connect().await;
    assert!(
        matches!(&untrusted, Err(McpError::Connect { .. })),
        "an unknown authority is refused: {untrusted:?}"
    );
    let server = McpServer::http("srv", url)
        .root_certificate_pem(ca)
        .bearer_token("s3cret")
        .header("x-tenant", "acme");
    assert!(
        !format!("{server:?}").contains("s3cret"),
        "Debug redacts the token"
    );
    let tools = connect(server).await;
    call_sends_invocation_id_in_meta(tools, &log).await;
    let seen = mcp_server::calls(&log);
    assert_eq!(seen[0]["auth"], "Bearer s3cret", "{seen:?}");
    assert_eq!(seen[0]["tenant"], "acme", "{seen:?}");
}

#[test]
async fn bad_http_settings_are_connect_errors() {
    for server in [
        McpServer::http("srv", "ftp://127.0.0.1:1/mcp"),
        McpServer::http("srv", "https://127.0.0.1:1/mcp").root_certificate_pem("not a certificate"),
        McpServer::http("srv", "https://127.0.0.1:1/mcp").header("bad header", "x"),
    ] {
        let refused = server.connect().await;
        assert!(
            matches!(&refused, Err(McpError::Connect { .. })),
            "{refused:?}"
        );
    }
}

#[test(multi_thread)]
async fn destructive_tool_asks_for_approval_showing_the_exact_call() {
    let (_dir, log) = log_file();
    let tools = connect(stdio_server(&log)).await;
    let store = MemoryStore::new();
    let engine = engine_with(&store, &tools, PermissionMode::Default, None).await;

    let task = send(&engine, r#"srv.delete {"name": "x"}"#).await;
    let asked = settled(&engine, &task).await;
    assert_state(&asked, TaskState::InputRequired);
    let shown = status_json(&asked);
    assert!(
        shown.contains(r#""tool":"srv.delete""#) && shown.contains(r#""arguments":{"name":"x"}"#),
        "the approval request shows the exact call: {shown}"
    );
    assert!(
        calls_of(&log, "delete").is_empty(),
        "not called before approval"
    );

    let mut approve = Message::user_text("approve");
    approve.task_id = Some(task.to_string());
    engine
        .send(Request::operator(approve))
        .await
        .expect("approve");
    let done = settled(&engine, &task).await;
    assert_state(&done, TaskState::Completed);
    assert_eq!(
        calls_of(&log, "delete").len(),
        1,
        "called once, after approval"
    );

    // A rejected call never reaches the server.
    let task = send(&engine, r#"srv.delete {"name": "y"}"#).await;
    assert_state(&settled(&engine, &task).await, TaskState::InputRequired);
    let mut reject = Message::user_text("reject");
    reject.task_id = Some(task.to_string());
    engine
        .send(Request::operator(reject))
        .await
        .expect("reject");
    assert_state(&settled(&engine, &task).await, TaskState::Rejected);
    assert_eq!(
        calls_of(&log, "delete").len(),
        1,
        "the rejected call was not made"
    );

    // Bypass runs it without asking.
    let bypass = engine_with(&MemoryStore::new(), &tools, PermissionMode::Bypass, None).await;
    let task = send(&bypass, r#"srv.delete {"name": "z"}"#).await;
    assert_state(&settled(&bypass, &task).await, TaskState::Completed);
}

#[test(multi_thread)]
async fn tools_list_changed_makes_new_tools_callable() {
    let (_dir, log) = log_file();
    let tools = connect(stdio_server(&log)).await;
    // `grow` is not destructive: it runs without asking in acceptEdits.
    let engine = engine_with(
        &MemoryStore::new(),
        &tools,
        PermissionMode::AcceptEdits,
        None,
    )
    .await;
    let task = send(&engine, "srv.late {}").await;
    let refused = settled(&engine, &task).await;
    assert_state(&refused, TaskState::Failed);
    assert!(status_json(&refused).contains("no tool registered as `srv.late`"));

    let task = send(&engine, "srv.grow {}").await;
    assert_state(&settled(&engine, &task).await, TaskState::Completed);
    eventually("srv.late to be listed", || {
        tools.names().iter().any(|n| n == "srv.late")
    })
    .await;
    let task = send(&engine, "srv.late {}").await;
    let done = settled(&engine, &task).await;
    assert_state(&done, TaskState::Completed);
    assert_eq!(output(&done), json!("late "));
}

#[test(multi_thread)]
async fn dead_server_is_restarted_and_idempotent_call_retried_with_same_key() {
    let (_dir, log) = log_file();
    let server = stdio_server(&log).policy("die_once", EffectPolicy::Idempotent);
    let tools = connect(server.min_mode("die_once", PermissionMode::Default)).await;
    let store = MemoryStore::new();
    let engine = engine_with(&store, &tools, PermissionMode::Default, None).await;
    let task = send(&engine, "srv.die_once {}").await;
    let done = settled(&engine, &task).await;
    assert_state(&done, TaskState::Completed);
    assert_eq!(output(&done), json!("survived"));
    let id = issued(&store.journal(&task, 0).await.unwrap(), "srv.die_once");
    let calls = calls_of(&log, "die_once");
    assert_eq!(
        calls.len(),
        2,
        "the call that killed the server, then its retry"
    );
    assert!(calls.iter().all(|(key, _)| key == &json!(id)), "{calls:?}");
    assert_ne!(
        calls[0].1, calls[1].1,
        "a new server process answered the retry"
    );
}

#[test(multi_thread)]
async fn server_dying_during_at_most_once_call_reports_outcome_unknown() {
    let (_dir, log) = log_file();
    let server = stdio_server(&log).min_mode("die_once", PermissionMode::Default);
    let tools = connect(server).await;
    let engine = engine_with(&MemoryStore::new(), &tools, PermissionMode::Default, None).await;
    let task = send(&engine, "srv.die_once {}").await;
    let failed = settled(&engine, &task).await;
    assert_state(&failed, TaskState::Failed);
    assert!(
        status_json(&failed).contains("outcome unknown"),
        "{}",
        status_json(&failed)
    );
    assert_eq!(calls_of(&log, "die_once").len(), 1, "never retried");
    // The server is started again for the next call.
    let task = send(&engine, r#"srv.lookup {"name": "b"}"#).await;
    assert_state(&settled(&engine, &task).await, TaskState::Completed);
}

#[test(multi_thread)]
async fn error_result_fails_the_call_without_retry() {
    let (_dir, log) = log_file();
    let tools = connect(stdio_server(&log)).await;
    let engine = engine_with(&MemoryStore::new(), &tools, PermissionMode::Default, None).await;
    let task = send(&engine, "srv.fail {}").await;
    let failed = settled(&engine, &task).await;
    assert_state(&failed, TaskState::Failed);
    assert!(status_json(&failed).contains("no such thing"));
    assert_eq!(calls_of(&log, "fail").len(), 1);

    let task = send(&engine, r#"srv.lookup [1, 2]"#).await;
    let failed = settled(&engine, &task).await;
    assert_state(&failed, TaskState::Failed);
    assert!(status_json(&failed).contains("must be a JSON object"));
}

#[test(multi_thread)]
async fn crash_during_idempotent_mcp_call_reissues_it_with_same_meta_key() {
    let (_dir, log) = log_file();
    let store = MemoryStore::new();
    let tools = connect(stdio_server(&log)).await;
    // `put` is not destructive: it runs without asking in acceptEdits.
    let crashing = engine_with(
        &store,
        &tools,
        PermissionMode::AcceptEdits,
        crash_during("srv.put"),
    )
    .await;
    let task = send(&crashing, r#"srv.put {"name": "p"}"#).await;
    eventually("the interrupted call to reach the server", || {
        calls_of(&log, "put").len() == 1
    })
    .await;
    assert!(crashing.is_halted());
    drop(crashing);
    drop(tools);
    let journal = store.journal(&task, 0).await.unwrap();
    let id = issued(&journal, "srv.put");
    assert!(
        !journal
            .iter()
            .any(|r| matches!(&r.entry, Entry::ReceiptRecorded { .. })),
        "no receipt at the crash"
    );

    let tools = connect(stdio_server(&log)).await;
    let engine = engine_with(&store, &tools, PermissionMode::AcceptEdits, None).await;
    let done = settled(&engine, &task).await;
    assert_state(&done, TaskState::Completed);
    let keys: Vec<Value> = calls_of(&log, "put").into_iter().map(|c| c.0).collect();
    assert_eq!(
        keys,
        [json!(id), json!(id)],
        "reissued with the same _meta key"
    );
}

#[test(multi_thread)]
async fn crash_during_at_most_once_mcp_call_reports_it_unknown_without_second_call() {
    let (_dir, log) = log_file();
    let store = MemoryStore::new();
    let server = || stdio_server(&log).min_mode("send", PermissionMode::Default);
    let tools = connect(server()).await;
    let crashing = engine_with(
        &store,
        &tools,
        PermissionMode::Default,
        crash_during("srv.send"),
    )
    .await;
    let task = send(&crashing, r#"srv.send {"name": "s"}"#).await;
    eventually("the interrupted call to reach the server", || {
        calls_of(&log, "send").len() == 1
    })
    .await;
    assert!(crashing.is_halted());
    drop(crashing);
    drop(tools);

    let tools = connect(server()).await;
    let engine = engine_with(&store, &tools, PermissionMode::Default, None).await;
    let failed = settled(&engine, &task).await;
    assert_state(&failed, TaskState::Failed);
    let id = issued(&store.journal(&task, 0).await.unwrap(), "srv.send");
    let shown = status_json(&failed);
    assert!(
        shown.contains("outcome unknown") && shown.contains(&id),
        "{shown}"
    );
    assert_eq!(calls_of(&log, "send").len(), 1, "no second call");
}

#[test]
async fn bad_server_settings_are_typed_errors() {
    let refused = McpServer::http("bad.name", "http://127.0.0.1:1/mcp")
        .connect()
        .await;
    assert!(matches!(refused, Err(McpError::InvalidName(n)) if n == "bad.name"));
    let refused = McpServer::stdio("srv", "/nonexistent/radkit-mcp-server", ["x"])
        .connect()
        .await;
    assert!(
        matches!(refused, Err(McpError::Spawn { .. })),
        "{refused:?}"
    );
}

#[test(multi_thread, needs = PythonMcp)]
async fn python_sdk_time_server_tools_are_listed_and_called() {
    let server = McpServer::stdio(
        "time",
        services::python_mcp(),
        ["-m", "mcp_server_time", "--local-timezone", "UTC"],
    );
    let tools = connect(server).await;
    assert_eq!(
        tools.names(),
        ["time.convert_time", "time.get_current_time"]
    );
    assert_eq!(
        tools.treatment("time.convert_time"),
        Some((EffectPolicy::Idempotent, PermissionMode::Plan)),
        "read-only"
    );
    let engine = engine_with(&MemoryStore::new(), &tools, PermissionMode::Plan, None).await;
    let task = send(
        &engine,
        r#"time.convert_time {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}"#,
    )
    .await;
    let done = settled(&engine, &task).await;
    assert_state(&done, TaskState::Completed);
    let out = output(&done);
    let target = out["target"]["datetime"].as_str().unwrap_or_default();
    assert!(target.contains("T21:00:00+09:00"), "{out}");
}

/// `EngineBuilder::mcp_server` connects the server when the engine starts and offers its tools; a
/// server that cannot be reached fails `start` naming it, and `build` refuses to connect.
#[test(multi_thread)]
async fn an_engine_builder_connects_its_mcp_servers_at_start() {
    let (_dir, log) = log_file();
    let store = MemoryStore::new();
    let engine = within(
        PATIENCE,
        "the engine to start",
        Engine::builder(store.clone())
            .without_registered_skills()
            .skill(McpCaller)
            .mcp_server(stdio_server(&log))
            .start(),
    )
    .await
    .expect("start the engine with its MCP server");
    let task = send(&engine, r#"srv.lookup {"name": "b"}"#).await;
    let done = settled(&engine, &task).await;
    assert_state(&done, TaskState::Completed);
    assert_eq!(output(&done)["name"], json!("b"));

    let unreachable = Engine::builder(MemoryStore::new())
        .without_registered_skills()
        .skill(McpCaller)
        .mcp_server(McpServer::stdio(
            "gone",
            "/nonexistent/radkit-mcp-server",
            ["x"],
        ))
        .start()
        .await
        .err()
        .expect("a server that cannot start fails the engine's start");
    assert!(
        unreachable.to_string().contains("MCP server"),
        "{unreachable}"
    );
    let built = Engine::builder(MemoryStore::new())
        .without_registered_skills()
        .skill(McpCaller)
        .mcp_server(stdio_server(&log))
        .build()
        .err()
        .expect("build cannot connect");
    assert!(built.to_string().contains("start().await"), "{built}");
}
