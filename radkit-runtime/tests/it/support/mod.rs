//! What the suite's modules share: the harness, the outside services, and the engine builders,
//! skills and waits of `common`.

pub mod common;
pub mod harness;
pub mod services;
