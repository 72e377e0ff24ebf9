//! Checkpoints: a long-running task is reloaded from its first entry and its last checkpoint only, and
//! nothing it owes survives less for it — not an idempotent command cut off by a crash, not a
//! compensation recorded hundreds of entries before. Each test runs on SQLite and on PostgreSQL (the
//! server is `RADKIT_TEST_POSTGRES_URL`, else the local one, see `services`; when it does not answer
//! the Postgres tests are reported ignored), each in a fresh file or schema.

use crate::support::common;
use crate::support::services;

use radkit_runtime::engine::{Caller, Request};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::{Boundary, Fault};
use radkit_runtime::engine::{Engine, EngineBuilder};
use radkit_runtime::flow::step_table::{await_input, goto, Step, StepInput, StepTable};
use radkit_runtime::flow::{
    Cmd, EffectPolicy, Event, FlowSkill, SkillInfo, StepCtx, StepError, StepResult, Transition,
};
use radkit_runtime::journal::{Entry, JournalRecord};
use radkit_runtime::model::TaskState;
use radkit_runtime::store::{Durability, PostgresStore, SqliteStore, Store};
use radkit_runtime::tools::FnTool;

/// Where a test's tasks live; [`Backend::open`] opens it again the way a restarted process would.
enum Backend {
    Sqlite(tempfile::TempDir),
    /// A URL whose sessions work in a fresh schema.
    Postgres(String),
}

impl Backend {
    fn sqlite() -> Self {
        Backend::Sqlite(tempfile::tempdir().expect("a temporary directory"))
    }

    async fn postgres() -> Self {
        let (_, scoped) = radkit_runtime::store::PostgresStore::create_schema(
            &services::postgres_url(),
            "radkit_checkpoint",
        )
        .await
        .expect("create a test schema");
        Backend::Postgres(scoped)
    }

    async fn open(&self) -> Arc<dyn Store> {
        match self {
            Backend::Sqlite(dir) => Arc::new(
                SqliteStore::open(dir.path().join("spin.sqlite"), Durability::Full)
                    .expect("open the SQLite store"),
            ),
            Backend::Postgres(url) => Arc::new(
                PostgresStore::connect(url)
                    .await
                    .expect("connect the Postgres store"),
            ),
        }
    }

    /// An engine named `worker` over a newly opened store. On Postgres, short leases: a crashed
    /// engine's lease runs out quickly for the next one.
    async fn engine(&self, worker: &str, counts: &Counts, every: u64) -> EngineBuilder {
        engine(self.open().await, counts, every)
            .worker_id(worker)
            .lease_ttl(Duration::from_millis(400))
            .poll_interval(Duration::from_millis(20))
    }
}

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

fn engine(store: Arc<dyn Store>, counts: &Counts, every: u64) -> EngineBuilder {
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

fn checkpoints(journal: &[JournalRecord]) -> usize {
    journal
        .iter()
        .filter(|r| matches!(r.entry, Entry::Checkpoint { .. }))
        .count()
}

/// A reload of `task` reads its first entry and what follows its last checkpoint: the last
/// checkpoint and no other, and at most `every` visits of four entries (activated, command, receipt,
/// transition) besides, out of a journal of more than `min_len` entries and `min_checkpoints`
/// checkpoints.
async fn assert_reload_is_compacted(
    store: &dyn Store,
    task: &str,
    every: u64,
    min_len: usize,
    min_checkpoints: usize,
) {
    let all = store.journal(task, 0).await.unwrap();
    let for_replay = store.journal_for_replay(task).await.unwrap();
    assert!(
        checkpoints(&all) >= min_checkpoints && all.len() > min_len,
        "a checkpoint every {every} visits: {} in {} entries",
        checkpoints(&all),
        all.len()
    );
    let last = all
        .iter()
        .rev()
        .find(|r| matches!(r.entry, Entry::Checkpoint { .. }))
        .expect("a checkpoint");
    assert_eq!(for_replay.first(), all.first(), "the first entry is read");
    assert_eq!(
        for_replay
            .iter()
            .filter(|r| matches!(r.entry, Entry::Checkpoint { .. }))
            .collect::<Vec<_>>(),
        vec![last],
        "the last checkpoint is read and no earlier one"
    );
    assert!(
        for_replay.ends_with(&all[last.seq as usize - 1..]),
        "everything from the last checkpoint on is read"
    );
    assert!(
        for_replay.len() as u64 <= 1 + 4 * every + 4,
        "a reload reads {} of {} entries",
        for_replay.len(),
        all.len()
    );
}

#[test(multi_thread)]
async fn sqlite_a_crash_in_a_long_loop_resumes_from_the_last_checkpoint_without_repeating_a_tick() {
    a_crash_in_a_long_loop_resumes_from_the_last_checkpoint_without_repeating_a_tick(
        Backend::sqlite(),
    )
    .await
}

#[test(multi_thread, needs = Postgres)]
async fn postgres_a_crash_in_a_long_loop_resumes_from_the_last_checkpoint_without_repeating_a_tick()
{
    a_crash_in_a_long_loop_resumes_from_the_last_checkpoint_without_repeating_a_tick(
        Backend::postgres().await,
    )
    .await
}

#[test(multi_thread)]
async fn sqlite_a_compensation_recorded_before_many_checkpoints_still_runs_on_cancel() {
    a_compensation_recorded_before_many_checkpoints_still_runs_on_cancel(Backend::sqlite()).await
}

#[test(multi_thread, needs = Postgres)]
async fn postgres_a_compensation_recorded_before_many_checkpoints_still_runs_on_cancel() {
    a_compensation_recorded_before_many_checkpoints_still_runs_on_cancel(Backend::postgres().await)
        .await
}

async fn a_crash_in_a_long_loop_resumes_from_the_last_checkpoint_without_repeating_a_tick(
    backend: Backend,
) {
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
    let a = backend
        .engine("engine-a", &counts, 10)
        .await
        .fault_hook(hook)
        .start()
        .await
        .unwrap();
    let task = a.send(Request::operator(user("100"))).await.unwrap();
    wait_halted(&a).await;
    drop(a);

    // A new process: it reloads the task from its last checkpoint.
    let store = backend.open().await;
    assert_reload_is_compacted(store.as_ref(), &task, 10, 200, 5).await;
    let b = backend
        .engine("engine-b", &counts, 10)
        .await
        .start()
        .await
        .unwrap();
    let waiting = settled(&b, &task).await;
    assert_eq!(waiting.status.state, TaskState::InputRequired);
    b.send(Request::operator(reply(&task, "yes")))
        .await
        .unwrap();
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

async fn a_compensation_recorded_before_many_checkpoints_still_runs_on_cancel(backend: Backend) {
    let counts = Counts::default();
    let task = {
        let a = backend
            .engine("engine-a", &counts, 5)
            .await
            .start()
            .await
            .unwrap();
        let task = a.send(Request::operator(user("40"))).await.unwrap();
        assert_eq!(
            settled(&a, &task).await.status.state,
            TaskState::InputRequired
        );
        a.halt();
        task
    };
    // A fresh engine knows the reservation only through the last checkpoint.
    let store = backend.open().await;
    assert_reload_is_compacted(store.as_ref(), &task, 5, 100, 7).await;
    let for_replay = store.journal_for_replay(&task).await.unwrap();
    // The task's first append is read whole: on a store of one engine's alone it carries what the
    // first step did first with the task's creation. Nothing after it is, up to the checkpoint.
    let first_append = for_replay
        .iter()
        .zip(1u64..)
        .take_while(|(r, seq)| r.seq == *seq)
        .count() as u64;
    assert!(
        !for_replay
            .iter()
            .filter(|r| r.seq > first_append)
            .any(|r| matches!(&r.entry, Entry::CommandIssued { cmd, .. } if cmd.kind.fingerprint().contains("reserve"))),
        "the reservation's own entries are not reread"
    );
    let b = backend
        .engine("engine-b", &counts, 5)
        .await
        .start()
        .await
        .unwrap();
    let canceled = b.cancel(&Caller::Operator, &task).await.unwrap();
    assert_eq!(canceled.status.state, TaskState::Canceled);
    assert_eq!(
        counts.undone.load(Ordering::SeqCst),
        1,
        "the reservation was undone once"
    );
}

/// A reducer whose first transition sets a timer (an hour's sleep) beside a tool; the tool's result
/// takes a plain `goto`, and the state it enters waits for the timer.
struct SleepBesideTool;

#[async_trait::async_trait]
impl FlowSkill for SleepBesideTool {
    type State = u32;
    fn info(&self) -> SkillInfo {
        SkillInfo::new("sleep_beside_tool", "Sleep beside a tool").version("1")
    }
    fn initial_state(&self) -> u32 {
        0
    }
    async fn on_event(
        &self,
        state: u32,
        event: Event,
        _: &StepCtx,
    ) -> Result<Transition<u32>, StepError> {
        Ok(match (state, event) {
            (0, Event::UserMessage { .. }) => Transition::to(1)
                .cmd(Cmd::sleep(Duration::from_secs(3600)))
                .cmd(Cmd::tool("tick", serde_json::json!(0))),
            (1, Event::CommandResult { .. }) => Transition::goto(2),
            (2, Event::Enter) => Transition::to(3),
            (3, Event::TimerFired { .. }) => Transition::complete("slept"),
            _ => Transition::ignore(),
        })
    }
}

#[test(multi_thread)]
async fn sqlite_no_checkpoint_is_written_while_a_sleep_issued_beside_a_tool_is_outstanding() {
    no_checkpoint_is_written_while_a_sleep_issued_beside_a_tool_is_outstanding(Backend::sqlite())
        .await
}

#[test(multi_thread, needs = Postgres)]
async fn postgres_no_checkpoint_is_written_while_a_sleep_issued_beside_a_tool_is_outstanding() {
    no_checkpoint_is_written_while_a_sleep_issued_beside_a_tool_is_outstanding(
        Backend::postgres().await,
    )
    .await
}

/// A checkpoint stands for everything before it, so it is written only when nothing is outstanding:
/// the plain `goto` that follows the tool's result, with a checkpoint due at every visit, writes none
/// while the sleep issued beside the tool has no receipt, and the task goes on waiting for that sleep
/// (a checkpoint would have forgotten it: the task would fail as waiting for nothing, and a reload
/// would read nothing of the sleep).
async fn no_checkpoint_is_written_while_a_sleep_issued_beside_a_tool_is_outstanding(
    backend: Backend,
) {
    let store = backend.open().await;
    let tick = FnTool::new(EffectPolicy::Idempotent, |args, _| async move { Ok(args) });
    let engine = Engine::builder_arc(store.clone())
        .skill(SleepBesideTool)
        .effects(Effects::new().tool("tick", tick))
        .checkpoint_every(1)
        .start()
        .await
        .unwrap();
    let task = engine.send(Request::operator(user("go"))).await.unwrap();
    // The visit the `goto` entered journaled its transition: the run has settled on the sleep (or, had
    // the checkpoint forgotten the sleep, ended in the same append).
    let journal = within(PATIENCE, "the third visit's transition", async {
        loop {
            let journal = store.journal(&task, 0).await.unwrap();
            if journal
                .iter()
                .any(|r| matches!(r.entry, Entry::Transitioned { visit: 3, .. }))
            {
                return journal;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let entries: Vec<&Entry> = journal.iter().map(|r| &r.entry).collect();
    assert_eq!(checkpoints(&journal), 0, "{entries:#?}");
    assert!(
        !entries.iter().any(|e| matches!(e, Entry::Terminal { .. })),
        "the task waits for its sleep: {entries:#?}"
    );
    let row = store.task(&task).await.unwrap().expect("the task's row");
    assert!(!row.state.is_terminal(), "{row:?}");
    assert!(
        row.wake_at_ms.is_some(),
        "the row wakes for the sleep: {row:?}"
    );
    let for_replay = store.journal_for_replay(&task).await.unwrap();
    assert!(
        for_replay.iter().any(|r| matches!(&r.entry, Entry::CommandIssued { cmd, .. } if cmd.kind.kind_name() == "sleep")),
        "a reload reads the sleep"
    );
    engine.halt();
}
