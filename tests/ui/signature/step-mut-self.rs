// Rule: steps take &self, not &mut self.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&mut self, ctx: &StepCtx) -> StepResult {
        ctx.complete("x", vec![])
    }
}

fn main() {}
