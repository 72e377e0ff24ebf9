//! radkit: durable agent skills served over A2A. This facade re-exports the runtime
//! (`radkit_runtime`) and the authoring macros, so a skill depends on `radkit` (and `serde` for its
//! own payload types) only.
//!
//! Write a skill as named async steps with [`flow_skill`] and [`step`]; move between them with
//! [`goto!`] and [`await_input!`]. The [`macros_guide`] lists every macro argument, the allowed step
//! signatures and the compile errors.
//!
//! # Features
//!
//! * `cli` (default): [`cli::main`] gives a program the whole `radkit` command line over its own
//!   skills (and the `radkit` binary is built). It turns `sqlite` on; its Postgres, gRPC and OpenAI
//!   options come with those features.
//! * `sqlite` (default): `store::SqliteStore` (rusqlite, SQLite bundled).
//! * `grpc` (default): the A2A 1.0 gRPC binding, `server::grpc` (tonic, prost). Without it the
//!   server serves JSON-RPC and HTTP+JSON, lists no gRPC interface on its card and answers a gRPC
//!   request `UNIMPLEMENTED`.
//! * `openai` (default): `llm::OpenAiModel` and `--llm openai` (no crate of its own).
//! * `postgres`: `store::PostgresStore` (tokio-postgres, deadpool-postgres);
//!   with `cli`, `radkit worker`, `--store postgres://…` and the lease options.
//! * `testing`: the runtime's test tooling: fault injection (`engine::{Boundary, Fault,
//!   FaultHook}`, `EngineBuilder::fault_hook`) and the store conformance suite (`store::conformance`).
//!
//! A library that embeds the engine in its own server and needs only SQLite depends on
//! `radkit = { version = "0.1", default-features = false, features = ["sqlite"] }`: no CLI, gRPC or
//! Postgres is compiled. The memory store, the engine, the A2A client and the JSON-RPC and
//! HTTP+JSON bindings are always there.

#![cfg_attr(docsrs, feature(doc_cfg))]

pub use radkit_runtime::{await_input, flow_skill, goto, join, step};
pub use radkit_runtime::{
    client, effects, engine, flow, journal, llm, machine, model, prelude, registry, server,
    serverless, store, telemetry, tools,
};
pub use radkit_runtime::{schemars, serde_json};

#[cfg(feature = "restate")]
#[cfg_attr(docsrs, doc(cfg(feature = "restate")))]
pub use radkit_runtime::restate;

#[doc(hidden)]
pub use radkit_runtime::__private;

#[cfg(feature = "cli")]
#[cfg_attr(docsrs, doc(cfg(feature = "cli")))]
pub mod cli;

#[doc = include_str!("../docs/macros.md")]
pub mod macros_guide {}

/// Every `rust` block of the README compiles (and runs unless `no_run`) as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// Every `rust` block of `docs/skills.md` compiles (and runs unless `no_run`) as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../docs/skills.md")]
pub struct SkillsDoctests;
