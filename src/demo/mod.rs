//! The seed's research loop (draft -> critique -> approved / revise / ask a human), written in the
//! explicit-reducer and step-table forms (the macro form lives in `research_macro`), plus the scripted
//! models that make it run without a network. `radkit serve` serves it; the examples and the
//! cross-form equivalence test use it.

pub mod payments;
pub mod report;
pub mod research_macro;
pub mod research_reducer;
pub mod research_table;
pub mod ticker;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use radkit_runtime::effects::Effects;
use radkit_runtime::flow::EffectError;
use radkit_runtime::llm::ScriptedModel;

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

/// The critic's structured answer.
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

/// An engine builder serving every form of the research loop, the streaming report and the ticker
/// over `store` with the scripted models; a message that names no skill runs the macro form.
pub fn engine_builder(store: impl radkit_runtime::store::Store) -> radkit_runtime::EngineBuilder {
    radkit_runtime::Engine::builder(store)
        .skill(research_macro::ResearchLoop)
        .skill(research_table::skill())
        .skill(research_reducer::ResearchReducer)
        .skill(report::skill())
        .skill(ticker::Ticker)
        .default_skill("research_loop_v2")
        .effects(ticker::with_tick_tool(scripted_effects()))
}

/// Scripted models for the research loop: `research` drafts from its input; `critic` asks for a
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
        let topic = text.lines().next().unwrap_or_default();
        Ok(serde_json::Value::String(format!(
            "Draft on: {topic} ({} chars of input)",
            text.len()
        )))
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
