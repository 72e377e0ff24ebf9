// Rule: a skill id is not empty (it names the skill in tasks and in the agent card).
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::Content;

#[derive(Default)]
struct S;

#[flow_skill(id = "", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        ctx.complete(msg.joined_texts(), vec![])
    }
}

fn main() {}
