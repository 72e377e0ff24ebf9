//! Property: for any sequence of events, folding the journaled events through the reducer again
//! rebuilds exactly the states the journal recorded; and a crash at any boundary a run crosses,
//! followed by recovery (replaying from the last checkpoint), ends in the same state with the same
//! journal of effects as a run without a crash, and never runs an effect again once it has a receipt.
//!
//! `RADKIT_PROPTEST_CASES` sets the number of cases (default 256). Failing cases are not persisted
//! (a seed means something else once a generator changes): a shrunk failure is pinned below as a
//! named test with its explicit sequence of events.

use crate::support::common;

use radkit_runtime::engine::{Caller, Request};
use radkit_runtime::model::TaskId;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::*;
use proptest::prelude::*;
use proptest::sample::Index;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::{Boundary, Fault};
use radkit_runtime::engine::{Engine, EngineBuilder};
use radkit_runtime::flow::{
    Cmd, EffectPolicy, Event, FlowSkill, Invoker, SkillInfo, StepCtx, StepError, Transition,
};
use radkit_runtime::journal::{Entry, JournalRecord};
use radkit_runtime::model::TaskState;
use radkit_runtime::store::MemoryStore;
use radkit_runtime::tools::FnTool;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Acc {
    total: i64,
    log: Vec<String>,
    pending: Option<i64>,
}

struct Accumulator;

#[async_trait]
impl FlowSkill for Accumulator {
    type State = Acc;
    fn info(&self) -> SkillInfo {
        SkillInfo::new("acc", "Accumulator")
    }
    fn initial_state(&self) -> Acc {
        Acc {
            total: 0,
            log: Vec::new(),
            pending: None,
        }
    }
    async fn on_event(
        &self,
        mut s: Acc,
        event: Event,
        _: &StepCtx,
    ) -> Result<Transition<Acc>, StepError> {
        s.log.push(event.kind_name().to_owned());
        Ok(match event {
            Event::UserMessage { message } => {
                let text = message.joined_texts();
                let mut words = text.split_whitespace();
                let (op, n) = (
                    words.next().unwrap_or(""),
                    words
                        .next()
                        .and_then(|n| n.parse::<i64>().ok())
                        .unwrap_or(0),
                );
                match op {
                    "add" => {
                        s.total += n;
                        Transition::await_input(s, "next", "next?")
                    }
                    "tool" => {
                        s.pending = Some(n);
                        Transition::to(s).cmd(Cmd::tool("double", serde_json::json!(n)))
                    }
                    "hop" => {
                        s.total -= n;
                        Transition::goto(s)
                    }
                    "done" => Transition::complete(format!("total {}", s.total)),
                    _ => Transition::await_input(s, "next", "unknown op"),
                }
            }
            Event::CommandResult { outcome, .. } => {
                s.total += outcome.ok().and_then(|v| v.as_i64()).unwrap_or(0);
                s.pending = None;
                Transition::await_input(s, "next", "next?")
            }
            Event::Enter => Transition::await_input(s, "next", "hopped"),
            _ => Transition::ignore(),
        })
    }
}

struct NoEffects;
#[async_trait]
impl Invoker for NoEffects {
    async fn invoke(&self, _: u32, _: Cmd) -> Result<serde_json::Value, StepError> {
        Err(StepError::msg("a reducer has no in-step effects"))
    }
}

/// How many times the `double` tool ran, per InvocationId (raw executions, not receipts).
type Executions = Arc<Mutex<BTreeMap<String, u32>>>;

fn effects(executions: Executions) -> Effects {
    Effects::new().tool(
        "double",
        FnTool::new(EffectPolicy::Idempotent, move |args, key| {
            let executions = executions.clone();
            async move {
                *executions
                    .lock()
                    .unwrap()
                    .entry(key.as_str().to_owned())
                    .or_default() += 1;
                Ok(serde_json::json!(args.as_i64().unwrap_or(0) * 2))
            }
        }),
    )
}

fn op() -> impl Strategy<Value = String> {
    prop_oneof![
        (-50i64..50).prop_map(|n| format!("add {n}")),
        (-50i64..50).prop_map(|n| format!("tool {n}")),
        (0i64..9).prop_map(|n| format!("hop {n}")),
        Just("noise".to_owned()),
    ]
}

/// Where the one injected crash of a run happens.
#[derive(Clone, Copy, Debug)]
enum CrashAt {
    /// Nowhere: the run only counts the boundaries it crosses.
    Nowhere,
    /// At the `n`-th call of the fault hook (from 0).
    Call(usize),
    /// At the `n`-th call (from 0) at this boundary.
    Nth(Boundary, usize),
}

/// The fault-hook calls of a run's first engine (every one it made, up to and including the crash),
/// and the index of the call that crashed it.
#[derive(Default)]
struct Boundaries {
    calls: Vec<Fault>,
    crash: Option<usize>,
}

/// What a run did.
struct Run {
    task_id: TaskId,
    state: TaskState,
    text: String,
    journal: Vec<JournalRecord>,
    boundaries: Boundaries,
    executions: BTreeMap<String, u32>,
    /// Where a run's live state differed from the fold of its stored journal after an append.
    divergences: Vec<String>,
}

impl Run {
    /// The fault at which the run crashed.
    fn crash(&self) -> Option<&Fault> {
        self.boundaries.crash.map(|i| &self.boundaries.calls[i])
    }

    /// `id` without the task id (two runs have two tasks; the rest is visit and ordinal).
    fn local<'a>(&self, id: &'a str) -> &'a str {
        id.strip_prefix(self.task_id.as_str()).unwrap_or(id)
    }

    /// Raw executions of `double`, per InvocationId without the task id.
    fn executions(&self) -> BTreeMap<String, u32> {
        self.executions
            .iter()
            .map(|(id, n)| (self.local(id).to_owned(), *n))
            .collect()
    }

    /// The journal of effects, InvocationIds without the task id: every `command_issued` (id and
    /// command) and every receipt (id, attempt and outcome) in journal order, and per id how many
    /// times it was issued and received.
    fn effect_journal(&self) -> EffectJournal {
        let mut journal = EffectJournal::default();
        for record in &self.journal {
            match &record.entry {
                Entry::CommandIssued { id, cmd, .. } => {
                    let id = self.local(id.as_str()).to_owned();
                    journal.per_id.entry(id.clone()).or_default().0 += 1;
                    journal
                        .issued
                        .push((id, serde_json::to_value(cmd).unwrap()));
                }
                Entry::ReceiptRecorded { receipt } => {
                    let id = self.local(receipt.id.as_str()).to_owned();
                    journal.per_id.entry(id.clone()).or_default().1 += 1;
                    let outcome = serde_json::to_value(&receipt.outcome).unwrap();
                    journal.receipts.push((id, receipt.attempt, outcome));
                }
                Entry::AttemptFailed { id, attempt, .. } => {
                    let id = self.local(id.as_str()).to_owned();
                    journal.failed.push((id, *attempt));
                }
                _ => {}
            }
        }
        journal
    }
}

#[derive(Debug, Default, PartialEq)]
struct EffectJournal {
    issued: Vec<(String, serde_json::Value)>,
    receipts: Vec<(String, u32, serde_json::Value)>,
    failed: Vec<(String, u32)>,
    /// Per id: (issued, receipts).
    per_id: BTreeMap<String, (u32, u32)>,
}

fn builder(store: &MemoryStore, executions: &Executions, every: u64) -> EngineBuilder {
    Engine::builder(store.clone())
        .skill(Accumulator)
        .effects(effects(executions.clone()))
        .checkpoint_every(every)
        .check_fold(true)
}

/// A new engine over the same store, as a restarted process (no fault hook: one crash per run).
async fn restart(store: &MemoryStore, executions: &Executions, every: u64) -> Engine {
    builder(store, executions, every).start().await.unwrap()
}

/// Resolves once `engine` halted: a halted engine never settles a task, so every wait races it.
async fn halted(engine: &Engine) {
    while !engine.is_halted() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Send every op (answering input-required each time), then `done`, with checkpoints every `every`
/// visits; crash once where `crash` says, recovering with a fresh engine (which replays from the last
/// checkpoint: the memory store hands out only the first entry and what follows it).
async fn run(ops: &[String], crash: CrashAt, every: u64) -> Run {
    let store = MemoryStore::new();
    let executions = Executions::default();
    let boundaries = Arc::new(Mutex::new(Boundaries::default()));
    let hook = {
        let boundaries = boundaries.clone();
        move |fault: &Fault| {
            let mut b = boundaries.lock().unwrap();
            if b.crash.is_some() {
                return false;
            }
            let n = b.calls.len();
            b.calls.push(fault.clone());
            let now = match crash {
                CrashAt::Nowhere => false,
                CrashAt::Call(k) => n == k,
                CrashAt::Nth(boundary, k) => {
                    fault.boundary == boundary
                        && b.calls.iter().filter(|f| f.boundary == boundary).count() == k + 1
                }
            };
            if now {
                b.crash = Some(n);
            }
            now
        }
    };
    let mut engine = builder(&store, &executions, every)
        .fault_hook(hook)
        .build()
        .unwrap();
    let mut task_id: Option<TaskId> = None;
    // What the fold check found, in every engine of the run.
    let mut divergences = Vec::new();
    let mut i = 0;
    let all: Vec<String> = ops.iter().cloned().chain(["done".to_owned()]).collect();
    while i < all.len() {
        if engine.is_halted() {
            divergences.extend(engine.fold_divergences());
            engine = restart(&store, &executions, every).await;
        }
        let message = match &task_id {
            None => user(&all[i]),
            Some(id) => {
                let t = tokio::select! {
                    t = settled(&engine, id) => t,
                    () = halted(&engine) => continue,
                };
                if engine.is_halted() {
                    continue;
                }
                if t.status.state != TaskState::InputRequired {
                    break;
                }
                // After a crash the journal tells whether this op was already delivered.
                let delivered = engine
                    .journal(&Caller::Operator, id)
                    .await
                    .unwrap()
                    .iter()
                    .filter(|r| matches!(r.entry, Entry::MessageReceived { .. }))
                    .count();
                if delivered > i {
                    i = delivered;
                    continue;
                }
                reply(id, &all[i])
            }
        };
        match engine.send(Request::operator(message)).await {
            Ok(id) => {
                task_id.get_or_insert(id);
                i += 1;
            }
            Err(_) if engine.is_halted() => {}
            Err(e) => panic!("send failed: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let task_id = task_id.expect("a task was started");
    let task = loop {
        if engine.is_halted() {
            // The crash came while the last op ran: recover and wait again.
            divergences.extend(engine.fold_divergences());
            engine = restart(&store, &executions, every).await;
        }
        tokio::select! {
            task = settled(&engine, &task_id) => break task,
            () = halted(&engine) => {}
        }
    };
    let boundaries = std::mem::take(&mut *boundaries.lock().unwrap());
    // An effect cut off by a crash while in flight still completes, on its own time.
    if let Some(fault) = boundaries
        .crash
        .map(|i| &boundaries.calls[i])
        .filter(|f| f.boundary == Boundary::DuringEffect)
    {
        let id = fault.command.as_ref().unwrap().as_str().to_owned();
        for _ in 0..2000 {
            if executions.lock().unwrap().get(&id).copied().unwrap_or(0) >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let executions = executions.lock().unwrap().clone();
    divergences.extend(engine.fold_divergences());
    Run {
        divergences,
        state: task.status.state,
        text: status_text(&task),
        journal: engine.journal(&Caller::Operator, &task_id).await.unwrap(),
        task_id,
        boundaries,
        executions,
    }
}

/// How many times each effect must run in `crashed`, given its crash: once, and twice for the
/// command whose effect ran but whose receipt the crash lost (during the effect, or after it returned
/// and before the receipt). A crash after the receipt is written must not run it again.
fn expected_executions(reference: &Run, crashed: &Run) -> BTreeMap<String, u32> {
    let mut expected = reference.executions();
    if let Some(fault) = crashed.crash() {
        if matches!(
            fault.boundary,
            Boundary::DuringEffect | Boundary::EffectReturned
        ) {
            let id = fault.command.as_ref().expect("a command boundary");
            *expected
                .entry(crashed.local(id.as_str()).to_owned())
                .or_default() += 1;
        }
    }
    expected
}

fn rebuild_matches_journal(
    journal: &[radkit_runtime::journal::JournalRecord],
) -> Result<(), TestCaseError> {
    let ctx = StepCtx::new("t".into(), "c".into(), "s".into(), Arc::new(NoEffects));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut state = Accumulator.initial_state();
    let mut last_event = None;
    for record in journal {
        match &record.entry {
            Entry::Activated {
                event,
                state: recorded,
                ..
            } => {
                prop_assert_eq!(
                    serde_json::to_value(&state).unwrap(),
                    recorded.clone(),
                    "state at visit start"
                );
                last_event = Some(event.clone());
            }
            Entry::Transitioned {
                state: Some(recorded),
                ..
            } => {
                let event = last_event.take().expect("transition follows a visit");
                let t = rt
                    .block_on(Accumulator.on_event(state.clone(), event, &ctx))
                    .unwrap();
                state = match t.next {
                    radkit_runtime::flow::Next::To(s) | radkit_runtime::flow::Next::Goto(s) => s,
                    radkit_runtime::flow::Next::AwaitInput { state, .. } => state,
                    _ => state,
                };
                prop_assert_eq!(
                    serde_json::to_value(&state).unwrap(),
                    recorded.clone(),
                    "state after transition"
                );
            }
            _ => {}
        }
    }
    Ok(())
}

/// The crash property for one case: a crash-free run (checkpoints off) counts the boundaries it
/// crosses; a second run crashes at the `pick`-th of them (checkpoints every `every` visits) and
/// must crash there, end in the same state and text, journal the same effects, and run each effect
/// exactly as often as its crash allows. Returns the crashed run.
fn a_crash_ends_like_no_crash(
    ops: &[String],
    pick: Pick,
    every: u64,
) -> Result<Run, TestCaseError> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let reference = rt.block_on(run(ops, CrashAt::Nowhere, 0));
    let calls = &reference.boundaries.calls;
    prop_assert!(!calls.is_empty(), "a run crosses at least one boundary");
    prop_assert!(
        reference.executions.values().all(|n| *n == 1),
        "without a crash every effect runs once: {:?}",
        reference.executions
    );
    let effects = reference.effect_journal();
    prop_assert!(
        effects.per_id.values().all(|n| *n == (1, 1)),
        "without a crash every command is issued and received once: {:?}",
        effects.per_id
    );
    let crash = match pick {
        Pick::Index(index) => CrashAt::Call(index.index(calls.len())),
        Pick::Nth(boundary, n) => CrashAt::Nth(boundary, n),
    };
    let crashed = rt.block_on(run(ops, crash, every));
    for run in [&reference, &crashed] {
        prop_assert!(
            run.divergences.is_empty(),
            "live state differs from the journal's fold: {:?}",
            run.divergences
        );
    }
    let Some(fault) = crashed.crash() else {
        return Err(TestCaseError::fail(format!(
            "no crash at {crash:?}: the run crossed {} boundaries, the crash-free one {}",
            crashed.boundaries.calls.len(),
            calls.len()
        )));
    };
    // The crash is where it was aimed: up to it, the crashed run crossed the reference's boundaries
    // (kind and command).
    let path = |run: &Run, calls: &[Fault]| -> Vec<(Boundary, Option<String>)> {
        calls
            .iter()
            .map(|f| {
                let id = f
                    .command
                    .as_ref()
                    .map(|id| run.local(id.as_str()).to_owned());
                (f.boundary, id)
            })
            .collect()
    };
    let upto = crashed.boundaries.calls.len();
    prop_assert_eq!(
        path(&crashed, &crashed.boundaries.calls),
        path(&reference, &calls[..upto.min(calls.len())]),
        "the boundaries up to the crash at {:?}",
        fault
    );
    prop_assert_eq!(crashed.state, reference.state);
    prop_assert_eq!(&crashed.text, &reference.text);
    prop_assert_eq!(
        crashed.effect_journal(),
        effects,
        "the journal of effects after a crash at {:?}",
        fault
    );
    prop_assert_eq!(
        crashed.executions(),
        expected_executions(&reference, &crashed),
        "effect executions per id after a crash at {:?}",
        fault
    );
    rebuild_matches_journal(&crashed.journal)?;
    Ok(crashed)
}

/// Which boundary a case crashes at.
#[derive(Clone, Copy, Debug)]
enum Pick {
    /// One of those the crash-free run crossed (the index is scaled to their number).
    Index(Index),
    /// The `n`-th (from 0) of a kind.
    Nth(Boundary, usize),
}

fn cases() -> u32 {
    std::env::var("RADKIT_PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn replaying_the_journal_rebuilds_the_same_state(ops in proptest::collection::vec(op(), 0..8)) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let done = rt.block_on(run(&ops, CrashAt::Nowhere, 1));
        prop_assert!(done.text.starts_with("total"), "{}", done.text);
        if ops.iter().any(|op| op.starts_with("hop")) {
            prop_assert!(
                done.journal.iter().any(|r| matches!(r.entry, Entry::Checkpoint { .. })),
                "a goto with nothing outstanding writes a checkpoint"
            );
        }
        rebuild_matches_journal(&done.journal)?;
        let seqs: Vec<u64> = done.journal.iter().map(|r| r.seq).collect();
        prop_assert_eq!(seqs, (1..=done.journal.len() as u64).collect::<Vec<_>>(), "no gap, no duplicate");
    }

    #[test]
    fn a_crash_anywhere_ends_in_the_same_state(
        ops in proptest::collection::vec(op(), 1..6),
        index in any::<Index>(),
        every in 0u64..3,
    ) {
        a_crash_ends_like_no_crash(&ops, Pick::Index(index), every)?;
    }
}

fn ops(ops: &[&str]) -> Vec<String> {
    ops.iter().map(|op| (*op).to_owned()).collect()
}

/// The seed proptest saved for `a_crash_anywhere_ends_in_the_same_state` before checkpoints existed
/// (`ops = ["tool -39", "hop 7", "add 12"], crash_at = 2`): the third fault-hook call, when the first
/// `double` has returned and its receipt is not written, while the test waits for the task to ask for
/// the next op. It caught the test waiting on the halted engine until its 20 s timeout (fixed in
/// the harness by racing every wait with `halted`). Here with checkpoints off, as then, and on.
#[test]
fn a_crash_after_the_first_effect_returns_while_the_next_op_is_awaited_recovers() {
    let ops = ops(&["tool -39", "hop 7", "add 12"]);
    for every in 0..3 {
        let crashed =
            a_crash_ends_like_no_crash(&ops, Pick::Nth(Boundary::EffectReturned, 0), every)
                .unwrap_or_else(|e| panic!("checkpoints every {every}: {e}"));
        assert_eq!(crashed.boundaries.crash, Some(2), "the seed's crash_at");
        assert_eq!(crashed.text, "total -73");
    }
}

/// A crash at each command boundary of a middle `double` (after an earlier one has its receipt, and
/// before a later one): the effect runs again only if the crash lost its receipt, never after.
#[test]
fn a_crash_at_each_command_boundary_runs_no_effect_again_after_its_receipt() {
    let ops = ops(&["tool 5", "add 1", "tool 7", "hop 2", "tool 9"]);
    for boundary in [
        Boundary::CommandJournaled,
        Boundary::DuringEffect,
        Boundary::EffectReturned,
        Boundary::ReceiptWritten,
    ] {
        for every in 0..3 {
            let crashed = a_crash_ends_like_no_crash(&ops, Pick::Nth(boundary, 1), every)
                .unwrap_or_else(|e| panic!("{boundary:?}, checkpoints every {every}: {e}"));
            assert_eq!(crashed.text, "total 41");
        }
    }
}
