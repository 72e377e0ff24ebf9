// Rule: a step borrows the step context: `ctx: &StepCtx`, not `ctx: StepCtx`.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{flow_skill, goto};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, msg: Content) -> StepResult {
        goto!("b", msg.joined_texts())
    }

    #[step]
    async fn b(&self, ctx: StepCtx, text: String) -> StepResult {
        ctx.complete(text, vec![])
    }
}

fn main() {}
