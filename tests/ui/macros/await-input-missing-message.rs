// Rule: await_input! needs a message (what to ask the user).
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{await_input, flow_skill};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn ask(&self, msg: Content) -> StepResult {
        await_input!(slot = "x", carry = msg.joined_texts())
    }

    #[step(resume_from = "ask")]
    async fn answer(&self, ctx: &StepCtx, text: String, reply: Content) -> StepResult {
        ctx.complete(format!("{text}{reply:?}"), vec![])
    }
}

fn main() {}
