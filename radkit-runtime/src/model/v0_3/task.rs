//! A2A 0.3 `Task`, its status and artifacts, and the two streaming update events.

use serde::{Deserialize, Serialize};

use super::{Message, Part};
use crate::model::Metadata;

/// Lifecycle state of a task.
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
    /// Unknown.
    Unknown,
}

/// Status of a task at a point in time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatus {
    /// State.
    pub state: TaskState,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// ISO 8601 timestamp.
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
    /// Extension URIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<String>>,
}

/// A task: one run of one skill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// Task id.
    pub id: String,
    /// Context id.
    pub context_id: String,
    /// Current status.
    pub status: TaskStatus,
    /// Messages exchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Message>>,
    /// Outputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<Artifact>>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Always `"task"`.
    pub kind: TaskKind,
}

/// The constant `kind` of a task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskKind {
    /// `"task"`
    #[default]
    #[serde(rename = "task")]
    Task,
}

/// A status change, streamed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    /// Task id.
    pub task_id: String,
    /// Context id.
    pub context_id: String,
    /// Always `"status-update"`.
    pub kind: StatusUpdateKind,
    /// New status.
    pub status: TaskStatus,
    /// True on the last event of a stream.
    #[serde(rename = "final")]
    pub is_final: bool,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// The constant `kind` of a status update.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum StatusUpdateKind {
    /// `"status-update"`
    #[default]
    #[serde(rename = "status-update")]
    StatusUpdate,
}

/// An artifact (or a chunk of one), streamed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    /// Task id.
    pub task_id: String,
    /// Context id.
    pub context_id: String,
    /// Always `"artifact-update"`.
    pub kind: ArtifactUpdateKind,
    /// The artifact or chunk.
    pub artifact: Artifact,
    /// Append to a previously sent artifact with the same id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<bool>,
    /// This is the final chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_chunk: Option<bool>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// The constant `kind` of an artifact update.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArtifactUpdateKind {
    /// `"artifact-update"`
    #[default]
    #[serde(rename = "artifact-update")]
    ArtifactUpdate,
}
