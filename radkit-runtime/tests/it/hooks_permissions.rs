//! Hooks (observe, modify, deny) and permission modes enforced by the built-in gate.

use crate::support::common;

use radkit_runtime::engine::{Caller, Request};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::*;
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::Engine;
use radkit_runtime::engine::{Boundary, Fault, Hook, HookContext, HookDecision};
use radkit_runtime::flow::step_table::{Step, StepInput, StepTable};
use radkit_runtime::flow::PermissionMode;
use radkit_runtime::flow::{Cmd, CmdKind, EffectPolicy, Receipt, SkillInfo, StepCtx, StepResult};
use radkit_runtime::journal::Entry;
use radkit_runtime::model::TaskState;
use radkit_runtime::store::MemoryStore;
use radkit_runtime::tools::FnTool;

struct Ops;

fn run_ops<'a>(_: &'a Ops, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let mut done = Vec::new();
        for tool in input.message().joined_texts().split_whitespace() {
            let out: serde_json::Value = ctx
                .tool(tool)
                .call(serde_json::json!({ "path": "/tmp/x" }))
                .await?;
            done.push(out["tool"].as_str().unwrap_or_default().to_owned());
        }
        ctx.complete(done.join(","), vec![])
    })
}

static OPS: &[Step<Ops>] = &[Step::new("ops", run_ops).start().takes_user_message()];

fn tool(name: &'static str, mode: PermissionMode, log: Arc<Mutex<Vec<String>>>) -> FnTool {
    FnTool::new(EffectPolicy::Idempotent, move |args, _| {
        let log = log.clone();
        async move {
            log.lock().unwrap().push(format!("{name} {args}"));
            Ok(serde_json::json!({ "tool": name }))
        }
    })
    .min_mode(mode)
}

fn builder(
    store: &MemoryStore,
    log: &Arc<Mutex<Vec<String>>>,
) -> radkit_runtime::engine::EngineBuilder {
    let effects = Effects::new()
        .tool("read", tool("read", PermissionMode::Plan, log.clone()))
        .tool(
            "edit",
            tool("edit", PermissionMode::AcceptEdits, log.clone()),
        )
        .tool(
            "delete",
            tool("delete", PermissionMode::Bypass, log.clone()),
        );
    Engine::builder(store.clone())
        .skill(StepTable::new(SkillInfo::new("ops", "Ops"), Ops, OPS).unwrap())
        .effects(effects)
}

/// A new task in permission mode `mode` (as a server parses it from message metadata).
fn with_mode(text: &str, mode: &str) -> Request {
    Request::operator(user(text)).mode(PermissionMode::parse(mode).expect("a known mode"))
}

#[test]
async fn plan_mode_runs_read_only_tools_and_refuses_the_rest() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let engine = builder(&MemoryStore::new(), &log).start().await.unwrap();
    let id = engine.send(with_mode("read edit", "plan")).await.unwrap();
    let task = settled(&engine, &id).await;
    assert_eq!(task.status.state, TaskState::Failed);
    assert!(
        status_text(&task)
            .contains("tool `edit` needs permission mode AcceptEdits; this task runs in plan mode"),
        "{}",
        status_text(&task)
    );
    assert_eq!(log.lock().unwrap().len(), 1, "only `read` ran");
}

#[test]
async fn default_mode_asks_before_destructive_tools() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let engine = builder(&MemoryStore::new(), &log).start().await.unwrap();
    let id = engine
        .send(Request::operator(user("read delete")))
        .await
        .unwrap();
    let task = settled(&engine, &id).await;
    assert_eq!(task.status.state, TaskState::InputRequired);
    assert!(
        status_text(&task).contains("Approval needed to run `delete`"),
        "{}",
        status_text(&task)
    );
    assert_eq!(
        log.lock().unwrap().len(),
        1,
        "`delete` waits for the answer"
    );
    engine
        .send(Request::operator(reply(&id, "approve")))
        .await
        .unwrap();
    let task = settled(&engine, &id).await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    assert_eq!(status_text(&task), "read,delete");
}

#[test]
async fn a_declined_permission_ends_the_task_rejected() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let engine = builder(&MemoryStore::new(), &log).start().await.unwrap();
    let id = engine
        .send(with_mode("edit delete", "acceptEdits"))
        .await
        .unwrap();
    let task = settled(&engine, &id).await;
    assert_eq!(
        task.status.state,
        TaskState::InputRequired,
        "edit ran, delete asks"
    );
    engine
        .send(Request::operator(reply(&id, "reject")))
        .await
        .unwrap();
    let task = settled(&engine, &id).await;
    assert_eq!(task.status.state, TaskState::Rejected);
    assert_eq!(log.lock().unwrap().len(), 1);
}

#[test]
async fn bypass_mode_runs_everything_and_bad_modes_are_refused() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let engine = builder(&MemoryStore::new(), &log).start().await.unwrap();
    let id = engine
        .send(with_mode("read edit delete", "bypass"))
        .await
        .unwrap();
    assert_eq!(
        settled(&engine, &id).await.status.state,
        TaskState::Completed
    );
    // An unknown mode is refused where it is parsed (the server answers -32602, see
    // tests/it/a2a_errors.rs); the engine takes typed modes only.
    assert_eq!(PermissionMode::parse("yolo"), None);
}

#[test]
async fn an_approved_tool_runs_once_after_a_crash_and_the_question_is_not_asked_again() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let store = MemoryStore::new();
    let hook = |f: &Fault| {
        f.boundary == Boundary::CommandJournaled && f.what.as_deref() == Some("tool `delete`")
    };
    let engine = builder(&store, &log).fault_hook(hook).build().unwrap();
    let id = engine
        .send(Request::operator(user("delete read")))
        .await
        .unwrap();
    assert_eq!(
        settled(&engine, &id).await.status.state,
        TaskState::InputRequired
    );
    engine
        .send(Request::operator(reply(&id, "approve")))
        .await
        .unwrap();
    wait_halted(&engine).await;
    drop(engine);
    let engine = builder(&store, &log).start().await.unwrap();
    let task = settled(&engine, &id).await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    let journal = engine.journal(&Caller::Operator, &id).await.unwrap();
    assert_eq!(
        journal
            .iter()
            .filter(|r| matches!(r.entry, Entry::AwaitingInput { .. }))
            .count(),
        1
    );
    assert_eq!(
        log.lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with("delete"))
            .count(),
        1
    );
}

#[derive(Default)]
struct Audit {
    seen: Mutex<Vec<String>>,
}

struct AuditHook(Arc<Audit>);

#[async_trait]
impl Hook for AuditHook {
    async fn before_step(&self, ctx: &HookContext) -> HookDecision {
        self.0
            .seen
            .lock()
            .unwrap()
            .push(format!("before {}", ctx.step));
        HookDecision::Continue
    }
    async fn after_step(&self, ctx: &HookContext, outcome: &str) {
        self.0
            .seen
            .lock()
            .unwrap()
            .push(format!("after {} {outcome}", ctx.step));
    }
    async fn before_command(&self, _: &HookContext, cmd: &mut Cmd) -> HookDecision {
        if let CmdKind::Tool { tool, args } = &mut cmd.kind {
            if tool == "delete" {
                return HookDecision::Deny("deleting is off today".into());
            }
            args["path"] = serde_json::json!("/sandbox/x");
        }
        HookDecision::Continue
    }
    async fn after_command(&self, _: &HookContext, cmd: &Cmd, receipt: &Receipt) {
        self.0.seen.lock().unwrap().push(format!(
            "done {} {}",
            cmd.kind.fingerprint(),
            receipt.outcome.is_ok()
        ));
    }
}

#[test]
async fn hooks_observe_modify_and_deny() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let audit = Arc::new(Audit::default());
    let engine = builder(&MemoryStore::new(), &log)
        .permission_mode(PermissionMode::Bypass)
        .hook(AuditHook(audit.clone()))
        .start()
        .await
        .unwrap();
    let id = engine
        .send(Request::operator(user("read delete")))
        .await
        .unwrap();
    let task = settled(&engine, &id).await;
    assert_eq!(task.status.state, TaskState::Failed);
    assert!(
        status_text(&task).contains("denied by a hook: deleting is off today"),
        "{}",
        status_text(&task)
    );
    assert_eq!(
        *log.lock().unwrap(),
        vec![r#"read {"path":"/sandbox/x"}"#.to_owned()],
        "the hook rewrote the arguments"
    );
    let seen = audit.seen.lock().unwrap().clone();
    assert_eq!(seen.first().map(String::as_str), Some("before ops"));
    assert!(
        seen.contains(&"done tool `read` true".to_owned()),
        "{seen:?}"
    );
    assert!(seen.last().unwrap().starts_with("after ops"), "{seen:?}");
}
