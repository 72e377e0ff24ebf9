// Rule: step parameters are not `&mut` (payloads are owned, the context is shared).
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
    async fn b(&self, ctx: &StepCtx, text: &mut String) -> StepResult {
        ctx.complete(text.clone(), vec![])
    }
}

fn main() {}
