// Rule: #[flow_skill] goes on an impl block or a struct.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::Content;

#[flow_skill(id = "s", name = "S")]
async fn a(ctx: &StepCtx, msg: Content) -> StepResult {
    ctx.complete(msg.joined_texts(), vec![])
}

fn main() {}
