// Rule: metadata on the struct needs #[flow_skill] on the impl too.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;

#[flow_skill(id = "s", name = "S")]
#[derive(Default)]
struct S;

impl S {
    #[allow(dead_code)]
    async fn a(&self, ctx: &StepCtx) -> StepResult {
        ctx.complete("x", vec![])
    }
}

fn main() {}
