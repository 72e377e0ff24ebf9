//! Crash tests at every durability boundary: an injected crash halts the engine exactly like `kill -9`
//! (nothing more is journaled); a fresh engine over the same store recovers and finishes the task.
//! Each test asserts what the command's effect policy promises.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;
use radkit_runtime::engine::{Boundary, Fault};
use radkit_runtime::flow::{EffectPolicy, InvocationId};
use radkit_runtime::journal::Entry;
use radkit_runtime::model::TaskState;
use radkit_runtime::store::MemoryStore;
use radkit_runtime::Engine;

/// A hook crashing once at `boundary` for commands whose fingerprint mentions `tool` (any if empty).
fn once(boundary: Boundary, tool: &'static str) -> impl Fn(&Fault) -> bool + Send + Sync + 'static {
    let fired = Arc::new(AtomicBool::new(false));
    move |f: &Fault| {
        let matches = f.boundary == boundary
            && (tool.is_empty() || f.what.as_deref().is_some_and(|w| w.contains(tool)));
        matches && !fired.swap(true, Ordering::SeqCst)
    }
}

async fn crashing_engine(
    store: &MemoryStore,
    ledger: &Ledger,
    hook: impl Fn(&Fault) -> bool + Send + Sync + 'static,
) -> Engine {
    Engine::builder(store.clone())
        .skill(pay_skill())
        .effects(pay_effects(ledger))
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

fn receipts_for(
    journal: &[radkit_runtime::journal::JournalRecord],
    tool: &str,
) -> Vec<InvocationId> {
    let issued: Vec<InvocationId> = journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::CommandIssued { id, cmd, .. } if cmd.kind.fingerprint().contains(tool) => {
                Some(id.clone())
            }
            _ => None,
        })
        .collect();
    journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::ReceiptRecorded { receipt } if issued.contains(&receipt.id) => {
                Some(receipt.id.clone())
            }
            _ => None,
        })
        .collect()
}

/// Runs the pay flow with a crash at `boundary` on `tool`, recovers, answers the note, and returns
/// the final task, the ledger and the journal.
async fn run_with_crash(
    boundary: Boundary,
    tool: &'static str,
) -> (
    radkit_runtime::model::Task,
    Ledger,
    Vec<radkit_runtime::journal::JournalRecord>,
) {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let engine = crashing_engine(&store, &ledger, once(boundary, tool)).await;
    let task_id = engine.send(None, None, user("42 EUR")).await.unwrap();
    if tool == "send_email" {
        let t = settled(&engine, &task_id).await;
        assert_eq!(t.status.state, TaskState::InputRequired);
        engine
            .send(None, None, reply(&task_id, "thanks"))
            .await
            .unwrap();
    }
    wait_halted(&engine).await;
    let engine = fresh_engine(&store, &ledger).await;
    let mut task = settled(&engine, &task_id).await;
    if task.status.state == TaskState::InputRequired {
        engine
            .send(None, None, reply(&task_id, "thanks"))
            .await
            .unwrap();
        task = settled(&engine, &task_id).await;
    }
    let journal = engine.journal(None, &task_id).await.unwrap();
    (task, ledger, journal)
}

#[tokio::test]
async fn crash_after_command_journaled_reissues_same_invocation_id() {
    let (task, ledger, journal) = run_with_crash(Boundary::CommandJournaled, "charge_card").await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    let charges: Vec<_> = ledger
        .applied()
        .into_iter()
        .filter(|k| k.starts_with("charge_card"))
        .collect();
    assert_eq!(charges.len(), 1, "one charge per InvocationId: {charges:?}");
    // The reissued call used the id journaled before the crash.
    let issued = journal.iter().find_map(|r| match &r.entry {
        Entry::CommandIssued { id, cmd, .. } if cmd.kind.fingerprint().contains("charge_card") => {
            Some(id.clone())
        }
        _ => None,
    });
    assert_eq!(charges[0], format!("charge_card:{}", issued.unwrap()));
    assert_eq!(receipts_for(&journal, "charge_card").len(), 1);
}

#[tokio::test]
async fn crash_during_effect_idempotent_tool_applies_once() {
    let (task, ledger, journal) = run_with_crash(Boundary::DuringEffect, "charge_card").await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    let charges: Vec<_> = ledger
        .applied()
        .into_iter()
        .filter(|k| k.starts_with("charge_card"))
        .collect();
    assert_eq!(
        charges.len(),
        1,
        "the reissue carried the same key: {charges:?}"
    );
    assert_eq!(receipts_for(&journal, "charge_card").len(), 1);
}

#[tokio::test]
async fn crash_after_effect_before_receipt_does_not_double_charge() {
    let (task, ledger, journal) = run_with_crash(Boundary::EffectReturned, "charge_card").await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    let calls: u32 = ledger
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("charge_card"))
        .map(|(_, v)| *v)
        .sum();
    assert_eq!(
        calls, 2,
        "the call was reissued once after the lost receipt"
    );
    let charges: Vec<_> = ledger
        .applied()
        .into_iter()
        .filter(|k| k.starts_with("charge_card"))
        .collect();
    assert_eq!(charges.len(), 1, "exactly one charge per InvocationId");
    assert_eq!(
        receipts_for(&journal, "charge_card").len(),
        1,
        "no receipt lost, none duplicated"
    );
}

#[tokio::test]
async fn crash_after_receipt_does_not_rerun_tool() {
    let (task, ledger, journal) = run_with_crash(Boundary::ReceiptWritten, "charge_card").await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    let calls: u32 = ledger
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("charge_card"))
        .map(|(_, v)| *v)
        .sum();
    assert_eq!(calls, 1, "the receipt short-circuits the replay");
    assert_eq!(receipts_for(&journal, "charge_card").len(), 1);
}

#[tokio::test]
async fn crash_after_at_least_once_receipt_lost_reissues_with_same_key() {
    let (task, ledger, _) = run_with_crash(Boundary::EffectReturned, "write_receipt").await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    let calls = ledger.calls.lock().unwrap().clone();
    let receipt_calls: Vec<_> = calls
        .iter()
        .filter(|(k, _)| k.starts_with("write_receipt"))
        .collect();
    assert_eq!(receipt_calls.len(), 1, "one key");
    assert_eq!(
        *receipt_calls[0].1, 2,
        "at-least-once: run again with the same key"
    );
}

#[tokio::test]
async fn at_most_once_without_receipt_reports_unknown_outcome() {
    let (task, ledger, _) = run_with_crash(Boundary::EffectReturned, "send_email").await;
    assert_eq!(task.status.state, TaskState::Failed);
    let text = status_text(&task);
    assert!(
        text.contains("outcome unknown") && text.contains("send_email"),
        "{text}"
    );
    let calls: u32 = ledger
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("send_email"))
        .map(|(_, v)| *v)
        .sum();
    assert_eq!(calls, 1, "never sent twice");
}

#[tokio::test]
async fn crash_while_awaiting_input_resumes_on_reply() {
    let (task, ledger, _) = run_with_crash(Boundary::AwaitingInput, "").await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    assert!(status_text(&task).contains("thanks"));
    assert_eq!(ledger.applied().len(), 3);
}

#[tokio::test]
async fn crash_during_resume_replays_the_reply() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let engine = crashing_engine(&store, &ledger, once(Boundary::Resuming, "")).await;
    let task_id = engine.send(None, None, user("10 EUR")).await.unwrap();
    assert_eq!(
        settled(&engine, &task_id).await.status.state,
        TaskState::InputRequired
    );
    engine
        .send(None, None, reply(&task_id, "see you"))
        .await
        .unwrap();
    wait_halted(&engine).await;
    let engine = fresh_engine(&store, &ledger).await;
    let task = settled(&engine, &task_id).await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    assert!(
        status_text(&task).contains("see you"),
        "the journaled reply is used"
    );
    let history: Vec<String> = task
        .history
        .unwrap()
        .iter()
        .map(|m| m.joined_texts())
        .collect();
    assert_eq!(
        history.iter().filter(|t| t.as_str() == "see you").count(),
        1,
        "reply recorded once: {history:?}"
    );
}

#[tokio::test]
async fn non_terminal_tasks_are_recovered_at_start() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let engine = crashing_engine(
        &store,
        &ledger,
        once(Boundary::CommandJournaled, "write_receipt"),
    )
    .await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            engine
                .send(None, None, user(&format!("{i} EUR")))
                .await
                .unwrap(),
        );
    }
    wait_halted(&engine).await;
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
    let charges = ledger
        .applied()
        .into_iter()
        .filter(|k| k.starts_with("charge_card"))
        .count();
    assert_eq!(charges, 5);
}

#[tokio::test]
async fn idempotent_policy_is_taken_from_the_tool_declaration() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let engine = fresh_engine(&store, &ledger).await;
    let task_id = engine.send(None, None, user("1 EUR")).await.unwrap();
    settled(&engine, &task_id).await;
    let journal = engine.journal(None, &task_id).await.unwrap();
    let policy = journal.iter().find_map(|r| match &r.entry {
        Entry::CommandIssued { cmd, .. } if cmd.kind.fingerprint().contains("charge_card") => {
            Some(cmd.policy)
        }
        _ => None,
    });
    assert_eq!(policy, Some(EffectPolicy::Idempotent));
}
