//! What the three forms of the research loop share: the critic's answer, the revision history, the
//! prompts, and scripted models that make the loop run without a network.

use radkit::effects::Effects;
use radkit::engine::EngineBuilder;
use radkit::flow::EffectError;
use radkit::llm::ScriptedModel;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One round of drafting and feedback.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Cycle {
    /// The draft.
    pub draft: String,
    /// The critic's or the human's note on it.
    pub note: String,
}

/// The critic's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Good enough.
    Approve,
    /// Try again with the note.
    Revise,
    /// A human must decide.
    AskHuman,
}

/// The critic's structured answer (`ctx.llm("critic").run::<Critique>(..)` sends its JSON Schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Critique {
    /// Decision.
    pub verdict: Verdict,
    /// Why, or what to change.
    pub note: String,
}

/// What the critic model is given.
pub fn critic_input(draft: &str, cycles: usize) -> serde_json::Value {
    serde_json::json!({ "draft": draft, "cycles": cycles })
}

/// What the research model is given on a revision: the feedback, then the draft it applies to.
pub fn revision_prompt(cycle: &Cycle) -> String {
    format!(
        "Revise the draft.\nFeedback: {}\nDraft: {}",
        cycle.note, cycle.draft
    )
}

/// An engine serving all three forms: the macro form is registered, so this adds the step table
/// and the reducer, the scripted models, and the macro form as the skill of a message naming none.
pub fn research_forms(builder: EngineBuilder) -> EngineBuilder {
    builder
        .skill(super::table_form::skill())
        .skill(super::reducer_form::ResearchReducer)
        .default_skill("research_loop_v2")
        .effects(scripted_effects())
}

/// Scripted models: `research` drafts from its input (and, given a revision prompt, revises the
/// draft with the feedback, so a human's reply shows in the final note); `critic` asks for a
/// revision on the first draft, a human on the second, and approves after that.
pub fn scripted_effects() -> Effects {
    let research = ScriptedModel::new(|request| {
        let text = match &request.input {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        };
        Ok(serde_json::Value::String(draft(&text)))
    });
    let critic = ScriptedModel::new(|request| {
        let cycles = request
            .input
            .get("cycles")
            .and_then(|c| c.as_u64())
            .ok_or_else(|| EffectError::permanent("critic input has no `cycles`"))?;
        let critique = match cycles {
            0 => Critique {
                verdict: Verdict::Revise,
                note: "Add sources.".into(),
            },
            1 => Critique {
                verdict: Verdict::AskHuman,
                note: "Is the tone right for the audience?".into(),
            },
            _ => Critique {
                verdict: Verdict::Approve,
                note: "Well sourced and on tone.".into(),
            },
        };
        serde_json::to_value(critique).map_err(|e| EffectError::permanent(e.to_string()))
    });
    Effects::new()
        .model("research", research)
        .model("critic", critic)
}

/// The scripted research model: a first draft names its topic; a revision keeps the draft and
/// records the feedback it applied.
fn draft(input: &str) -> String {
    let revision = input
        .strip_prefix("Revise the draft.\nFeedback: ")
        .and_then(|rest| rest.split_once("\nDraft: "));
    match revision {
        Some((feedback, previous)) => format!("{previous}\nRevised: {feedback}"),
        None => format!(
            "Draft on: {}",
            input.lines().next().unwrap_or_default().trim()
        ),
    }
}
