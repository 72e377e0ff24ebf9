//! Following a task (`Engine::subscribe`): every record once, in `seq` order, with `is_final` where the
//! task settled — decided by the subscription, so every subscriber (the SSE streams, `wait_settled`)
//! agrees — and a store that cannot be read reaches the subscriber as an error, never as a silent end.

use crate::support::common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::{reply, settled, user, within, PATIENCE};
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::Engine;
use radkit_runtime::engine::{Caller, EngineError, Request};
use radkit_runtime::flow::step_table::{await_input, goto, Step, StepInput, StepTable};
use radkit_runtime::flow::{EffectPolicy, SkillInfo, StepCtx, StepResult};
use radkit_runtime::journal::{Entry, JournalRecord};
use radkit_runtime::model::{TaskId, TaskState};
use radkit_runtime::store::{
    Append, MemoryStore, Store, StoreError, TaskQuery, TaskRecord, TaskView,
};
use radkit_runtime::tools::FnTool;

/// How many visits the loop makes after the reply: far more records than a live subscriber buffers.
const LAPS: u32 = 80;

/// Asks for a go-ahead, then loops `LAPS` visits and completes.
struct Lapper;

fn ask<'a, S>(_: &'a S, _: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { await_input("go", "Ready?", 0u32) })
}

/// One visit of the loop (a step of `Lapper` and of `Holder`): laps `LAPS` times, then completes.
fn lap<'a, S>(_: &'a S, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let n: u32 = input.payload()?;
        if n >= LAPS {
            return ctx.complete(format!("{n} laps"), vec![]);
        }
        goto("lap", n + 1)
    })
}

fn go<'a, S>(_: &'a S, _: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { goto("lap", 1u32) })
}

static STEPS: &[Step<Lapper>] = &[
    Step::new("ask", ask).start().takes_user_message(),
    Step::new("go", go).resume_from("ask").goes_to(&["lap"]),
    Step::new("lap", lap).goes_to(&["lap"]),
];

/// `Lapper` whose every lap reports its progress: an append a lap, `LOUD_LAPS` of them, more
/// than a live subscriber buffers (a run publishes its records an append at a time).
struct Loud;

const LOUD_LAPS: u32 = 200;

fn loud_lap<'a>(_: &'a Loud, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let n: u32 = input.payload()?;
        if n >= LOUD_LAPS {
            return ctx.complete(format!("{n} laps"), vec![]);
        }
        ctx.progress(format!("lap {n}")).await?;
        goto("lap", n + 1)
    })
}

static LOUD_STEPS: &[Step<Loud>] = &[
    Step::new("ask", ask).start().takes_user_message(),
    Step::new("go", go).resume_from("ask").goes_to(&["lap"]),
    Step::new("lap", loud_lap).goes_to(&["lap"]),
];

async fn loud(store: impl Store) -> Engine {
    Engine::builder(store)
        .without_registered_skills()
        .skill(StepTable::new(SkillInfo::new("lapper", "Lapper"), Loud, LOUD_STEPS).unwrap())
        .checkpoint_every(0)
        .start()
        .await
        .unwrap()
}

/// A memory store whose `journal` reads fail once `broken` is set (appends and replay reads work).
#[derive(Clone, Default)]
struct UnreadableJournal {
    inner: MemoryStore,
    broken: Arc<AtomicBool>,
}

#[async_trait]
impl Store for UnreadableJournal {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
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
        if self.broken.load(Ordering::SeqCst) {
            return Err(StoreError::backend("reading the journal", "disk I/O error"));
        }
        self.inner.journal(task_id, after_seq).await
    }

    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        self.inner.journal_for_replay(task_id).await
    }

    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        self.inner.list(query).await
    }
}

async fn lapper(store: impl Store) -> Engine {
    Engine::builder(store)
        .without_registered_skills()
        .skill(StepTable::new(SkillInfo::new("lapper", "Lapper"), Lapper, STEPS).unwrap())
        .checkpoint_every(0)
        .start()
        .await
        .unwrap()
}

/// Wait until `store` (read directly) says the task ended.
async fn ended(store: &MemoryStore, task: &TaskId) {
    within(PATIENCE, "the task to end", async {
        loop {
            let row = store.task(task).await.unwrap().expect("the task's row");
            if row.state.is_terminal() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}

#[test(multi_thread)]
async fn updates_come_once_in_seq_order_and_are_final_where_the_task_settles() {
    let engine = lapper(MemoryStore::new()).await;
    let task = engine.send(Request::operator(user("start"))).await.unwrap();
    settled(&engine, &task).await;
    let mut sub = engine.subscribe(&Caller::Operator, &task).await.unwrap();
    engine
        .send(Request::operator(reply(&task, "go")))
        .await
        .unwrap();
    let mut seqs = Vec::new();
    let mut finals = Vec::new();
    while let Some(update) = within(PATIENCE, "the next update", sub.next()).await {
        let update = update.expect("the store can be read");
        seqs.push(update.seq());
        if update.is_final {
            finals.push(update.record.entry.kind_name());
        }
    }
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "every record once, in order");
    // The question was answered: the subscription knew it from the journal when it replayed it, so
    // only the end is final.
    assert_eq!(finals, vec!["terminal"]);
    assert!(sub.next().await.is_none(), "nothing after the end");

    // From after the answer, a subscriber that catches up with a settled task sees it final at once.
    let snapshot = engine
        .snapshot(&Caller::Operator, &task, None)
        .await
        .unwrap();
    assert!(snapshot.is_final);
    assert_eq!(snapshot.task.status.state, TaskState::Completed);
}

#[test(multi_thread)]
async fn a_question_nobody_answered_yet_is_final() {
    let engine = lapper(MemoryStore::new()).await;
    let task = engine.send(Request::operator(user("start"))).await.unwrap();
    let mut sub = engine.subscribe(&Caller::Operator, &task).await.unwrap();
    let last = loop {
        let update = within(PATIENCE, "the question", sub.next())
            .await
            .expect("the task asks before it ends")
            .expect("the store can be read");
        if update.is_final {
            break update;
        }
    };
    assert!(matches!(last.record.entry, Entry::AwaitingInput { .. }));
    let snapshot = engine
        .snapshot(&Caller::Operator, &task, None)
        .await
        .unwrap();
    assert!(snapshot.is_final);
    assert_eq!(snapshot.task.status.state, TaskState::InputRequired);
}

#[test(multi_thread)]
async fn a_store_that_cannot_be_read_while_following_a_task_is_an_error_not_a_silent_end() {
    let store = UnreadableJournal::default();
    let engine = loud(store.clone()).await;
    let task = engine.send(Request::operator(user("start"))).await.unwrap();
    settled(&engine, &task).await;
    let mut sub = engine.subscribe(&Caller::Operator, &task).await.unwrap();
    // The subscriber reads nothing while the task writes more records than a live subscriber
    // buffers: it lags, and must read the rest from the store, which fails from the moment the reply
    // was taken (taking it reads the task's history).
    engine
        .send(Request::operator(reply(&task, "go")))
        .await
        .unwrap();
    store.broken.store(true, Ordering::SeqCst);
    ended(&store.inner, &task).await;
    let mut error = None;
    while let Some(update) = within(PATIENCE, "the next update", sub.next()).await {
        match update {
            Ok(update) => assert!(
                !matches!(update.record.entry, Entry::Terminal { .. }),
                "the end cannot be read from a broken store"
            ),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let error = error.expect("the subscriber is told the store failed, not left with a silent end");
    assert!(matches!(error, EngineError::Store(_)), "{error:?}");
    assert!(
        sub.next().await.is_none(),
        "the subscription ends after its error"
    );
}

/// A subscriber that read nothing while the task wrote more records than it buffers still gets every
/// record once, in order (it used to skip the ones it lagged over when it checked whether a question
/// was answered).
#[test(multi_thread)]
async fn a_subscriber_that_lagged_misses_no_record() {
    let store = MemoryStore::new();
    let engine = loud(store.clone()).await;
    let task = engine.send(Request::operator(user("start"))).await.unwrap();
    settled(&engine, &task).await;
    let mut sub = engine.subscribe(&Caller::Operator, &task).await.unwrap();
    engine
        .send(Request::operator(reply(&task, "go")))
        .await
        .unwrap();
    ended(&store, &task).await;
    let mut seqs = Vec::new();
    while let Some(update) = within(PATIENCE, "the next update", sub.next()).await {
        seqs.push(update.expect("the store can be read").seq());
    }
    let stored = store.journal(&task, 0).await.unwrap().len() as u64;
    assert!(
        stored > 2 * u64::from(LOUD_LAPS),
        "the task wrote {stored} records"
    );
    assert_eq!(seqs, (1..=stored).collect::<Vec<_>>());
}

/// Reports `PROGRESS_LAPS` progress updates (one append each), then completes.
struct Chatty;

const PROGRESS_LAPS: u32 = 300;

fn chat<'a>(_: &'a Chatty, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let n: u32 = input.payload()?;
        if n >= PROGRESS_LAPS {
            return ctx.complete("chatted", vec![]);
        }
        ctx.progress(format!("lap {n}")).await?;
        goto("chat", n + 1)
    })
}

static CHATTY: &[Step<Chatty>] = &[Step::new("chat", chat)
    .start()
    .takes_user_message()
    .goes_to(&["chat"])];

/// The stream of the send that created a task starts from the task as its creating append left it
/// (submitted, its first message in its history), however far the task has run since: the snapshot
/// reads that one append, not the ones after it.
#[test(multi_thread)]
async fn the_snapshot_at_a_tasks_start_is_its_creating_append_however_far_it_ran() {
    let dir = tempfile::tempdir().unwrap();
    let store = radkit_runtime::store::SqliteStore::open(
        dir.path().join("start.sqlite"),
        radkit_runtime::store::Durability::Full,
    )
    .unwrap();
    let engine = lapper(store).await;
    let task = engine.send(Request::operator(user("start"))).await.unwrap();
    assert_eq!(
        settled(&engine, &task).await.status.state,
        TaskState::InputRequired
    );
    let start = engine
        .snapshot_at_start(&Caller::Operator, &task, None)
        .await
        .unwrap();
    assert_eq!(start.task.status.state, TaskState::Submitted);
    assert_eq!(start.task.history.len(), 1, "{:?}", start.task.history);
    assert_eq!(start.last_seq, 2, "task_created and message_received");
    assert!(!start.is_final);
}

/// A memory store whose appends answer a few milliseconds after they were written (a slow network,
/// a busy database): the time the store wrote and the time the writer got its answer differ.
#[derive(Clone, Default)]
struct SlowToAnswer {
    inner: MemoryStore,
}

#[async_trait]
impl Store for SlowToAnswer {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
        self.inner.append(append).await?;
        tokio::time::sleep(Duration::from_millis(5)).await;
        Ok(())
    }
    async fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        self.inner.task(task_id).await
    }
    async fn journal(&self, task_id: &str, after: u64) -> Result<Vec<JournalRecord>, StoreError> {
        self.inner.journal(task_id, after).await
    }
    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        self.inner.journal_for_replay(task_id).await
    }
    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        self.inner.list(query).await
    }
}

/// A record a subscriber gets live carries the time the journal keeps for it, so an event and its
/// replay (a reconnect, `GetTask`'s status time) say the same time: the writer chooses it once.
#[test(multi_thread)]
async fn a_live_record_carries_the_time_the_journal_keeps_for_it() {
    let store = SlowToAnswer::default();
    let engine = lapper(store.clone()).await;
    let task = engine.send(Request::operator(user("start"))).await.unwrap();
    settled(&engine, &task).await;
    let mut sub = engine.subscribe(&Caller::Operator, &task).await.unwrap();
    engine
        .send(Request::operator(reply(&task, "go")))
        .await
        .unwrap();
    let mut seen = Vec::new();
    while let Some(update) = within(PATIENCE, "the next update", sub.next()).await {
        let update = update.expect("the store can be read");
        seen.push((update.seq(), update.record.at_ms));
    }
    let kept: Vec<(u64, i64)> = store
        .journal(&task, 0)
        .await
        .unwrap()
        .iter()
        .map(|r| (r.seq, r.at_ms))
        .collect();
    assert!(seen.len() > LAPS as usize, "{} records seen", seen.len());
    assert_eq!(
        seen, kept,
        "(seq, at_ms) live and as the journal keeps them"
    );
}

/// A memory store that counts its journal reads (whole and paged), records how much a page held,
/// and counts the task views read through it.
#[derive(Clone, Default)]
struct CountingReads {
    inner: MemoryStore,
    whole_reads: Arc<AtomicUsize>,
    page_reads: Arc<AtomicUsize>,
    largest_page: Arc<AtomicUsize>,
    view_reads: Arc<AtomicUsize>,
}

impl CountingReads {
    /// Journal reads of any kind so far.
    fn journal_reads(&self) -> usize {
        self.whole_reads.load(Ordering::SeqCst) + self.page_reads.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Store for CountingReads {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
        self.inner.append(append).await
    }
    async fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        self.inner.task(task_id).await
    }
    async fn journal(&self, task_id: &str, after: u64) -> Result<Vec<JournalRecord>, StoreError> {
        self.whole_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.journal(task_id, after).await
    }
    async fn journal_page(
        &self,
        task_id: &str,
        after: u64,
        appends: usize,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        self.page_reads.fetch_add(1, Ordering::SeqCst);
        let page = self.inner.journal_page(task_id, after, appends).await?;
        self.largest_page.fetch_max(page.len(), Ordering::SeqCst);
        Ok(page)
    }
    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        self.inner.journal_for_replay(task_id).await
    }
    async fn task_view(
        &self,
        task_id: &str,
        history: Option<usize>,
    ) -> Result<Option<TaskView>, StoreError> {
        self.view_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.task_view(task_id, history).await
    }
    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        self.inner.list(query).await
    }
}

/// A subscriber to a long journal holds one page of it at a time: it never reads the whole journal
/// at once, and still gets every record once, in order.
#[test(multi_thread)]
async fn following_a_long_journal_reads_it_a_page_at_a_time() {
    let store = CountingReads::default();
    let engine = Engine::builder(store.clone())
        .without_registered_skills()
        .skill(StepTable::new(SkillInfo::new("chatty", "Chatty"), Chatty, CHATTY).unwrap())
        .start()
        .await
        .unwrap();
    let task = engine.send(Request::operator(user("go"))).await.unwrap();
    ended(&store.inner, &task).await;
    let stored = store.inner.journal(&task, 0).await.unwrap().len();
    assert!(stored > 3 * PROGRESS_LAPS as usize, "{stored} records");

    store.whole_reads.store(0, Ordering::SeqCst);
    store.largest_page.store(0, Ordering::SeqCst);
    let mut sub = engine.subscribe(&Caller::Operator, &task).await.unwrap();
    let mut seqs = Vec::new();
    while let Some(update) = within(PATIENCE, "the next update", sub.next()).await {
        seqs.push(update.expect("the store can be read").seq());
    }
    assert_eq!(seqs, (1..=stored as u64).collect::<Vec<_>>());
    assert_eq!(
        store.whole_reads.load(Ordering::SeqCst),
        0,
        "no whole-journal read"
    );
    let largest = store.largest_page.load(Ordering::SeqCst);
    assert!(largest <= 64, "a page of {largest} records");
}

/// Holds on the tool `hold` until released, then laps `LAPS` visits and completes.
struct Holder;

fn hold<'a>(_: &'a Holder, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let _: u32 = ctx.tool("hold").call(0u32).await?;
        goto("lap", 1u32)
    })
}

static HOLDER_STEPS: &[Step<Holder>] = &[
    Step::new("hold", hold)
        .start()
        .takes_user_message()
        .goes_to(&["lap"]),
    Step::new("lap", lap).goes_to(&["lap"]),
];

/// A blocking wait needs no record, only the moment the task settles: it reads the task's view
/// (one row) again when a published record may have settled it or when it lagged, never the
/// journal — a subscription would read every record it missed from the store, a page at a time.
#[test(multi_thread)]
async fn waiting_for_a_task_to_settle_reads_its_view_never_its_journal() {
    let store = CountingReads::default();
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let held = release.clone();
    let tool = FnTool::new(EffectPolicy::Idempotent, move |args, _| {
        let held = held.clone();
        async move {
            let _permit = held.acquire().await;
            Ok(args)
        }
    });
    let engine = Engine::builder(store.clone())
        .without_registered_skills()
        .skill(StepTable::new(SkillInfo::new("holder", "Holder"), Holder, HOLDER_STEPS).unwrap())
        .effects(Effects::new().tool("hold", tool))
        .checkpoint_every(0)
        .start()
        .await
        .unwrap();
    let task = engine.send(Request::operator(user("start"))).await.unwrap();
    let (journal_before, views_before) = (
        store.journal_reads(),
        store.view_reads.load(Ordering::SeqCst),
    );
    let waiting = tokio::spawn({
        let (engine, task) = (engine.clone(), task.clone());
        async move { engine.wait_settled(&Caller::Operator, &task).await }
    });
    // The wait has read the task (working, on its held tool) before the task goes on.
    within(PATIENCE, "the wait's first read", async {
        while store.view_reads.load(Ordering::SeqCst) == views_before {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    release.add_permits(1);
    let settled = within(PATIENCE, "the task to settle", waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(settled.status.state, TaskState::Completed);
    assert_eq!(
        store.journal_reads(),
        journal_before,
        "the wait read no journal record"
    );
    let stored = store.inner.journal(&task, 0).await.unwrap().len();
    assert!(
        stored > 2 * LAPS as usize,
        "the task wrote {stored} records, more than a live receiver buffers"
    );
}
