// Rule: the start step receives the first message (`_: Content` ignores it on purpose).
use radkit::await_input;
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::Content;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn ask(&self) -> StepResult {
        await_input!(slot = "name", message = "What is your name?")
    }

    #[step(resume_from = "ask")]
    async fn greet(&self, ctx: &StepCtx, reply: Content) -> StepResult {
        ctx.complete(reply.joined_texts(), vec![])
    }
}

fn main() {}
