// Rule: a bare #[flow_skill] on the impl needs #[flow_skill(id, name)] on the struct.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;

#[derive(Default)]
struct S;

#[flow_skill]
impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx, _: radkit::model::Content) -> StepResult {
        ctx.complete("x", vec![])
    }
}

fn main() {}
