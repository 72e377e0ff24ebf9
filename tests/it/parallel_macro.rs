//! Parallel effects in the macro DSL: a `#[flow_skill]` step runs a model call and a tool call at
//! once with `join!` (from the prelude), with no other ceremony. The two calls are journaled
//! together in argument order (the model's id first) and really run at the same time: each waits
//! for the other to have started, which two calls in sequence never could.

use std::sync::Arc;
use std::time::Duration;

use radkit::engine::{Caller, Request};
use radkit::journal::Entry;
use radkit::llm::{LlmRequest, LlmResponse, Model};
use radkit::model::TaskState;
use radkit::prelude::*;
use radkit::store::MemoryStore;
use tokio::sync::Barrier;

#[derive(Default)]
struct Brief;

/// Writes a brief from a summary and a lookup made at once.
#[flow_skill(id = "brief", name = "Brief", register = false)]
impl Brief {
    #[step(start)]
    async fn brief(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let topic = msg.joined_texts();
        let (summary, facts) = join!(
            ctx.llm("writer").run::<String>(&topic),
            ctx.tool("lookup").call::<_, Vec<String>>(&topic),
        );
        ctx.complete(format!("{} | {}", summary?, facts?.join(", ")), vec![])
    }
}

/// A model that waits at `barrier` before it answers.
struct Writer(Arc<Barrier>);

#[async_trait::async_trait]
impl Model for Writer {
    async fn complete(&self, _: LlmRequest) -> Result<LlmResponse, EffectError> {
        self.0.wait().await;
        Ok(LlmResponse::answer(
            serde_json::json!("Otters hold hands"),
            None,
        ))
    }
}

#[test(multi_thread)]
async fn join_in_a_flow_skill_step_runs_a_model_and_a_tool_at_once() {
    // Both effects wait at the barrier until the other has started.
    let barrier = Arc::new(Barrier::new(2));
    let writer = Writer(barrier.clone());
    let lookup = {
        let barrier = barrier.clone();
        FnTool::new(EffectPolicy::Idempotent, move |_, _| {
            let barrier = barrier.clone();
            async move {
                barrier.wait().await;
                Ok(serde_json::json!(["sea otters", "rafts"]))
            }
        })
    };
    let engine = Engine::builder(MemoryStore::new())
        .without_registered_skills()
        .skill(Brief)
        .effects(
            Effects::new()
                .model("writer", writer)
                .tool("lookup", lookup),
        )
        .start()
        .await
        .unwrap();
    let id = engine
        .send(Request::operator(Message::user_text("otters")))
        .await
        .unwrap();
    let task = tokio::time::timeout(
        Duration::from_secs(20),
        engine.wait_settled(&Caller::Operator, &id),
    )
    .await
    .expect("the two calls ran at once (in sequence each would wait for the other forever)")
    .unwrap();
    assert_eq!(task.status.state, TaskState::Completed);
    let text = task.status.message.map(|m| m.joined_texts());
    assert_eq!(
        text.as_deref(),
        Some("Otters hold hands | sea otters, rafts")
    );

    let journal = engine.journal(&Caller::Operator, &id).await.unwrap();
    let issued: Vec<(u64, String, String)> = journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::CommandIssued { id, cmd, .. } => {
                Some((r.seq, id.to_string(), cmd.kind.fingerprint()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        issued
            .iter()
            .map(|(_, id, what)| (id.clone(), what.clone()))
            .collect::<Vec<_>>(),
        vec![
            (format!("{id}:1:0"), "llm `writer`".to_owned()),
            (format!("{id}:1:1"), "tool `lookup`".to_owned()),
        ],
        "ids in argument order"
    );
    assert_eq!(issued[1].0, issued[0].0 + 1, "journaled together");
}
