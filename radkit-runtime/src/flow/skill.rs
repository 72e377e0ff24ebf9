//! `FlowSkill`, the explicit-reducer contract every authoring surface compiles to, and its type-erased
//! form the engine drives.

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{Event, StepCtx, StepError, Transition};

/// One step of a skill's graph, for the agent card, `radkit graph` and the version hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepInfo {
    /// Step name.
    pub name: String,
    /// The start step.
    pub start: bool,
    /// The step whose `await_input` this step answers.
    pub resume_from: Option<String>,
    /// Steps this step can `goto`.
    pub gotos: Vec<String>,
    /// Payload type, as written.
    pub payload: String,
}

/// Who a skill is: the metadata that goes into the agent card, and its version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillInfo {
    /// Unique id.
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Keywords.
    pub tags: Vec<String>,
    /// Example prompts.
    pub examples: Vec<String>,
    /// Accepted input MIME types (empty: the agent's defaults).
    pub input_modes: Vec<String>,
    /// Produced output MIME types (empty: the agent's defaults).
    pub output_modes: Vec<String>,
    /// Compatibility version, recorded at task creation. A task resumes only on the same version.
    pub version: String,
    /// The step graph (empty for a plain reducer).
    pub steps: Vec<StepInfo>,
}

impl SkillInfo {
    /// Metadata with an id and a name; everything else empty, version `"1"`.
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> Self {
        SkillInfo {
            id: id.into(),
            name: name.into(),
            description: String::new(),
            tags: Vec::new(),
            examples: Vec::new(),
            input_modes: Vec::new(),
            output_modes: Vec::new(),
            version: "1".to_owned(),
            steps: Vec::new(),
        }
    }

    /// With a description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// With a version.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// With tags.
    pub fn tags<I: IntoIterator<Item = T>, T: Into<String>>(mut self, tags: I) -> Self {
        self.tags = tags.into_iter().map(Into::into).collect();
        self
    }

    /// With examples.
    pub fn examples<I: IntoIterator<Item = T>, T: Into<String>>(mut self, examples: I) -> Self {
        self.examples = examples.into_iter().map(Into::into).collect();
        self
    }

    /// A stable version derived from the step graph and payload types (FNV-1a, hex): changes whenever a
    /// step, an edge or a payload type changes.
    pub fn graph_version(steps: &[StepInfo]) -> String {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for step in steps {
            let resume = step.resume_from.as_deref().unwrap_or("");
            for piece in [step.name.as_str(), resume, step.payload.as_str()]
                .into_iter()
                .chain(step.gotos.iter().map(String::as_str))
            {
                for byte in piece.bytes().chain([0u8]) {
                    hash ^= u64::from(byte);
                    hash = hash.wrapping_mul(0x0100_0000_01b3);
                }
            }
            hash ^= u64::from(step.start);
        }
        format!("{hash:016x}")
    }
}

/// A durable skill written as an explicit reducer: `(state, event) -> transition`.
///
/// All effects leave as commands (`Transition::cmd`) or as journaled `ctx` calls, so the engine can
/// replay a task from its journal. The macros and step tables implement this trait too.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a radkit skill",
    note = "write `#[flow_skill(id = \"..\", name = \"..\")]` on the impl block of its steps, or implement `FlowSkill` by hand"
)]
#[async_trait]
pub trait FlowSkill: Send + Sync + 'static {
    /// The persisted state.
    type State: Serialize + DeserializeOwned + Send + Sync + 'static;

    /// Metadata and version.
    fn info(&self) -> SkillInfo;

    /// The state a new task starts in; the first user message is delivered to it.
    fn initial_state(&self) -> Self::State;

    /// A short name of the state, used as the step name in journals and errors.
    fn step_name(&self, state: &Self::State) -> String {
        state_name(&serde_json::to_value(state).unwrap_or(serde_json::Value::Null))
    }

    /// Handle `event` in `state`.
    async fn on_event(
        &self,
        state: Self::State,
        event: Event,
        ctx: &StepCtx,
    ) -> Result<Transition<Self::State>, StepError>;
}

/// The name of an externally tagged serde enum value (`"Draft"`, `{"Critique": ..}`), or `"state"`.
pub(crate) fn state_name(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(map) if map.len() == 1 => {
            map.keys().next().cloned().unwrap_or_default()
        }
        serde_json::Value::Object(map) => match map.get("step") {
            Some(serde_json::Value::String(s)) => s.clone(),
            _ => "state".to_owned(),
        },
        _ => "state".to_owned(),
    }
}

/// A skill with its state erased to JSON: what the engine stores and drives.
#[async_trait]
pub trait ErasedSkill: Send + Sync + 'static {
    /// Metadata and version.
    fn info(&self) -> &SkillInfo;
    /// The initial state, as JSON.
    fn initial_state(&self) -> Result<serde_json::Value, StepError>;
    /// The step name of a JSON state.
    fn step_name(&self, state: &serde_json::Value) -> String;
    /// Deliver `event` to the JSON state.
    async fn activate(
        &self,
        state: serde_json::Value,
        event: Event,
        ctx: &StepCtx,
    ) -> Result<Transition<serde_json::Value>, StepError>;
}

struct Erased<F> {
    skill: F,
    info: SkillInfo,
}

/// Erase a skill's state type.
pub fn erase<F: FlowSkill>(skill: F) -> std::sync::Arc<dyn ErasedSkill> {
    let info = skill.info();
    std::sync::Arc::new(Erased { skill, info })
}

#[async_trait]
impl<F: FlowSkill> ErasedSkill for Erased<F> {
    fn info(&self) -> &SkillInfo {
        &self.info
    }

    fn initial_state(&self) -> Result<serde_json::Value, StepError> {
        Ok(serde_json::to_value(self.skill.initial_state())?)
    }

    fn step_name(&self, state: &serde_json::Value) -> String {
        match serde_json::from_value::<F::State>(state.clone()) {
            Ok(s) => self.skill.step_name(&s),
            Err(_) => state_name(state),
        }
    }

    async fn activate(
        &self,
        state: serde_json::Value,
        event: Event,
        ctx: &StepCtx,
    ) -> Result<Transition<serde_json::Value>, StepError> {
        let state: F::State = serde_json::from_value(state).map_err(|e| {
            StepError::Decode(format!(
                "persisted state of skill `{}` does not decode: {e}",
                self.info.id
            ))
        })?;
        let transition = self.skill.on_event(state, event, ctx).await?;
        transition.try_map_state(|s| serde_json::to_value(s).map_err(StepError::from))
    }
}
