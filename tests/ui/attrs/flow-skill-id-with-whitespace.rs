// Rule: a skill id has no whitespace (it is written unquoted in tasks and A2A metadata).
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::Content;

#[derive(Default)]
struct S;

#[flow_skill(id = "greeter skill", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        ctx.complete(msg.joined_texts(), vec![])
    }
}

fn main() {}
