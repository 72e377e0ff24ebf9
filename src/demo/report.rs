//! A slow skill that shows streaming: progress updates, an artifact streamed in chunks, and a durable
//! timer in the middle (so a server restart during the wait loses nothing).

use std::time::Duration;

use futures::future::BoxFuture;
use radkit::flow::step_table::{Step, StepInput, StepTable};
use radkit::flow::{SkillInfo, StepCtx, StepResult};

/// The skill's own data (none).
#[derive(Debug, Default)]
pub struct Report;

/// The table.
pub static STEPS: &[Step<Report>] = &[Step::new("write", write).start().takes_user_message()];

/// How long the report waits between its two halves (a durable timer).
pub const PAUSE: Duration = Duration::from_millis(1500);

/// The skill.
pub fn skill() -> StepTable<Report> {
    let info = SkillInfo::new("report", "Streaming report")
        .description("Writes a short report in chunks, with progress updates and a durable pause in the middle.")
        .tags(["streaming", "demo"])
        .examples(["Report on durable execution"]);
    match StepTable::new(info, Report, STEPS) {
        Ok(table) => table,
        Err(e) => unreachable!("the report step table is valid: {e}"),
    }
}

fn write<'a>(_: &'a Report, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let topic = input.message().joined_texts();
        ctx.progress("Searching…").await?;
        let mut report = ctx.partial_artifact("report.md");
        report.send(format!("# {topic}\n")).await?;
        report
            .send("Durable steps journal every effect before it runs.\n")
            .await?;
        ctx.sleep(PAUSE).await?;
        ctx.progress("Writing the conclusion…").await?;
        report
            .send("A crash replays receipts instead of repeating effects.\n")
            .await?;
        report
            .finish("Waiting for a human costs nothing.\n")
            .await?;
        ctx.complete("Report written.", vec![])
    })
}
