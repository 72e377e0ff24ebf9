//! radkit runtime: the A2A model, the authoring contract, the durable engine, the stores and the
//! A2A server. Users depend on the `radkit` facade, which re-exports this crate and the macros.
//!
//! Data flows one way: `server` (A2A JSON-RPC) -> `engine` -> (`store`, skills through `flow`) ->
//! journal records -> subscribers. The top-level modules are layers: none imports a module that
//! imports it back (`tests/it/module_cycles.rs` checks). `client` calls other agents over A2A (0.3 or
//! 1.0) and stands on `model` alone.
//!
//! # Features
//!
//! What is compiled follows cargo features; the engine, the memory store, the A2A client (`client`),
//! push delivery and the JSON-RPC (0.3, 1.0) and HTTP+JSON bindings always are. The default is
//! `sqlite`, `grpc` and `openai`; the `radkit` facade forwards each feature (and adds `cli`).
//!
//! * `sqlite` (default): `store::SqliteStore`, one file, the single-process store (rusqlite with
//!   SQLite bundled).
//! * `postgres`: `store::PostgresStore` (its schema and migrations with it), a store many
//!   engines share through leases (tokio-postgres, deadpool-postgres).
//! * `grpc` (default): the A2A 1.0 gRPC binding, `server::grpc`, on the server's port (tonic,
//!   prost). Without it, the server's card lists no gRPC interface and a gRPC request is answered
//!   `UNIMPLEMENTED` with a message saying the binding is not built in.
//! * `openai` (default): `llm::OpenAiModel`, an OpenAI-compatible chat-completions client. It adds
//!   no crate: reqwest is there either way, for the A2A client and push delivery.
//! * `testing` (off): test and benchmark tooling (tokio's `test-util` pattern): fault injection
//!   (the fault types of `engine`, `Boundary`, `Fault`, `FaultHook`, and `EngineBuilder::fault_hook`,
//!   which halts the engine at a durability boundary as `kill -9` would) and the store conformance
//!   suite, `store::conformance`, which every store (and a store of your own) runs. Without it none
//!   of these exist in the public API and no crash can be injected. Enable it in
//!   `[dev-dependencies]` (`radkit = { .., features = ["testing"] }`).
//!
//! A program that names a type of a feature it did not enable fails to compile, naming the type.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate self as radkit_runtime;

pub mod client;
mod config;
pub mod effects;
pub mod engine;
pub mod flow;
pub mod journal;
pub mod llm;
pub mod model;
pub mod registry;
#[cfg(feature = "restate")]
#[cfg_attr(docsrs, doc(cfg(feature = "restate")))]
pub mod restate;
pub mod server;
pub mod serverless;
pub mod store;
pub mod telemetry;
pub mod tools;

/// The task machine without I/O ([`engine::machine`]), at the crate's root.
pub use engine::machine;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

/// What a typical skill names, in one import: `use radkit::prelude::*;`.
///
/// The authoring macros and `join!` (parallel `ctx` calls); what a step receives and returns
/// (`StepCtx`, `Content`, `StepResult`, `StepError`); what it produces (`Artifact`, `Message`); tools
/// and their policies (`Effects`, `FnTool`, `EffectPolicy`, `EffectError`); approvals
/// (`ApprovalRequest`, `Decision`); calls to other agents and skills (`AgentReply`, `AgentError`);
/// and the `Engine` that runs skills, with its `EngineBuilder`. Your own items of the same names
/// shadow these.
pub mod prelude {
    pub use crate::effects::Effects;
    pub use crate::engine::{Engine, EngineBuilder};
    pub use crate::flow::{
        AgentError, AgentReply, ApprovalRequest, Decision, EffectError, EffectPolicy, StepCtx,
        StepError, StepResult,
    };
    pub use crate::model::{Artifact, Content, Message};
    pub use crate::tools::FnTool;
    pub use crate::{await_input, goto, join};
    /// `.boxed()` and `.map(..)` on futures: `ctx.race` over calls of different types races them
    /// as boxed futures of one output type.
    pub use futures::FutureExt as _;
    pub use radkit_macros::{flow_skill, step};
}

/// Run several `ctx` calls of a step at once and wait for all of them (`futures::join!`,
/// re-exported): `let (summary, facts) = radkit::join!(ctx.llm("m").run::<String>(&q),
/// ctx.tool("t").call::<_, Value>(&q));`. Each call takes its InvocationId when it is made (in
/// argument order when written inline), live and on replay, whatever order `join!` polls them in;
/// they are journaled in one append and performed in parallel (see [`StepCtx::all`](flow::StepCtx::all)).
pub use futures::join;
pub use radkit_macros::{flow_skill, step};
/// The JSON Schema crate structured model answers use (`ctx.llm(..).run::<T>()` needs
/// `T: JsonSchema`): `#[derive(radkit::schemars::JsonSchema)]`, or depend on `schemars` 0.8 yourself.
pub use schemars;
/// The JSON crate the engine speaks (payloads, tool arguments, receipts): a skill that builds
/// `serde_json::Value`s can name it through radkit, and compiler messages about the macros'
/// expansions name `radkit::serde_json::…`.
pub use serde_json;
