// Rule: a step returns its own skill's transition; a message names that state after the skill.
use radkit::prelude::*;

#[derive(Default)]
struct Greeter;

impl Greeter {
    fn finish(&self, ctx: &StepCtx) -> StepResult {
        ctx.complete("Done.", vec![])
    }
}

#[flow_skill(id = "greeter", name = "Greeter")]
impl Greeter {
    #[step(start)]
    async fn greet(&self, ctx: &StepCtx, _msg: Content) -> StepResult {
        self.finish(ctx)
    }
}

fn main() {}
