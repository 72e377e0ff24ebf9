// Rule: steps cannot be generic.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a<T: Default>(&self, ctx: &StepCtx, value: T) -> StepResult {
        let _ = value;
        ctx.complete("x", vec![])
    }
}

fn main() {}
