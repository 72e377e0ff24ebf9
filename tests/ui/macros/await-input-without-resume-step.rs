// Rule: await_input! needs a step resuming from this one.
use radkit::flow::StepResult;
use radkit::model::Content;
use radkit::{await_input, flow_skill};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn ask(&self, msg: Content) -> StepResult {
        await_input!(slot = "x", message = "?", carry = msg.joined_texts())
    }
}

fn main() {}
