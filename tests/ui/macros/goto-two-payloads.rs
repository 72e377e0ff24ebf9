// Rule: `goto!` takes one payload; several values go in a tuple.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{flow_skill, goto};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, msg: Content) -> StepResult {
        goto!("b", msg.joined_texts(), 1)
    }

    #[step]
    async fn b(&self, ctx: &StepCtx, text: String, n: u32) -> StepResult {
        ctx.complete(format!("{text}{n}"), vec![])
    }
}

fn main() {}
