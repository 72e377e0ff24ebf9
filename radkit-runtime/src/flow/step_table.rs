//! The step-table authoring surface: plain functions in a `static` table, no macros.
//!
//! ```ignore
//! static STEPS: &[Step<Research>] = &[
//!     Step::new("research", research).start().takes_user_message(),
//!     Step::new("critique", critique),
//!     Step::new("human_input", human_input).resume_from("critique"),
//! ];
//! ```

use async_trait::async_trait;
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{
    Event, FlowSkill, Next, SkillInfo, StepCtx, StepError, StepInfo, StepResult, Transition,
};
use crate::model::Content;

/// A step function: `fn(&skill, &ctx, input) -> BoxFuture<StepResult>`.
pub type StepFn<S> = for<'a> fn(&'a S, &'a StepCtx, StepInput) -> BoxFuture<'a, StepResult>;

/// One row of a step table.
pub struct Step<S: 'static> {
    name: &'static str,
    run: StepFn<S>,
    start: bool,
    takes_user_message: bool,
    resume_from: Option<&'static str>,
}

impl<S: 'static> Step<S> {
    /// A step named `name` running `run`.
    pub const fn new(name: &'static str, run: StepFn<S>) -> Self {
        Step {
            name,
            run,
            start: false,
            takes_user_message: false,
            resume_from: None,
        }
    }

    /// The step the first user message runs.
    pub const fn start(mut self) -> Self {
        self.start = true;
        self
    }

    /// The step receives the user message in [`StepInput::message`].
    pub const fn takes_user_message(mut self) -> Self {
        self.takes_user_message = true;
        self
    }

    /// The step answers `await_input` issued in step `step` (and receives the user's reply).
    pub const fn resume_from(mut self, step: &'static str) -> Self {
        self.resume_from = Some(step);
        self.takes_user_message = true;
        self
    }
}

/// The state of step-based skills: the step to run and its JSON payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepState {
    /// Step name.
    pub step: String,
    /// Its payload.
    pub payload: serde_json::Value,
}

impl StepState {
    /// A state for `step` with a payload.
    pub fn new(step: impl Into<String>, payload: impl Serialize) -> Result<Self, StepError> {
        Ok(StepState {
            step: step.into(),
            payload: serde_json::to_value(payload)?,
        })
    }
}

/// What a step-table step receives.
#[derive(Debug, Clone)]
pub struct StepInput {
    /// The payload `goto` or `await_input` carried (null for the start step).
    pub payload: serde_json::Value,
    /// The user message, for steps that take one.
    pub message: Option<Content>,
}

impl StepInput {
    /// The payload decoded as `T`; a missing payload (the start step) is `T::default()`.
    pub fn payload<T: DeserializeOwned + Default>(&self) -> Result<T, StepError> {
        if self.payload.is_null() {
            return Ok(T::default());
        }
        serde_json::from_value(self.payload.clone()).map_err(StepError::from)
    }

    /// The user message, or empty content.
    pub fn message(&self) -> Content {
        self.message.clone().unwrap_or_default()
    }
}

/// Go to `step` with `payload`.
pub fn goto(step: &str, payload: impl Serialize) -> StepResult {
    Ok(Transition::goto(StepState::new(step, payload)?))
}

/// Wait for user input; the reply runs the step declared `resume_from` the current step, with `carry`.
pub fn await_input(slot: &str, message: &str, carry: impl Serialize) -> StepResult {
    Ok(Transition::await_input(
        StepState::new("", carry)?,
        slot,
        message,
    ))
}

/// A skill made of a step table.
pub struct StepTable<S: 'static> {
    info: SkillInfo,
    skill: S,
    steps: &'static [Step<S>],
    start: usize,
}

impl<S: Send + Sync + 'static> StepTable<S> {
    /// Check the table (one start step, known and unique `resume_from` targets, unique names) and build
    /// the skill. The version is derived from the step graph unless `info` sets one other than `"1"`.
    pub fn new(mut info: SkillInfo, skill: S, steps: &'static [Step<S>]) -> Result<Self, String> {
        let mut start: Option<usize> = None;
        for (i, step) in steps.iter().enumerate() {
            if steps[..i].iter().any(|s| s.name == step.name) {
                return Err(format!("duplicate step `{}`", step.name));
            }
            if step.start {
                if let Some(first) = start {
                    return Err(format!(
                        "multiple start steps; `{}` is already the start step",
                        steps[first].name
                    ));
                }
                start = Some(i);
            }
            if let Some(target) = step.resume_from {
                if !steps.iter().any(|s| s.name == target) {
                    return Err(format!(
                        "`{}` resumes from unknown step `{target}`",
                        step.name
                    ));
                }
                if steps[..i].iter().any(|s| s.resume_from == Some(target)) {
                    return Err(format!("two steps resume from `{target}`"));
                }
            }
        }
        let start = start.ok_or_else(|| "no start step; mark one with `.start()`".to_owned())?;
        info.steps = steps
            .iter()
            .map(|s| StepInfo {
                name: s.name.to_owned(),
                start: s.start,
                resume_from: s.resume_from.map(str::to_owned),
                gotos: Vec::new(),
                payload: String::new(),
            })
            .collect();
        if info.version == "1" {
            info.version = SkillInfo::graph_version(&info.steps);
        }
        Ok(StepTable {
            info,
            skill,
            steps,
            start,
        })
    }

    fn find(&self, name: &str) -> Option<&Step<S>> {
        self.steps.iter().find(|s| s.name == name)
    }
}

#[async_trait]
impl<S: Send + Sync + 'static> FlowSkill for StepTable<S> {
    type State = StepState;

    fn info(&self) -> SkillInfo {
        self.info.clone()
    }

    fn initial_state(&self) -> StepState {
        StepState {
            step: self.steps[self.start].name.to_owned(),
            payload: serde_json::Value::Null,
        }
    }

    fn step_name(&self, state: &StepState) -> String {
        state.step.clone()
    }

    async fn on_event(&self, state: StepState, event: Event, ctx: &StepCtx) -> StepResult {
        let step = self.find(&state.step).ok_or_else(|| {
            StepError::msg(format!(
                "skill `{}` has no step `{}`",
                self.info.id, state.step
            ))
        })?;
        let message = match event {
            Event::UserMessage { message } if step.takes_user_message => {
                Some(Content::from(message))
            }
            Event::Enter => None,
            _ => return Ok(Transition::ignore()),
        };
        let mut transition = (step.run)(
            &self.skill,
            ctx,
            StepInput {
                payload: state.payload,
                message,
            },
        )
        .await?;
        match &mut transition.next {
            Next::AwaitInput { state, .. } => {
                let resume = self
                    .steps
                    .iter()
                    .find(|s| s.resume_from == Some(step.name))
                    .ok_or_else(|| {
                        StepError::msg(format!(
                            "step `{}` awaits input but no step declares `.resume_from(\"{}\")`",
                            step.name, step.name
                        ))
                    })?;
                state.step = resume.name.to_owned();
            }
            Next::Goto(target) | Next::To(target) if self.find(&target.step).is_none() => {
                return Err(StepError::msg(format!(
                    "step `{}` goes to unknown step `{}`",
                    step.name, target.step
                )));
            }
            _ => {}
        }
        Ok(transition)
    }
}
