// Rule: goto! cannot target a resume step.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{flow_skill, goto};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn ask(&self, msg: Content) -> StepResult {
        goto!("answer", msg.joined_texts())
    }

    #[step(resume_from = "ask")]
    async fn answer(&self, ctx: &StepCtx, text: String, reply: Content) -> StepResult {
        ctx.complete(format!("{text}{reply:?}"), vec![])
    }
}

fn main() {}
