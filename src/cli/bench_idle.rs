//! `bench idle --tasks N`: N tasks waiting for input on SQLite, what they cost at rest and how a
//! restarted server copes with them: the time to create them, bytes per waiting task in the file,
//! readiness after a restart (a fresh process opening the file and starting the engine as `radkit
//! serve` does — the startup check for stranded tasks, then recovery — until it can serve), the
//! process's RSS then, and the latency to answer a random one (a reply that resumes the task, which
//! completes; p50 and p99). Issue 30's targets: ≤ 2 KB per waiting task, ready in < 100 ms and RSS
//! < 64 MB whatever the count, an answer's p99 < 5 ms. `--skill` runs one of the program's skills
//! instead of the bench's own (the demo's research loop, the example of a waiting task).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures::future::BoxFuture;

use super::bench_reads::percentiles;
use crate::engine::{Caller, Engine, EngineBuilder, Request};
use crate::flow::step_table::{await_input, Step, StepInput, StepTable};
use crate::flow::{SkillInfo, StepCtx, StepResult};
use crate::model::{Message, TaskState};
use crate::store::{Durability, SqliteStore, ViewQuery};

/// The bench's skill: it asks at once, and completes with the answer.
struct Idle;

fn ask<'a>(_: &'a Idle, _: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { await_input("answer", "Your answer?", ()) })
}

fn answered<'a>(_: &'a Idle, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { ctx.complete(input.message().joined_texts(), vec![]) })
}

static STEPS: &[Step<Idle>] = &[
    Step::new("ask", ask).start().takes_user_message(),
    Step::new("answered", answered).resume_from("ask"),
];

/// The engine over the file at `path`: the program's (`app`) for `skill`, else the bench's own.
fn builder(
    app: &super::App,
    store: &SqliteStore,
    skill: Option<&str>,
) -> anyhow::Result<EngineBuilder> {
    let store = store.clone();
    if skill.is_some() {
        return Ok(app.builder(Arc::new(store)));
    }
    let skill =
        StepTable::new(SkillInfo::new("idle", "Idle"), Idle, STEPS).map_err(anyhow::Error::msg)?;
    Ok(super::bench::bench_builder(store, skill))
}

/// Tasks waiting for input, by the store's count (one query per poll); `Err` once one ended
/// instead (a `--skill` that does not ask, or failed).
async fn waiting(engine: &Engine) -> anyhow::Result<u64> {
    let counts = engine
        .state_counts(&Caller::Operator, ViewQuery::default())
        .await?;
    if let Some((state, ended)) = counts.iter().find(|(s, n)| s.is_terminal() && *n > 0) {
        bail!("{ended} tasks ended {state:?} instead of waiting for input");
    }
    Ok(counts
        .iter()
        .filter(|(s, _)| *s == TaskState::InputRequired)
        .map(|(_, n)| n)
        .sum())
}

/// The file's bytes: the database, its WAL and its shared memory.
fn file_bytes(path: &Path) -> u64 {
    ["", "-wal", "-shm"]
        .iter()
        .filter_map(|suffix| {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            std::fs::metadata(PathBuf::from(p)).ok().map(|m| m.len())
        })
        .sum()
}

/// Run `bench idle`: create the tasks here, then restart in a child process that answers
/// `answers` of them; prints one JSON line.
pub(crate) async fn idle(
    app: &super::App,
    tasks: u64,
    answers: u64,
    skill: Option<&str>,
) -> anyhow::Result<()> {
    if tasks == 0 {
        bail!("--tasks must be at least 1");
    }
    let (_dir, path) = super::bench::fresh_db()?;
    let started = Instant::now();
    let mut ids = Vec::with_capacity(usize::try_from(tasks)?);
    {
        let store = SqliteStore::open(&path, Durability::Full)?;
        let engine = builder(app, &store, skill)?.start().await?;
        let mut pending = Vec::new();
        for i in 0..tasks {
            let mut request = Request::operator(Message::user_text(format!("task {i}")));
            request.skill = skill.map(str::to_owned);
            pending.push(engine.send(request));
            if pending.len() == 512 {
                ids.extend(futures::future::try_join_all(pending.drain(..)).await?);
            }
        }
        ids.extend(futures::future::try_join_all(pending).await?);
        let deadline = Instant::now() + Duration::from_secs(3600);
        while waiting(&engine).await? < tasks {
            if Instant::now() > deadline {
                bail!("the tasks did not all wait for input within an hour");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        engine.halt();
    }
    let create = started.elapsed();
    // Every `tasks / answers`-th task, spread over the file.
    let step = (tasks / answers.clamp(1, tasks)).max(1);
    let sample: Vec<String> = ids
        .iter()
        .step_by(usize::try_from(step)?)
        .take(usize::try_from(answers)?)
        .map(ToString::to_string)
        .collect();
    let ids_file = path.with_extension("ids");
    std::fs::write(&ids_file, sample.join("\n"))?;
    // The file as it rests: its WAL folded into the database.
    {
        let conn = rusqlite::Connection::open(&path)?;
        conn.busy_timeout(Duration::from_secs(30))?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    }
    let bytes = file_bytes(&path);
    let mut child = tokio::process::Command::new(std::env::current_exe()?);
    child
        .args(["bench", "idle", "--tasks", &tasks.to_string(), "--child"])
        .arg(&path);
    if let Some(skill) = skill {
        child.args(["--skill", skill]);
    }
    let out = child.output().await?;
    if !out.status.success() {
        bail!(
            "the restarted process failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut line: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("the restarted process's line")?;
    line["create_seconds"] = create.as_secs_f64().into();
    line["tasks_created_per_sec"] = (tasks as f64 / create.as_secs_f64().max(1e-9)).into();
    line["file_bytes"] = bytes.into();
    line["bytes_per_waiting_task"] = (bytes as f64 / tasks as f64).into();
    line["skill"] = skill.unwrap_or("idle").into();
    println!("{line}");
    Ok(())
}

/// The restart half of `bench idle`: open the file, start the engine as `radkit serve` does, then
/// answer the tasks the parent listed, one at a time.
pub(crate) async fn child(
    app: &super::App,
    path: &Path,
    tasks: u64,
    skill: Option<&str>,
) -> anyhow::Result<()> {
    // What `EngineBuilder::start` does with `refuse_stranded` (as `radkit serve` on SQLite), in
    // its parts: open and build, check for stranded tasks, recover.
    let started = Instant::now();
    let store = SqliteStore::open(path, Durability::Full)?;
    let engine = builder(app, &store, skill)?.build()?;
    let opened = started.elapsed();
    let stranded = engine.stranded().await?;
    if !stranded.is_empty() {
        bail!("{} tasks are stranded", stranded.len());
    }
    let checked = started.elapsed();
    engine.recover().await?;
    let ready = started.elapsed();
    let rss_ready = super::bench_streams::rss_bytes();
    let ids = std::fs::read_to_string(path.with_extension("ids"))?;
    let mut samples = Vec::new();
    let commits_before = store.stats().batches;
    for id in ids.lines().filter(|l| !l.is_empty()) {
        let mut reply = Message::user_text("yes");
        reply.task_id = Some(id.to_owned());
        let t = Instant::now();
        // A blocking send: acknowledged once the reply is durable, then followed to the end.
        let settled = engine
            .send_settled(Request::operator(reply), Some(0))
            .await?;
        samples.push(t.elapsed());
        if settled.status.state != TaskState::Completed {
            bail!(
                "task {id} ended {:?} after its answer",
                settled.status.state
            );
        }
    }
    let answered = samples.len();
    let commits = store.stats().batches - commits_before;
    let (p50, p99) = percentiles(samples);
    println!(
        "{}",
        serde_json::json!({
            "workload": "idle",
            "tasks": tasks,
            "ready_ms": ready.as_secs_f64() * 1e3,
            "open_ms": opened.as_secs_f64() * 1e3,
            "stranded_check_ms": (checked - opened).as_secs_f64() * 1e3,
            "recover_ms": (ready - checked).as_secs_f64() * 1e3,
            "rss_after_restart_bytes": rss_ready,
            "answers": answered,
            "answer_p50_ms": p50,
            "answer_p99_ms": p99,
            "commits_per_answer": commits as f64 / answered.max(1) as f64,
            "peak_rss_bytes": super::bench::peak_rss_bytes(),
            "durability": "FULL",
        })
    );
    engine.halt();
    Ok(())
}
