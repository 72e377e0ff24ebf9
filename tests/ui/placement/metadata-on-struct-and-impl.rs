// Rule: metadata goes on the struct or on the impl block, not on both.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::Content;

#[flow_skill(id = "s", name = "S")]
#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        ctx.complete(msg.joined_texts(), vec![])
    }
}

fn main() {}
