// Rule: `answer` is `"message"` or `"task"`.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::Content;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S", answer = "text")]
impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx, _: Content) -> StepResult {
        ctx.complete("a", vec![])
    }
}

fn main() {}
