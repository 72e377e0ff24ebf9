// Rule: a step is declared once (rustc's conflict names a public mark, not a hidden path).
use radkit::prelude::*;

#[derive(Default)]
struct S;
#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn greet(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        ctx.complete(msg.joined_texts(), vec![])
    }
}
#[flow_skill]
impl S {
    #[step]
    async fn greet(&self, ctx: &StepCtx) -> StepResult {
        ctx.complete("Hello!", vec![])
    }
}

fn main() {}
