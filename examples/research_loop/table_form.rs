//! The research loop as a step table: plain functions, no macros.

use futures::future::BoxFuture;

use radkit::flow::step_table::{await_input, goto, Step, StepInput, StepTable};
use radkit::flow::{SkillInfo, StepCtx, StepResult};
use radkit::model::{Artifact, Content};

use super::shared::{critic_input, revision_prompt, Critique, Cycle, Verdict};

/// The skill's own data (none: everything lives in payloads).
#[derive(Debug, Default)]
pub struct ResearchTable;

/// The table.
pub static STEPS: &[Step<ResearchTable>] = &[
    Step::new("research", research)
        .start()
        .takes_user_message()
        .goes_to(&["critique"]),
    Step::new("critique", critique).goes_to(&["research"]),
    Step::new("human_input", human_input)
        .resume_from("critique")
        .goes_to(&["research"]),
];

/// The skill, ready for `Engine::builder(..).skill(..)`.
pub fn skill() -> StepTable<ResearchTable> {
    let info = SkillInfo::new("research_table", "Research Loop (step table)")
        .description("Drafts, critiques and revises a research note; asks a human when the critic is unsure.")
        .tags(["research", "writing"])
        .examples(["Write a note on durable execution"]);
    match StepTable::new(info, ResearchTable, STEPS) {
        Ok(table) => table,
        Err(e) => unreachable!("the research step table is valid: {e}"),
    }
}

fn research<'a>(
    _: &'a ResearchTable,
    ctx: &'a StepCtx,
    input: StepInput,
) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        // The first message arrives as `message`; a `goto` from a revision carries (prompt, history).
        let (msg, history): (Content, Vec<Cycle>) = match input.message {
            Some(msg) => (msg, Vec::new()),
            None => input.payload()?,
        };
        let draft: String = ctx.llm("research").run(msg).await?;
        goto("critique", (draft, history))
    })
}

fn critique<'a>(
    _: &'a ResearchTable,
    ctx: &'a StepCtx,
    input: StepInput,
) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let (draft, mut history): (String, Vec<Cycle>) = input.payload()?;
        let critique: Critique = ctx
            .llm("critic")
            .run(critic_input(&draft, history.len()))
            .await?;
        match critique.verdict {
            Verdict::Approve => ctx.complete(
                "Approved by critic.",
                vec![Artifact::from_text("final.txt", draft)],
            ),
            Verdict::Revise => {
                let cycle = Cycle {
                    draft,
                    note: critique.note,
                };
                let prompt = Content::from_text(revision_prompt(&cycle));
                history.push(cycle);
                goto("research", (prompt, history))
            }
            Verdict::AskHuman => {
                await_input("human_note", "Critic needs human input.", (draft, history))
            }
        }
    })
}

fn human_input<'a>(
    _: &'a ResearchTable,
    _ctx: &'a StepCtx,
    input: StepInput,
) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let (draft, mut history): (String, Vec<Cycle>) = input.payload()?;
        let cycle = Cycle {
            draft,
            note: input.message().joined_texts(),
        };
        let prompt = Content::from_text(revision_prompt(&cycle));
        history.push(cycle);
        goto("research", (prompt, history))
    })
}
