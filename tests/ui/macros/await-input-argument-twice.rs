// Rule: await_input! takes each argument once.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{await_input, flow_skill};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn ask(&self, _: Content) -> StepResult {
        await_input!(slot = "x", message = "?", slot = "y")
    }

    #[step(resume_from = "ask")]
    async fn answer(&self, ctx: &StepCtx, reply: Content) -> StepResult {
        ctx.complete(reply.joined_texts(), vec![])
    }
}

fn main() {}
