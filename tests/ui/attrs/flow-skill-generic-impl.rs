// Rule: a skill is a concrete type (the registry builds it with Default).
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;

#[derive(Default)]
struct S<T>(T);

#[flow_skill(id = "s", name = "S")]
impl<T: Default + Send + Sync + 'static> S<T> {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx, _: radkit::model::Content) -> StepResult {
        ctx.complete("x", vec![])
    }
}

fn main() {}
