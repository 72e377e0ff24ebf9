//! What the suite's modules share: the harness and the outside services (the runtime suite's files,
//! included by path), the in-process agent and bounded client of `agent`, the small skills of
//! `skills`, the `radkit serve` processes and JSON-RPC/SSE helpers of `common`, the push settings and
//! webhook receiver of `push_common`, the byte-holding proxy of `hold_proxy`, and the demo skills of
//! the `radkit` binary.

#[path = "../../../radkit-runtime/tests/it/support/harness.rs"]
pub mod harness;
#[path = "../../../radkit-runtime/tests/it/support/services.rs"]
pub mod services;

pub mod agent;
pub mod browser;
pub mod common;
pub mod hold_proxy;
pub mod mcp_server;
pub mod push_common;
pub mod skills;

#[path = "../../../src/demo/mod.rs"]
pub mod demo;
