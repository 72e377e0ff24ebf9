//! A real process is killed with SIGKILL in the middle of a tool call and the task is resumed from its
//! SQLite file by another process: the idempotent effect is applied once, the earlier receipt is
//! reused, the task completes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::flow::step_table::{Step, StepInput, StepTable};
use radkit_runtime::flow::{EffectPolicy, SkillInfo, StepCtx, StepResult};
use radkit_runtime::model::{Message, TaskState};
use radkit_runtime::store::{Durability, SqliteStore, TaskQuery};
use radkit_runtime::tools::FnTool;
use radkit_runtime::Engine;

struct Job;

fn run_job<'a>(_: &'a Job, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let a: String = ctx.tool("prepare").call("a").await?;
        let b: String = ctx.tool("ship").call("b").await?;
        ctx.complete(format!("{a}+{b}"), vec![])
    })
}

static STEPS: &[Step<Job>] = &[Step::new("job", run_job).start().takes_user_message()];

/// Appends `name:key` to the ledger file unless present (a provider deduplicating on the key).
fn ledger_tool(dir: PathBuf, name: &'static str, hang_after: bool) -> FnTool {
    FnTool::new(EffectPolicy::Idempotent, move |_args, key| {
        let dir = dir.clone();
        async move {
            let ledger = dir.join("ledger.txt");
            let line = format!("{name}:{key}");
            let calls = dir.join("calls.txt");
            let mut all = std::fs::read_to_string(&calls).unwrap_or_default();
            all.push_str(&format!("{line}\n"));
            std::fs::write(&calls, all)
                .map_err(|e| radkit_runtime::flow::EffectError::transient(e.to_string()))?;
            let existing = std::fs::read_to_string(&ledger).unwrap_or_default();
            if !existing.lines().any(|l| l == line) {
                std::fs::write(&ledger, format!("{existing}{line}\n"))
                    .map_err(|e| radkit_runtime::flow::EffectError::transient(e.to_string()))?;
            }
            if hang_after {
                std::fs::write(dir.join("marker"), b"in effect").ok();
                tokio::time::sleep(Duration::from_secs(120)).await;
            }
            Ok(serde_json::json!(name))
        }
    })
}

fn engine_builder(dir: &Path, hang: bool) -> radkit_runtime::EngineBuilder {
    let store =
        SqliteStore::open(dir.join("radkit.sqlite"), Durability::Full).expect("open sqlite");
    let skill = StepTable::new(SkillInfo::new("job", "Job"), Job, STEPS).unwrap();
    let effects = Effects::new()
        .tool("prepare", ledger_tool(dir.to_owned(), "prepare", false))
        .tool("ship", ledger_tool(dir.to_owned(), "ship", hang));
    Engine::builder(store).skill(skill).effects(effects)
}

#[tokio::test]
#[ignore = "entry point of the child process of kill_9_mid_tool_call_resumes_from_the_sqlite_file"]
async fn child_process_runs_the_job_until_killed() {
    let dir = PathBuf::from(std::env::var("RADKIT_KILL9_DIR").expect("run by the parent test"));
    let engine = engine_builder(&dir, true).start().await.unwrap();
    engine
        .send(None, None, Message::user_text("go"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(120)).await;
}

/// The child process, killed with SIGKILL when dropped: a failing test leaves no process behind.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn kill_9_mid_tool_call_resumes_from_the_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_runs_the_job_until_killed",
            "--ignored",
            "--nocapture",
        ])
        .env("RADKIT_KILL9_DIR", dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Child(child);
    // The marker is written by another process: no event reaches this one, so poll, with a deadline.
    let started = Instant::now();
    while !dir.path().join("marker").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "timed out waiting for the child to reach the tool call"
        );
        if let Some(status) = child.0.try_wait().unwrap() {
            panic!("the child exited ({status}) before it reached the tool call");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.0.kill().unwrap(); // SIGKILL
    child.0.wait().unwrap();

    let engine = engine_builder(dir.path(), false).start().await.unwrap();
    let tasks = engine.store().list(TaskQuery::default()).await.unwrap();
    assert_eq!(tasks.len(), 1);
    let id = tasks[0].id.clone();
    let Ok(task) =
        tokio::time::timeout(Duration::from_secs(30), engine.wait_settled(None, &id)).await
    else {
        let journal = engine.journal(None, &id).await.unwrap();
        panic!("task did not finish after recovery; journal: {journal:#?}");
    };
    let task = task.unwrap();
    assert_eq!(task.status.state, TaskState::Completed, "{:?}", task.status);

    let ledger = std::fs::read_to_string(dir.path().join("ledger.txt")).unwrap();
    let calls = std::fs::read_to_string(dir.path().join("calls.txt")).unwrap();
    let ship: Vec<&str> = ledger.lines().filter(|l| l.starts_with("ship:")).collect();
    assert_eq!(ship.len(), 1, "one shipment per InvocationId: {ledger}");
    assert_eq!(
        calls.lines().filter(|l| l.starts_with("ship:")).count(),
        2,
        "reissued once, same key: {calls}"
    );
    assert_eq!(
        calls
            .lines()
            .filter(|l| l.starts_with("ship:"))
            .collect::<std::collections::HashSet<_>>()
            .len(),
        1
    );
    assert_eq!(
        calls.lines().filter(|l| l.starts_with("prepare:")).count(),
        1,
        "the receipt of `prepare` survived the kill"
    );
}
