// Rule: #[step] needs a #[flow_skill] impl.
use radkit::flow::{StepCtx, StepResult};
use radkit::step;

struct S;

impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx) -> StepResult {
        ctx.complete("x", vec![])
    }
}

fn main() {}
