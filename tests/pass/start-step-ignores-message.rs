// A start step that does not use the first message says so with `_: Content`.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{await_input, flow_skill};

#[derive(Default)]
struct Greeter;

#[flow_skill(id = "greeter", name = "Greeter")]
impl Greeter {
    #[step(start)]
    async fn ask(&self, _: Content) -> StepResult {
        await_input!(slot = "name", message = "What is your name?")
    }

    #[step(resume_from = "ask")]
    async fn greet(&self, ctx: &StepCtx, reply: Content) -> StepResult {
        ctx.complete(format!("Hello, {}!", reply.joined_texts()), vec![])
    }
}

fn main() {}
