// Rule: payloads are Serialize + DeserializeOwned.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{flow_skill, goto};

struct Opaque(usize);

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, msg: Content) -> StepResult {
        goto!("b", Opaque(msg.joined_texts().len()))
    }

    #[step]
    async fn b(&self, ctx: &StepCtx, value: Opaque) -> StepResult {
        ctx.complete(format!("{}", value.0), vec![])
    }
}

fn main() {}
