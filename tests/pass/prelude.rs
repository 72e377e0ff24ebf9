// `use radkit::prelude::*;` is the only import a skill needs (warnings denied: nothing is unused).
#![deny(warnings)]
use radkit::prelude::*;

#[derive(Default)]
struct Review;

#[flow_skill(id = "prelude", name = "Prelude")]
impl Review {
    #[step(start)]
    async fn draft(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let draft: String = ctx.llm("writer").run(msg).await?;
        await_input!(slot = "ok", message = "Publish?", carry = draft)
    }

    #[step(resume_from = "draft")]
    async fn publish(&self, draft: String, reply: Content) -> StepResult {
        goto!("done", (draft, reply.joined_texts()))
    }

    #[step]
    async fn done(&self, ctx: &StepCtx, draft: String, note: String) -> StepResult {
        ctx.complete(note, vec![Artifact::from_text("post.md", &draft)])
    }
}

fn main() {}
