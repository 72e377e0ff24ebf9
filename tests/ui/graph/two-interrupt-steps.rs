// Rule: a message that interrupts a task has one destination: one #[step(interrupt)].
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::Content;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx, _: Content) -> StepResult {
        ctx.complete("a", vec![])
    }

    #[step(interrupt)]
    async fn b(&self, ctx: &StepCtx, _: Content) -> StepResult {
        ctx.complete("b", vec![])
    }

    #[step(interrupt)]
    async fn c(&self, ctx: &StepCtx, _: Content) -> StepResult {
        ctx.complete("c", vec![])
    }
}

fn main() {}
