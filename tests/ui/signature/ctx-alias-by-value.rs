// Rule: the step context under another name is still borrowed: `ctx: &Ctx`, not `ctx: Ctx`.
use radkit::flow::StepCtx as Ctx;
use radkit::flow::StepResult;
use radkit::flow_skill;
use radkit::model::Content;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, ctx: Ctx, msg: Content) -> StepResult {
        ctx.complete(msg.joined_texts(), vec![])
    }
}

fn main() {}
