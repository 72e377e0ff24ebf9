// Rule: the step that resumes from `ask` is in the same impl block as `ask`.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{await_input, flow_skill};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn ask(&self, _: Content) -> StepResult {
        await_input!(slot = "name", message = "Your name?")
    }
}

#[flow_skill]
impl S {
    #[step(resume_from = "ask")]
    async fn greet(&self, ctx: &StepCtx, reply: Content) -> StepResult {
        ctx.complete(reply.joined_texts(), vec![])
    }
}

fn main() {}
