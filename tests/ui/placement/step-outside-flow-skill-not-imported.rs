// Rule: #[step] needs a #[flow_skill] impl; without one (and without an import) rustc cannot find it.
use radkit::flow::{StepCtx, StepResult};

struct S;

impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx) -> StepResult {
        ctx.complete("x", vec![])
    }
}

fn main() {}
