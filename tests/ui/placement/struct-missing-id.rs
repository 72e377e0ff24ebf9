// Rule: #[flow_skill(..)] on the struct needs an id; the impl block reports nothing more.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;

#[flow_skill(name = "S")]
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
