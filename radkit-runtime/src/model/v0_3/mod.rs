//! A2A 0.3 wire types, and their conversions from and to radkit's model.
//!
//! This module owns the JSON shape 0.3 clients see and nothing else. Field names follow the A2A 0.3
//! JSON schema exactly (vendored in the repository as `docs/a2a/a2a-v0.3.0.schema.json`, with the
//! specification beside it): `kind` discriminators, optional lists, inline file bytes as base64
//! text. The servers and the client use it; the engine, the journal and the stores never do.

mod convert;
mod message;
mod task;

pub use message::{FileContent, Message, MessageKind, Part, Role};
pub use task::{
    Artifact, ArtifactUpdateKind, StatusUpdateKind, Task, TaskArtifactUpdateEvent, TaskKind,
    TaskState, TaskStatus, TaskStatusUpdateEvent,
};

/// The A2A protocol version these types speak.
pub const PROTOCOL_VERSION: &str = "0.3.0";
