// Rule: steps must be async fn.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    fn a(&self, ctx: &StepCtx) -> StepResult {
        ctx.complete("x", vec![])
    }
}

fn main() {}
