//! The research loop in the macro form: named async steps, typed `goto!` and `await_input!`. The
//! skill is registered with `#[flow_skill]`, so every engine of this program serves it.

use radkit::flow::{StepCtx, StepResult};
use radkit::model::{Artifact, Content};
use radkit::{await_input, flow_skill, goto};

use super::shared::{critic_input, revision_prompt, Critique, Cycle, Verdict};

/// The research loop (macro form).
#[derive(Debug, Default)]
pub struct ResearchLoop;

/// Drafts, critiques and revises a research note; asks a human when the critic is unsure.
#[flow_skill(
    id = "research_loop_v2",
    name = "Research Loop v2",
    tags = ["research", "writing"],
    examples = ["Write a note on durable execution"]
)]
impl ResearchLoop {
    /// Draft from the message (or from the revision prompt).
    #[step(start)]
    async fn research(&self, ctx: &StepCtx, msg: Content, history: Vec<Cycle>) -> StepResult {
        let draft: String = ctx.llm("research").run(msg).await?;
        goto!("critique", (draft, history))
    }

    /// Ask the critic; approve, revise or ask a human.
    #[step]
    async fn critique(&self, ctx: &StepCtx, payload: (String, Vec<Cycle>)) -> StepResult {
        let (draft, mut history) = payload;
        let critique: Critique = ctx
            .llm("critic")
            .run(critic_input(&draft, history.len()))
            .await?;
        match critique.verdict {
            Verdict::Approve => ctx.complete(
                "Approved by critic.",
                vec![Artifact::from_text("final.txt", &draft)],
            ),
            Verdict::Revise => {
                let cycle = Cycle {
                    draft,
                    note: critique.note,
                };
                let prompt = Content::from_text(revision_prompt(&cycle));
                history.push(cycle);
                goto!("research", (prompt, history))
            }
            Verdict::AskHuman => await_input!(
                slot = "human_note",
                message = "Critic needs human input.",
                carry = (draft, history)
            ),
        }
    }

    /// The human's note becomes the next revision.
    #[step(resume_from = "critique")]
    async fn human_input(&self, payload: (String, Vec<Cycle>), msg: Content) -> StepResult {
        let (draft, mut history) = payload;
        let cycle = Cycle {
            draft,
            note: msg.joined_texts(),
        };
        let prompt = Content::from_text(revision_prompt(&cycle));
        history.push(cycle);
        goto!("research", (prompt, history))
    }
}
