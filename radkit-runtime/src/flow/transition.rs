//! `Transition`: what a step or reducer decides, plus the effects that leave with the decision.

use serde::{Deserialize, Serialize};

use crate::model::{Artifact, Message};

use super::{Cmd, StepError};

/// Where the task goes next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next<S> {
    /// Move to `S` and wait for the next event (a command result, a timer).
    To(S),
    /// Move to `S` and run it now (`Event::Enter`).
    Goto(S),
    /// Move to `S`, set the task to `input-required`, and deliver the next user message to it.
    AwaitInput {
        /// The waiting state (carries the payload).
        state: S,
        /// Name of the awaited answer.
        slot: String,
        /// What to ask.
        message: Message,
    },
    /// Finish successfully.
    Complete {
        /// Final message.
        message: Option<Message>,
    },
    /// Finish with an error.
    Fail {
        /// Why.
        reason: String,
    },
    /// Decline the task (a business outcome, not an error).
    Reject {
        /// Why.
        reason: String,
    },
    /// The event does not concern this state: nothing changes.
    Ignore,
}

/// A decision plus the commands, messages and artifacts that leave with it, atomically journaled.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a transition does nothing until it is returned to the engine"]
pub struct Transition<S> {
    /// Where to go.
    pub next: Next<S>,
    /// Commands to run after the transition is journaled; each result comes back as an event.
    pub cmds: Vec<Cmd>,
    /// Messages to the client.
    pub messages: Vec<Message>,
    /// Artifacts to the client.
    pub artifacts: Vec<Artifact>,
}

/// What a step returns. `S` is the skill's state type; step tables use the default [`super::StepState`].
pub type StepResult<S = StepState> = Result<Transition<S>, StepError>;

impl<S> Transition<S> {
    fn of(next: Next<S>) -> Self {
        Transition {
            next,
            cmds: Vec::new(),
            messages: Vec::new(),
            artifacts: Vec::new(),
        }
    }

    /// Move to `state` and wait for the next event.
    pub fn to(state: S) -> Self {
        Self::of(Next::To(state))
    }

    /// Move to `state` and run it now.
    pub fn goto(state: S) -> Self {
        Self::of(Next::Goto(state))
    }

    /// Wait for user input in `state`.
    pub fn await_input(state: S, slot: impl Into<String>, message: impl Into<String>) -> Self {
        Self::of(Next::AwaitInput {
            state,
            slot: slot.into(),
            message: Message::agent_text(message),
        })
    }

    /// Finish successfully with a final agent message.
    pub fn complete(message: impl Into<String>) -> Self {
        Self::of(Next::Complete {
            message: Some(Message::agent_text(message)),
        })
    }

    /// Finish successfully without a message.
    pub fn done() -> Self {
        Self::of(Next::Complete { message: None })
    }

    /// Finish as failed.
    pub fn fail(reason: impl Into<String>) -> Self {
        Self::of(Next::Fail {
            reason: reason.into(),
        })
    }

    /// Finish as rejected.
    pub fn reject(reason: impl Into<String>) -> Self {
        Self::of(Next::Reject {
            reason: reason.into(),
        })
    }

    /// Change nothing.
    pub fn ignore() -> Self {
        Self::of(Next::Ignore)
    }

    /// Also run `cmd` once the transition is journaled.
    pub fn cmd(mut self, cmd: Cmd) -> Self {
        self.cmds.push(cmd);
        self
    }

    /// Also send `message` to the client.
    pub fn message(mut self, message: Message) -> Self {
        self.messages.push(message);
        self
    }

    /// Also send `artifact` to the client.
    pub fn artifact(mut self, artifact: Artifact) -> Self {
        self.artifacts.push(artifact);
        self
    }

    /// Also send every artifact in `artifacts`.
    pub fn artifacts(mut self, artifacts: impl IntoIterator<Item = Artifact>) -> Self {
        self.artifacts.extend(artifacts);
        self
    }

    /// The same transition with its state mapped (used to erase state types).
    pub fn map_state<T>(self, f: impl FnOnce(S) -> T) -> Transition<T> {
        match self.try_map_state(|s| Ok::<T, std::convert::Infallible>(f(s))) {
            Ok(t) => t,
            Err(never) => match never {},
        }
    }

    /// The same transition with its state mapped by a fallible function.
    pub fn try_map_state<T, E>(
        self,
        f: impl FnOnce(S) -> Result<T, E>,
    ) -> Result<Transition<T>, E> {
        let next = match self.next {
            Next::To(s) => Next::To(f(s)?),
            Next::Goto(s) => Next::Goto(f(s)?),
            Next::AwaitInput {
                state,
                slot,
                message,
            } => Next::AwaitInput {
                state: f(state)?,
                slot,
                message,
            },
            Next::Complete { message } => Next::Complete { message },
            Next::Fail { reason } => Next::Fail { reason },
            Next::Reject { reason } => Next::Reject { reason },
            Next::Ignore => Next::Ignore,
        };
        Ok(Transition {
            next,
            cmds: self.cmds,
            messages: self.messages,
            artifacts: self.artifacts,
        })
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
