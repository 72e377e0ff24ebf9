//! radkit: durable agent skills served over A2A. This facade re-exports the runtime and the macros.

pub use radkit_runtime::*;
pub use radkit_runtime::{await_input, goto};

pub mod demo;
