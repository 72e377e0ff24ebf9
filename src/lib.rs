//! radkit: durable agent skills served over A2A. This facade re-exports the runtime
//! (`radkit_runtime`) and the authoring macros, so a skill depends on `radkit` (and `serde` for its
//! own payload types) only.
//!
//! Write a skill as named async steps with [`flow_skill`] and [`step`]; move between them with
//! [`goto!`] and [`await_input!`]. The [`macros_guide`] lists every macro argument, the allowed step
//! signatures and the compile errors. With the `cli` feature (on by default), [`cli::main`] gives a
//! program the whole `radkit` command line over its own skills. The `testing` feature (off by
//! default) forwards the runtime's test tooling: fault injection (`engine::{Boundary, Fault, FaultHook}`,
//! `EngineBuilder::fault_hook`) and the store conformance suite (`store::conformance`).

pub use radkit_runtime::{await_input, flow_skill, goto, join, step};
pub use radkit_runtime::{
    client, effects, engine, flow, journal, llm, model, prelude, registry, server, store, tools,
};
pub use radkit_runtime::{schemars, serde_json};

#[doc(hidden)]
pub use radkit_runtime::__private;

#[cfg(feature = "cli")]
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
