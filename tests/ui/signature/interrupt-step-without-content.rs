// Rule: the interrupt step receives the message that interrupts the task (`_: Content` ignores it
// on purpose).
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
    async fn stop(&self, ctx: &StepCtx) -> StepResult {
        ctx.complete("stopped", vec![])
    }
}

fn main() {}
