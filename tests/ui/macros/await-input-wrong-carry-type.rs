// Rule: await_input! carry has the resume step's payload type.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{await_input, flow_skill};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn ask(&self, msg: Content) -> StepResult {
        await_input!(
            slot = "note",
            message = "?",
            carry = msg.joined_texts().len()
        )
    }

    #[step(resume_from = "ask")]
    async fn answer(&self, ctx: &StepCtx, text: String, reply: Content) -> StepResult {
        ctx.complete(format!("{text}{reply:?}"), vec![])
    }
}

fn main() {}
