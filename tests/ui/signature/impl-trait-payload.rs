// Rule: payloads have a concrete type (the journal stores them).
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
    async fn b(&self, ctx: &StepCtx, text: impl ToString) -> StepResult {
        ctx.complete(text.to_string(), vec![])
    }
}

fn main() {}
