// Rule: a resume step runs on the user's reply; calling it directly skips the journal.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::Content;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn ask(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        self.greet(ctx, msg).await
    }

    #[step(resume_from = "ask")]
    async fn greet(&self, ctx: &StepCtx, reply: Content) -> StepResult {
        ctx.complete(reply.joined_texts(), vec![])
    }
}

fn main() {}
