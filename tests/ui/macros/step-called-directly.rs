// Rule: steps move with `goto!`; a direct call skips the journal's transition and the step graph.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::Content;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn ask(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        return self.greet(ctx, msg.joined_texts()).await;
    }

    #[step]
    async fn greet(&self, ctx: &StepCtx, name: String) -> StepResult {
        ctx.complete(format!("Hello, {name}!"), vec![])
    }
}

fn main() {}
