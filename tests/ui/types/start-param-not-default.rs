// Rule: start-step parameters other than Content are Default.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::Content;

#[derive(serde::Serialize, serde::Deserialize)]
struct NoDefault(u32);

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx, msg: Content, n: NoDefault) -> StepResult {
        ctx.complete(format!("{}{}", msg.joined_texts(), n.0), vec![])
    }
}

fn main() {}
