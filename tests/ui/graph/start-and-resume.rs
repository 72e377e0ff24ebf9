// Rule: a step cannot be both start and resume.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::Content;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start, resume_from = "b")]
    async fn a(&self, ctx: &StepCtx, reply: Content) -> StepResult {
        ctx.complete(reply.joined_texts(), vec![])
    }

    #[step]
    async fn b(&self, ctx: &StepCtx) -> StepResult {
        ctx.complete("b", vec![])
    }
}

fn main() {}
