//! Checkpoints: a long-running task is reloaded from its first entry and its last checkpoint only, and
//! nothing it owes survives less for it — not an idempotent command cut off by a crash, not a
//! compensation recorded hundreds of entries before.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::{Boundary, Fault};
use radkit_runtime::flow::step_table::{await_input, goto, Step, StepInput, StepTable};
use radkit_runtime::flow::{EffectPolicy, SkillInfo, StepCtx, StepResult};
use radkit_runtime::journal::Entry;
use radkit_runtime::model::TaskState;
use radkit_runtime::store::{Durability, SqliteStore, Store};
use radkit_runtime::tools::FnTool;
use radkit_runtime::Engine;

struct Spinner;

/// `start`: reserve (a `Compensate` tool), then spin N times (one idempotent tick each), then wait for
/// a human; `finish` completes.
fn start<'a>(_: &'a Spinner, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let n: u64 = input.message().joined_texts().trim().parse().unwrap_or(1);
        let _: serde_json::Value = ctx.tool("reserve").call(n).await?;
        goto("spin", (0u64, n))
    })
}

fn spin<'a>(_: &'a Spinner, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let (i, n): (u64, u64) = input.payload()?;
        let _: u64 = ctx.tool("tick").call(i).await?;
        if i + 1 >= n {
            return await_input("ok", "Spun. Confirm?", (i, n));
        }
        goto("spin", (i + 1, n))
    })
}

fn finish<'a>(_: &'a Spinner, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { ctx.complete("done", vec![]) })
}

static STEPS: &[Step<Spinner>] = &[
    Step::new("start", start)
        .start()
        .takes_user_message()
        .goes_to(&["spin"]),
    Step::new("spin", spin).goes_to(&["spin"]),
    Step::new("finish", finish)
        .resume_from("spin")
        .takes_user_message(),
];

/// Tick calls per InvocationId, and compensations run.
#[derive(Clone, Default)]
struct Counts {
    ticks: Arc<Mutex<HashMap<String, u32>>>,
    undone: Arc<AtomicU32>,
}

fn engine(store: Arc<dyn Store>, counts: &Counts, every: u64) -> radkit_runtime::EngineBuilder {
    let skill = StepTable::new(SkillInfo::new("spinner", "Spinner"), Spinner, STEPS).unwrap();
    let ticks = counts.ticks.clone();
    let tick = FnTool::new(EffectPolicy::Idempotent, move |args, key| {
        let ticks = ticks.clone();
        async move {
            *ticks
                .lock()
                .unwrap()
                .entry(key.as_str().to_owned())
                .or_default() += 1;
            Ok(args)
        }
    });
    let undone = counts.undone.clone();
    let reserve = FnTool::new(EffectPolicy::Compensate, |args, _| async move {
        Ok(serde_json::json!({ "reserved": args }))
    })
    .compensate_with(move |_, _, _| {
        let undone = undone.clone();
        async move {
            undone.fetch_add(1, Ordering::SeqCst);
            Ok(serde_json::Value::Null)
        }
    });
    Engine::builder_arc(store)
        .skill(skill)
        .effects(Effects::new().tool("tick", tick).tool("reserve", reserve))
        .checkpoint_every(every)
}

fn checkpoints(journal: &[radkit_runtime::journal::JournalRecord]) -> usize {
    journal
        .iter()
        .filter(|r| matches!(r.entry, Entry::Checkpoint { .. }))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_in_a_long_loop_resumes_from_the_last_checkpoint_without_repeating_a_tick() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spin.sqlite");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path, Durability::Full).unwrap());
    let counts = Counts::default();
    let journaled = Arc::new(AtomicU32::new(0));
    let hook = {
        let journaled = journaled.clone();
        move |f: &Fault| {
            f.boundary == Boundary::CommandJournaled
                && f.what.as_deref().is_some_and(|w| w.contains("tick"))
                && journaled.fetch_add(1, Ordering::SeqCst) == 57
        }
    };
    let a = engine(store.clone(), &counts, 10)
        .fault_hook(hook)
        .build()
        .unwrap();
    let task = a.send(None, None, user("100")).await.unwrap();
    wait_halted(&a).await;
    drop(a);

    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path, Durability::Full).unwrap());
    let for_replay = store.journal_for_replay(&task).await.unwrap();
    let all = store.journal(&task, 0).await.unwrap();
    assert!(
        checkpoints(&all) >= 5,
        "a checkpoint every 10 visits: {}",
        checkpoints(&all)
    );
    assert!(
        // The first entry, then at most ten visits of four entries (activated, command, receipt,
        // transition) since the last checkpoint.
        for_replay.len() <= 1 + 4 * 10 && all.len() > 200,
        "a reload reads {} of {} entries",
        for_replay.len(),
        all.len()
    );
    let b = engine(store.clone(), &counts, 10).start().await.unwrap();
    let waiting = settled(&b, &task).await;
    assert_eq!(waiting.status.state, TaskState::InputRequired);
    b.send(None, None, reply(&task, "yes")).await.unwrap();
    assert_eq!(settled(&b, &task).await.status.state, TaskState::Completed);

    let ticks = counts.ticks.lock().unwrap().clone();
    assert_eq!(ticks.len(), 100, "one tick per loop turn");
    assert!(
        ticks.values().all(|n| *n == 1),
        "a crash after journaling a tick and before running it runs it once: {ticks:?}"
    );
    let seqs: Vec<u64> = store
        .journal(&task, 0)
        .await
        .unwrap()
        .iter()
        .map(|r| r.seq)
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compensation_recorded_before_many_checkpoints_still_runs_on_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spin.sqlite");
    let counts = Counts::default();
    let task = {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path, Durability::Full).unwrap());
        let a = engine(store, &counts, 5).start().await.unwrap();
        let task = a.send(None, None, user("40")).await.unwrap();
        assert_eq!(
            settled(&a, &task).await.status.state,
            TaskState::InputRequired
        );
        a.halt();
        task
    };
    // A fresh engine knows the reservation only through the last checkpoint.
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path, Durability::Full).unwrap());
    let for_replay = store.journal_for_replay(&task).await.unwrap();
    assert!(
        !for_replay
            .iter()
            .any(|r| matches!(&r.entry, Entry::CommandIssued { cmd, .. } if cmd.kind.fingerprint().contains("reserve"))),
        "the reservation's own entries are not reread"
    );
    let b = engine(store, &counts, 5).start().await.unwrap();
    let canceled = b.cancel(None, &task).await.unwrap();
    assert_eq!(canceled.status.state, TaskState::Canceled);
    assert_eq!(
        counts.undone.load(Ordering::SeqCst),
        1,
        "the reservation was undone once"
    );
}
