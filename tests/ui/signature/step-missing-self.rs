// Rule: a step needs a &self receiver.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(ctx: &StepCtx) -> StepResult {
        ctx.complete("x", vec![])
    }
}

fn main() {}
