// Rule: `await_input!` is the step's result; as a statement it would build a transition and drop it.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{await_input, flow_skill};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn ask(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        await_input!(slot = "name", message = "Your name?");
        ctx.complete(msg.joined_texts(), vec![])
    }

    #[step(resume_from = "ask")]
    async fn greet(&self, ctx: &StepCtx, reply: Content) -> StepResult {
        ctx.complete(reply.joined_texts(), vec![])
    }
}

fn main() {}
