//! radkit's task model, and the two wire versions that render it.
//!
//! The root holds radkit's own types: a [`Task`] with its [`TaskStatus`], [`Message`]s made of
//! [`Part`]s, [`Artifact`]s, and the [`StatusUpdate`]s and [`ArtifactUpdate`]s a stream carries. They
//! hold what both A2A versions can carry and none of either's framing (no `kind` tags, no
//! `*_UNSPECIFIED` or `unknown` states); the engine, the journal, `flow` and the stores use nothing
//! else. Their serde form is the journal's (see [`Message`]).
//!
//! [`v0_3`] and [`v1`] are the A2A 0.3 and 1.0.1 wire types, each with its conversions from and to
//! the model: writing the model never fails, reading a wire value the model has no place for is a
//! [`WireError`]. `grpc` (feature `grpc`) is 1.0's protobuf form and its conversions to [`v1`]. Only the servers and the client use them. The agent card document both versions
//! read, its signatures and the extended card are here too.

mod binding;
mod card;
mod card_signing;
mod content;
mod extended_card;
#[cfg(feature = "grpc")]
#[cfg_attr(docsrs, doc(cfg(feature = "grpc")))]
pub mod grpc;
mod id;
mod message;
mod task;
mod update;
pub mod v0_3;
pub mod v1;
mod wire_error;

pub use binding::Binding;
pub use card::{served_json, AgentCapabilities, AgentCard, AgentSkill, SecurityScheme};
pub use card_signing::{
    canonical_json, canonical_payload, python_sdk_0_3_payload, python_sdk_payload, CardSigner,
    SigningError,
};
pub use content::Content;
pub use extended_card::{ExtendedCard, ExtendedCardError};
pub use id::TaskId;
pub(crate) use message::base64_text;
pub use message::{File, FileContent, Message, Part, Role};
pub use task::{Artifact, Task, TaskState, TaskStatus};
pub use update::{ArtifactUpdate, StatusUpdate};
pub use wire_error::WireError;

/// Arbitrary JSON object carried in `metadata` fields.
pub type Metadata = serde_json::Map<String, serde_json::Value>;

/// A fresh random identifier (UUID v4) for messages, artifacts and tasks.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
