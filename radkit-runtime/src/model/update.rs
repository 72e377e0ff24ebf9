//! What a stream of a task carries after the task itself: its status changes and its artifacts
//! (whole, or in chunks).

use super::{Artifact, Metadata, TaskStatus};

/// A task's status changed.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusUpdate {
    /// Task id.
    pub task_id: String,
    /// Context id.
    pub context_id: String,
    /// The new status.
    pub status: TaskStatus,
    /// True on the last update of a stream: the task ended or waits on its client.
    pub is_final: bool,
    /// Metadata.
    pub metadata: Option<Metadata>,
}

/// A task produced an artifact, or a chunk of one.
#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactUpdate {
    /// Task id.
    pub task_id: String,
    /// Context id.
    pub context_id: String,
    /// The artifact, or the chunk.
    pub artifact: Artifact,
    /// Appends to the artifact sent before with the same id.
    pub append: bool,
    /// The artifact's last chunk.
    pub last_chunk: bool,
    /// Metadata.
    pub metadata: Option<Metadata>,
}
