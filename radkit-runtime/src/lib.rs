//! radkit runtime: the A2A model, the authoring contract, the durable engine, the stores and the
//! A2A server. Users depend on the `radkit` facade, which re-exports this crate and the macros.

#![warn(missing_docs)]

extern crate self as radkit_runtime;

pub mod flow;
pub mod model;

pub use flow::*;
pub use model::{Artifact, Content, Message, Part, Role, Task, TaskState};
pub mod effects;
pub mod engine;
pub mod journal;
pub mod llm;
pub mod store;
pub mod tools;

pub use engine::{Engine, EngineBuilder, EngineError};
pub mod registry;
pub mod server;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use radkit_macros::{flow_skill, step};
