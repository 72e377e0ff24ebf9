//! The two specialists the coordinator delegates to, served together by one process (a message
//! names its skill in metadata `skillId`). Both answer from the question's text alone, so the demo
//! needs no model: the optimist says yes at once; the pessimist thinks it over first — a durable
//! `ctx.sleep`, so a crash of either process can land while a call is in flight — and says no
//! unless the question mentions a safeguard.

use std::time::Duration;

use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::{new_id, Artifact, Content, Part};

/// Always sees the bright side, and says so at once.
#[derive(Debug, Default)]
pub struct Optimist;

/// Answers yes to any question, at once.
#[flow_skill(
    id = "optimist",
    name = "Optimist",
    register = false,
    tags = ["opinion"],
    examples = ["Should we ship on Friday?"]
)]
impl Optimist {
    /// The answer, from the question alone.
    #[step(start)]
    async fn answer(&self, ctx: &StepCtx, question: Content) -> StepResult {
        let question = question.joined_texts();
        let reason = match question.trim() {
            "" => "whatever it is, the odds are on our side.".to_owned(),
            q => format!("“{q}” — absolutely: the upside is clear and the odds are on our side."),
        };
        answer(ctx, "yes", reason)
    }
}

/// Expects the worst, and takes its time to say so.
#[derive(Debug)]
pub struct Pessimist {
    /// How long it thinks before it answers (a durable timer: a restart keeps the deadline).
    pub think: Duration,
}

/// What lets even the pessimist say yes.
const SAFEGUARDS: [&str; 4] = ["tested", "reviewed", "backup", "rollback"];

/// Thinks it over, then answers no — unless the question mentions a safeguard.
#[flow_skill(
    id = "pessimist",
    name = "Pessimist",
    register = false,
    tags = ["opinion"],
    examples = ["Should we ship the tested release?"]
)]
impl Pessimist {
    /// Think (a durable sleep, journaled with its deadline), then answer.
    #[step(start)]
    async fn answer(&self, ctx: &StepCtx, question: Content) -> StepResult {
        ctx.progress(format!(
            "Thinking it over for {} s…",
            self.think.as_secs_f32()
        ))
        .await?;
        ctx.sleep(self.think).await?;
        let question = question.joined_texts();
        let lower = question.to_lowercase();
        match SAFEGUARDS.iter().find(|s| lower.contains(*s)) {
            Some(safeguard) => answer(
                ctx,
                "yes",
                format!("it is {safeguard}, so even I have no objection."),
            ),
            None => answer(
                ctx,
                "no",
                "nothing says it was tested or reviewed, nor how to roll it back; what can go wrong will.".to_owned(),
            ),
        }
    }
}

/// Complete with the reason as the status message and the verdict as a data artifact (what the
/// coordinator reads: structured, not parsed out of prose).
fn answer<S>(ctx: &StepCtx, verdict: &str, reason: String) -> StepResult<S> {
    let mut data = serde_json::Map::new();
    data.insert("verdict".into(), verdict.into());
    data.insert("reason".into(), reason.clone().into());
    let artifact = Artifact {
        artifact_id: new_id(),
        name: Some("verdict".into()),
        description: None,
        parts: vec![Part::data(data)],
        metadata: None,
        extensions: Vec::new(),
    };
    ctx.complete(format!("{verdict}: {reason}"), vec![artifact])
}
