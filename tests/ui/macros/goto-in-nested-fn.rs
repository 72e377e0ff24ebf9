// Rule: `goto!` is the step's own return value, not a nested fn's.
use radkit::prelude::*;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, msg: Content) -> StepResult {
        fn next(text: String) -> StepResult {
            goto!("b", text)
        }
        next(msg.joined_texts())
    }

    #[step]
    async fn b(&self, ctx: &StepCtx, text: String) -> StepResult {
        ctx.complete(text, vec![])
    }
}

fn main() {}
