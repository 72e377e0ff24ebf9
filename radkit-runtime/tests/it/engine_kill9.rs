//! Real `kill -9`, one test per effect policy: the test binary re-executes itself as a child process
//! (the ignored entry point `child_process_runs_until_killed`, told its case by an environment
//! variable), which runs a task on a SQLite file until it is inside the effect (or inside the
//! compensation of a canceled task) and says so with a marker file. The parent kills it with SIGKILL,
//! reads the journal from the file as the next process finds it, recovers with a fresh engine over
//! the same file, and asserts every raw call of the tool (the child's and its own, read from a file
//! the tool appends to), the key each call got, the journal at the kill and at the end, and how the
//! task ends. The table `CASES` is the specification.
#![cfg(unix)]

use radkit_runtime::engine::Caller;
use radkit_runtime::model::TaskId;
use std::path::PathBuf;

use radkit_runtime::flow::EffectPolicy;
use radkit_runtime::journal::Entry;
use radkit_runtime::model::TaskState;
use radkit_runtime::store::{Store, TaskQuery};

use crate::support::common;
mod kill9;

use common::{status_text, within, PATIENCE};
use kill9::calls::{calls, processes_and_functions};
use kill9::child::Child;
use kill9::journal::{command_of, compensations_of, issued, receipts_of, timeline};
use kill9::skill::{engine, open_store};
use kill9::{Case, End, Kill, Process, Then, CASE_VAR, CHILD_TEST, DIR_VAR, DONE, EFFECT, PREPARE};

#[rustfmt::skip]
const CASES: &[Case] = &[
    // The command is durable, its receipt is not: reissued with the same InvocationId, so the effect
    // runs twice with one key (the provider deduplicates on it).
    Case { name: "idempotent", policy: EffectPolicy::Idempotent, then: Then::Complete,
           kill: Kill::DuringEffect, at_kill: &["child prepare", "child effect"],
           in_all: &["child prepare", "child effect", "parent effect"], end: End::Completed },
    Case { name: "at_least_once", policy: EffectPolicy::AtLeastOnce, then: Then::Complete,
           kill: Kill::DuringEffect, at_kill: &["child prepare", "child effect"],
           in_all: &["child prepare", "child effect", "parent effect"], end: End::Completed },
    // Never reissued: the task fails "outcome unknown" and the tool is not called again.
    Case { name: "at_most_once", policy: EffectPolicy::AtMostOnce, then: Then::Complete,
           kill: Kill::DuringEffect, at_kill: &["child prepare", "child effect"],
           in_all: &["child prepare", "child effect"], end: End::OutcomeUnknown },
    // The effect succeeded, the task was canceled and the compensation cut off: it runs again with
    // the effect's InvocationId and the task ends canceled; the effect itself never runs again.
    Case { name: "compensate", policy: EffectPolicy::Compensate, then: Then::Ask,
           kill: Kill::DuringCompensation, at_kill: &["child prepare", "child effect", "child undo"],
           in_all: &["child prepare", "child effect", "child undo", "parent undo"],
           end: End::Canceled },
    // The same with the question asked by an `await_input` transition.
    Case { name: "compensate_after_await_input", policy: EffectPolicy::Compensate,
           then: Then::AwaitInput, kill: Kill::DuringCompensation,
           at_kill: &["child prepare", "child effect", "child undo"],
           in_all: &["child prepare", "child effect", "child undo", "parent undo"],
           end: End::Canceled },
];

#[test]
async fn kill_9_during_an_idempotent_effect_reissues_it_with_the_same_invocation_id() {
    kill_9("idempotent").await;
}

#[test]
async fn kill_9_during_an_at_least_once_effect_reissues_it_with_the_same_invocation_id() {
    kill_9("at_least_once").await;
}

#[test]
async fn kill_9_during_an_at_most_once_effect_fails_the_task_outcome_unknown_without_calling_again()
{
    kill_9("at_most_once").await;
}

#[test]
async fn kill_9_during_the_compensation_of_a_canceled_task_runs_it_again_and_the_task_is_canceled()
{
    kill_9("compensate").await;
}

#[test]
async fn kill_9_during_the_compensation_of_a_task_canceled_at_await_input_runs_it_again() {
    kill_9("compensate_after_await_input").await;
}

/// The child process: run the case's task until the parent kills it at the case's kill point.
#[test]
#[ignore = "entry point of the child process of the kill_9_* tests (selected by RADKIT_KILL9_CASE)"]
async fn child_process_runs_until_killed() {
    let (Ok(dir), Ok(name)) = (std::env::var(DIR_VAR), std::env::var(CASE_VAR)) else {
        eprintln!("{CHILD_TEST} runs only as the child of a kill_9_* test; nothing to do");
        return;
    };
    kill9::child::run(case(&name), &PathBuf::from(dir)).await;
}

fn case(name: &str) -> &'static Case {
    CASES
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case named `{name}`"))
}

// ---- the parent ----

/// Run case `name`: kill the child at its kill point, check the file, recover, check the end.
async fn kill_9(name: &str) {
    let case = case(name);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut child = Child::spawn(case, dir.path());
    child.reached(case.kill).await;
    child.kill_9();
    let calls_at_kill = calls(dir.path());
    assert_eq!(
        processes_and_functions(&calls_at_kill),
        case.at_kill,
        "{name}: raw calls at the kill"
    );

    // The file as the next process finds it, before any recovery.
    let store = open_store(dir.path());
    let tasks = store
        .list(TaskQuery::default())
        .await
        .expect("list the tasks");
    assert_eq!(tasks.len(), 1, "{name}: one task in the file");
    let task_id = TaskId::from(tasks[0].id.clone());
    let at_kill = store
        .journal(&task_id, 0)
        .await
        .expect("read the journal at the kill");
    let effect_id = command_of(&at_kill, EFFECT).unwrap_or_else(|| {
        panic!(
            "{name}: `effect` is journaled at the kill: {}",
            timeline(&at_kill)
        )
    });
    let prepare_id = command_of(&at_kill, PREPARE).unwrap_or_else(|| {
        panic!(
            "{name}: `prepare` is journaled at the kill: {}",
            timeline(&at_kill)
        )
    });
    assert_eq!(
        receipts_of(&at_kill, &prepare_id),
        1,
        "{name}: the receipt of `prepare` is durable"
    );
    match case.kill {
        Kill::DuringEffect => assert_eq!(
            receipts_of(&at_kill, &effect_id),
            0,
            "{name}: the command is journaled without a receipt at the kill: {}",
            timeline(&at_kill)
        ),
        Kill::DuringCompensation => {
            assert_eq!(
                receipts_of(&at_kill, &effect_id),
                1,
                "{name}: the effect's receipt is durable"
            );
            assert!(
                at_kill
                    .iter()
                    .any(|r| matches!(r.entry, Entry::CancelRequested)),
                "{name}: the cancel is journaled at the kill: {}",
                timeline(&at_kill)
            );
            assert_eq!(
                compensations_of(&at_kill, &effect_id),
                [false; 0],
                "{name}: no compensation is journaled at the kill: {}",
                timeline(&at_kill)
            );
        }
    }

    // Recover from the file.
    let engine = engine(case, dir.path(), Process::Parent, store)
        .start()
        .await
        .expect("start the recovering engine");
    let task = match tokio::time::timeout(
        PATIENCE,
        engine.wait_settled(&Caller::Operator, &task_id),
    )
    .await
    {
        Ok(task) => task.expect("wait_settled"),
        Err(_) => {
            let journal = engine
                .journal(&Caller::Operator, &task_id)
                .await
                .unwrap_or_default();
            panic!(
                "{name}: timed out after {PATIENCE:?} waiting for the recovered task to end {:?}; \
                 its journal:\n{}",
                case.end,
                timeline(&journal)
            );
        }
    };
    let calls_in_all = calls(dir.path());
    let journal = within(
        PATIENCE,
        "the final journal",
        engine.journal(&Caller::Operator, &task_id),
    )
    .await
    .expect("read the final journal");
    engine.shutdown().await;

    assert_eq!(
        processes_and_functions(&calls_in_all),
        case.in_all,
        "{name}: raw calls in all"
    );
    for (process, function, key) in &calls_in_all {
        let expected = if function == PREPARE {
            &prepare_id
        } else {
            &effect_id
        };
        assert_eq!(
            key,
            expected.as_str(),
            "{name}: the {process}'s call of {function} got the journaled InvocationId"
        );
    }
    assert_eq!(
        journal
            .iter()
            .filter(|r| issued(r, EFFECT).is_some())
            .count(),
        1,
        "{name}: `effect` is journaled once (reissued under its id, never as a new command)"
    );
    match case.end {
        End::Completed => {
            assert_eq!(
                task.status.state,
                TaskState::Completed,
                "{name}: {:?}",
                task.status
            );
            assert_eq!(status_text(&task), DONE, "{name}");
            assert_eq!(
                receipts_of(&journal, &effect_id),
                1,
                "{name}: one receipt for `effect`"
            );
        }
        End::OutcomeUnknown => {
            assert_eq!(
                task.status.state,
                TaskState::Failed,
                "{name}: {:?}",
                task.status
            );
            let text = status_text(&task);
            let expected = format!("outcome unknown: tool `{EFFECT}` (invocation {effect_id})");
            assert!(
                text.contains(&expected),
                "{name}: the failure names the command: {text}"
            );
        }
        End::Canceled => {
            assert_eq!(
                task.status.state,
                TaskState::Canceled,
                "{name}: {:?}",
                task.status
            );
            assert_eq!(
                compensations_of(&journal, &effect_id),
                [true],
                "{name}: one compensation journaled, and it succeeded: {}",
                timeline(&journal)
            );
        }
    }
}
