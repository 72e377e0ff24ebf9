//! Messages sent while a task works, declared with the macros: `while_working = "queue"` keeps them
//! for the task's next `await_input!`, and a `#[step(interrupt)]` step receives one that interrupts
//! the task. Over A2A 0.3 JSON-RPC a follow-up `message/send` to a working task is answered with the
//! task (the 0.3 TCK's follow-up to a running task), not refused.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use radkit::engine::{Caller, Request};
use radkit::flow::WhileWorking;
use radkit::model::TaskState;
use radkit::prelude::*;
use radkit::store::MemoryStore;
use serde_json::json;
use tokio::sync::Semaphore;

use crate::support::agent;
use crate::support::common::{rpc, uuid, within, PATIENCE};

#[derive(Default)]
struct Queueing;

/// Works, then asks for more; a message sent while it worked is the answer.
#[flow_skill(
    id = "queueing",
    name = "Queueing",
    while_working = "queue",
    register = false
)]
impl Queueing {
    #[step(start)]
    async fn work(&self, ctx: &StepCtx, _: Content) -> StepResult {
        let _: String = ctx.tool("slow").call(()).await?;
        await_input!(slot = "more", message = "Anything else?")
    }

    #[step(resume_from = "work")]
    async fn more(&self, ctx: &StepCtx, reply: Content) -> StepResult {
        ctx.complete(format!("also {}", reply.joined_texts()), vec![])
    }
}

#[derive(Default)]
struct Interrupted;

/// Works in two calls; a message sent while it works redirects it.
#[flow_skill(id = "interrupted", name = "Interrupted", register = false)]
impl Interrupted {
    #[step(start)]
    async fn work(&self, ctx: &StepCtx, _: Content) -> StepResult {
        let _: String = ctx.tool("slow").call(()).await?;
        let _: String = ctx.tool("after").call(()).await?;
        ctx.complete("finished the plan", vec![])
    }

    #[step(interrupt)]
    async fn redirect(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        ctx.complete(format!("redirected: {}", msg.joined_texts()), vec![])
    }
}

/// `slow` says it started and waits for a permit; `after` counts its calls.
struct Gate {
    entered: Arc<Semaphore>,
    release: Arc<Semaphore>,
    after: Arc<AtomicU32>,
}

impl Gate {
    fn new() -> Self {
        Gate {
            entered: Arc::new(Semaphore::new(0)),
            release: Arc::new(Semaphore::new(0)),
            after: Arc::default(),
        }
    }

    fn effects(&self) -> Effects {
        let (entered, release) = (self.entered.clone(), self.release.clone());
        let slow = FnTool::new(EffectPolicy::Idempotent, move |_, _| {
            let (entered, release) = (entered.clone(), release.clone());
            async move {
                entered.add_permits(1);
                release.acquire().await.expect("open").forget();
                Ok(json!("slow"))
            }
        });
        let counter = self.after.clone();
        let after = FnTool::new(EffectPolicy::Idempotent, move |_, _| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(json!("after"))
            }
        });
        Effects::new().tool("slow", slow).tool("after", after)
    }

    async fn running(&self) {
        within(PATIENCE, "the slow tool to start", self.entered.acquire())
            .await
            .expect("open")
            .forget();
    }
}

#[test(multi_thread)]
async fn a_macro_skill_that_queues_takes_a_follow_up_sent_over_json_rpc_as_its_next_answer() {
    let gate = Gate::new();
    let served = agent::start(
        agent::only(MemoryStore::new(), Queueing).effects(gate.effects()),
        |c| c,
    )
    .await;
    let client = agent::client();
    let mut first = crate::support::common::user("start working");
    first["messageId"] = json!(uuid());
    let sent = rpc(
        &client,
        &served.url,
        None,
        "message/send",
        json!({ "message": first, "configuration": { "blocking": false } }),
    )
    .await;
    let task = sent["result"]["id"].as_str().expect("a task").to_owned();
    gate.running().await;
    let follow_up = json!({
        "role": "user", "kind": "message", "messageId": uuid(), "taskId": task,
        "parts": [{ "kind": "text", "text": "the appendix" }]
    });
    let kept = rpc(
        &client,
        &served.url,
        None,
        "message/send",
        json!({ "message": follow_up, "configuration": { "blocking": false } }),
    )
    .await;
    assert_eq!(kept["result"]["id"], json!(task), "{kept}");
    gate.release.add_permits(1);
    let done = within(
        PATIENCE,
        "the task to settle",
        served
            .engine
            .wait_settled(&Caller::Operator, &task.clone().into()),
    )
    .await
    .unwrap();
    assert_eq!(done.status.state, TaskState::Completed, "{done:?}");
    assert_eq!(
        done.status.message.map(|m| m.joined_texts()).as_deref(),
        Some("also the appendix")
    );
}

#[test(multi_thread)]
async fn a_macro_interrupt_step_receives_the_message_that_interrupts_the_task() {
    let gate = Gate::new();
    let engine = agent::only(MemoryStore::new(), Interrupted)
        .effects(gate.effects())
        .start()
        .await
        .unwrap();
    assert_eq!(engine.skills()[0].while_working, WhileWorking::Interrupt);
    let task = engine
        .send(Request::operator(Message::user_text("do the plan")))
        .await
        .unwrap();
    gate.running().await;
    let mut stop = Message::user_text("do something else");
    stop.task_id = Some(task.to_string());
    engine.send(Request::operator(stop)).await.unwrap();
    gate.release.add_permits(1);
    let done = within(
        Duration::from_secs(20),
        "the task to settle",
        engine.wait_settled(&Caller::Operator, &task),
    )
    .await
    .unwrap();
    assert_eq!(
        done.status.message.map(|m| m.joined_texts()).as_deref(),
        Some("redirected: do something else")
    );
    assert_eq!(gate.after.load(Ordering::SeqCst), 0);
}
