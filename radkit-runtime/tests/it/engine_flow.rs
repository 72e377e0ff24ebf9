//! Engine behaviour without crashes: retries, guards, panics, cancel with compensation, durable timers,
//! determinism and version checks, input validation.

use crate::support::common;

use radkit_runtime::engine::{Caller, Request};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::*;
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::{Boundary, Fault};
use radkit_runtime::engine::{Engine, EngineError};
use radkit_runtime::flow::step_table::{goto, Step, StepInput, StepTable};
use radkit_runtime::flow::{
    Cmd, EffectError, EffectPolicy, Event, FlowSkill, RetryPolicy, SkillInfo, StepCtx, StepError,
    StepResult, Transition,
};
use radkit_runtime::journal::Entry;
use radkit_runtime::model::TaskState;
use radkit_runtime::store::{MemoryStore, Store};
use radkit_runtime::tools::FnTool;

struct One;

fn call_flaky<'a>(_: &'a One, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let retry = RetryPolicy {
            max_attempts: 4,
            initial_backoff_ms: 1,
            max_backoff_ms: 5,
        };
        let out: String = ctx.tool("flaky").retry(retry).call(()).await?;
        ctx.complete(out, vec![])
    })
}
static FLAKY_STEPS: &[Step<One>] = &[Step::new("call", call_flaky).start().takes_user_message()];

#[test]
async fn transient_errors_are_retried_and_every_attempt_is_journaled() {
    let (tool, count) = flaky(2, true);
    let skill = StepTable::new(SkillInfo::new("flaky", "Flaky"), One, FLAKY_STEPS).unwrap();
    let engine = Engine::builder(MemoryStore::new())
        .skill(skill)
        .effects(Effects::new().tool("flaky", tool))
        .start()
        .await
        .unwrap();
    let id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = settled(&engine, &id).await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    assert_eq!(*count.lock().unwrap(), 3);
    let journal = engine.journal(&Caller::Operator, &id).await.unwrap();
    let failed: Vec<u32> = journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::AttemptFailed { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect();
    assert_eq!(failed, vec![1, 2]);
    let receipt_attempt = journal.iter().find_map(|r| match &r.entry {
        Entry::ReceiptRecorded { receipt } => Some(receipt.attempt),
        _ => None,
    });
    assert_eq!(receipt_attempt, Some(3));
}

#[test]
async fn permanent_errors_are_not_retried_and_fail_the_task() {
    let (tool, count) = flaky(10, false);
    let skill = StepTable::new(SkillInfo::new("flaky", "Flaky"), One, FLAKY_STEPS).unwrap();
    let engine = Engine::builder(MemoryStore::new())
        .skill(skill)
        .effects(Effects::new().tool("flaky", tool))
        .start()
        .await
        .unwrap();
    let id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = settled(&engine, &id).await;
    assert_eq!(task.status.state, TaskState::Failed);
    assert!(
        status_text(&task).contains("card declined"),
        "{}",
        status_text(&task)
    );
    assert_eq!(*count.lock().unwrap(), 1);
}

struct Looper;
fn spin<'a>(_: &'a Looper, _: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let n: u64 = input.payload()?;
        goto("spin", n + 1)
    })
}
static LOOP_STEPS: &[Step<Looper>] = &[Step::new("spin", spin)
    .start()
    .takes_user_message()
    .goes_to(&["spin"])];

#[test]
async fn max_steps_guard_fails_a_runaway_loop() {
    let skill = StepTable::new(SkillInfo::new("loop", "Loop"), Looper, LOOP_STEPS).unwrap();
    let engine = Engine::builder(MemoryStore::new())
        .skill(skill)
        .max_steps(50)
        .start()
        .await
        .unwrap();
    let id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = settled(&engine, &id).await;
    assert_eq!(task.status.state, TaskState::Failed);
    assert!(
        status_text(&task).contains("max_steps"),
        "{}",
        status_text(&task)
    );
}

struct Panicky;
fn boom<'a>(_: &'a Panicky, _: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { panic!("kaboom: token sk-live-123 in /srv/secrets.toml") })
}
static PANIC_STEPS: &[Step<Panicky>] = &[Step::new("boom", boom).start().takes_user_message()];

#[test]
async fn a_panicking_step_fails_its_task_not_the_process() {
    let skill = StepTable::new(SkillInfo::new("panic", "Panic"), Panicky, PANIC_STEPS).unwrap();
    let engine = Engine::builder(MemoryStore::new())
        .skill(skill)
        .start()
        .await
        .unwrap();
    let id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = settled(&engine, &id).await;
    assert_eq!(task.status.state, TaskState::Failed);
    // The panic's text is internal: it goes to the server log, never to the client.
    assert_eq!(
        status_text(&task),
        "step `boom` of skill `panic` panicked; see the server log"
    );
    let journal = engine.journal(&Caller::Operator, &id).await.unwrap();
    let written = serde_json::to_string(&journal).unwrap();
    assert!(
        !written.contains("kaboom") && !written.contains("sk-live"),
        "the panic payload reached the journal: {written}"
    );
    // The engine still serves other tasks.
    let id2 = engine.send(Request::operator(user("again"))).await.unwrap();
    assert_eq!(settled(&engine, &id2).await.status.state, TaskState::Failed);
}

struct Saga;
fn book<'a>(_: &'a Saga, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let _: serde_json::Value = ctx.tool("hotel").call("rome").await?;
        let _: serde_json::Value = ctx.tool("flight").call("fco").await?;
        radkit_runtime::flow::step_table::await_input("ok", "Confirm?", ())
    })
}
fn confirm<'a>(_: &'a Saga, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { ctx.complete("booked", vec![]) })
}
static SAGA_STEPS: &[Step<Saga>] = &[
    Step::new("book", book).start().takes_user_message(),
    Step::new("confirm", confirm).resume_from("book"),
];

fn saga_tool(name: &'static str, undone: Arc<Mutex<Vec<String>>>) -> FnTool {
    FnTool::new(EffectPolicy::Compensate, move |args, _| async move {
        Ok(serde_json::json!({ "booked": name, "args": args }))
    })
    .compensate_with(move |_args, output, _key| {
        let undone = undone.clone();
        async move {
            undone
                .lock()
                .unwrap()
                .push(output["booked"].as_str().unwrap_or_default().to_owned());
            Ok(serde_json::Value::Null)
        }
    })
}

#[test]
async fn cancel_runs_compensations_newest_first_and_journals_each() {
    let undone = Arc::new(Mutex::new(Vec::new()));
    let effects = Effects::new()
        .tool("hotel", saga_tool("hotel", undone.clone()))
        .tool("flight", saga_tool("flight", undone.clone()));
    let skill = StepTable::new(SkillInfo::new("saga", "Saga"), Saga, SAGA_STEPS).unwrap();
    let engine = Engine::builder(MemoryStore::new())
        .skill(skill)
        .effects(effects)
        .start()
        .await
        .unwrap();
    let id = engine.send(Request::operator(user("trip"))).await.unwrap();
    assert_eq!(
        settled(&engine, &id).await.status.state,
        TaskState::InputRequired
    );
    let task = within(
        PATIENCE,
        "the cancel to finish",
        engine.cancel(&Caller::Operator, &id),
    )
    .await
    .unwrap();
    assert_eq!(task.status.state, TaskState::Canceled);
    assert_eq!(
        *undone.lock().unwrap(),
        vec!["flight".to_owned(), "hotel".to_owned()]
    );
    let journal = engine.journal(&Caller::Operator, &id).await.unwrap();
    assert_eq!(
        journal
            .iter()
            .filter(|r| matches!(r.entry, Entry::Compensated { .. }))
            .count(),
        2
    );
    match within(
        PATIENCE,
        "a second cancel",
        engine.cancel(&Caller::Operator, &id),
    )
    .await
    {
        Err(EngineError::TaskFinished {
            state: TaskState::Canceled,
            ..
        }) => {}
        other => panic!("a finished task is not cancelable: {other:?}"),
    }
    match engine.send(Request::operator(reply(&id, "late"))).await {
        Err(EngineError::TaskFinished { .. }) => {}
        other => panic!("a message to a finished task is an error: {other:?}"),
    }
}

struct Sleeper;
fn nap<'a>(_: &'a Sleeper, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        ctx.progress("napping").await?;
        ctx.sleep(Duration::from_millis(300)).await?;
        ctx.complete("rested", vec![])
    })
}
static SLEEP_STEPS: &[Step<Sleeper>] = &[Step::new("nap", nap).start().takes_user_message()];

#[test]
async fn durable_timer_fires_after_restart() {
    let store = MemoryStore::new();
    let skill = || StepTable::new(SkillInfo::new("sleep", "Sleep"), Sleeper, SLEEP_STEPS).unwrap();
    let hook = |f: &Fault| f.boundary == Boundary::TimerWait;
    let engine = Engine::builder(store.clone())
        .skill(skill())
        .fault_hook(hook)
        .build()
        .unwrap();
    let id = engine.send(Request::operator(user("zz"))).await.unwrap();
    wait_halted(&engine).await;
    drop(engine);
    let row = store.task(&id).await.unwrap().unwrap();
    assert!(row.wake_at_ms.is_some(), "the timer is a row, not a thread");
    let engine = Engine::builder(store.clone())
        .skill(skill())
        .start()
        .await
        .unwrap();
    let task = settled(&engine, &id).await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    let journal = engine.journal(&Caller::Operator, &id).await.unwrap();
    assert_eq!(
        journal
            .iter()
            .filter(|r| matches!(r.entry, Entry::Progress { .. }))
            .count(),
        1,
        "progress not repeated on replay"
    );
}

struct Versioned(&'static str, &'static str);

#[async_trait]
impl FlowSkill for Versioned {
    type State = u32;
    fn info(&self) -> SkillInfo {
        SkillInfo::new("versioned", "Versioned").version(self.0)
    }
    fn initial_state(&self) -> u32 {
        0
    }
    async fn on_event(
        &self,
        state: u32,
        event: Event,
        ctx: &StepCtx,
    ) -> Result<Transition<u32>, StepError> {
        match event {
            Event::UserMessage { .. } if state == 0 => {
                let _: serde_json::Value = ctx.tool(self.1).call(()).await?;
                Ok(Transition::await_input(1, "more", "more?"))
            }
            Event::UserMessage { .. } => Ok(Transition::complete("done")),
            _ => Ok(Transition::ignore()),
        }
    }
}

fn counting(counter: Arc<AtomicU32>) -> FnTool {
    FnTool::new(EffectPolicy::Idempotent, move |_, _| {
        let c = counter.clone();
        async move {
            c.fetch_add(1, Ordering::SeqCst);
            Ok(serde_json::Value::Null)
        }
    })
}

#[test]
async fn resuming_on_an_incompatible_version_is_a_clear_error() {
    let store = MemoryStore::new();
    let c = Arc::new(AtomicU32::new(0));
    let effects = Effects::new().tool("a", counting(c.clone()));
    let engine = Engine::builder(store.clone())
        .skill(Versioned("1", "a"))
        .effects(effects.clone())
        .start()
        .await
        .unwrap();
    let id = engine.send(Request::operator(user("go"))).await.unwrap();
    assert_eq!(
        settled(&engine, &id).await.status.state,
        TaskState::InputRequired
    );
    // The old version's process is gone before the new one starts.
    drop(engine);
    let engine = Engine::builder(store.clone())
        .skill(Versioned("2", "a"))
        .effects(effects)
        .start()
        .await
        .unwrap();
    match engine.send(Request::operator(reply(&id, "more"))).await {
        Err(e @ EngineError::VersionMismatch { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("version 1")
                    && text.contains("version 2")
                    && text.contains("versioned"),
                "{text}"
            );
        }
        other => panic!("expected a version mismatch, got {other:?}"),
    }
}

#[test]
async fn a_task_of_a_skill_this_agent_does_not_serve_says_so() {
    let store = MemoryStore::new();
    let effects = Effects::new().tool("a", counting(Arc::new(AtomicU32::new(0))));
    let engine = Engine::builder(store.clone())
        .skill(Versioned("1", "a"))
        .effects(effects)
        .start()
        .await
        .unwrap();
    let id = engine.send(Request::operator(user("go"))).await.unwrap();
    settled(&engine, &id).await;
    drop(engine);
    let other = StepTable::new(SkillInfo::new("panic", "Panic"), Panicky, PANIC_STEPS).unwrap();
    let engine = Engine::builder(store.clone())
        .skill(other)
        .start()
        .await
        .unwrap();
    match engine.send(Request::operator(reply(&id, "more"))).await {
        Err(EngineError::SkillNotServed { task_id, skill_id }) => {
            assert_eq!(
                (task_id.as_str(), skill_id.as_str()),
                (id.as_str(), "versioned")
            );
        }
        other => panic!("expected a skill that is not served, got {other:?}"),
    }
}

#[test]
fn an_engine_that_cannot_be_built_as_configured_is_a_config_error() {
    let versioned = || Engine::builder(MemoryStore::new()).skill(Versioned("1", "a"));
    for (what, built) in [
        (
            "no skill",
            Engine::builder(MemoryStore::new())
                .without_registered_skills()
                .build(),
        ),
        (
            "a default that is not served",
            versioned().default_skill("nope").build(),
        ),
        (
            "an only_skills id that is not served",
            versioned().only_skills(["nope"]).build(),
        ),
        (
            "a lease too short",
            versioned().lease_ttl(Duration::from_millis(1)).build(),
        ),
    ] {
        match built {
            Err(EngineError::Config(_)) => {}
            Err(other) => panic!("{what}: expected a config error, got {other:?}"),
            Ok(_) => panic!("{what}: built"),
        }
    }
}

#[test]
async fn a_step_issuing_another_command_on_replay_is_non_determinism() {
    let store = MemoryStore::new();
    let c = Arc::new(AtomicU32::new(0));
    let effects = Effects::new()
        .tool("a", counting(c.clone()))
        .tool("b", counting(c.clone()));
    let hook = |f: &Fault| f.boundary == Boundary::EffectReturned;
    let engine = Engine::builder(store.clone())
        .skill(Versioned("1", "a"))
        .effects(effects.clone())
        .fault_hook(hook)
        .build()
        .unwrap();
    let id = engine.send(Request::operator(user("go"))).await.unwrap();
    wait_halted(&engine).await;
    drop(engine);
    // Same id and version, but the code now calls tool `b` where the journal recorded tool `a`.
    let engine = Engine::builder(store.clone())
        .skill(Versioned("1", "b"))
        .effects(effects)
        .start()
        .await
        .unwrap();
    let task = settled(&engine, &id).await;
    assert_eq!(task.status.state, TaskState::Failed);
    let text = status_text(&task);
    assert!(
        text.contains("non-determinism")
            && text.contains("`versioned`")
            && text.contains("#0")
            && text.contains("tool `a`")
            && text.contains("tool `b`"),
        "{text}"
    );
}

#[test]
async fn bad_input_is_a_typed_error() {
    let engine = Engine::builder(MemoryStore::new())
        .skill(Versioned("1", "a"))
        .start()
        .await
        .unwrap();
    let mut empty = user("x");
    empty.parts.clear();
    assert!(matches!(
        engine.send(Request::operator(empty)).await,
        Err(EngineError::InvalidInput(_))
    ));
    assert!(matches!(
        engine
            .send(Request::operator(user("x")).skill("nope"))
            .await,
        Err(EngineError::UnknownSkill(_))
    ));
    assert!(matches!(
        engine
            .send(Request::operator(reply("no-such-task", "x")))
            .await,
        Err(EngineError::TaskNotFound(_))
    ));
    assert!(matches!(
        engine
            .task(&Caller::Operator, &"no-such-task".into(), None)
            .await,
        Err(EngineError::TaskNotFound(_))
    ));
}

#[test]
async fn tasks_are_visible_only_to_their_principal() {
    let c = Arc::new(AtomicU32::new(0));
    let engine = Engine::builder(MemoryStore::new())
        .skill(Versioned("1", "a"))
        .effects(Effects::new().tool("a", counting(c)))
        .start()
        .await
        .unwrap();
    let id = engine
        .send(Request::new(Caller::principal("alice"), user("go")))
        .await
        .unwrap();
    assert!(engine
        .task(&Caller::principal("alice"), &id, None)
        .await
        .is_ok());
    assert!(matches!(
        engine.task(&Caller::principal("bob"), &id, None).await,
        Err(EngineError::TaskNotFound(_))
    ));
    assert!(matches!(
        within(
            PATIENCE,
            "bob's cancel",
            engine.cancel(&Caller::principal("bob"), &id)
        )
        .await,
        Err(EngineError::TaskNotFound(_))
    ));
}

#[test]
async fn reducer_commands_deliver_results_as_events() {
    struct Counter;
    #[async_trait]
    impl FlowSkill for Counter {
        type State = Vec<String>;
        fn info(&self) -> SkillInfo {
            SkillInfo::new("counter", "Counter")
        }
        fn initial_state(&self) -> Vec<String> {
            Vec::new()
        }
        async fn on_event(
            &self,
            mut seen: Vec<String>,
            event: Event,
            _: &StepCtx,
        ) -> Result<Transition<Vec<String>>, StepError> {
            seen.push(event.kind_name().to_owned());
            Ok(match event {
                Event::UserMessage { .. } => Transition::to(seen)
                    .cmd(Cmd::tool("a", serde_json::Value::Null))
                    .cmd(Cmd::sleep(Duration::from_millis(20))),
                Event::CommandResult { .. } => Transition::to(seen),
                Event::TimerFired { .. } => Transition::complete(seen.join(",")),
                _ => Transition::ignore(),
            })
        }
    }
    let c = Arc::new(AtomicU32::new(0));
    let engine = Engine::builder(MemoryStore::new())
        .skill(Counter)
        .effects(Effects::new().tool("a", counting(c.clone())))
        .start()
        .await
        .unwrap();
    let id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = settled(&engine, &id).await;
    assert_eq!(
        status_text(&task),
        "user_message,command_result,timer_fired"
    );
    assert_eq!(c.load(Ordering::SeqCst), 1);
    let _ = EffectError::transient("unused");
}

#[test]
async fn a_reducer_hears_cancel_and_its_goodbye_is_kept() {
    struct Polite;
    #[async_trait]
    impl FlowSkill for Polite {
        type State = u8;
        fn info(&self) -> SkillInfo {
            SkillInfo::new("polite", "Polite")
        }
        fn initial_state(&self) -> u8 {
            0
        }
        async fn on_event(
            &self,
            _: u8,
            event: Event,
            ctx: &StepCtx,
        ) -> Result<Transition<u8>, StepError> {
            Ok(match event {
                Event::UserMessage { .. } => Transition::await_input(1, "more", "more?"),
                Event::Cancel => {
                    // Effects are refused while canceling; messages are kept.
                    assert!(matches!(
                        ctx.tool("a").call::<_, serde_json::Value>(()).await,
                        Err(StepError::Canceled)
                    ));
                    Transition::ignore().message(radkit_runtime::model::Message::agent_text("Bye."))
                }
                _ => Transition::ignore(),
            })
        }
    }
    let engine = Engine::builder(MemoryStore::new())
        .skill(Polite)
        .start()
        .await
        .unwrap();
    let id = engine.send(Request::operator(user("hi"))).await.unwrap();
    assert_eq!(
        settled(&engine, &id).await.status.state,
        TaskState::InputRequired
    );
    let task = within(
        PATIENCE,
        "the cancel to finish",
        engine.cancel(&Caller::Operator, &id),
    )
    .await
    .unwrap();
    assert_eq!(task.status.state, TaskState::Canceled);
    let history: Vec<String> = task.history.iter().map(|m| m.joined_texts()).collect();
    assert!(history.contains(&"Bye.".to_owned()), "{history:?}");
}
