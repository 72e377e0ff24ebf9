// Rule: a step receives one user message.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::Content;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx, first: Content, second: Content) -> StepResult {
        ctx.complete(format!("{first:?}{second:?}"), vec![])
    }
}

fn main() {}
