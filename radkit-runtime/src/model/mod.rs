//! A2A 0.3 wire types. This module owns the JSON shape clients see and nothing else: it never touches
//! the engine, the store or HTTP. Field names follow the A2A 0.3 JSON schema exactly (vendored
//! in the repository as `docs/a2a/a2a-v0.3.0.schema.json`, with the specification beside it).
//! [`v1`] holds the A2A 1.0.1 wire types and their conversions to and from these; the agent card
//! document both versions read, its signatures and the extended card are here too.

mod card;
mod card_signing;
mod content;
mod extended_card;
mod id;
mod message;
mod task;
pub mod v1;

pub use card::{served_json, AgentCapabilities, AgentCard, AgentSkill, SecurityScheme};
pub use card_signing::{
    canonical_json, canonical_payload, python_sdk_0_3_payload, python_sdk_payload, CardSigner,
    SigningError,
};
pub use content::Content;
pub use extended_card::{ExtendedCard, ExtendedCardError};
pub use id::TaskId;
pub use message::{FileContent, Message, Part, Role};
pub use task::{
    Artifact, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
};

/// Arbitrary JSON object carried in `metadata` fields.
pub type Metadata = serde_json::Map<String, serde_json::Value>;

/// The A2A protocol version this crate speaks.
pub const PROTOCOL_VERSION: &str = "0.3.0";

/// A fresh random identifier (UUID v4) for messages, artifacts and tasks.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
