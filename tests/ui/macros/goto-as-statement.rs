// Rule: `goto!` is the step's result; as a statement it would build a transition and drop it.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{flow_skill, goto};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        if msg.joined_texts().is_empty() {
            goto!("b", msg.joined_texts());
        }
        ctx.complete("done", vec![])
    }

    #[step]
    async fn b(&self, ctx: &StepCtx, text: String) -> StepResult {
        ctx.complete(text, vec![])
    }
}

fn main() {}
