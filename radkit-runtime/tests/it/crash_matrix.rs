//! The crash matrix: every effect policy x every crash point x every way a skill issues an effect
//! (an in-step `ctx.tool(..)` call, the same call in a parallel batch beside another tool's, and a
//! transition command) x every store (memory, SQLite reopened
//! from its file, Postgres in a fresh schema). Each cell runs one task until the crash, halts that
//! engine for good (like `kill -9`: nothing more is journaled), reads the journal from the store before
//! any recovery, starts a fresh engine over the reopened store, drives the task to its end, and
//! asserts the raw number of effect (and compensation) executions at the crash and in all, the key
//! each execution got, the journal at the crash and at the end, and the final state — for
//! `AtMostOnce` the "outcome unknown" failure naming the command. A failure names its cell:
//! `sqlite::at_most_once::after_effect_before_receipt::transition`.
//!
//! The table below is the whole specification; `matrix/` holds the probe tool, the two skills, the
//! stores and the runner of one cell. Postgres cells are reported ignored when no server answers
//! (see `services`). Rows marked as known engine bugs run only with `RADKIT_MATRIX_KNOWN_BUGS=1`.

use futures::future::LocalBoxFuture;
use radkit_runtime::flow::EffectPolicy::{AtLeastOnce, AtMostOnce, Compensate, Idempotent};

use matrix::AtCrash::*;
use matrix::End::*;
use matrix::Point::*;
use matrix::{row, run, Backend, Form, Row, EVERY_FORM};

mod matrix;
use crate::support::services;

/// What each policy promises at each crash point, in both issue forms (`EVERY_FORM`). `(a, b)` counts raw
/// calls of the effect: `a` at the crash, `b` in all once the recovered task ended.
#[rustfmt::skip]
const TABLE: &[Row] = &[
    // The skill is about to issue the effect: nothing of it is durable, so it runs once after
    // recovery, whatever its policy (an at-most-once effect that never started is not "unknown").
    row(Idempotent,  BeforeJournaled, EVERY_FORM, NotIssued, (0, 1), Completed),
    row(AtLeastOnce, BeforeJournaled, EVERY_FORM, NotIssued, (0, 1), Completed),
    row(AtMostOnce,  BeforeJournaled, EVERY_FORM, NotIssued, (0, 1), Completed),
    row(Compensate,  BeforeJournaled, EVERY_FORM, NotIssued, (0, 1), Completed),
    // The command is durable, the effect not started: reissued with the same InvocationId, except
    // at-most-once, which never runs and fails "outcome unknown".
    row(Idempotent,  AfterJournaled, EVERY_FORM, IssuedNoReceipt, (0, 1), Completed),
    row(AtLeastOnce, AfterJournaled, EVERY_FORM, IssuedNoReceipt, (0, 1), Completed),
    row(AtMostOnce,  AfterJournaled, EVERY_FORM, IssuedNoReceipt, (0, 0), OutcomeUnknown),
    row(Compensate,  AfterJournaled, EVERY_FORM, IssuedNoReceipt, (0, 1), Completed),
    // The effect is in flight (it completes after the crash): reissued, so it runs twice with one
    // key; at-most-once ran once and fails "outcome unknown".
    row(Idempotent,  DuringEffect, EVERY_FORM, IssuedNoReceipt, (1, 2), Completed),
    row(AtLeastOnce, DuringEffect, EVERY_FORM, IssuedNoReceipt, (1, 2), Completed),
    row(AtMostOnce,  DuringEffect, EVERY_FORM, IssuedNoReceipt, (1, 1), OutcomeUnknown),
    row(Compensate,  DuringEffect, EVERY_FORM, IssuedNoReceipt, (1, 2), Completed),
    // The effect returned, its receipt is not written: the same as during the effect.
    row(Idempotent,  EffectReturned, EVERY_FORM, IssuedNoReceipt, (1, 2), Completed),
    row(AtLeastOnce, EffectReturned, EVERY_FORM, IssuedNoReceipt, (1, 2), Completed),
    row(AtMostOnce,  EffectReturned, EVERY_FORM, IssuedNoReceipt, (1, 1), OutcomeUnknown),
    row(Compensate,  EffectReturned, EVERY_FORM, IssuedNoReceipt, (1, 2), Completed),
    // The result reached the skill and nothing was flushed since: other receipts are still buffered
    // (output commit) and lost, so the effect is reissued; an at-most-once receipt is flushed at
    // once, so that effect is not repeated and the task completes.
    row(Idempotent,  ResultArrived, EVERY_FORM, IssuedNoReceipt, (1, 2), Completed),
    row(AtLeastOnce, ResultArrived, EVERY_FORM, IssuedNoReceipt, (1, 2), Completed),
    row(AtMostOnce,  ResultArrived, EVERY_FORM, Receipted,       (1, 1), Completed),
    row(Compensate,  ResultArrived, EVERY_FORM, IssuedNoReceipt, (1, 2), Completed),
    // The receipt is durable: replay short-circuits, the effect never runs again.
    row(Idempotent,  ReceiptWritten, EVERY_FORM, Receipted, (1, 1), Completed),
    row(AtLeastOnce, ReceiptWritten, EVERY_FORM, Receipted, (1, 1), Completed),
    row(AtMostOnce,  ReceiptWritten, EVERY_FORM, Receipted, (1, 1), Completed),
    row(Compensate,  ReceiptWritten, EVERY_FORM, Receipted, (1, 1), Completed),
    // Waiting for input: the receipt is durable; the task waits again and completes on the reply.
    row(Idempotent,  AwaitingInput, EVERY_FORM, InputAwaited, (1, 1), Completed),
    row(AtLeastOnce, AwaitingInput, EVERY_FORM, InputAwaited, (1, 1), Completed),
    row(AtMostOnce,  AwaitingInput, EVERY_FORM, InputAwaited, (1, 1), Completed),
    row(Compensate,  AwaitingInput, EVERY_FORM, InputAwaited, (1, 1), Completed),
    // The reply is taken, not yet durable (it commits with the resumed step's first append): its
    // send is refused, nothing of it is journaled, and the task completes on the reply sent again.
    row(Idempotent,  Resuming, EVERY_FORM, ReplyNotDurable, (1, 1), Completed),
    row(AtLeastOnce, Resuming, EVERY_FORM, ReplyNotDurable, (1, 1), Completed),
    row(AtMostOnce,  Resuming, EVERY_FORM, ReplyNotDurable, (1, 1), Completed),
    row(Compensate,  Resuming, EVERY_FORM, ReplyNotDurable, (1, 1), Completed),
    // Sleeping on a durable timer: the fresh engine fires it; the effect before it is not repeated.
    row(Idempotent,  TimerWait, EVERY_FORM, TimerSet, (1, 1), Completed),
    row(AtLeastOnce, TimerWait, EVERY_FORM, TimerSet, (1, 1), Completed),
    row(AtMostOnce,  TimerWait, EVERY_FORM, TimerSet, (1, 1), Completed),
    row(Compensate,  TimerWait, EVERY_FORM, TimerSet, (1, 1), Completed),
    // The first attempt failed transiently and the retry is in flight: after recovery the retry
    // carries the same key as both attempts before the crash (every cell checks every call's key).
    row(Idempotent,  RetryAfterTransient, EVERY_FORM, IssuedNoReceipt, (2, 3), Completed),
    row(AtLeastOnce, RetryAfterTransient, EVERY_FORM, IssuedNoReceipt, (2, 3), Completed),
    row(AtMostOnce,  RetryAfterTransient, EVERY_FORM, IssuedNoReceipt, (2, 2), OutcomeUnknown),
    row(Compensate,  RetryAfterTransient, EVERY_FORM, IssuedNoReceipt, (2, 3), Completed),
    // A compensation cut off by a crash runs again with the same key (`.undos(at crash, in all)`),
    // and the task ends as decided before the crash.
    row(Compensate, CompensationAfterCancel,  EVERY_FORM, Compensating, (1, 1), Canceled).undos(1, 2),
    row(Compensate, CompensationAfterFailure, EVERY_FORM, Compensating, (1, 1), Failed).undos(1, 2),
];

/// The body of one trial. `services` runs plain `fn`s, so the cell is in const parameters.
type Body = fn() -> LocalBoxFuture<'static, ()>;

fn body<const ROW: usize, const FORM: usize, const STORE: usize>() -> LocalBoxFuture<'static, ()> {
    Box::pin(run::cell(&TABLE[ROW], Form::ALL[FORM], Backend::ALL[STORE]))
}

/// Tests left out because a known engine bug breaks them: (the bug, the trial).
type Skipped = Vec<(&'static str, String)>;

/// Whether the rows marked as known engine bugs run.
fn known_bugs() -> bool {
    std::env::var("RADKIT_MATRIX_KNOWN_BUGS").is_ok_and(|v| v == "1")
}

/// Add the trials of row `ROW`: one per issue form it lists and store.
fn push_row<const ROW: usize>(tests: &mut Vec<services::Test>, skipped: &mut Skipped) {
    let bodies: [[Body; 3]; 3] = [
        [body::<ROW, 0, 0>, body::<ROW, 0, 1>, body::<ROW, 0, 2>],
        [body::<ROW, 1, 0>, body::<ROW, 1, 1>, body::<ROW, 1, 2>],
        [body::<ROW, 2, 0>, body::<ROW, 2, 1>, body::<ROW, 2, 2>],
    ];
    let row = &TABLE[ROW];
    for (f, form) in Form::ALL.into_iter().enumerate() {
        if !row.forms.contains(&form) {
            continue;
        }
        for (s, backend) in Backend::ALL.into_iter().enumerate() {
            let name = format!("{}::{}", backend.name(), row.name(form));
            if let (Some(bug), false) = (row.bug, known_bugs()) {
                skipped.push((bug, name));
                continue;
            }
            let needs = match backend {
                Backend::Postgres => services::Needs::Postgres,
                Backend::Memory | Backend::Sqlite => services::Needs::Nothing,
            };
            tests.push(services::multi_thread(name, needs, bodies[f][s]));
        }
    }
}

/// True when `rows` is `0, 1, 2, …`.
const fn in_order(rows: &[usize]) -> bool {
    let mut i = 0;
    while i < rows.len() {
        if rows[i] != i {
            return false;
        }
        i += 1;
    }
    true
}

/// `push_row` for every row index, checked at compile time to be exactly the table's.
macro_rules! every_row {
    ($tests:ident, $skipped:ident; $($row:literal)*) => {
        const _: () = assert!(
            in_order(&[$($row),*]) && [$($row),*].len() == TABLE.len(),
            "list every row index of TABLE, in order, in `main`"
        );
        $(push_row::<$row>(&mut $tests, &mut $skipped);)*
    };
}

inventory::submit! {
    crate::support::harness::Suite { module: module_path!(), tests: cells }
}

/// Every cell of the table (the known-bug rows only with `RADKIT_MATRIX_KNOWN_BUGS=1`), and the race
/// that is no cell.
fn cells() -> Vec<services::Test> {
    let (mut tests, mut skipped) = (Vec::new(), Vec::new());
    every_row!(tests, skipped;
        0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20
        21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41);
    let race: Body = || Box::pin(matrix::bugs::cancel_right_after_the_task_settled());
    tests.push(services::multi_thread(
        "postgres::cancel_right_after_the_task_settled",
        services::Needs::Postgres,
        race,
    ));
    if !skipped.is_empty() {
        let mut note = format!(
            "\nnote: {} crash-matrix tests state what a known engine bug breaks and do not run \
             (RADKIT_MATRIX_KNOWN_BUGS=1 runs them, and they fail):",
            skipped.len()
        );
        let mut bugs: Vec<&str> = skipped.iter().map(|(bug, _)| *bug).collect();
        bugs.dedup();
        for bug in bugs {
            note.push_str(&format!("\n  {bug}:"));
            for (_, name) in skipped.iter().filter(|(b, _)| *b == bug) {
                note.push_str(&format!("\n    {name}"));
            }
        }
        eprintln!("{note}\n");
    }
    tests
}
