//! Events delivered to a skill, and the receipts that record command outcomes.

use serde::{Deserialize, Serialize};

use super::{EffectError, InvocationId};
use crate::model::Message;

/// The outcome of a command: its value, or the error it ended with.
pub type Outcome = Result<serde_json::Value, EffectError>;

/// Something that happened to a task; the engine delivers it to the skill's current state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// A user message: the first one starts the task, later ones answer `await_input`.
    UserMessage {
        /// The message.
        message: Message,
    },
    /// A command issued by an earlier transition finished.
    CommandResult {
        /// Which command.
        id: InvocationId,
        /// Its outcome.
        outcome: Outcome,
    },
    /// A sleep command issued by an earlier transition fired.
    TimerFired {
        /// The sleep command.
        id: InvocationId,
    },
    /// The client canceled the task.
    Cancel,
    /// The state was entered by `goto` and runs now.
    Enter,
    /// A message sent while the task worked, to a skill that is interrupted by such messages
    /// ([`WhileWorking::Interrupt`](super::WhileWorking)): delivered to the state the task was in.
    Interrupted {
        /// The message.
        message: Message,
    },
}

impl Event {
    /// The event's kind name, for logs and errors.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Event::UserMessage { .. } => "user_message",
            Event::CommandResult { .. } => "command_result",
            Event::TimerFired { .. } => "timer_fired",
            Event::Cancel => "cancel",
            Event::Enter => "enter",
            Event::Interrupted { .. } => "interrupted",
        }
    }
}

/// The journaled result of one command attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// Which command.
    pub id: InvocationId,
    /// Attempt number, from 1.
    pub attempt: u32,
    /// The outcome.
    pub outcome: Outcome,
    /// Token usage or other accounting the effect reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<serde_json::Value>,
}
