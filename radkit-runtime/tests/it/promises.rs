//! The engine's promises that had no test of their own: compensation on failure (not only on
//! cancel), retries that run out, approvals that expire across a restart and on another worker, and
//! hook denials that a replay honours. Each test names the boundary it crosses and the promise it
//! checks. The Postgres test uses `RADKIT_TEST_POSTGRES_URL`, else the local server (see `services`);
//! when it does not answer, that test is reported ignored. A test that pins a known engine bug is
//! marked `#[ignore = "the bug"]` (reported ignored; `--ignored` runs it).

use crate::support::common;
use crate::support::services;

use radkit_runtime::engine::{Caller, EngineError, Request};
use radkit_runtime::model::TaskId;
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use common::{status_text, user};
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::{Boundary, Fault, Hook, HookContext, HookDecision};
use radkit_runtime::engine::{Engine, EngineBuilder};
use radkit_runtime::flow::step_table::{Step, StepInput, StepTable};
use radkit_runtime::flow::{
    ApprovalRequest, Cmd, CmdKind, Decision, EffectError, EffectPolicy, ErrorKind, Event,
    FlowSkill, InvocationId, RetryPolicy, SkillInfo, StepCtx, StepError, StepResult, Transition,
};
use radkit_runtime::journal::{now_ms, Entry, JournalRecord};
use radkit_runtime::model::{Message, Task, TaskState};
use radkit_runtime::store::{
    Append, Durability, MemoryStore, PostgresStore, SqliteStore, Store, StoreError, TaskQuery,
    TaskRecord,
};
use radkit_runtime::tools::FnTool;
use serde_json::{json, Value};

// ---- waiting, always bounded ----

/// How long any one wait may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// `fut`, or a panic naming `what` was awaited when it takes longer than [`PATIENCE`].
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    common::within(PATIENCE, what, fut).await
}

/// The task once it waits for input or has finished.
async fn settled(engine: &Engine, task: &TaskId, what: &str) -> Task {
    within(what, engine.wait_settled(&Caller::Operator, task))
        .await
        .unwrap_or_else(|e| panic!("waiting for {what}: {e}"))
}

/// The task once its terminal entry is journaled (a task that waits for input does not count). A
/// subscription told that the task's run could not write (`StorageUnavailable`) is opened again, as a
/// client would: the task resumes by itself.
async fn finished(engine: &Engine, task: &TaskId, what: &str) -> Task {
    within(what, async {
        'follow: loop {
            let mut sub = engine
                .subscribe(&Caller::Operator, task)
                .await
                .unwrap_or_else(|e| panic!("subscribing for {what}: {e}"));
            while let Some(update) = sub.next().await {
                match update {
                    Ok(_) => {}
                    Err(EngineError::StorageUnavailable { .. }) => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue 'follow;
                    }
                    Err(e) => panic!("following the task for {what}: {e}"),
                }
            }
            break;
        }
        engine
            .task(&Caller::Operator, task, None)
            .await
            .unwrap_or_else(|e| panic!("reading the task after {what}: {e}"))
    })
    .await
}

/// Until `engine` halted at an injected crash.
async fn halted(engine: &Engine, what: &str) {
    within(what, async {
        while !engine.is_halted() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}

/// Until the wall clock is past `deadline_ms` (a durable deadline, read from the journal).
async fn past(deadline_ms: i64) {
    let wait = u64::try_from(deadline_ms + 1 - now_ms()).unwrap_or(0);
    assert!(
        wait <= PATIENCE.as_millis() as u64,
        "a deadline {wait} ms away is not a short one"
    );
    tokio::time::sleep(Duration::from_millis(wait)).await;
    assert!(now_ms() > deadline_ms);
}

// ---- journal reading ----

async fn journal(engine: &Engine, task: &TaskId) -> Vec<JournalRecord> {
    engine
        .journal(&Caller::Operator, task)
        .await
        .unwrap_or_else(|e| panic!("the journal of {task}: {e}"))
}

/// The InvocationId of the (single) command with `fingerprint` (`tool \`hotel\``).
fn command_id(journal: &[JournalRecord], fingerprint: &str) -> InvocationId {
    let ids: Vec<&InvocationId> = journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::CommandIssued { id, cmd, .. } if cmd.kind.fingerprint() == fingerprint => {
                Some(id)
            }
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 1, "{fingerprint} is journaled once: {ids:?}");
    ids[0].clone()
}

/// The `compensated` entries: (command, outcome ok), in journal order.
fn compensated(journal: &[JournalRecord]) -> Vec<(InvocationId, bool)> {
    journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::Compensated { id, outcome } => Some((id.clone(), outcome.is_ok())),
            _ => None,
        })
        .collect()
}

fn seq_of(journal: &[JournalRecord], pick: impl Fn(&Entry) -> bool) -> u64 {
    journal
        .iter()
        .find(|r| pick(&r.entry))
        .map(|r| r.seq)
        .expect("the entry is journaled")
}

fn sqlite(path: &Path) -> Arc<dyn Store> {
    Arc::new(SqliteStore::open(path, Durability::Full).expect("open the SQLite store"))
}

/// A URL whose sessions work in a fresh schema of the test database.
async fn postgres_schema() -> String {
    radkit_runtime::store::PostgresStore::create_schema(
        &services::postgres_url(),
        "radkit_promises",
    )
    .await
    .expect("create a test schema")
    .1
}

/// A Postgres store on `url` (each call its own connections: another engine's store).
async fn postgres_store(url: &str) -> Arc<dyn Store> {
    Arc::new(
        PostgresStore::connect(url)
            .await
            .expect("connect the Postgres store"),
    )
}

/// `builder` as worker `worker`, with leases of `ttl_ms` and a 20 ms claim poll.
fn short_leases(builder: EngineBuilder, worker: &str, ttl_ms: u64) -> EngineBuilder {
    builder
        .worker_id(worker)
        .lease_ttl(Duration::from_millis(ttl_ms))
        .poll_interval(Duration::from_millis(20))
}

// ---- 1. compensation on failure ----

struct Trip;

/// Reserves with each `Compensate` tool the message names (`hotel`, `flight`), then ends as the
/// message's last word says: `charge` calls a tool that fails permanently, `fail` returns
/// `ctx.fail(..)`.
fn book<'a>(_: &'a Trip, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let words = input.message().joined_texts();
        for word in words.split_whitespace() {
            match word {
                "hotel" | "flight" => {
                    let _: Value = ctx.tool(word).call(json!({ "for": "ada" })).await?;
                }
                "charge" => {
                    let _: Value = ctx.tool("charge").call(json!({ "cents": 9900 })).await?;
                }
                "fail" => return ctx.fail("no seats on the connecting flight"),
                _ => {}
            }
        }
        ctx.complete("booked", vec![])
    })
}

static TRIP_STEPS: &[Step<Trip>] = &[Step::new("book", book).start().takes_user_message()];

/// What the compensations did: (tool, key, the output they were given).
type Undone = Arc<Mutex<Vec<(String, String, Value)>>>;

/// `hotel` and `flight` (`Compensate`, compensations logged in `undone`; `halt_on` halts the engine
/// in `slot` from inside the first compensation of that tool), `charge` (always declines).
fn trip_engine(
    store: Arc<dyn Store>,
    undone: &Undone,
    halt_on: Option<(&'static str, Arc<OnceLock<Engine>>)>,
) -> EngineBuilder {
    let reservation = |name: &'static str| {
        let undone = undone.clone();
        let halt_on = halt_on.clone();
        FnTool::new(EffectPolicy::Compensate, move |_, key| async move {
            Ok(json!({ "reservation": format!("{name}-{key}") }))
        })
        .compensate_with(move |_, output, key| {
            let undone = undone.clone();
            let halt_on = halt_on.clone();
            async move {
                let mut log = undone.lock().unwrap();
                let first = !log.iter().any(|(tool, _, _)| tool == name);
                log.push((name.to_owned(), key.as_str().to_owned(), output));
                if let Some((_, slot)) = halt_on.filter(|(tool, _)| first && *tool == name) {
                    // The process dies right after this compensation ran, before its entry.
                    slot.get().expect("the engine is built").halt();
                }
                Ok(Value::Null)
            }
        })
    };
    let charge = FnTool::new(EffectPolicy::Idempotent, |_, _| async {
        Err(EffectError::permanent("card declined"))
    });
    Engine::builder_arc(store)
        .skill(StepTable::new(SkillInfo::new("trip", "Trip"), Trip, TRIP_STEPS).unwrap())
        .effects(
            Effects::new()
                .tool("hotel", reservation("hotel"))
                .tool("flight", reservation("flight"))
                .tool("charge", charge),
        )
}

#[test(multi_thread)]
async fn a_permanent_tool_error_after_a_compensable_tool_runs_its_compensation_once_journaled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trip.sqlite");
    let undone = Undone::default();
    let engine = trip_engine(sqlite(&path), &undone, None)
        .start()
        .await
        .unwrap();
    let task = engine
        .send(Request::operator(user("hotel charge")))
        .await
        .unwrap();
    let done = finished(&engine, &task, "the failed booking").await;
    assert_eq!(
        done.status.state,
        TaskState::Failed,
        "{}",
        status_text(&done)
    );
    assert!(
        status_text(&done).contains("tool `charge` failed: card declined"),
        "{}",
        status_text(&done)
    );
    let entries = journal(&engine, &task).await;
    let hotel = command_id(&entries, "tool `hotel`");
    assert_eq!(
        *undone.lock().unwrap(),
        vec![(
            "hotel".to_owned(),
            hotel.as_str().to_owned(),
            json!({ "reservation": format!("hotel-{hotel}") })
        )],
        "the reservation is undone once, with its key and its recorded output"
    );
    assert_eq!(compensated(&entries), vec![(hotel, true)]);
    assert!(
        seq_of(&entries, |e| matches!(e, Entry::Compensated { .. }))
            < seq_of(&entries, |e| matches!(e, Entry::Terminal { .. })),
        "the compensation is journaled before the task ends"
    );

    // A restart over the same file, and a cancel of the finished task, undo nothing more.
    engine.halt();
    drop(engine);
    let engine = trip_engine(sqlite(&path), &undone, None)
        .start()
        .await
        .unwrap();
    assert!(engine.cancel(&Caller::Operator, &task).await.is_err());
    assert_eq!(undone.lock().unwrap().len(), 1, "compensated exactly once");
    assert_eq!(compensated(&journal(&engine, &task).await).len(), 1);
}

#[test(multi_thread)]
async fn ctx_fail_after_two_compensable_tools_compensates_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let undone = Undone::default();
    let engine = trip_engine(sqlite(&dir.path().join("trip.sqlite")), &undone, None)
        .start()
        .await
        .unwrap();
    let task = engine
        .send(Request::operator(user("hotel flight fail")))
        .await
        .unwrap();
    let done = finished(&engine, &task, "the failed booking").await;
    assert_eq!(done.status.state, TaskState::Failed);
    assert_eq!(status_text(&done), "no seats on the connecting flight");
    let entries = journal(&engine, &task).await;
    let (hotel, flight) = (
        command_id(&entries, "tool `hotel`"),
        command_id(&entries, "tool `flight`"),
    );
    let order: Vec<(String, String)> = undone
        .lock()
        .unwrap()
        .iter()
        .map(|(tool, key, _)| (tool.clone(), key.clone()))
        .collect();
    assert_eq!(
        order,
        vec![
            ("flight".to_owned(), flight.as_str().to_owned()),
            ("hotel".to_owned(), hotel.as_str().to_owned()),
        ],
        "newest first"
    );
    assert_eq!(compensated(&entries), vec![(flight, true), (hotel, true)]);
}

/// The step fails (a permanent tool error); the engine dies right after the first compensation
/// (`flight`) was journaled and the second (`hotel`) ran, before its entry. Recovery runs `hotel`'s
/// again with the same key (compensations tolerate a repeat) and never `flight`'s.
#[test(multi_thread)]
async fn a_crash_between_two_compensations_of_a_failed_step_does_not_repeat_the_finished_one() {
    crash_between_two_compensations("hotel flight charge", "tool `charge` failed: card declined")
        .await
}

/// The same crash after `ctx.fail(..)`: the task must still end with the skill's reason.
///
/// The `fail` transition's `transitioned` entry is durable once the first compensation is, but its
/// reason is written only with the terminal entry. Recovery re-runs the visit (its commands return
/// their receipts) to get the reason back. (It used to see a finished visit with nothing outstanding
/// and fail the task with "the skill moved to a state that waits for an event, but no command, timer
/// or input is outstanding".)
#[test(multi_thread)]
async fn a_crash_between_two_compensations_after_ctx_fail_keeps_the_failure_reason() {
    crash_between_two_compensations("hotel flight fail", "no seats on the connecting flight").await
}

async fn crash_between_two_compensations(message: &str, reason: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trip.sqlite");
    let undone = Undone::default();
    let slot = Arc::new(OnceLock::new());
    let a = trip_engine(sqlite(&path), &undone, Some(("hotel", slot.clone())))
        .build()
        .unwrap();
    let _ = slot.set(a.clone());
    let task = a.send(Request::operator(user(message))).await.unwrap();
    halted(&a, "the crash inside `hotel`'s compensation").await;
    drop(a);

    let b = trip_engine(sqlite(&path), &undone, None)
        .start()
        .await
        .unwrap();
    let done = finished(&b, &task, "the recovered failure").await;
    let entries = journal(&b, &task).await;
    let (hotel, flight) = (
        command_id(&entries, "tool `hotel`"),
        command_id(&entries, "tool `flight`"),
    );
    let order: Vec<(String, String)> = undone
        .lock()
        .unwrap()
        .iter()
        .map(|(tool, key, _)| (tool.clone(), key.clone()))
        .collect();
    assert_eq!(
        order,
        vec![
            ("flight".to_owned(), flight.as_str().to_owned()),
            ("hotel".to_owned(), hotel.as_str().to_owned()),
            ("hotel".to_owned(), hotel.as_str().to_owned()),
        ],
        "the journaled compensation is not repeated; the interrupted one runs again with its key"
    );
    assert_eq!(compensated(&entries), vec![(flight, true), (hotel, true)]);
    assert_eq!(done.status.state, TaskState::Failed);
    assert_eq!(
        status_text(&done),
        reason,
        "the task ends with the skill's reason"
    );
}

// ---- 2. retries running out ----

struct Busy;

fn call_busy<'a>(_: &'a Busy, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let retry = RetryPolicy {
            max_attempts: 3,
            initial_backoff_ms: 1,
            max_backoff_ms: 4,
        };
        let out: Value = ctx.tool("always_busy").retry(retry).call(()).await?;
        ctx.complete(out.to_string(), vec![])
    })
}

static BUSY_STEPS: &[Step<Busy>] = &[Step::new("call", call_busy).start().takes_user_message()];

#[test(multi_thread)]
async fn retries_running_out_fail_the_task_naming_the_tool_with_one_invocation_id() {
    let keys = Arc::new(Mutex::new(Vec::<String>::new()));
    let tool = {
        let keys = keys.clone();
        FnTool::new(EffectPolicy::Idempotent, move |_, key| {
            let keys = keys.clone();
            async move {
                let mut keys = keys.lock().unwrap();
                keys.push(key.as_str().to_owned());
                Err(EffectError::transient(format!(
                    "upstream busy (attempt {})",
                    keys.len()
                )))
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::builder_arc(sqlite(&dir.path().join("busy.sqlite")))
        .skill(StepTable::new(SkillInfo::new("busy", "Busy"), Busy, BUSY_STEPS).unwrap())
        .effects(Effects::new().tool("always_busy", tool))
        .start()
        .await
        .unwrap();
    let task = engine.send(Request::operator(user("go"))).await.unwrap();
    let done = finished(&engine, &task, "the task whose retries ran out").await;
    assert_eq!(done.status.state, TaskState::Failed);
    assert_eq!(
        status_text(&done),
        "tool `always_busy` failed: upstream busy (attempt 3)",
        "the failure names the tool and its last error"
    );

    let entries = journal(&engine, &task).await;
    let id = command_id(&entries, "tool `always_busy`");
    assert_eq!(
        *keys.lock().unwrap(),
        vec![id.as_str().to_owned(); 3],
        "three attempts, all with the command's InvocationId as their key"
    );
    let failed: Vec<(InvocationId, u32, String)> = entries
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::AttemptFailed { id, attempt, error } => {
                assert_eq!(error.kind, ErrorKind::Transient);
                Some((id.clone(), *attempt, error.message.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        failed,
        vec![
            (id.clone(), 1, "upstream busy (attempt 1)".to_owned()),
            (id.clone(), 2, "upstream busy (attempt 2)".to_owned()),
        ],
        "every failed attempt before the last is journaled"
    );
    let receipts: Vec<_> = entries
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::ReceiptRecorded { receipt } => Some(receipt.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(receipts.len(), 1);
    assert_eq!(receipts[0].id, id);
    assert_eq!(receipts[0].attempt, 3, "the last attempt is the receipt");
    assert_eq!(
        receipts[0].outcome,
        Err(EffectError::transient("upstream busy (attempt 3)"))
    );
}

// ---- 3. approval expiry ----

/// How long an approval waits: long enough for an engine to reach `input-required` and halt on a
/// loaded machine, short enough for a test.
const APPROVAL_WINDOW: Duration = Duration::from_millis(1500);

struct Refund;

fn refund<'a>(_: &'a Refund, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let amount = input.message().joined_texts();
        let request = ApprovalRequest::new(
            "pay_out",
            json!({ "amount": amount }),
            "refunds need a human",
        )
        .expires(APPROVAL_WINDOW, Decision::Reject);
        let approval = ctx.approve("refund", request).await?;
        if !approval.approved() {
            let why = if approval.expired {
                "the approval expired"
            } else {
                "the approver rejected it"
            };
            return ctx.reject(format!("refund not paid: {why}"));
        }
        let _: Value = ctx
            .tool("pay_out")
            .call(json!({ "amount": amount }))
            .await?;
        ctx.complete("refund paid", vec![])
    })
}

static REFUND_STEPS: &[Step<Refund>] = &[Step::new("refund", refund).start().takes_user_message()];

fn refund_engine(store: Arc<dyn Store>, paid: &Arc<Mutex<u32>>) -> EngineBuilder {
    let paid = paid.clone();
    let pay_out = FnTool::new(EffectPolicy::Idempotent, move |_, _| {
        let paid = paid.clone();
        async move {
            *paid.lock().unwrap() += 1;
            Ok(json!("paid"))
        }
    });
    Engine::builder_arc(store)
        .skill(StepTable::new(SkillInfo::new("refund", "Refund"), Refund, REFUND_STEPS).unwrap())
        .effects(Effects::new().tool("pay_out", pay_out))
}

/// The approval question's command and its journaled deadline.
fn approval_deadline(journal: &[JournalRecord]) -> (InvocationId, i64) {
    let ask = command_id(journal, "ask_user `refund`");
    let at = journal
        .iter()
        .find_map(|r| match &r.entry {
            Entry::TimerSet { id, fire_at_ms } if *id == ask => Some(*fire_at_ms),
            _ => None,
        })
        .expect("the approval's deadline is journaled");
    (ask, at)
}

/// Engine A runs the refund until it waits for the approval, then halts before the deadline.
/// Returns the task, the question and its deadline.
async fn wait_for_approval_then_halt(a: Engine) -> (TaskId, InvocationId, i64) {
    let task = a.send(Request::operator(user("9900"))).await.unwrap();
    let waiting = settled(&a, &task, "the approval question").await;
    assert_eq!(waiting.status.state, TaskState::InputRequired);
    a.halt();
    let (ask, deadline) = approval_deadline(&journal(&a, &task).await);
    assert!(
        now_ms() < deadline,
        "engine A halted before the deadline (else it may have fired there)"
    );
    (task, ask, deadline)
}

/// The task ended `rejected` by the question's default: one question, its receipt the journaled
/// default, the tool never called.
async fn assert_expired_by_default(
    engine: &Engine,
    task: &TaskId,
    ask: &InvocationId,
    paid: &Arc<Mutex<u32>>,
) {
    let done = finished(engine, task, "the expired approval's default").await;
    assert_eq!(
        done.status.state,
        TaskState::Rejected,
        "{}",
        status_text(&done)
    );
    assert_eq!(status_text(&done), "refund not paid: the approval expired");
    let entries = journal(engine, task).await;
    let receipts: Vec<_> = entries
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::ReceiptRecorded { receipt } if receipt.id == *ask => {
                Some(receipt.outcome.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        receipts,
        vec![Ok(json!({ "decision": "reject", "expired": true }))],
        "the default is the question's one receipt"
    );
    assert_eq!(
        entries
            .iter()
            .filter(|r| matches!(r.entry, Entry::AwaitingInput { .. }))
            .count(),
        1,
        "the question is not asked again"
    );
    assert_eq!(*paid.lock().unwrap(), 0, "nothing was paid out");
}

#[test(multi_thread)]
async fn an_approval_that_expired_while_the_engine_was_down_takes_its_default_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("refund.sqlite");
    let paid = Arc::new(Mutex::new(0));
    let a = refund_engine(sqlite(&path), &paid).start().await.unwrap();
    let (task, ask, deadline) = wait_for_approval_then_halt(a).await;
    past(deadline).await;

    let b = refund_engine(sqlite(&path), &paid).start().await.unwrap();
    assert_expired_by_default(&b, &task, &ask, &paid).await;
}

#[test(multi_thread)]
async fn an_approval_that_expires_after_a_restart_fires_on_the_new_engine() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("refund.sqlite");
    let paid = Arc::new(Mutex::new(0));
    let a = refund_engine(sqlite(&path), &paid).start().await.unwrap();
    let (task, ask, deadline) = wait_for_approval_then_halt(a).await;

    let b = refund_engine(sqlite(&path), &paid).start().await.unwrap();
    assert!(now_ms() < deadline, "engine B started before the deadline");
    assert_eq!(
        b.state(&Caller::Operator, &task).await.unwrap(),
        TaskState::InputRequired,
        "the restart alone does not answer the question"
    );
    assert_expired_by_default(&b, &task, &ask, &paid).await;
}

#[test(multi_thread, needs = Postgres)]
async fn postgres_an_approval_expires_on_the_worker_that_took_the_task_over() {
    let url = postgres_schema().await;
    let connect = || postgres_store(&url);
    let paid = Arc::new(Mutex::new(0));
    let short_leases = |builder, worker| short_leases(builder, worker, 400);
    let a = short_leases(refund_engine(connect().await, &paid), "engine-a")
        .start()
        .await
        .unwrap();
    let (task, ask, deadline) = wait_for_approval_then_halt(a).await;

    let b = short_leases(refund_engine(connect().await, &paid), "engine-b")
        .start()
        .await
        .unwrap();
    assert!(now_ms() < deadline, "engine B started before the deadline");
    assert_expired_by_default(&b, &task, &ask, &paid).await;
}

/// A reducer that asks from a transition, with a deadline and a default.
struct AskFromTransition;

#[async_trait]
impl FlowSkill for AskFromTransition {
    type State = u32;
    fn info(&self) -> SkillInfo {
        SkillInfo::new("ask_from_transition", "Ask from a transition").version("1")
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
        match (state, event) {
            (0, Event::UserMessage { .. }) => {
                let question = Cmd::new(CmdKind::AskUser {
                    slot: "go_ahead".to_owned(),
                    message: Message::agent_text("Go ahead?"),
                    expires_in_ms: Some(300),
                    on_expiry: Some(json!("expired")),
                });
                Ok(Transition::to(1).cmd(question))
            }
            (1, Event::CommandResult { outcome, .. }) => match outcome {
                Ok(answer) if answer == json!("expired") => {
                    Ok(Transition::reject("nobody answered in time"))
                }
                _ => Ok(Transition::complete("answered")),
            },
            _ => Ok(Transition::ignore()),
        }
    }
}

/// `Transition::to(..).cmd(Cmd::new(CmdKind::AskUser { expires_in_ms: Some(..), on_expiry: Some(..),
/// .. }))` expires like a question asked inside a step (`ctx.ask`, `ctx.approve`, the tool gate): its
/// deadline is a durable timer, and without a reply the command's result is its default. (It used to
/// wait forever: the driver set no timer for it and replay read no deadline.)
#[test(multi_thread)]
async fn a_question_with_a_deadline_issued_by_a_transition_expires() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::builder_arc(sqlite(&dir.path().join("ask.sqlite")))
        .skill(AskFromTransition)
        .start()
        .await
        .unwrap();
    let task = engine.send(Request::operator(user("go"))).await.unwrap();
    assert_eq!(
        settled(&engine, &task, "the question").await.status.state,
        TaskState::InputRequired
    );
    let done = finished(&engine, &task, "the question's expiry (300 ms)").await;
    assert_eq!(done.status.state, TaskState::Rejected);
    assert_eq!(status_text(&done), "nobody answered in time");
}

/// The same question, across a restart: the deadline is read back from the journal (`timer_set`)
/// and the recovered task takes the default once.
#[test(multi_thread)]
async fn a_question_issued_by_a_transition_that_expired_while_the_engine_was_down_takes_its_default_on_restart(
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ask.sqlite");
    let engine = |path: &Path| Engine::builder_arc(sqlite(path)).skill(AskFromTransition);
    let a = engine(&path).start().await.unwrap();
    let task = a.send(Request::operator(user("go"))).await.unwrap();
    assert_eq!(
        settled(&a, &task, "the question").await.status.state,
        TaskState::InputRequired
    );
    a.halt();
    let entries = journal(&a, &task).await;
    drop(a);
    let ask = command_id(&entries, "ask_user `go_ahead`");
    let deadline = entries
        .iter()
        .find_map(|r| match &r.entry {
            Entry::TimerSet { id, fire_at_ms } if *id == ask => Some(*fire_at_ms),
            _ => None,
        })
        .expect("the question's deadline is journaled");
    past(deadline).await;

    let b = engine(&path).start().await.unwrap();
    let done = finished(&b, &task, "the expired question after the restart").await;
    assert_eq!(done.status.state, TaskState::Rejected);
    assert_eq!(status_text(&done), "nobody answered in time");
    let receipts: Vec<_> = journal(&b, &task)
        .await
        .into_iter()
        .filter_map(|r| match r.entry {
            Entry::ReceiptRecorded { receipt } if receipt.id == ask => Some(receipt.outcome),
            _ => None,
        })
        .collect();
    assert_eq!(receipts, vec![Ok(json!("expired"))], "the default, once");
}

// ---- 5. hook denials on replay ----

struct Cleanup;

/// `wipe` (a hook may deny it; the step carries on and says so), then `notify`.
fn cleanup<'a>(_: &'a Cleanup, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let outcome = match ctx
            .tool("wipe")
            .call::<_, Value>(json!({ "path": "/data" }))
            .await
        {
            Ok(_) => "wiped".to_owned(),
            Err(e) => format!("wipe refused: {e}"),
        };
        let _: Value = ctx.tool("notify").call(&outcome).await?;
        ctx.complete(outcome, vec![])
    })
}

static CLEANUP_STEPS: &[Step<Cleanup>] =
    &[Step::new("cleanup", cleanup).start().takes_user_message()];

/// Denies `wipe` when `deny` is set, allows everything otherwise; records what it was asked about.
struct WipeHook {
    deny: bool,
    asked: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Hook for WipeHook {
    async fn before_command(&self, _: &HookContext, cmd: &mut Cmd) -> HookDecision {
        self.asked.lock().unwrap().push(cmd.kind.fingerprint());
        match &cmd.kind {
            CmdKind::Tool { tool, .. } if self.deny && tool == "wipe" => {
                HookDecision::Deny("wiping is frozen during the audit".to_owned())
            }
            _ => HookDecision::Continue,
        }
    }
}

fn cleanup_engine(
    store: Arc<dyn Store>,
    calls: &Arc<Mutex<Vec<String>>>,
    hook: WipeHook,
) -> EngineBuilder {
    let tool = |name: &'static str| {
        let calls = calls.clone();
        FnTool::new(EffectPolicy::Idempotent, move |_, key| {
            let calls = calls.clone();
            async move {
                calls.lock().unwrap().push(format!("{name} {key}"));
                Ok(json!(name))
            }
        })
    };
    Engine::builder_arc(store)
        .skill(
            StepTable::new(SkillInfo::new("cleanup", "Cleanup"), Cleanup, CLEANUP_STEPS).unwrap(),
        )
        .effects(
            Effects::new()
                .tool("wipe", tool("wipe"))
                .tool("notify", tool("notify")),
        )
        .hook(hook)
}

#[test(multi_thread)]
async fn a_hook_denial_is_journaled_and_honoured_on_replay_when_the_hook_now_allows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cleanup.sqlite");
    let calls = Arc::new(Mutex::new(Vec::new()));
    let denied = Arc::new(Mutex::new(Vec::new()));
    // Engine A denies `wipe`, then dies once `notify` is journaled (after the denial is durable).
    let a = cleanup_engine(
        sqlite(&path),
        &calls,
        WipeHook {
            deny: true,
            asked: denied.clone(),
        },
    )
    .fault_hook(|f: &Fault| {
        f.boundary == Boundary::CommandJournaled && f.what.as_deref() == Some("tool `notify`")
    })
    .start()
    .await
    .unwrap();
    let task = a.send(Request::operator(user("clean up"))).await.unwrap();
    halted(&a, "the crash after `notify` was journaled").await;
    drop(a);
    assert_eq!(
        *denied.lock().unwrap(),
        vec!["tool `wipe`".to_owned(), "tool `notify`".to_owned()]
    );
    assert!(
        calls.lock().unwrap().is_empty(),
        "nothing ran before the crash"
    );

    // Engine B's hook would allow `wipe`; the replay honours the journaled denial instead.
    let allowed = Arc::new(Mutex::new(Vec::new()));
    let b = cleanup_engine(
        sqlite(&path),
        &calls,
        WipeHook {
            deny: false,
            asked: allowed.clone(),
        },
    )
    .start()
    .await
    .unwrap();
    let done = finished(&b, &task, "the recovered cleanup").await;
    assert_eq!(
        done.status.state,
        TaskState::Completed,
        "{}",
        status_text(&done)
    );
    let denial =
        "wipe refused: tool `wipe` failed: denied by a hook: wiping is frozen during the audit";
    assert_eq!(status_text(&done), denial);
    let entries = journal(&b, &task).await;
    let (wipe, notify) = (
        command_id(&entries, "tool `wipe`"),
        command_id(&entries, "tool `notify`"),
    );
    assert_eq!(
        *calls.lock().unwrap(),
        vec![format!("notify {notify}")],
        "`wipe` never ran; `notify` ran once, with its journaled id"
    );
    assert!(
        allowed.lock().unwrap().is_empty(),
        "hooks are not asked again about journaled commands: {:?}",
        allowed.lock().unwrap()
    );
    let wipe_receipts: Vec<_> = entries
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::ReceiptRecorded { receipt } if receipt.id == wipe => {
                Some(receipt.outcome.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        wipe_receipts,
        vec![Err(EffectError::permanent(
            "denied by a hook: wiping is frozen during the audit"
        ))],
        "the denial is the command's one receipt"
    );
}

// ---- a store that fails once ----

/// What the store says when it fails: internal text that must not become the task's status.
const HICCUP: &str = "connection to db-primary.internal reset by peer";

/// A memory store whose `fail_at`-th append (from 1) fails with [`HICCUP`]; every other call works.
#[derive(Clone)]
struct Hiccup {
    inner: MemoryStore,
    appends: Arc<AtomicU32>,
    fail_at: u32,
}

#[async_trait]
impl Store for Hiccup {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
        if self.appends.fetch_add(1, Ordering::SeqCst) + 1 == self.fail_at {
            return Err(StoreError::backend("appending", HICCUP));
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

    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        self.inner.list(query).await
    }
}

struct Tick;

fn tick_once<'a>(_: &'a Tick, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let _: Value = ctx.tool("tick").call(()).await?;
        ctx.complete("ticked", vec![])
    })
}

static TICK_STEPS: &[Step<Tick>] = &[Step::new("tick", tick_once).start().takes_user_message()];

/// The second append (the step's `activated` and the tool's `command_issued`) fails once. The run
/// stops there (the tool never starts: its command is not durable), and the engine reloads the task
/// from the store and replays it, as a restart would. (It used to strand the task: the failed batch's
/// seqs stayed taken, every later append of the run was refused as a conflict, and on a store without
/// leases nothing picked the task up again until the process restarted.)
/// The promise checked: while its engine runs, a task is not stranded by one failed write — it
/// finishes, its journal has no gap, and its status never quotes the store's internals.
#[test(multi_thread)]
async fn a_store_failure_during_a_step_does_not_strand_the_task() {
    let store = Hiccup {
        inner: MemoryStore::new(),
        appends: Arc::new(AtomicU32::new(0)),
        fail_at: 2,
    };
    let tick = FnTool::new(EffectPolicy::Idempotent, |_, _| async { Ok(json!("tick")) });
    let engine = Engine::builder(store.clone())
        .skill(StepTable::new(SkillInfo::new("tick", "Tick"), Tick, TICK_STEPS).unwrap())
        .effects(Effects::new().tool("tick", tick))
        .start()
        .await
        .unwrap();
    let task = engine.send(Request::operator(user("go"))).await.unwrap();
    let done = finished(&engine, &task, "the task after one failed append").await;
    assert_eq!(
        done.status.state,
        TaskState::Completed,
        "{}",
        status_text(&done)
    );
    assert_eq!(status_text(&done), "ticked");
    assert!(
        !status_text(&done).contains("db-primary"),
        "the store's internals reach the task's status: {}",
        status_text(&done)
    );
    let seqs: Vec<u64> = journal(&engine, &task)
        .await
        .iter()
        .map(|r| r.seq)
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
}

/// The append that would carry an answer's reply (with the step it resumes) fails: the answer's
/// sender gets the store's error, not an acknowledgement; nothing of the reply is journaled; and the
/// task, reloaded, still waits for it and completes on the reply sent again.
#[test(multi_thread)]
async fn a_store_failure_on_an_answers_append_refuses_the_answer_and_the_task_still_waits() {
    let inner = MemoryStore::new();
    let appends = Arc::new(AtomicU32::new(0));
    let ledger = common::Ledger::default();
    let pay = |fail_at| {
        Engine::builder(Hiccup {
            inner: inner.clone(),
            appends: appends.clone(),
            fail_at,
        })
        .skill(common::pay_skill())
        .effects(common::pay_effects(&ledger))
    };
    // `0`: no append fails.
    let engine = pay(0).start().await.unwrap();
    let task = engine
        .send(Request::operator(user("10 EUR")))
        .await
        .unwrap();
    assert_eq!(
        common::settled(&engine, &task).await.status.state,
        TaskState::InputRequired
    );
    engine.shutdown().await;

    let engine = pay(appends.load(Ordering::SeqCst) + 1)
        .start()
        .await
        .unwrap();
    let refused = engine
        .send(Request::operator(common::reply(&task, "see you")))
        .await;
    match refused {
        Err(EngineError::Store(e)) => assert!(e.to_string().contains(HICCUP), "{e}"),
        other => panic!("the answer's failed append is its error: {other:?}"),
    }
    let journal = inner.journal(&task, 0).await.unwrap();
    assert!(
        !journal.iter().any(|r| matches!(&r.entry, Entry::MessageReceived { message } if message.joined_texts() == "see you")),
        "nothing of the refused reply is journaled"
    );
    let waits = async {
        loop {
            let state = engine.state(&Caller::Operator, &task).await.unwrap();
            if state == TaskState::InputRequired {
                match engine
                    .send(Request::operator(common::reply(&task, "see you")))
                    .await
                {
                    Ok(_) => return,
                    // The reload after the failed append may still hold the task.
                    Err(EngineError::NotAwaitingInput { .. }) => {}
                    Err(e) => panic!("the reply sent again: {e}"),
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    common::within(
        common::PATIENCE,
        "the task to take the reply sent again",
        waits,
    )
    .await;
    let done = common::settled(&engine, &task).await;
    assert_eq!(
        done.status.state,
        TaskState::Completed,
        "{}",
        status_text(&done)
    );
    let history: Vec<String> = done.history.iter().map(|m| m.joined_texts()).collect();
    assert_eq!(
        history.iter().filter(|t| t.as_str() == "see you").count(),
        1,
        "{history:?}"
    );
    assert_eq!(ledger.calls_of("send_email").len(), 1);
}

// ---- sends cut off by their client ----

#[test(multi_thread)]
async fn sends_cut_off_at_any_point_leave_no_task_stranded_in_memory() {
    sends_cut_off_at_any_point_leave_no_task_stranded(Arc::new(MemoryStore::new()), |b| b).await;
}

#[test(multi_thread)]
async fn sends_cut_off_at_any_point_leave_no_task_stranded_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        SqliteStore::open_default(dir.path().join("radkit.db")).expect("open the SQLite store");
    sends_cut_off_at_any_point_leave_no_task_stranded(Arc::new(store), |b| b).await;
}

#[test(multi_thread, needs = Postgres)]
async fn postgres_sends_cut_off_at_any_point_leave_no_task_stranded() {
    let store = postgres_store(&postgres_schema().await).await;
    sends_cut_off_at_any_point_leave_no_task_stranded(store, |b| {
        short_leases(b, "engine-a", 5_000)
    })
    .await;
}

/// A client that hangs up drops its request's future at whatever point the send has reached. Each
/// send here is cut off at another point (after 0, 1, 2… polls, then after 0, 25, 50… µs): a task
/// whose creating append committed must run as if nobody had hung up (it reaches its question,
/// charged once), and sending the same message again finds it.
async fn sends_cut_off_at_any_point_leave_no_task_stranded(
    store: Arc<dyn Store>,
    configure: impl Fn(EngineBuilder) -> EngineBuilder,
) {
    let ledger = common::Ledger::default();
    let engine = configure(
        Engine::builder_arc(store.clone())
            .without_registered_skills()
            .skill(common::pay_skill())
            .effects(common::pay_effects(&ledger)),
    )
    .start()
    .await
    .unwrap();
    let message = |i: usize| {
        let mut m = user("5");
        m.message_id = format!("cut-off-{i}");
        m
    };
    const POLLED: usize = 48;
    const TIMED: usize = 80;
    for i in 0..POLLED + TIMED {
        let send = engine.send(Request::operator(message(i)));
        if i < POLLED {
            cut_off_after_polls(send, i).await;
        } else {
            let after = Duration::from_micros(25 * (i - POLLED) as u64);
            let _ = tokio::time::timeout(after, send).await;
        }
    }
    let created = store.list(TaskQuery::default()).await.unwrap();
    assert!(
        !created.is_empty(),
        "no send got as far as creating its task: the test cut nothing off"
    );
    for task in &created {
        let task_id = TaskId::from(task.id.clone());
        let done = common::within(
            Duration::from_secs(60),
            &format!("task {task_id} (its send was cut off) to reach its question"),
            engine.wait_settled(&Caller::Operator, &task_id),
        )
        .await
        .unwrap();
        assert_eq!(done.status.state, TaskState::InputRequired, "{task_id}");
    }
    for i in 0..POLLED + TIMED {
        let again = common::within(
            Duration::from_secs(60),
            "a retried send",
            engine.send(Request::operator(message(i))),
        )
        .await
        .unwrap();
        let done = common::settled(&engine, &again).await;
        assert_eq!(done.status.state, TaskState::InputRequired, "{again}");
    }
    let charges = ledger.calls_of("charge_card");
    assert_eq!(
        ledger.applied_of("charge_card").len(),
        POLLED + TIMED,
        "one charge per message: {charges:?}"
    );
    engine.shutdown().await;
}

/// Poll `fut` `polls` times (letting the runtime run between polls), then drop it unless it ended.
async fn cut_off_after_polls(fut: impl Future, polls: usize) {
    let mut fut = std::pin::pin!(fut);
    for _ in 0..polls {
        if futures::poll!(fut.as_mut()).is_ready() {
            return;
        }
        tokio::task::yield_now().await;
    }
}

// ---- a question and a tool from one transition ----

/// A reducer whose first transition asks a question and calls the `lookup` tool together; it
/// completes once it has both results (the tool's and the reply), in either order.
struct AskAndLookUp;

#[async_trait]
impl FlowSkill for AskAndLookUp {
    /// Bit 1: the lookup returned; bit 2: the reply came.
    type State = u32;
    fn info(&self) -> SkillInfo {
        SkillInfo::new("ask_and_look_up", "Ask and look up").version("1")
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
        let got = match event {
            Event::UserMessage { .. } if state == 0 => {
                let question = Cmd::new(CmdKind::AskUser {
                    slot: "note".to_owned(),
                    message: Message::agent_text("Any note?"),
                    expires_in_ms: None,
                    on_expiry: None,
                });
                return Ok(Transition::to(0)
                    .cmd(question)
                    .cmd(Cmd::tool("lookup", json!({}))));
            }
            Event::CommandResult { outcome: Ok(v), .. } if v == json!("looked up") => 1,
            Event::CommandResult { outcome: Ok(_), .. } => 2,
            _ => return Ok(Transition::ignore()),
        };
        match state | got {
            3 => Ok(Transition::complete("looked up and answered")),
            now => Ok(Transition::to(now)),
        }
    }
}

fn ask_and_look_up(store: Arc<dyn Store>, lookups: &Arc<AtomicU32>) -> EngineBuilder {
    let lookups = lookups.clone();
    Engine::builder_arc(store)
        .without_registered_skills()
        .skill(AskAndLookUp)
        .effects(Effects::new().tool(
            "lookup",
            FnTool::new(EffectPolicy::Idempotent, move |_, _| {
                lookups.fetch_add(1, Ordering::SeqCst);
                async { Ok(json!("looked up")) }
            }),
        ))
}

/// The engine dies during the `lookup` the question's transition issued: the task's row says
/// `input-required`, yet it has work to do. The next engine performs the lookup without waiting for
/// the reply (the row's wake time says so), and the reply, when it comes, is taken.
#[test(multi_thread)]
async fn a_tool_issued_beside_a_question_is_performed_after_a_crash_without_waiting_for_the_reply()
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ask-and-look-up.sqlite");
    let lookups = Arc::new(AtomicU32::new(0));
    let a = ask_and_look_up(sqlite(&path), &lookups)
        .fault_hook(|f: &Fault| {
            f.boundary == Boundary::DuringEffect && f.what.as_deref() == Some("tool `lookup`")
        })
        .start()
        .await
        .unwrap();
    let task = a.send(Request::operator(user("go"))).await.unwrap();
    halted(&a, "the crash during the lookup").await;
    drop(a);
    let b = ask_and_look_up(sqlite(&path), &lookups)
        .start()
        .await
        .unwrap();
    the_lookup_is_performed_then_the_reply_taken(&b, &task).await;
}

/// The same on Postgres: the crashed engine's lease expires and another worker claims the task by
/// its wake time, though its row says `input-required`.
#[test(multi_thread, needs = Postgres)]
async fn postgres_a_tool_issued_beside_a_question_is_claimed_and_performed_after_a_crash() {
    let url = postgres_schema().await;
    let connect = || postgres_store(&url);
    let lookups = Arc::new(AtomicU32::new(0));
    let short_leases = |builder, worker| short_leases(builder, worker, 500);
    let a = short_leases(ask_and_look_up(connect().await, &lookups), "engine-a")
        .fault_hook(|f: &Fault| {
            f.boundary == Boundary::DuringEffect && f.what.as_deref() == Some("tool `lookup`")
        })
        .start()
        .await
        .unwrap();
    let task = a.send(Request::operator(user("go"))).await.unwrap();
    halted(&a, "the crash during the lookup").await;
    let b = short_leases(ask_and_look_up(connect().await, &lookups), "engine-b")
        .start()
        .await
        .unwrap();
    the_lookup_is_performed_then_the_reply_taken(&b, &task).await;
    drop(a);
}

async fn the_lookup_is_performed_then_the_reply_taken(engine: &Engine, task: &TaskId) {
    within("the lookup's receipt, with no reply sent", async {
        loop {
            let lookup_done = journal(engine, task).await.iter().any(|r| {
                matches!(&r.entry, Entry::ReceiptRecorded { receipt }
                    if receipt.outcome.as_ref().is_ok_and(|v| *v == json!("looked up")))
            });
            if lookup_done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let mut answer = user("no note");
    answer.task_id = Some(task.to_string());
    within(
        "the reply to be taken",
        engine.send(Request::operator(answer)),
    )
    .await
    .expect("the reply is taken");
    let done = finished(engine, task, "the task's end").await;
    assert_eq!(
        done.status.state,
        TaskState::Completed,
        "{}",
        status_text(&done)
    );
    let entries = journal(engine, task).await;
    let lookup = command_id(&entries, "tool `lookup`");
    let receipts = entries
        .iter()
        .filter(|r| matches!(&r.entry, Entry::ReceiptRecorded { receipt } if receipt.id == lookup))
        .count();
    assert_eq!(receipts, 1, "one receipt for the lookup");
}
