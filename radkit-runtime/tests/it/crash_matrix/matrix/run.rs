//! One cell of the matrix: run the skill until the crash point, halt that engine for good, read the
//! store as the restarted process will and check what it holds, recover with a fresh engine over the
//! reopened store, drive the task to its end, and check the raw call counts, the keys the tool saw,
//! the final journal and the final state. Every wait is bounded and names what it waited for.

use radkit_runtime::engine::{Caller, Request};
use radkit_runtime::model::TaskId;
use std::time::{Duration, Instant};

use radkit_runtime::effects::Effects;
use radkit_runtime::engine::Boundary;
use radkit_runtime::engine::Engine;
use radkit_runtime::flow::InvocationId;
use radkit_runtime::journal::{Entry, JournalRecord};
use radkit_runtime::model::{Task, TaskState};

use super::probe::{sibling, Probe, EFFECT, SIBLING};
use super::skills::{noted, skill, DONE, REFUSED, WOKE};
use super::stores::Site;
use super::{AtCrash, Backend, End, Form, Point, Row, Tail};
use crate::support::common::{reply, status_text, user};

/// How long a crash point may take to be reached, and a task to settle (a timer and, on Postgres, the
/// crashed engine's lease expiring are part of it).
const LIMIT: Duration = Duration::from_secs(20);

/// The note a user sends when the task asks for one.
const NOTE: &str = "leave it at the door";

/// The fault boundary a cell crashes at, when the engine has one there.
fn fault(point: Point, form: Form) -> Option<Boundary> {
    match point {
        Point::AfterJournaled => Some(Boundary::CommandJournaled),
        Point::EffectReturned => Some(Boundary::EffectReturned),
        Point::ReceiptWritten => Some(Boundary::ReceiptWritten),
        Point::AwaitingInput => Some(Boundary::AwaitingInput),
        Point::Resuming => Some(Boundary::Resuming),
        // A transition's sleep has no fault point: the runner halts the engine itself.
        Point::TimerWait if form != Form::Transition => Some(Boundary::TimerWait),
        _ => None,
    }
}

/// Run the cell `row` x `form` x `backend`.
pub async fn cell(row: &Row, form: Form, backend: Backend) {
    let cell = format!("{}::{}", backend.name(), row.name(form));
    let site = Site::new(backend).await;
    let probe = Probe::new(row.point);
    let builder = |store, crashing| {
        let builder = Engine::builder_arc(store)
            .without_registered_skills()
            .erased_skill(skill(form, &probe))
            .effects(
                Effects::new()
                    .tool(EFFECT, probe.tool(row.policy))
                    .tool(SIBLING, sibling()),
            )
            .check_fold(true);
        site.leases(builder, crashing)
    };

    // Run until the crash.
    let boundary = fault(row.point, form);
    let mut crashing = builder(site.open().await, true);
    if let Some(boundary) = boundary {
        crashing = crashing.fault_hook(probe.fault_hook(boundary));
    }
    let mut crashed = crashing.build().expect("build the engine that crashes");
    let task_id = crashed
        .send(Request::operator(user("order 7")))
        .await
        .unwrap_or_else(|e| panic!("{cell}: the task was not created: {e}"));
    let mut canceling = None;
    match row.point {
        Point::Resuming => {
            let task = settle(&crashed, &task_id, &cell, "the question before the crash").await;
            assert_eq!(task.status.state, TaskState::InputRequired, "{cell}");
            // The crash comes before the reply is durable: its send is not acknowledged.
            let refused = crashed.send(Request::operator(reply(&task_id, NOTE))).await;
            assert!(
                refused.is_err(),
                "{cell}: a reply cut off before it was durable was acknowledged"
            );
        }
        Point::CompensationAfterCancel => {
            let task = settle(&crashed, &task_id, &cell, "the question before the cancel").await;
            assert_eq!(task.status.state, TaskState::InputRequired, "{cell}");
            // The task waits as a row; the engine that ran it stops cleanly and another one cancels
            // it (a cancel racing the driver's wind-down is pinned by
            // `bugs::cancel_right_after_the_task_settled`).
            crashed.shutdown().await;
            crashed = builder(site.open().await, true)
                .build()
                .expect("build the engine that cancels and crashes");
            let (engine, id) = (crashed.clone(), task_id.clone());
            canceling = Some(tokio::spawn(async move {
                engine.cancel(&Caller::Operator, &id).await
            }));
        }
        Point::TimerWait if boundary.is_none() => {
            committed(&crashed, &task_id, &cell, "timer_set", |entry| {
                matches!(entry, Entry::TimerSet { .. })
            })
            .await;
        }
        _ => {}
    }
    if boundary.is_some() || probe.pauses() {
        probe.reached(LIMIT, &cell).await;
    }
    if boundary.is_some() {
        // The engine halts itself once the hook said so (after its own flush at `ReceiptWritten`).
        halted(&crashed, &cell).await;
    }
    crashed.halt();
    assert_eq!(
        crashed.fold_divergences(),
        Vec::<String>::new(),
        "{cell}: before the crash"
    );
    let calls_at_crash = probe.calls();
    let undos_at_crash = probe.undos();

    // The store as the next process finds it.
    let store = site.open().await;
    let at_crash = store
        .journal(&task_id, 0)
        .await
        .unwrap_or_else(|e| panic!("{cell}: the journal cannot be read after the crash: {e}"));
    check_at_crash(&cell, row, &at_crash);
    // What was cut off runs on into the dead engine; nothing of the crashed engine is left running.
    probe.release();
    if let Some(canceling) = canceling {
        canceling.abort();
    }
    drop(crashed);

    // Recover.
    let fresh = builder(store.clone(), false)
        .start()
        .await
        .unwrap_or_else(|e| panic!("{cell}: the fresh engine did not start: {e}"));
    let mut task = settle(&fresh, &task_id, &cell, "the recovered task").await;
    if task.status.state == TaskState::InputRequired
        && matches!(row.point, Point::AwaitingInput | Point::Resuming)
    {
        fresh
            .send(Request::operator(reply(&task_id, NOTE)))
            .await
            .unwrap_or_else(|e| panic!("{cell}: the reply after recovery was refused: {e}"));
        task = settle(&fresh, &task_id, &cell, "the answered task").await;
    }
    let journal = store
        .journal(&task_id, 0)
        .await
        .unwrap_or_else(|e| panic!("{cell}: the final journal cannot be read: {e}"));
    fresh.shutdown().await;
    assert_eq!(
        fresh.fold_divergences(),
        Vec::<String>::new(),
        "{cell}: after recovery"
    );

    let expect = &row.expect;
    let counted = (calls_at_crash, probe.calls(), undos_at_crash, probe.undos());
    let promised = (
        expect.calls_at_crash,
        expect.calls,
        expect.undos_at_crash,
        expect.undos,
    );
    assert_eq!(
        counted, promised,
        "{cell}: raw calls (of the effect at the crash, in all, of its compensation at the crash, in all)"
    );
    check_end(&cell, row, &task, &journal);
    let id = effect_id(&journal).unwrap_or_else(|| {
        panic!(
            "{cell}: the effect was never journaled: {}",
            kinds(&journal)
        )
    });
    for (what, keys) in [
        ("effect", probe.keys()),
        ("compensation", probe.undo_keys()),
    ] {
        assert!(
            keys.iter().all(|key| key == id.as_str()),
            "{cell}: every raw {what} call uses the journaled InvocationId {id}: {keys:?}"
        );
    }
    check_final_journal(&cell, row, &id, &journal);
    site.close().await;
}

/// Wait for the task to settle (input-required or finished).
async fn settle(engine: &Engine, task_id: &TaskId, cell: &str, what: &str) -> Task {
    match tokio::time::timeout(LIMIT, engine.wait_settled(&Caller::Operator, task_id)).await {
        Ok(Ok(task)) => task,
        Ok(Err(e)) => panic!("{cell}: waiting for {what} to settle failed: {e}"),
        Err(_) => {
            let state = engine.state(&Caller::Operator, task_id).await;
            panic!("{cell}: {what} did not settle within {LIMIT:?} (its row says {state:?})")
        }
    }
}

/// Wait until an entry matching `wanted` is committed.
async fn committed(
    engine: &Engine,
    task_id: &TaskId,
    cell: &str,
    what: &str,
    wanted: impl Fn(&Entry) -> bool,
) {
    let mut sub = engine
        .subscribe(&Caller::Operator, task_id)
        .await
        .unwrap_or_else(|e| panic!("{cell}: cannot follow the task: {e}"));
    let seen = async {
        while let Some(update) = sub.next().await {
            let record = update
                .unwrap_or_else(|e| panic!("{cell}: the subscription failed: {e}"))
                .record;
            if wanted(&record.entry) {
                return true;
            }
        }
        false
    };
    match tokio::time::timeout(LIMIT, seen).await {
        Ok(true) => {}
        Ok(false) => panic!("{cell}: the task ended without a `{what}` entry"),
        Err(_) => panic!("{cell}: no `{what}` entry was committed within {LIMIT:?}"),
    }
}

/// Wait until the engine halted (the fault hook fired; the engine may still finish its own flush).
async fn halted(engine: &Engine, cell: &str) {
    let deadline = Instant::now() + LIMIT;
    while !engine.is_halted() {
        assert!(
            Instant::now() < deadline,
            "{cell}: the engine did not halt within {LIMIT:?} after its fault hook fired"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn is_effect(entry: &Entry) -> Option<&InvocationId> {
    match entry {
        Entry::CommandIssued { id, cmd, .. }
            if cmd.kind.fingerprint() == format!("tool `{EFFECT}`") =>
        {
            Some(id)
        }
        _ => None,
    }
}

/// The effect's InvocationId, once journaled.
fn effect_id(journal: &[JournalRecord]) -> Option<InvocationId> {
    journal.iter().find_map(|r| is_effect(&r.entry)).cloned()
}

/// The entries' kinds, for messages.
fn kinds(journal: &[JournalRecord]) -> String {
    let kinds: Vec<&str> = journal.iter().map(|r| r.entry.kind_name()).collect();
    kinds.join(", ")
}

/// Position of the first entry at or after `from` matching `wanted`.
fn find(journal: &[JournalRecord], from: usize, wanted: impl Fn(&Entry) -> bool) -> Option<usize> {
    journal
        .iter()
        .skip(from)
        .position(|r| wanted(&r.entry))
        .map(|i| i + from)
}

fn receipt_of(journal: &[JournalRecord], id: &InvocationId) -> Option<usize> {
    find(
        journal,
        0,
        |e| matches!(e, Entry::ReceiptRecorded { receipt } if &receipt.id == id),
    )
}

/// Checks common to both journals: seqs from 1 without gaps, the effect journaled at most once.
fn check_shape(cell: &str, when: &str, journal: &[JournalRecord]) {
    let seqs: Vec<u64> = journal.iter().map(|r| r.seq).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "{cell}: seqs {when} are gap-free from 1"
    );
    let issued = journal
        .iter()
        .filter(|r| is_effect(&r.entry).is_some())
        .count();
    assert!(
        issued <= 1,
        "{cell}: the effect is journaled once {when}, not {issued} times: {}",
        kinds(journal)
    );
}

/// What the store holds at the crash, read before recovery.
fn check_at_crash(cell: &str, row: &Row, journal: &[JournalRecord]) {
    let all = kinds(journal);
    let cell = format!("{cell}: at the crash the store holds [{all}]");
    check_shape(&cell, "at the crash", journal);
    assert!(
        find(journal, 0, |e| matches!(e, Entry::Terminal { .. })).is_none(),
        "{cell}; the task must not have ended"
    );
    let issued = journal.iter().find_map(|r| match &r.entry {
        Entry::CommandIssued { id, cmd, .. } if is_effect(&r.entry).is_some() => {
            Some((id.clone(), cmd.policy))
        }
        _ => None,
    });
    let Some((id, policy)) = issued else {
        assert_eq!(
            row.expect.at_crash,
            AtCrash::NotIssued,
            "{cell}; the effect's command_issued is missing"
        );
        return;
    };
    assert_ne!(
        row.expect.at_crash,
        AtCrash::NotIssued,
        "{cell}; the effect must not be journaled yet"
    );
    assert_eq!(
        policy, row.policy,
        "{cell}; the tool's declared policy is journaled"
    );
    let receipt = receipt_of(journal, &id);
    if row.expect.at_crash == AtCrash::IssuedNoReceipt {
        assert!(receipt.is_none(), "{cell}; the effect must have no receipt");
        return;
    }
    let Some(receipt) = receipt else {
        panic!("{cell}; the effect's receipt is missing");
    };
    let ok = matches!(&journal[receipt].entry, Entry::ReceiptRecorded { receipt } if receipt.outcome.is_ok());
    assert!(ok, "{cell}; the effect's receipt is a success");
    let awaiting = find(journal, receipt, |e| {
        matches!(e, Entry::AwaitingInput { .. })
    });
    match row.expect.at_crash {
        AtCrash::NotIssued | AtCrash::IssuedNoReceipt | AtCrash::Receipted => {}
        AtCrash::InputAwaited => {
            assert!(
                awaiting.is_some(),
                "{cell}; awaiting_input after the receipt"
            )
        }
        AtCrash::ReplyNotDurable => {
            let awaiting = awaiting.unwrap_or_else(|| panic!("{cell}; awaiting_input is missing"));
            assert!(
                find(journal, awaiting, |e| matches!(
                    e,
                    Entry::MessageReceived { .. }
                ))
                .is_none(),
                "{cell}; nothing of the unacknowledged reply is journaled"
            );
        }
        AtCrash::TimerSet => {
            let timer = journal.iter().skip(receipt).find_map(|r| match &r.entry {
                Entry::TimerSet { id, .. } => Some(id.clone()),
                _ => None,
            });
            let timer = timer.unwrap_or_else(|| panic!("{cell}; timer_set after the receipt"));
            assert!(
                receipt_of(journal, &timer).is_none(),
                "{cell}; the timer has not fired"
            );
        }
        AtCrash::Compensating => {
            let decided = find(journal, receipt, |e| {
                matches!(e, Entry::CancelRequested)
                    || matches!(e, Entry::Transitioned { next, .. } if *next == radkit_runtime::journal::TransitionKind::Fail)
            });
            assert!(
                decided.is_some(),
                "{cell}; the decision to compensate is committed"
            );
            assert!(
                find(journal, 0, |e| matches!(e, Entry::Compensated { .. })).is_none(),
                "{cell}; no compensation is recorded yet"
            );
        }
    }
}

/// The final state and its message.
fn check_end(cell: &str, row: &Row, task: &Task, journal: &[JournalRecord]) {
    let text = status_text(task);
    let state = task.status.state;
    let cell = format!(
        "{cell}: the task ended {state:?} with {text:?} after [{}]",
        kinds(journal)
    );
    match row.expect.end {
        End::Completed => {
            let message = match row.point.tail() {
                Tail::Ask => noted(NOTE),
                Tail::Sleep => WOKE.to_owned(),
                Tail::Complete | Tail::Fail => DONE.to_owned(),
            };
            assert_eq!(
                (state, text.as_str()),
                (TaskState::Completed, message.as_str()),
                "{cell}"
            );
        }
        End::OutcomeUnknown => {
            let id = effect_id(journal)
                .map(|id| id.to_string())
                .unwrap_or_default();
            assert_eq!(state, TaskState::Failed, "{cell}");
            assert!(
                text.contains("outcome unknown")
                    && text.contains(&format!("tool `{EFFECT}`"))
                    && !id.is_empty()
                    && text.contains(&id),
                "{cell}; expected \"outcome unknown\" naming tool `{EFFECT}` and invocation {id}"
            );
        }
        End::Canceled => assert_eq!(state, TaskState::Canceled, "{cell}"),
        End::Failed => {
            assert_eq!(
                (state, text.as_str()),
                (TaskState::Failed, REFUSED),
                "{cell}"
            )
        }
    }
}

/// The journal after the recovered task ended.
fn check_final_journal(cell: &str, row: &Row, id: &InvocationId, journal: &[JournalRecord]) {
    let cell = format!("{cell}: the final journal is [{}]", kinds(journal));
    check_shape(&cell, "at the end", journal);
    let receipts = journal
        .iter()
        .filter(|r| matches!(&r.entry, Entry::ReceiptRecorded { receipt } if &receipt.id == id))
        .count();
    let unknown = row.expect.end == End::OutcomeUnknown;
    assert_eq!(
        receipts,
        usize::from(!unknown),
        "{cell}; receipts of the effect"
    );
    let compensated = journal
        .iter()
        .filter(|r| matches!(&r.entry, Entry::Compensated { id: c, .. } if c == id))
        .count();
    assert_eq!(
        compensated,
        usize::from(row.expect.undos > 0),
        "{cell}; compensations journaled"
    );
    let terminal = find(journal, 0, |e| matches!(e, Entry::Terminal { .. }));
    assert_eq!(
        terminal,
        Some(journal.len() - 1),
        "{cell}; one terminal entry, last"
    );
}
