// The form: metadata on the impl block, payload tuples, goto!, await_input!, a resume step.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::{Artifact, Content};
use radkit::{await_input, flow_skill, goto};

#[derive(Default)]
struct Loop;

#[flow_skill(id = "impl_form", name = "Impl form", tags = ["a"], examples = ["b"])]
impl Loop {
    #[step(start)]
    async fn research(&self, ctx: &StepCtx, msg: Content, history: Vec<String>) -> StepResult {
        let draft: String = ctx.llm("research").run(msg).await?;
        goto!("critique", (draft, history))
    }

    #[step]
    async fn critique(&self, ctx: &StepCtx, payload: (String, Vec<String>)) -> StepResult {
        let (draft, history) = payload;
        if history.len() > 2 {
            return ctx.complete("Approved.", vec![Artifact::from_text("final.txt", &draft)]);
        }
        await_input!(
            slot = "note",
            message = "Human input?",
            carry = (draft, history)
        )
    }

    #[step(resume_from = "critique")]
    async fn human_input(&self, payload: (String, Vec<String>), msg: Content) -> StepResult {
        let (draft, mut history) = payload;
        history.push(msg.joined_texts());
        goto!("research", (Content::from_text(&draft), history))
    }
}

fn main() {}
