// Rule: `__start` names the state before the first message; no step may take it.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::Content;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn __start(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        ctx.complete(msg.joined_texts(), vec![])
    }
}

fn main() {}
