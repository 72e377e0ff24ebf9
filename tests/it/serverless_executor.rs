//! Commands dispatched to executors (`EngineBuilder::dispatch`, `radkit::serverless::Executor`) on
//! Postgres: a pass journals a dispatched tool's command and rests without performing it; an
//! executor performs it under its InvocationId and journals the receipt; the next sweep finishes the
//! task. An executor that dies holding a command leaves it, once its claim expires, to the next,
//! which follows the command's policy as the engine does after a crash.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use radkit::engine::{Caller, Engine, EngineBuilder};
use radkit::journal::Entry;
use radkit::model::{Message, TaskState};
use radkit::prelude::*;
use radkit::serverless::{Event, Executed, Executor, Passes, Rest};
use radkit::store::{PostgresStore, Store};
use serde_json::json;

use crate::support::services;

/// Charges with a dispatched tool, then completes with what it returned.
#[derive(Default)]
struct Charge;

#[flow_skill(id = "charge", name = "Charge", register = false)]
impl Charge {
    #[step(start)]
    async fn charge(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let charged: serde_json::Value = ctx
            .tool("charge_card")
            .call(json!({"amount": msg.joined_texts()}))
            .await?;
        ctx.complete(format!("charged {}", charged["amount"]), vec![])
    }
}

async fn fresh_schema() -> String {
    let (_, scoped) =
        radkit::store::PostgresStore::create_schema(&services::postgres_url(), "radkit_exec")
            .await
            .expect("create a test schema");
    scoped
}

struct World {
    store: Arc<dyn Store>,
    runs: Arc<AtomicU32>,
    policy: EffectPolicy,
}

impl World {
    async fn new(policy: EffectPolicy) -> World {
        let url = fresh_schema().await;
        World {
            store: Arc::new(PostgresStore::connect(&url).await.unwrap()),
            runs: Arc::default(),
            policy,
        }
    }

    fn builder(&self) -> EngineBuilder {
        let runs = self.runs.clone();
        let tool = FnTool::new(self.policy, move |args, _| {
            runs.fetch_add(1, Ordering::SeqCst);
            async move { Ok(args) }
        });
        Engine::builder_arc(self.store.clone())
            .without_registered_skills()
            .skill(Charge)
            .effects(Effects::new().tool("charge_card", tool))
            .dispatch(["charge_card"])
    }

    fn passes(&self) -> Passes {
        Passes::from_builder(self.builder()).unwrap()
    }

    fn executor(&self) -> Executor {
        Executor::from_builder(self.builder()).unwrap()
    }

    async fn start(&self) -> String {
        let mut message = Message::user_text("4200");
        message.message_id = "m1".into();
        let event = Event::Message {
            caller: Caller::Operator,
            message,
            skill: None,
            mode: None,
        };
        let passed = self.passes().run(event, soon()).await.unwrap();
        let Rest::Waiting {
            input: false,
            wake_at_ms: Some(_),
        } = passed.rest
        else {
            panic!("the pass rests on the dispatched command: {passed:?}");
        };
        passed.task_id
    }

    async fn end(&self, task_id: &str) -> (TaskState, String) {
        let journal = self.store.journal(task_id, 0).await.unwrap();
        match journal.last().map(|r| &r.entry) {
            Some(Entry::Terminal { state, message }) => (
                *state,
                message
                    .as_ref()
                    .map(|m| m.joined_texts())
                    .unwrap_or_default(),
            ),
            other => panic!("not ended: {other:?}"),
        }
    }
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

#[test(multi_thread, needs = Postgres)]
async fn a_dispatched_tool_runs_in_an_executor_and_the_next_sweep_finishes_the_task() {
    let w = World::new(EffectPolicy::Idempotent).await;
    let task_id = w.start().await;
    assert_eq!(
        w.runs.load(Ordering::SeqCst),
        0,
        "the pass did not perform it"
    );
    let record = w.store.task(&task_id).await.unwrap().unwrap();
    assert!(
        record
            .wake_at_ms
            .is_some_and(|at| at > radkit::journal::now_ms()),
        "the row rests until the receipt (or the recheck): {record:?}"
    );
    // A sweep before the executor finds nothing to do.
    assert!(w.passes().sweep(soon(), 8).await.unwrap().is_empty());
    let executed = w.executor().run(soon(), 8).await.unwrap();
    assert!(
        matches!(executed.as_slice(), [Executed::Recorded { ok: true, .. }]),
        "{executed:?}"
    );
    assert_eq!(w.runs.load(Ordering::SeqCst), 1);
    assert!(
        w.executor().run(soon(), 8).await.unwrap().is_empty(),
        "the command left the list"
    );
    let swept = w.passes().sweep(soon(), 8).await.unwrap();
    assert_eq!(
        swept.iter().map(|p| p.rest.clone()).collect::<Vec<_>>(),
        vec![Rest::Ended(TaskState::Completed)]
    );
    assert_eq!(
        w.end(&task_id).await,
        (TaskState::Completed, "charged \"4200\"".to_owned())
    );
    assert_eq!(
        w.runs.load(Ordering::SeqCst),
        1,
        "the pass did not perform it either"
    );
}

/// An executor that claimed the command and died: its claim expires after `ttl_ms`.
async fn dead_executor(w: &World, ttl_ms: i64) {
    let claimed = w
        .store
        .dispatch()
        .unwrap()
        .claim_dispatched("dead", ttl_ms, 8)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    // It performed the effect, and died before recording it.
    w.runs.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(u64::try_from(ttl_ms).unwrap() + 50)).await;
}

#[test(multi_thread, needs = Postgres)]
async fn an_idempotent_command_whose_executor_died_is_performed_again_by_the_next() {
    let w = World::new(EffectPolicy::Idempotent).await;
    let task_id = w.start().await;
    dead_executor(&w, 300).await;
    let executed = w.executor().run(soon(), 8).await.unwrap();
    assert!(
        matches!(executed.as_slice(), [Executed::Recorded { ok: true, .. }]),
        "{executed:?}"
    );
    assert_eq!(
        w.runs.load(Ordering::SeqCst),
        2,
        "performed again with the same id"
    );
    w.passes().sweep(soon(), 8).await.unwrap();
    assert_eq!(w.end(&task_id).await.0, TaskState::Completed);
}

#[test(multi_thread, needs = Postgres)]
async fn an_at_most_once_command_whose_executor_died_is_not_performed_again_and_its_task_fails() {
    let w = World::new(EffectPolicy::AtMostOnce).await;
    let task_id = w.start().await;
    dead_executor(&w, 300).await;
    let executed = w.executor().run(soon(), 8).await.unwrap();
    assert!(
        matches!(executed.as_slice(), [Executed::Unknown { .. }]),
        "{executed:?}"
    );
    assert_eq!(
        w.runs.load(Ordering::SeqCst),
        1,
        "never performed a second time"
    );
    w.passes().sweep(soon(), 8).await.unwrap();
    let (state, text) = w.end(&task_id).await;
    assert_eq!(state, TaskState::Failed);
    assert!(text.contains("outcome unknown"), "{text}");
}

#[test]
async fn dispatching_needs_a_store_with_a_dispatch_list() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        radkit::store::SqliteStore::open(dir.path().join("x.sqlite"), Default::default()).unwrap();
    let builder = Engine::builder(store)
        .without_registered_skills()
        .skill(Charge)
        .dispatch(["charge_card"]);
    let refused = Passes::from_builder(builder);
    assert!(
        matches!(&refused, Err(radkit::engine::EngineError::Config(m)) if m.contains("dispatch")),
        "{:?}",
        refused.err()
    );
}
