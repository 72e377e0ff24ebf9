//! The small skills many tests serve (none registered: an engine names the ones it serves).

use std::time::Duration;

use radkit::prelude::*;

/// Asks once, then completes with `Got <answer>` and an artifact (`answer`, `answer.txt`) holding
/// the answer.
#[derive(Default)]
pub struct Ask;

#[flow_skill(id = "ask", name = "Ask", register = false)]
impl Ask {
    #[step(start)]
    async fn ask(&self, _: Content) -> StepResult {
        await_input!(slot = "answer", message = "Your answer?")
    }

    #[step(resume_from = "ask")]
    async fn done(&self, ctx: &StepCtx, reply: Content) -> StepResult {
        let text = reply.joined_texts();
        ctx.complete(
            format!("Got {text}"),
            vec![Artifact::from_text("answer.txt", text).with_id("answer")],
        )
    }
}

/// Sleeps ten minutes on a durable timer: a task that is `working` and waits for no input.
#[derive(Default)]
pub struct Nap;

#[flow_skill(id = "nap", name = "Nap", register = false)]
impl Nap {
    #[step(start)]
    async fn nap(&self, ctx: &StepCtx, _: Content) -> StepResult {
        ctx.sleep(Duration::from_secs(600)).await?;
        ctx.complete("rested", vec![])
    }
}
