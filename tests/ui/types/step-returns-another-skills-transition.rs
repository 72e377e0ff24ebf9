// Rule: a step returns its own skill's transition, not another skill's.
use radkit::prelude::*;

#[derive(Default)]
struct Echo;
#[flow_skill(id = "echo", name = "Echo")]
impl Echo {
    #[step(start)]
    async fn echo(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        ctx.complete(msg.joined_texts(), vec![])
    }
}

#[derive(Default)]
struct Greeter;
#[flow_skill(id = "greeter", name = "Greeter")]
impl Greeter {
    #[step(start)]
    async fn greet(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        Echo.echo(ctx, msg).await
    }
}

fn main() {}
