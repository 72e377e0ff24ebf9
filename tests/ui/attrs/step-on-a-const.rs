// Rule: #[step] goes on methods, not on other items of the impl block.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::Content;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step]
    const LIMIT: usize = 3;

    #[step(start)]
    async fn a(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        ctx.complete(format!("{}{}", msg.joined_texts(), Self::LIMIT), vec![])
    }
}

fn main() {}
