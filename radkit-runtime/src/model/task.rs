//! [`Task`], its [`TaskStatus`] and [`TaskState`], and its [`Artifact`]s, as the engine holds them.
//! Like [`Message`], their serde form is the journal's and the stores'; the wire versions render
//! them ([`v0_3`](super::v0_3), [`v1`](super::v1)).

use serde::{Deserialize, Serialize};

use super::message::stored_list;
use super::{new_id, Message, Metadata, Part};

/// Where a task is in its life.
///
/// Stored by its kebab-case name (`input-required`), in the journal and in the stores' state
/// columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    /// Received, not yet started.
    Submitted,
    /// Running.
    Working,
    /// Waiting for the client.
    InputRequired,
    /// Finished successfully.
    Completed,
    /// Canceled by the client.
    Canceled,
    /// Finished with an error.
    Failed,
    /// The agent declined (a business outcome).
    Rejected,
    /// Waiting for authentication.
    AuthRequired,
}

impl TaskState {
    /// Every state, in declaration order.
    pub const ALL: [TaskState; 8] = [
        TaskState::Submitted,
        TaskState::Working,
        TaskState::InputRequired,
        TaskState::Completed,
        TaskState::Canceled,
        TaskState::Failed,
        TaskState::Rejected,
        TaskState::AuthRequired,
    ];

    /// The states a task never leaves: the one definition [`TaskState::is_terminal`] and the stores'
    /// SQL filters are built from.
    pub const TERMINAL: [TaskState; 4] = [
        TaskState::Completed,
        TaskState::Canceled,
        TaskState::Failed,
        TaskState::Rejected,
    ];

    /// True for states a task never leaves ([`TaskState::TERMINAL`]).
    pub fn is_terminal(self) -> bool {
        Self::TERMINAL.contains(&self)
    }

    /// True for the states in which the task waits on its client (input or authentication): a
    /// stream of the task closes there, as at a terminal state.
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }

    /// The stored name (`input-required`, ...), which is also A2A 0.3's.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::InputRequired => "input-required",
            TaskState::Completed => "completed",
            TaskState::Canceled => "canceled",
            TaskState::Failed => "failed",
            TaskState::Rejected => "rejected",
            TaskState::AuthRequired => "auth-required",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == s)
    }
}

/// A task's status at a point in time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatus {
    /// The state.
    pub state: TaskState,
    /// What the agent said with it: the answer, the question, or the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// When (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// An output of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Unique within the task.
    pub artifact_id: String,
    /// Human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Content.
    pub parts: Vec<Part>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// URIs of the extensions this artifact uses.
    #[serde(
        default,
        deserialize_with = "stored_list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub extensions: Vec<String>,
}

impl Artifact {
    /// A named artifact of one text part.
    pub fn from_text(name: impl Into<String>, text: impl Into<String>) -> Self {
        Artifact {
            artifact_id: new_id(),
            name: Some(name.into()),
            description: None,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: Vec::new(),
        }
    }

    /// The artifact with a given id (ids must be deterministic for replayed emissions).
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.artifact_id = id.into();
        self
    }
}

/// A task: one run of one skill, as its journal projects it.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// Task id.
    pub id: String,
    /// Context (conversation) id.
    pub context_id: String,
    /// Current status.
    pub status: TaskStatus,
    /// Messages exchanged, oldest first (the window asked for; empty when none was).
    pub history: Vec<Message>,
    /// Outputs.
    pub artifacts: Vec<Artifact>,
    /// Metadata.
    pub metadata: Option<Metadata>,
}

#[cfg(test)]
mod tests {
    use super::TaskState;

    #[test]
    fn all_lists_each_state_once_and_terminal_is_a_subset() {
        for (i, state) in TaskState::ALL.into_iter().enumerate() {
            assert_eq!(TaskState::parse(state.as_str()), Some(state));
            let stored = serde_json::to_value(state).unwrap();
            assert_eq!(stored, serde_json::json!(state.as_str()));
            assert!(!TaskState::ALL[..i].contains(&state), "{state:?} twice");
        }
        for state in TaskState::TERMINAL {
            assert!(TaskState::ALL.contains(&state) && state.is_terminal());
        }
        assert!(!TaskState::Working.is_terminal() && !TaskState::InputRequired.is_terminal());
        assert_eq!(TaskState::parse("unknown"), None);
    }
}
