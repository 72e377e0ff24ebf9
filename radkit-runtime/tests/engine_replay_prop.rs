//! Property: for any sequence of events, folding the journaled events through the reducer again
//! rebuilds exactly the states the journal recorded; and a crash at any boundary followed by recovery
//! ends in the same state as a run without a crash.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use common::*;
use proptest::prelude::*;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::Fault;
use radkit_runtime::flow::{
    Cmd, EffectPolicy, Event, FlowSkill, Invoker, SkillInfo, StepCtx, StepError, Transition,
};
use radkit_runtime::journal::Entry;
use radkit_runtime::model::TaskState;
use radkit_runtime::store::MemoryStore;
use radkit_runtime::tools::FnTool;
use radkit_runtime::Engine;
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
    async fn invoke(&self, _: Cmd) -> Result<serde_json::Value, StepError> {
        Err(StepError::msg("a reducer has no in-step effects"))
    }
}

fn effects(calls: Arc<AtomicU32>) -> Effects {
    Effects::new().tool(
        "double",
        FnTool::new(EffectPolicy::Idempotent, move |args, _| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
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

/// Send every op (answering input-required each time), then `done`; crash once at the `crash_at`-th
/// boundary if given, recovering with a fresh engine (which replays from the last checkpoint: the
/// memory store hands out only the first entry and what follows it). Returns the final status text
/// and the journal.
async fn run(
    ops: &[String],
    crash_at: Option<u32>,
    checkpoint_every: u64,
) -> (String, Vec<radkit_runtime::journal::JournalRecord>) {
    let store = MemoryStore::new();
    let calls = Arc::new(AtomicU32::new(0));
    let seen = Arc::new(AtomicU32::new(0));
    let hook = {
        let seen = seen.clone();
        move |_: &Fault| crash_at.is_some_and(|k| seen.fetch_add(1, Ordering::SeqCst) == k)
    };
    let mut engine = Engine::builder(store.clone())
        .skill(Accumulator)
        .effects(effects(calls.clone()))
        .checkpoint_every(checkpoint_every)
        .fault_hook(hook)
        .build()
        .unwrap();
    let mut task_id: Option<String> = None;
    let mut i = 0;
    let all: Vec<String> = ops.iter().cloned().chain(["done".to_owned()]).collect();
    while i < all.len() {
        if engine.is_halted() {
            engine = Engine::builder(store.clone())
                .skill(Accumulator)
                .effects(effects(calls.clone()))
                .checkpoint_every(checkpoint_every)
                .start()
                .await
                .unwrap();
        }
        let message = match &task_id {
            None => user(&all[i]),
            Some(id) => {
                // A halted engine never settles the task: wait for whichever comes first.
                let halted = async {
                    while !engine.is_halted() {
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    }
                };
                let t = tokio::select! {
                    t = settled(&engine, id) => t,
                    () = halted => continue,
                };
                if engine.is_halted() {
                    continue;
                }
                if t.status.state != TaskState::InputRequired {
                    break;
                }
                // After a crash the journal tells whether this op was already delivered.
                let delivered = engine
                    .journal(None, id)
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
        match engine.send(None, None, message).await {
            Ok(id) => {
                task_id.get_or_insert(id);
                i += 1;
            }
            Err(_) if engine.is_halted() => {}
            Err(e) => panic!("send failed: {e}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    if engine.is_halted() {
        engine = Engine::builder(store.clone())
            .skill(Accumulator)
            .effects(effects(calls.clone()))
            .checkpoint_every(checkpoint_every)
            .start()
            .await
            .unwrap();
    }
    let id = task_id.expect("a task was started");
    loop {
        let halted = async {
            while !engine.is_halted() {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        };
        tokio::select! {
            task = settled(&engine, &id) => return (status_text(&task), engine.journal(None, &id).await.unwrap()),
            () = halted => {
                // The crash came while the last op ran: recover and wait again.
                engine = Engine::builder(store.clone()).skill(Accumulator).effects(effects(calls.clone())).checkpoint_every(checkpoint_every).start().await.unwrap();
            }
        }
    }
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn replaying_the_journal_rebuilds_the_same_state(ops in proptest::collection::vec(op(), 0..8)) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let (text, journal) = rt.block_on(run(&ops, None, 1));
        prop_assert!(text.starts_with("total"), "{}", text);
        if ops.iter().any(|op| op.starts_with("hop")) {
            prop_assert!(
                journal.iter().any(|r| matches!(r.entry, Entry::Checkpoint { .. })),
                "a goto with nothing outstanding writes a checkpoint"
            );
        }
        rebuild_matches_journal(&journal)?;
        let seqs: Vec<u64> = journal.iter().map(|r| r.seq).collect();
        prop_assert_eq!(seqs, (1..=journal.len() as u64).collect::<Vec<_>>(), "no gap, no duplicate");
    }

    #[test]
    fn a_crash_anywhere_ends_in_the_same_state(ops in proptest::collection::vec(op(), 1..6), crash_at in 0u32..12, every in 0u64..3) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let (expected, _) = rt.block_on(run(&ops, None, 0));
        let (text, journal) = rt.block_on(run(&ops, Some(crash_at), every));
        prop_assert_eq!(text, expected);
        rebuild_matches_journal(&journal)?;
    }
}
