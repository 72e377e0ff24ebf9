// Rule: `goto!` targets a #[step] method, not another method of the impl.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{flow_skill, goto};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, msg: Content) -> StepResult {
        goto!("finish", msg.joined_texts())
    }

    async fn finish(&self, ctx: &StepCtx, text: String) -> StepResult {
        ctx.complete(text, vec![])
    }
}

fn main() {}
