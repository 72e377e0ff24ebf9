//! Parallel effects inside a step (`ctx.all`, `join!` over `ctx` calls): the calls take their
//! InvocationIds in the order given, the batch is journaled in one append, at most
//! `max_parallel_effects` run at once, a crash in the middle reissues only the calls without a
//! durable receipt, a sibling of a batch whose append failed never starts, a batch replayed in
//! another order is a non-determinism failure naming the step, and a question or a sleep inside a
//! batch lets the siblings finish and keep their receipts.

use crate::support::common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::{reply, settled, status_text, user, wait_halted, within, Ledger, PATIENCE};
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::Engine;
use radkit_runtime::engine::{Boundary, Caller, Fault, Request};
use radkit_runtime::flow::step_table::{Step, StepInput, StepTable};
use radkit_runtime::flow::{
    CmdKind, EffectPolicy, InvocationId, SkillInfo, StepCtx, StepError, StepResult,
};
use radkit_runtime::journal::{Entry, JournalRecord};
use radkit_runtime::model::{Task, TaskId, TaskState};
use radkit_runtime::store::{Append, MemoryStore, Store, StoreError, TaskQuery, TaskRecord};
use radkit_runtime::tools::FnTool;
use serde_json::Value;

// ---- the skills ----

/// One step: `width` calls of the `count` tool in one `ctx.try_all`, each with its index; the
/// task completes with the values, in order, comma-joined.
struct Fan {
    width: u64,
}

fn fan<'a>(s: &'a Fan, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let values: Vec<u64> = ctx
            .try_all((0..s.width).map(|i| ctx.tool("count").call(i)))
            .await?;
        let text: Vec<String> = values.iter().map(u64::to_string).collect();
        ctx.complete(text.join(","), vec![])
    })
}

static FAN_STEPS: &[Step<Fan>] = &[Step::new("fan", fan).start().takes_user_message()];

fn fan_skill(width: u64) -> StepTable<Fan> {
    StepTable::new(SkillInfo::new("fan", "Fan"), Fan { width }, FAN_STEPS).unwrap()
}

/// `join!` over tools `a` and `b`, in that order, or `b` then `a` when `flipped` (a skill changed
/// between a crash and the replay).
struct Pair {
    flipped: bool,
}

fn pair<'a>(s: &'a Pair, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let (first, second) = if s.flipped { ("b", "a") } else { ("a", "b") };
        let (x, y) = radkit_runtime::join!(
            ctx.tool(first).call::<_, Value>(1),
            ctx.tool(second).call::<_, Value>(2),
        );
        ctx.complete(format!("{} {}", x?, y?), vec![])
    })
}

static PAIR_STEPS: &[Step<Pair>] = &[Step::new("pair", pair).start().takes_user_message()];

fn pair_skill(flipped: bool) -> StepTable<Pair> {
    StepTable::new(SkillInfo::new("pair", "Pair"), Pair { flipped }, PAIR_STEPS).unwrap()
}

/// A question, or a one-millisecond sleep when `sleep`, between two `count` calls, all in one
/// `join!`; the task completes with the answer (or `slept`) and both values.
struct Waits {
    sleep: bool,
}

fn waits<'a>(s: &'a Waits, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let wait = async {
            if s.sleep {
                ctx.sleep(Duration::from_millis(1)).await?;
                Ok::<_, StepError>("slept".to_owned())
            } else {
                Ok(ctx.ask("note", "A note?").await?.joined_texts())
            }
        };
        let (x, note, y) = radkit_runtime::join!(
            ctx.tool("count").call::<_, u64>(1),
            wait,
            ctx.tool("count").call::<_, u64>(2),
        );
        ctx.complete(format!("{} {} {}", x?, note?, y?), vec![])
    })
}

static WAITS_STEPS: &[Step<Waits>] = &[Step::new("waits", waits).start().takes_user_message()];

fn waits_skill(sleep: bool) -> StepTable<Waits> {
    StepTable::new(
        SkillInfo::new("waits", "Waits"),
        Waits { sleep },
        WAITS_STEPS,
    )
    .unwrap()
}

/// Three child-skill calls (`ctx.skill("echo")`) in one `ctx.try_all`.
struct Calls;

fn calls<'a>(_: &'a Calls, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let texts = ["a", "b", "c"].map(String::from);
        let replies = ctx
            .try_all(texts.into_iter().map(|t| ctx.skill("echo").send(t)))
            .await?;
        let texts: Vec<String> = replies.iter().map(|r| r.text()).collect();
        ctx.complete(texts.join(","), vec![])
    })
}

static CALLS_STEPS: &[Step<Calls>] = &[Step::new("calls", calls).start().takes_user_message()];

struct Echo;

fn echo<'a>(_: &'a Echo, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(
        async move { ctx.complete(format!("echo {}", input.message().joined_texts()), vec![]) },
    )
}

static ECHO_STEPS: &[Step<Echo>] = &[Step::new("echo", echo).start().takes_user_message()];

// ---- tools and stores ----

/// An idempotent tool that logs each call in `ledger` (by its InvocationId), waits `delay(arg)`,
/// and answers its argument.
fn counting(ledger: &Ledger, delay: fn(u64) -> Duration) -> FnTool {
    let ledger = ledger.clone();
    FnTool::new(EffectPolicy::Idempotent, move |args, key| {
        let ledger = ledger.clone();
        async move {
            ledger.record_call("count", key.as_str());
            let wait = delay(args.as_u64().unwrap_or(0));
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            ledger.apply("count", key.as_str());
            Ok(args)
        }
    })
}

fn no_delay(_: u64) -> Duration {
    Duration::ZERO
}

/// Completion order unlike issue order: 3, 8, 1, 6, … (each call's delay a permutation of its index).
fn shuffled(i: u64) -> Duration {
    Duration::from_millis(5 + (i * 7) % 10 * 3)
}

/// A memory store that keeps each append's entries, and fails its `fail_at`-th append (from 1; 0
/// never) without writing it.
#[derive(Clone, Default)]
struct Recording {
    inner: MemoryStore,
    appends: Arc<Mutex<Vec<Vec<Entry>>>>,
    fail_at: usize,
}

impl Recording {
    /// The appends holding `command_issued` entries: for each, how many.
    fn issuing_appends(&self) -> Vec<usize> {
        self.appends
            .lock()
            .unwrap()
            .iter()
            .map(|entries| {
                entries
                    .iter()
                    .filter(|e| matches!(e, Entry::CommandIssued { .. }))
                    .count()
            })
            .filter(|&n| n > 0)
            .collect()
    }
}

#[async_trait]
impl Store for Recording {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
        let n = {
            let mut appends = self.appends.lock().unwrap();
            appends.push(append.entries.to_vec());
            appends.len()
        };
        if n == self.fail_at {
            return Err(StoreError::backend("appending", "injected failure"));
        }
        self.inner.append(append).await
    }
    async fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        self.inner.task(task_id).await
    }
    async fn journal(
        &self,
        task_id: &str,
        after_seq: u64,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        self.inner.journal(task_id, after_seq).await
    }
    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        self.inner.journal_for_replay(task_id).await
    }
    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        self.inner.list(query).await
    }
}

// ---- helpers ----

fn fan_effects(ledger: &Ledger, delay: fn(u64) -> Duration) -> Effects {
    Effects::new().tool("count", counting(ledger, delay))
}

/// The `count` calls logged so far, each as its InvocationId.
fn count_calls(ledger: &Ledger) -> Vec<String> {
    ledger
        .calls_of("count")
        .into_iter()
        .map(|c| c.trim_start_matches("count:").to_owned())
        .collect()
}

fn ids(calls: &[String]) -> BTreeSet<String> {
    calls.iter().cloned().collect()
}

/// The step's commands in the journal: (id, the tool's argument), in journal order.
fn issued(journal: &[JournalRecord]) -> Vec<(InvocationId, Value)> {
    journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::CommandIssued { id, cmd, .. } => match &cmd.kind {
                CmdKind::Tool { args, .. } => Some((id.clone(), args.clone())),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn receipted(journal: &[JournalRecord]) -> BTreeSet<String> {
    journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::ReceiptRecorded { receipt } => Some(receipt.id.to_string()),
            _ => None,
        })
        .collect()
}

/// The task once it is terminal, polling the store's view (a run stopped by a failed append tells
/// its waiters so, and a later run finishes the task).
async fn terminal(engine: &Engine, task_id: &TaskId) -> Task {
    within(PATIENCE, "the task to end", async {
        loop {
            let task = engine.task(&Caller::Operator, task_id, None).await.unwrap();
            if task.status.state.is_terminal() {
                return task;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}

fn assert_completed_with(task: &Task, text: &str) {
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(task)
    );
    assert_eq!(status_text(task), text);
}

fn zero_to(width: u64) -> String {
    (0..width)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

// ---- the promises ----

/// Ten idempotent calls in one `ctx.all`, completing in shuffled order; the engine dies right after
/// the fifth receipt is durable, while other calls are still in flight. A fresh engine re-runs the
/// step: the calls with a durable receipt return it, only the others are reissued (same ids), and
/// the task completes with all ten values in input order. Ten effects in all, one per id.
#[test]
async fn fan_out_killed_midway_reissues_only_the_effects_without_receipts() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let receipts = Arc::new(AtomicU32::new(0));
    let hook = {
        let receipts = receipts.clone();
        move |f: &Fault| {
            f.boundary == Boundary::ReceiptWritten && receipts.fetch_add(1, Ordering::SeqCst) == 4
        }
    };
    let engine = Engine::builder(store.clone())
        .skill(fan_skill(10))
        .effects(fan_effects(&ledger, shuffled))
        .fault_hook(hook)
        .check_fold(true)
        .build()
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    wait_halted(&engine).await;
    assert!(engine.fold_divergences().is_empty());
    drop(engine);

    let journal = store.journal(&task_id, 0).await.unwrap();
    let durable = receipted(&journal);
    let commands = issued(&journal);
    assert_eq!(commands.len(), 10, "the whole batch is journaled");
    for (ordinal, (id, arg)) in commands.iter().enumerate() {
        assert_eq!(
            id.as_str(),
            format!("{task_id}:1:{ordinal}"),
            "ids in input order"
        );
        assert_eq!(arg, &Value::from(ordinal as u64), "{id} is call {ordinal}");
    }
    assert!(
        durable.len() >= 5 && durable.len() < 10,
        "the crash came after the fifth receipt, before the last: {durable:?}"
    );
    let before = count_calls(&ledger);

    let engine = Engine::builder(store.clone())
        .skill(fan_skill(10))
        .effects(fan_effects(&ledger, shuffled))
        .check_fold(true)
        .start()
        .await
        .unwrap();
    let task = settled(&engine, &task_id).await;
    assert_completed_with(&task, &zero_to(10));
    assert!(engine.fold_divergences().is_empty());

    let after: Vec<String> = count_calls(&ledger).split_off(before.len());
    let all: BTreeSet<String> = commands.iter().map(|(id, _)| id.to_string()).collect();
    let missing: BTreeSet<String> = all.difference(&durable).cloned().collect();
    assert_eq!(
        ids(&after),
        missing,
        "after the restart, exactly the calls without a durable receipt are reissued"
    );
    assert_eq!(after.len(), missing.len(), "each once");
    assert!(
        before.iter().all(|id| all.contains(id)),
        "before the crash, only the batch's ids"
    );
    assert_eq!(
        ledger.applied_of("count").len(),
        10,
        "ten effects in all, one per id"
    );
    let journal = store.journal(&task_id, 0).await.unwrap();
    assert_eq!(issued(&journal).len(), 10, "nothing journaled twice");
    assert_eq!(receipted(&journal), all, "one receipt each");
}

/// The ten `command_issued` entries of a batch commit in one append (with the visit's
/// `activated`), and so do forty (past `join_all`'s small-list limit of 30, where it polls through
/// a `FuturesOrdered`): their ids still follow the input order. On a multi-threaded runtime, as a
/// server runs.
#[test(multi_thread)]
async fn a_batch_is_journaled_in_one_append_with_ids_in_input_order() {
    for width in [10u64, 40] {
        let store = Recording::default();
        let ledger = Ledger::default();
        let engine = Engine::builder(store.clone())
            .skill(fan_skill(width))
            .effects(fan_effects(&ledger, no_delay))
            .check_fold(true)
            .start()
            .await
            .unwrap();
        let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
        let task = settled(&engine, &task_id).await;
        assert_completed_with(&task, &zero_to(width));
        assert_eq!(
            store.issuing_appends(),
            vec![width as usize],
            "width {width}: one append carries every command of the batch"
        );
        assert_eq!(
            store.appends.lock().unwrap().len(),
            2,
            "width {width}: the task's creation with the batch, and its receipts with the task's end"
        );
        let journal = store.journal(&task_id, 0).await.unwrap();
        for (ordinal, (id, arg)) in issued(&journal).iter().enumerate() {
            assert_eq!(id.as_str(), format!("{task_id}:1:{ordinal}"));
            assert_eq!(arg, &Value::from(ordinal as u64));
        }
        assert_eq!(ledger.calls_total(), width as u32);
        assert!(engine.fold_divergences().is_empty());
    }
}

/// The append carrying the batch fails (nothing written). The first call's flush sees the failure;
/// its siblings find nothing pending and must not start their effects (their flushes fail on the
/// stopped run, and each attempt checks the run first). That append also creates the task (on a
/// store of one engine's alone the driver's first append does), so the send that made it is
/// refused; sent again, the task runs and performs each call once.
#[test]
async fn a_batch_whose_append_failed_starts_none_of_its_effects() {
    // Append 1 creates the task with the visit's `activated` and the batch.
    let store = Recording {
        fail_at: 1,
        ..Recording::default()
    };
    let ledger = Ledger::default();
    let engine = Engine::builder(store.clone())
        .skill(fan_skill(10))
        .effects(fan_effects(&ledger, no_delay))
        .start()
        .await
        .unwrap();
    let message = user("go");
    let refused = engine
        .send(Request::operator(message.clone()))
        .await
        .expect_err("the append that creates the task failed");
    assert!(
        matches!(refused, radkit_runtime::engine::EngineError::Store(_)),
        "{refused:?}"
    );
    assert_eq!(
        ledger.calls_total(),
        0,
        "no effect of the failed batch started"
    );
    let task_id = engine.send(Request::operator(message)).await.unwrap();
    let task = terminal(&engine, &task_id).await;
    assert_completed_with(&task, &zero_to(10));
    let calls = count_calls(&ledger);
    assert_eq!(
        calls.len(),
        10,
        "each call performed once, after the send again: {calls:?}"
    );
    assert_eq!(ids(&calls).len(), 10);
}

/// A fan-out of ten with a bound of three: never more than three effects in flight (and three
/// are, so the calls do run in parallel); with the default bound all ten run at once.
#[test]
async fn parallel_effects_respect_the_bound() {
    for (bound, expected) in [(Some(3), 3), (None, 10)] {
        let now = Arc::new(AtomicUsize::new(0));
        let max = Arc::new(AtomicUsize::new(0));
        let tool = {
            let (now, max) = (now.clone(), max.clone());
            FnTool::new(EffectPolicy::Idempotent, move |args, _| {
                let (now, max) = (now.clone(), max.clone());
                async move {
                    let in_flight = now.fetch_add(1, Ordering::SeqCst) + 1;
                    max.fetch_max(in_flight, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    Ok(args)
                }
            })
        };
        let mut builder = Engine::builder(MemoryStore::new())
            .skill(fan_skill(10))
            .effects(Effects::new().tool("count", tool));
        if let Some(n) = bound {
            builder = builder.max_parallel_effects(n);
        }
        let engine = builder.start().await.unwrap();
        let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
        let task = settled(&engine, &task_id).await;
        assert_completed_with(&task, &zero_to(10));
        assert_eq!(
            max.load(Ordering::SeqCst),
            expected,
            "bound {bound:?}: most effects in flight at once"
        );
    }
}

/// `join!(a, b)` journaled, then the engine dies before either runs; the skill, changed, issues
/// `join!(b, a)` on replay. The replay fails the task with the non-determinism error naming the
/// step, and neither tool runs.
#[test]
async fn a_batch_replayed_in_another_order_fails_naming_the_step() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let effects = || {
        Effects::new()
            .tool("a", ledger.tool("a", EffectPolicy::Idempotent))
            .tool("b", ledger.tool("b", EffectPolicy::Idempotent))
    };
    let fired = Arc::new(AtomicBool::new(false));
    let hook = move |f: &Fault| {
        f.boundary == Boundary::CommandJournaled && !fired.swap(true, Ordering::SeqCst)
    };
    let engine = Engine::builder(store.clone())
        .skill(pair_skill(false))
        .effects(effects())
        .fault_hook(hook)
        .build()
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    wait_halted(&engine).await;
    drop(engine);
    let journal = store.journal(&task_id, 0).await.unwrap();
    assert_eq!(issued(&journal).len(), 2, "both calls journaled");

    let engine = Engine::builder(store.clone())
        .skill(pair_skill(true))
        .effects(effects())
        .start()
        .await
        .unwrap();
    let task = settled(&engine, &task_id).await;
    assert_eq!(task.status.state, TaskState::Failed);
    let text = status_text(&task);
    assert!(
        text.starts_with("non-determinism in skill `pair`, step `pair`, command #0"),
        "{text}"
    );
    assert_eq!(ledger.calls_total(), 0, "neither tool ran");
}

/// A question asked in the middle of a `join!`: the task shows `input-required` as soon as the
/// batch is journaled, while the sibling calls still run. They finish and keep their receipts (the
/// reply waits for the visit to end), and the step re-run on the reply gets both receipts back (two
/// effects in all) and the answer.
#[test]
async fn a_question_inside_a_batch_keeps_the_siblings_receipts() {
    let ledger = Ledger::default();
    let engine = Engine::builder(MemoryStore::new())
        .skill(waits_skill(false))
        .effects(fan_effects(&ledger, shuffled))
        .check_fold(true)
        .start()
        .await
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = settled(&engine, &task_id).await;
    assert_eq!(task.status.state, TaskState::InputRequired);
    engine
        .send(Request::operator(reply(&task_id, "fine")))
        .await
        .unwrap();
    let task = settled(&engine, &task_id).await;
    assert_completed_with(&task, "1 fine 2");
    assert_eq!(count_calls(&ledger).len(), 2, "not performed again");
    let journal = engine.journal(&Caller::Operator, &task_id).await.unwrap();
    let replies = journal
        .iter()
        .filter(|r| matches!(r.entry, Entry::MessageReceived { .. }) && r.seq > 2)
        .count();
    assert_eq!(replies, 1, "the reply is journaled once");
    assert!(engine.fold_divergences().is_empty());
}

/// A question beside a call that runs until the test lets it go, in one `join!`: the task asks
/// while the call still runs, and a reply sent then is taken at once (by the live run, not refused
/// as "not waiting" after the driver held the task past the reply's patience); the call finishes
/// later, the visit re-runs with the answer and the call's receipt, and the call ran once.
#[test]
async fn a_reply_while_a_sibling_call_runs_is_taken_at_once() {
    struct AskBeside;
    fn ask_beside<'a>(
        _: &'a AskBeside,
        ctx: &'a StepCtx,
        _: StepInput,
    ) -> BoxFuture<'a, StepResult> {
        Box::pin(async move {
            let (note, slow) = radkit_runtime::join!(
                ctx.ask("note", "A note?"),
                ctx.tool("slow").call::<_, u64>(7),
            );
            ctx.complete(format!("{} {}", note?.joined_texts(), slow?), vec![])
        })
    }
    static STEPS: &[Step<AskBeside>] = &[Step::new("ask_beside", ask_beside)
        .start()
        .takes_user_message()];
    let release = Arc::new(tokio::sync::Notify::new());
    let runs = Arc::new(AtomicU32::new(0));
    let slow = {
        let (release, runs) = (release.clone(), runs.clone());
        FnTool::new(EffectPolicy::Idempotent, move |args, _| {
            let (release, runs) = (release.clone(), runs.clone());
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                release.notified().await;
                Ok(args)
            }
        })
    };
    let store = MemoryStore::new();
    let engine = Engine::builder(store.clone())
        .skill(
            StepTable::new(SkillInfo::new("ask_beside", "Ask beside"), AskBeside, STEPS).unwrap(),
        )
        .effects(Effects::new().tool("slow", slow))
        .check_fold(true)
        .start()
        .await
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = settled(&engine, &task_id).await;
    assert_eq!(task.status.state, TaskState::InputRequired);
    within(
        PATIENCE,
        "the reply to be taken while the call runs",
        engine.send(Request::operator(reply(&task_id, "fine"))),
    )
    .await
    .expect("a reply while a sibling runs is taken");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the call still runs");
    release.notify_one();
    let task = terminal(&engine, &task_id).await;
    assert_completed_with(&task, "fine 7");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "not performed again");
    let journal = store.journal(&task_id, 0).await.unwrap();
    let reply_at = journal
        .iter()
        .position(|r| matches!(r.entry, Entry::MessageReceived { .. }) && r.seq > 2)
        .expect("the reply is journaled");
    assert!(
        receipted(&journal[..reply_at]).is_empty(),
        "the reply was journaled while the call ran: no receipt precedes it"
    );
    assert!(engine.fold_divergences().is_empty());
}

/// A sleep shorter than its siblings' effects, in one `join!`: its timer fires while they run; the
/// siblings finish, the step suspends, and the timer's wake re-runs it with both receipts.
#[test]
async fn a_sleep_inside_a_batch_resumes_with_the_siblings_receipts() {
    let ledger = Ledger::default();
    let engine = Engine::builder(MemoryStore::new())
        .skill(waits_skill(true))
        .effects(fan_effects(&ledger, |_| Duration::from_millis(30)))
        .check_fold(true)
        .start()
        .await
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = terminal(&engine, &task_id).await;
    assert_completed_with(&task, "1 slept 2");
    assert_eq!(count_calls(&ledger).len(), 2, "each sibling performed once");
    assert!(engine.fold_divergences().is_empty());
}

/// Calls of a child skill in one batch: journaled in one append, in input order, each child
/// answering its own call.
#[test]
async fn child_skill_calls_run_as_one_batch() {
    let store = Recording::default();
    let engine = Engine::builder(store.clone())
        .skill(StepTable::new(SkillInfo::new("calls", "Calls"), Calls, CALLS_STEPS).unwrap())
        .skill(StepTable::new(SkillInfo::new("echo", "Echo"), Echo, ECHO_STEPS).unwrap())
        .default_skill("calls")
        .check_fold(true)
        .start()
        .await
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = settled(&engine, &task_id).await;
    assert_completed_with(&task, "echo a,echo b,echo c");
    assert_eq!(store.issuing_appends(), vec![3], "one append for the batch");
    assert!(engine.fold_divergences().is_empty());
}

/// Each element of the batch chains a second call behind its first: the second calls would take
/// their ids in the order the first ones return.
struct Chained;

fn chained<'a>(_: &'a Chained, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let values: Vec<u64> = ctx
            .try_all((0..3u64).map(|i| async move {
                let first: u64 = ctx.tool("count").call(i).await?;
                ctx.tool("count").call::<_, u64>(first + 10).await
            }))
            .await?;
        ctx.complete(format!("{values:?}"), vec![])
    })
}

static CHAINED_STEPS: &[Step<Chained>] =
    &[Step::new("chained", chained).start().takes_user_message()];

#[test]
async fn a_call_chained_behind_a_sibling_inside_a_batch_fails_the_step_saying_why() {
    let ledger = Ledger::default();
    let engine = Engine::builder(MemoryStore::new())
        .skill(
            StepTable::new(SkillInfo::new("chained", "Chained"), Chained, CHAINED_STEPS).unwrap(),
        )
        .effects(fan_effects(&ledger, |i| {
            Duration::from_millis(10 * (i % 10 + 1))
        }))
        .check_fold(true)
        .start()
        .await
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = terminal(&engine, &task_id).await;
    assert_eq!(task.status.state, TaskState::Failed, "{task:?}");
    let text = status_text(&task);
    assert!(
        text.contains("step `chained` started tool `count`")
            && text.contains("would depend on which effect returned first"),
        "{text}"
    );
    assert!(engine.fold_divergences().is_empty());
}
