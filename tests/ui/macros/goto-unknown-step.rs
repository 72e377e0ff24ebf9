// Rule: goto! names a step of this impl.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{flow_skill, goto};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn research(&self, msg: Content) -> StepResult {
        goto!("critque", msg.joined_texts())
    }

    #[step]
    async fn critique(&self, ctx: &StepCtx, draft: String) -> StepResult {
        ctx.complete(draft, vec![])
    }
}

fn main() {}
