// Rule: payloads are owned; a reference to one's own type is the payload rule's error, at the type.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::Content;

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Note(String);

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx, msg: Content, note: &Note) -> StepResult {
        ctx.complete(format!("{}{}", msg.joined_texts(), note.0), vec![])
    }
}

fn main() {}
