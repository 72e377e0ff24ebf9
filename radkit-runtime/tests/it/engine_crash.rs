//! Crash tests at every durability boundary: an injected crash halts the engine exactly like `kill -9`
//! (nothing more is journaled); a fresh engine over the same store recovers and finishes the task.
//! Each test reads the journal straight from the store at the moment of the crash (before anything
//! recovers), then counts every raw tool call (each invocation, not each key), so an engine that never
//! journaled the command, or re-ran a call that had a receipt, fails. Each asserts what the command's
//! effect policy promises.

use crate::support::common;

use radkit_runtime::engine::{Caller, Request};
use radkit_runtime::model::TaskId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::Engine;
use radkit_runtime::engine::{Boundary, Fault};
use radkit_runtime::flow::step_table::{Step, StepInput, StepTable};
use radkit_runtime::flow::{EffectPolicy, InvocationId, SkillInfo, StepCtx, StepResult};
use radkit_runtime::journal::{Entry, JournalRecord};
use radkit_runtime::model::{Task, TaskState};
use radkit_runtime::store::{MemoryStore, Store};
use radkit_runtime::tools::FnTool;
use tokio::sync::Notify;

/// A hook crashing once at `boundary` for commands whose fingerprint mentions `tool` (any if empty).
fn once(boundary: Boundary, tool: &'static str) -> impl Fn(&Fault) -> bool + Send + Sync + 'static {
    let fired = Arc::new(AtomicBool::new(false));
    move |f: &Fault| {
        let matches = f.boundary == boundary
            && (tool.is_empty() || f.what.as_deref().is_some_and(|w| w.contains(tool)));
        matches && !fired.swap(true, Ordering::SeqCst)
    }
}

fn crashing_engine(
    store: &MemoryStore,
    effects: Effects,
    hook: impl Fn(&Fault) -> bool + Send + Sync + 'static,
) -> Engine {
    Engine::builder(store.clone())
        .skill(pay_skill())
        .effects(effects)
        .fault_hook(hook)
        .build()
        .unwrap()
}

async fn fresh_engine(store: &MemoryStore, ledger: &Ledger) -> Engine {
    Engine::builder(store.clone())
        .skill(pay_skill())
        .effects(pay_effects(ledger))
        .start()
        .await
        .unwrap()
}

/// The id of the first command of `tool` in `journal`.
fn issued(journal: &[JournalRecord], tool: &str) -> Option<InvocationId> {
    journal.iter().find_map(|r| match &r.entry {
        Entry::CommandIssued { id, cmd, .. } if cmd.kind.fingerprint().contains(tool) => {
            Some(id.clone())
        }
        _ => None,
    })
}

/// How many times command `id` is journaled as issued, and how many receipts it has.
fn issues_and_receipts(journal: &[JournalRecord], id: &InvocationId) -> (usize, usize) {
    let issues = journal
        .iter()
        .filter(|r| matches!(&r.entry, Entry::CommandIssued { id: i, .. } if i == id))
        .count();
    let receipts = journal
        .iter()
        .filter(|r| matches!(&r.entry, Entry::ReceiptRecorded { receipt } if &receipt.id == id))
        .count();
    (issues, receipts)
}

/// The raw call of `tool` with the key `id`, as the ledger logs it.
fn call(tool: &str, id: &InvocationId) -> String {
    format!("{tool}:{id}")
}

/// A pay flow stopped by a crash: what the store and the ledger held at that moment.
struct Crashed {
    store: MemoryStore,
    ledger: Ledger,
    task_id: TaskId,
    /// The task's journal read from the store right after the crash, before any recovery.
    journal: Vec<JournalRecord>,
}

impl Crashed {
    /// The command of `tool` journaled before the crash, which must have no receipt yet.
    fn pending(&self, tool: &str) -> InvocationId {
        let id = issued(&self.journal, tool)
            .unwrap_or_else(|| panic!("{tool} was not journaled before the crash"));
        assert_eq!(
            issues_and_receipts(&self.journal, &id),
            (1, 0),
            "at the crash, {tool} ({id}) is journaled once, without a receipt"
        );
        id
    }

    /// A fresh engine over the crashed one's store finishes the task (answering the note if it is
    /// asked again); the final task and its journal.
    async fn recover(&self) -> (Task, Vec<JournalRecord>) {
        let engine = fresh_engine(&self.store, &self.ledger).await;
        let mut task = settled(&engine, &self.task_id).await;
        if task.status.state == TaskState::InputRequired {
            engine
                .send(Request::operator(reply(&self.task_id, "thanks")))
                .await
                .unwrap();
            task = settled(&engine, &self.task_id).await;
        }
        let journal = engine
            .journal(&Caller::Operator, &self.task_id)
            .await
            .unwrap();
        (task, journal)
    }
}

/// Runs the pay flow with `effects` until the crash at `boundary` on `tool` (answering the note
/// first when the crash is in `send_email`), drops the crashed engine and reads the store.
async fn crash_with(
    boundary: Boundary,
    tool: &'static str,
    ledger: Ledger,
    effects: Effects,
) -> Crashed {
    let store = MemoryStore::new();
    let engine = crashing_engine(&store, effects, once(boundary, tool));
    let task_id = engine
        .send(Request::operator(user("42 EUR")))
        .await
        .unwrap();
    if tool == "send_email" {
        let t = settled(&engine, &task_id).await;
        assert_eq!(t.status.state, TaskState::InputRequired);
        engine
            .send(Request::operator(reply(&task_id, "thanks")))
            .await
            .unwrap();
    }
    wait_halted(&engine).await;
    drop(engine);
    let journal = store.journal(&task_id, 0).await.unwrap();
    Crashed {
        store,
        ledger,
        task_id,
        journal,
    }
}

async fn crash(boundary: Boundary, tool: &'static str) -> Crashed {
    let ledger = Ledger::default();
    let effects = pay_effects(&ledger);
    crash_with(boundary, tool, ledger, effects).await
}

fn assert_completed(task: &Task) {
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(task)
    );
}

#[test]
async fn crash_after_command_journaled_reissues_same_invocation_id() {
    let crashed = crash(Boundary::CommandJournaled, "charge_card").await;
    let id = crashed.pending("charge_card");
    assert!(
        crashed.ledger.calls_of("charge_card").is_empty(),
        "the crash came before the effect started"
    );

    let (task, journal) = crashed.recover().await;
    assert_completed(&task);
    assert_eq!(
        crashed.ledger.calls_of("charge_card"),
        vec![call("charge_card", &id)],
        "one call, with the InvocationId journaled before the crash"
    );
    assert_eq!(
        issues_and_receipts(&journal, &id),
        (1, 1),
        "not journaled again; one receipt"
    );
}

/// Signals around the first call of a gated tool: it starts, waits to be released, then finishes.
#[derive(Default)]
struct Gate {
    armed: AtomicBool,
    started: Notify,
    release: Notify,
    finished: Notify,
}

/// An idempotent ledger tool whose first call blocks until the gate is released.
fn gated(ledger: &Ledger, name: &'static str, gate: &Arc<Gate>) -> FnTool {
    gate.armed.store(true, Ordering::SeqCst);
    let (ledger, gate) = (ledger.clone(), gate.clone());
    FnTool::new(EffectPolicy::Idempotent, move |args, key| {
        let (ledger, gate) = (ledger.clone(), gate.clone());
        async move {
            ledger.record_call(name, key.as_str());
            let first = gate.armed.swap(false, Ordering::SeqCst);
            if first {
                gate.started.notify_one();
                gate.release.notified().await;
            }
            ledger.apply(name, key.as_str());
            if first {
                gate.finished.notify_one();
            }
            Ok(serde_json::json!({ "tool": name, "key": key.as_str(), "args": args }))
        }
    })
}

#[test]
async fn crash_during_effect_idempotent_tool_applies_once() {
    let ledger = Ledger::default();
    let gate = Arc::new(Gate::default());
    let effects = pay_effects(&ledger).tool("charge_card", gated(&ledger, "charge_card", &gate));
    let crashed = crash_with(Boundary::DuringEffect, "charge_card", ledger, effects).await;
    // The engine is down, and the charge has started and cannot finish until released: the crash
    // happened while the effect was in flight.
    within(PATIENCE, "the charge to start", gate.started.notified()).await;
    let id = crashed.pending("charge_card");
    assert_eq!(
        crashed.ledger.calls_of("charge_card"),
        vec![call("charge_card", &id)],
        "the effect started with the journaled key"
    );
    assert!(
        crashed.ledger.applied_of("charge_card").is_empty(),
        "and had not finished at the crash"
    );
    gate.release.notify_one();
    within(
        PATIENCE,
        "the interrupted charge to finish",
        gate.finished.notified(),
    )
    .await;

    let (task, journal) = crashed.recover().await;
    assert_completed(&task);
    assert_eq!(
        crashed.ledger.calls_of("charge_card"),
        vec![call("charge_card", &id), call("charge_card", &id)],
        "reissued once after the crash, with the same key"
    );
    assert_eq!(
        crashed.ledger.applied_of("charge_card"),
        vec![call("charge_card", &id)],
        "the provider applied it once"
    );
    assert_eq!(issues_and_receipts(&journal, &id), (1, 1));
}

#[test]
async fn crash_after_effect_before_receipt_does_not_double_charge() {
    let crashed = crash(Boundary::EffectReturned, "charge_card").await;
    let id = crashed.pending("charge_card");
    assert_eq!(
        crashed.ledger.calls_of("charge_card"),
        vec![call("charge_card", &id)],
        "the effect ran before the crash"
    );

    let (task, journal) = crashed.recover().await;
    assert_completed(&task);
    assert_eq!(
        crashed.ledger.calls_of("charge_card"),
        vec![call("charge_card", &id), call("charge_card", &id)],
        "the call was reissued once after the lost receipt, with the same key"
    );
    assert_eq!(
        crashed.ledger.applied_of("charge_card"),
        vec![call("charge_card", &id)],
        "exactly one charge per InvocationId"
    );
    assert_eq!(
        issues_and_receipts(&journal, &id),
        (1, 1),
        "no receipt lost, none duplicated"
    );
}

#[test]
async fn crash_after_receipt_does_not_rerun_tool() {
    let crashed = crash(Boundary::ReceiptWritten, "charge_card").await;
    let id = issued(&crashed.journal, "charge_card").expect("charge journaled before the crash");
    assert_eq!(
        issues_and_receipts(&crashed.journal, &id),
        (1, 1),
        "the receipt was durable before the crash"
    );
    assert_eq!(
        crashed.ledger.calls_of("charge_card"),
        vec![call("charge_card", &id)]
    );

    let (task, journal) = crashed.recover().await;
    assert_completed(&task);
    assert_eq!(
        crashed.ledger.calls_of("charge_card"),
        vec![call("charge_card", &id)],
        "the receipt short-circuits the replay"
    );
    assert_eq!(issues_and_receipts(&journal, &id), (1, 1));
}

#[test]
async fn crash_after_at_least_once_receipt_lost_reissues_with_same_key() {
    let crashed = crash(Boundary::EffectReturned, "write_receipt").await;
    let id = crashed.pending("write_receipt");
    assert_eq!(
        crashed.ledger.calls_of("write_receipt"),
        vec![call("write_receipt", &id)]
    );

    let (task, journal) = crashed.recover().await;
    assert_completed(&task);
    assert_eq!(
        crashed.ledger.calls_of("write_receipt"),
        vec![call("write_receipt", &id), call("write_receipt", &id)],
        "at-least-once: run again, with the same key"
    );
    assert_eq!(
        crashed.ledger.calls_of("charge_card").len(),
        1,
        "the charge before it had its receipt"
    );
    assert_eq!(issues_and_receipts(&journal, &id), (1, 1));
}

#[test]
async fn at_most_once_without_receipt_reports_unknown_outcome() {
    let crashed = crash(Boundary::EffectReturned, "send_email").await;
    let id = crashed.pending("send_email");
    assert_eq!(
        crashed.ledger.calls_of("send_email"),
        vec![call("send_email", &id)]
    );

    let (task, _) = crashed.recover().await;
    assert_eq!(task.status.state, TaskState::Failed);
    let text = status_text(&task);
    assert!(
        text.contains("outcome unknown") && text.contains("send_email"),
        "{text}"
    );
    assert_eq!(
        crashed.ledger.calls_of("send_email"),
        vec![call("send_email", &id)],
        "never sent twice"
    );
}

/// Every command's raw calls, per tool: `charge_card`, `write_receipt`, `send_email`.
fn call_counts(ledger: &Ledger) -> [usize; 3] {
    ["charge_card", "write_receipt", "send_email"].map(|tool| ledger.calls_of(tool).len())
}

#[test]
async fn crash_while_awaiting_input_resumes_on_reply() {
    let crashed = crash(Boundary::AwaitingInput, "").await;
    assert!(
        crashed
            .journal
            .iter()
            .any(|r| matches!(r.entry, Entry::AwaitingInput { .. })),
        "the wait was durable at the crash"
    );
    let row = crashed.store.task(&crashed.task_id).await.unwrap().unwrap();
    assert_eq!(row.state, TaskState::InputRequired);
    assert_eq!(call_counts(&crashed.ledger), [1, 1, 0]);

    let (task, _) = crashed.recover().await;
    assert_completed(&task);
    assert!(status_text(&task).contains("thanks"));
    assert_eq!(
        call_counts(&crashed.ledger),
        [1, 1, 1],
        "nothing before the wait ran again"
    );
}

/// Asks inside its step (`ctx.ask`), then completes with the reply.
struct Asks;

static ASKS_STEPS: &[Step<Asks>] = &[Step::new("ask", asks).start().takes_user_message()];

fn asks<'a>(_: &'a Asks, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let note = ctx.ask("note", "Any note?").await?;
        ctx.complete(format!("noted: {}", note.joined_texts()), vec![])
    })
}

fn asks_skill() -> StepTable<Asks> {
    StepTable::new(SkillInfo::new("asks", "Asks"), Asks, ASKS_STEPS).unwrap()
}

/// A question asked inside a step (`ctx.ask`) is durable before the step suspends, as an
/// `await_input` wait is: a crash as the task starts to wait finds the question journaled and the
/// task input-required, and the recovered task takes the reply to it.
#[test]
async fn crash_while_a_step_asks_finds_the_question_durable() {
    let store = MemoryStore::new();
    let engine = Engine::builder(store.clone())
        .skill(asks_skill())
        .fault_hook(once(Boundary::AwaitingInput, ""))
        .build()
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    wait_halted(&engine).await;
    drop(engine);
    let journal = store.journal(&task_id, 0).await.unwrap();
    assert!(
        journal
            .iter()
            .any(|r| matches!(r.entry, Entry::AwaitingInput { ask: Some(_), .. })),
        "the question was durable at the crash: {journal:?}"
    );
    let row = store.task(&task_id).await.unwrap().unwrap();
    assert_eq!(row.state, TaskState::InputRequired);

    let engine = Engine::builder(store.clone())
        .skill(asks_skill())
        .start()
        .await
        .unwrap();
    let waiting = settled(&engine, &task_id).await;
    assert_eq!(waiting.status.state, TaskState::InputRequired);
    engine
        .send(Request::operator(reply(&task_id, "thanks")))
        .await
        .unwrap();
    let task = settled(&engine, &task_id).await;
    assert_completed(&task);
    assert_eq!(status_text(&task), "noted: thanks");
}

/// The reply is taken but not durable yet (it commits with the resumed step's first append): the
/// crash loses it, and its sender is told so (not acknowledged); the task still waits, and the
/// reply sent again resumes it.
#[test]
async fn crash_while_a_reply_is_taken_loses_only_the_unacknowledged_reply() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let engine = crashing_engine(&store, pay_effects(&ledger), once(Boundary::Resuming, ""));
    let task_id = engine
        .send(Request::operator(user("10 EUR")))
        .await
        .unwrap();
    assert_eq!(
        settled(&engine, &task_id).await.status.state,
        TaskState::InputRequired
    );
    let refused = engine
        .send(Request::operator(reply(&task_id, "see you")))
        .await;
    assert!(
        matches!(refused, Err(radkit_runtime::engine::EngineError::Halted)),
        "the reply was not acknowledged: {refused:?}"
    );
    wait_halted(&engine).await;
    drop(engine);
    let at_crash = store.journal(&task_id, 0).await.unwrap();
    assert!(
        !at_crash.iter().any(|r| matches!(&r.entry, Entry::MessageReceived { message } if message.joined_texts() == "see you")),
        "nothing of the unacknowledged reply is journaled: {at_crash:?}"
    );
    assert_eq!(call_counts(&ledger), [1, 1, 0]);

    let engine = fresh_engine(&store, &ledger).await;
    assert_eq!(
        settled(&engine, &task_id).await.status.state,
        TaskState::InputRequired,
        "the task still waits for its reply"
    );
    engine
        .send(Request::operator(reply(&task_id, "see you")))
        .await
        .unwrap();
    let task = settled(&engine, &task_id).await;
    assert_completed(&task);
    let history: Vec<String> = task.history.iter().map(|m| m.joined_texts()).collect();
    assert_eq!(
        history.iter().filter(|t| t.as_str() == "see you").count(),
        1,
        "reply recorded once: {history:?}"
    );
    assert_eq!(call_counts(&ledger), [1, 1, 1]);
}

/// The acknowledged reply went to the store with the resumed step's first command: after a crash
/// right after that append, the fresh engine runs the step on the journaled reply.
#[test]
async fn crash_after_the_resumed_steps_first_command_replays_the_journaled_reply() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let engine = crashing_engine(
        &store,
        pay_effects(&ledger),
        once(Boundary::CommandJournaled, "send_email"),
    );
    let task_id = engine
        .send(Request::operator(user("10 EUR")))
        .await
        .unwrap();
    assert_eq!(
        settled(&engine, &task_id).await.status.state,
        TaskState::InputRequired
    );
    engine
        .send(Request::operator(reply(&task_id, "see you")))
        .await
        .expect("the reply is durable once acknowledged, crash or not");
    wait_halted(&engine).await;
    drop(engine);
    let at_crash = store.journal(&task_id, 0).await.unwrap();
    let reply_at = at_crash
        .iter()
        .position(|r| matches!(&r.entry, Entry::MessageReceived { message } if message.joined_texts() == "see you"))
        .expect("the reply was journaled before the crash");
    let email = issued(&at_crash, "send_email").expect("the email was journaled");
    assert_eq!(issues_and_receipts(&at_crash, &email), (1, 0));
    assert!(
        at_crash[reply_at..]
            .iter()
            .any(|r| matches!(&r.entry, Entry::CommandIssued { id, .. } if *id == email)),
        "the email's command follows the reply"
    );
    assert_eq!(call_counts(&ledger), [1, 1, 0]);

    let engine = fresh_engine(&store, &ledger).await;
    let task = settled(&engine, &task_id).await;
    // An at-most-once email journaled without a receipt is not sent again: its outcome is unknown.
    assert_eq!(task.status.state, TaskState::Failed, "{task:?}");
    let history: Vec<String> = task.history.iter().map(|m| m.joined_texts()).collect();
    assert_eq!(
        history.iter().filter(|t| t.as_str() == "see you").count(),
        1,
        "reply recorded once: {history:?}"
    );
    assert_eq!(
        call_counts(&ledger),
        [1, 1, 0],
        "nothing before the reply ran again, and the email is not risked twice"
    );
}

#[test]
async fn non_terminal_tasks_are_recovered_at_start() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    // The crash comes at the first `write_receipt` journaled once all five tasks journaled their
    // first command (`charge_card`): all five exist at the crash, whichever order the runtime
    // runs their drivers in, and the last one's `write_receipt` is journaled after that at the
    // latest.
    let charges = Arc::new(AtomicUsize::new(0));
    let crash = once(Boundary::CommandJournaled, "write_receipt");
    let hook = move |f: &Fault| {
        let started = f.boundary == Boundary::CommandJournaled
            && f.what.as_deref().is_some_and(|w| w.contains("charge_card"));
        if started {
            charges.fetch_add(1, Ordering::SeqCst);
        }
        charges.load(Ordering::SeqCst) >= 5 && crash(f)
    };
    let engine = crashing_engine(&store, pay_effects(&ledger), hook);
    let sends = (0..5).map(|i| engine.send(Request::operator(user(&format!("{i} EUR")))));
    let ids: Vec<_> = futures::future::join_all(sends)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    wait_halted(&engine).await;
    drop(engine);
    // What each task had journaled, and what had run, at the crash.
    let mut at_crash = Vec::new();
    for id in &ids {
        at_crash.extend(store.journal(id, 0).await.unwrap());
    }
    let journaled: Vec<String> = at_crash
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::CommandIssued { id, .. } => Some(id.to_string()),
            _ => None,
        })
        .collect();
    let calls_at_crash = ledger.log.lock().unwrap().clone();
    for call in &calls_at_crash {
        let (_, key) = call.split_once(':').unwrap();
        assert!(
            journaled.iter().any(|id| id == key),
            "{call} ran without being journaled first"
        );
    }

    let engine = fresh_engine(&store, &ledger).await;
    for id in &ids {
        let task = settled(&engine, id).await;
        assert_eq!(
            task.status.state,
            TaskState::InputRequired,
            "{}",
            status_text(&task)
        );
    }
    // A command journaled without a receipt at the crash runs once more, one with a receipt never
    // again, and one journaled after the crash runs once.
    let mut calls_after: HashMap<String, usize> = HashMap::new();
    for call in ledger.log.lock().unwrap().iter().skip(calls_at_crash.len()) {
        *calls_after.entry(call.clone()).or_default() += 1;
    }
    let mut keys: Vec<String> = calls_after.keys().cloned().collect();
    keys.extend(calls_at_crash.iter().cloned());
    keys.sort();
    keys.dedup();
    for call in &keys {
        let (_, key) = call.split_once(':').unwrap();
        let key = InvocationId::from_string(key.to_owned());
        let had_receipt = issues_and_receipts(&at_crash, &key).1 == 1;
        assert_eq!(
            calls_after.get(call).copied().unwrap_or(0),
            usize::from(!had_receipt),
            "{call} after the crash (receipt at the crash: {had_receipt})"
        );
    }
    for id in journaled.iter().filter(|id| {
        issues_and_receipts(&at_crash, &InvocationId::from_string(id.to_string())).1 == 0
    }) {
        assert!(
            calls_after
                .keys()
                .any(|call| call.split_once(':').unwrap().1 == id),
            "{id} was journaled without a receipt and never reissued"
        );
    }
    assert_eq!(
        ledger.applied_of("write_receipt").len(),
        5,
        "one receipt written per task"
    );
    assert_eq!(
        ledger.applied_of("charge_card").len(),
        5,
        "one charge per task"
    );
    assert_eq!(ledger.calls_of("send_email").len(), 0);
}

#[test]
async fn idempotent_policy_is_taken_from_the_tool_declaration() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let engine = fresh_engine(&store, &ledger).await;
    let task_id = engine.send(Request::operator(user("1 EUR"))).await.unwrap();
    settled(&engine, &task_id).await;
    let journal = engine.journal(&Caller::Operator, &task_id).await.unwrap();
    let policy = journal.iter().find_map(|r| match &r.entry {
        Entry::CommandIssued { cmd, .. } if cmd.kind.fingerprint().contains("charge_card") => {
            Some(cmd.policy)
        }
        _ => None,
    });
    assert_eq!(policy, Some(EffectPolicy::Idempotent));
}

/// A cancel sent to an engine that halted (shut down, or stopped by a failure) is refused at once
/// with `Halted` instead of waiting for an end nobody will write; the task is left as it was for
/// the next engine to finish.
#[test(multi_thread)]
async fn a_cancel_sent_to_a_halted_engine_returns_halted_at_once() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let engine = fresh_engine(&store, &ledger).await;
    let task = engine.send(Request::operator(user("5 EUR"))).await.unwrap();
    assert_eq!(
        settled(&engine, &task).await.status.state,
        TaskState::InputRequired
    );
    engine.halt();
    let canceled = within(
        PATIENCE,
        "the cancel's answer",
        engine.cancel(&Caller::Operator, &task),
    )
    .await;
    assert!(
        matches!(canceled, Err(radkit_runtime::engine::EngineError::Halted)),
        "{canceled:?}"
    );
    let journal = store.journal(&task, 0).await.unwrap();
    assert!(
        !journal
            .iter()
            .any(|r| matches!(r.entry, Entry::CancelRequested | Entry::Terminal { .. })),
        "a halted engine writes nothing"
    );
}
