// Rule: goto! payload has the target's payload type.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{flow_skill, goto};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn research(&self, msg: Content) -> StepResult {
        goto!("critique", msg.joined_texts().len())
    }

    #[step]
    async fn critique(&self, ctx: &StepCtx, draft: String) -> StepResult {
        ctx.complete(draft, vec![])
    }
}

fn main() {}
