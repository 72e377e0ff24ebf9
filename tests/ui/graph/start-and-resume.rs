// Rule: a step cannot be both start and resume.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::flow_skill;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start, resume_from = "a")]
    async fn a(&self, ctx: &StepCtx, reply: Content) -> StepResult {
        ctx.complete(reply.joined_texts(), vec![])
    }
}

fn main() {}
