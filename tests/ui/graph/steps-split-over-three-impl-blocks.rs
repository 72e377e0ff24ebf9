// Rule: all steps of a skill are in one #[flow_skill] impl block (rustc's conflict names a public mark).
use radkit::prelude::*;

#[derive(Default)]
struct S;
#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn ask(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        ctx.complete(msg.joined_texts(), vec![])
    }
}
#[flow_skill]
impl S {
    #[step]
    async fn greet(&self, _ctx: &StepCtx, name: String) -> StepResult { goto!("bye", name) }
}
#[flow_skill]
impl S {
    #[step]
    async fn bye(&self, ctx: &StepCtx, name: String) -> StepResult { ctx.complete(name, vec![]) }
}

fn main() {}
