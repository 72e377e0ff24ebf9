// Rule: `?` in a step needs a `Result` whose error converts to `StepError`.
use radkit::prelude::*;

#[derive(Default)]
struct Greeter;

#[flow_skill(id = "greeter", name = "Greeter")]
impl Greeter {
    #[step(start)]
    async fn greet(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let first = msg.joined_texts().chars().next()?;
        ctx.complete(first.to_string(), vec![])
    }
}

fn main() {}
