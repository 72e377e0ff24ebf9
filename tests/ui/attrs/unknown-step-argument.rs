// Rule: #[step(..)] takes start or resume_from only.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start, bogus)]
    async fn a(&self, ctx: &StepCtx, _: radkit::model::Content) -> StepResult {
        ctx.complete("x", vec![])
    }
}

fn main() {}
