//! radkit's integration tests, one binary (`cargo test --test it`): a module per subject, the shared
//! servers, agents, skills and clients in `support`. `#[test]` here is `radkit-test-macros`'
//! attribute (made the crate's `test` by `#[macro_use]` below, so no module can fall back to
//! libtest's, which this `harness = false` binary would never run): it registers the test with
//! `support::harness`, which runs every test under libtest's command line and reports a test whose
//! service is missing as ignored. Select a subject with its module path: `cargo test --test it
//! a2a_errors::`.
//!
//! The registry tests (`tests/test_registry*.rs`) are binaries of their own: they assert what the
//! whole process registered with `#[flow_skill]`.

#[macro_use]
extern crate radkit_test_macros;

mod support;

mod a2a_client;
mod a2a_client_lf;
mod a2a_errors;
mod a2a_grpc;
mod a2a_push;
mod a2a_server;
mod a2a_v1;
mod a2a_v1_http;
mod agent_card;
mod bench_a2a;
mod bench_fanout;
mod bench_floor;
mod bench_idle;
mod bench_machine;
mod bench_telemetry;
mod calls_cluster;
mod calls_remote;
mod cli_agents;
mod cli_graph;
mod cli_tasks;
mod cluster;
mod compiletest;
mod conformance_skill;
mod connections;
mod console;
mod delegate_kill9;
mod direct_answer;
mod doc_links;
mod fold_prop;
mod fuzz_http;
mod grpc_connections;
mod journal_fixture;
mod lambda;
mod machine;
mod mcp;
mod mcp_serve;
mod metrics;
mod parallel_macro;
mod payments;
mod push_cluster;
mod push_delivery;
mod push_kill9;
mod readme;
mod research_forms;
mod restate;
mod retention;
mod serverless;
mod serverless_a2a;
mod serverless_executor;
mod serverless_pass;
mod storage;
mod suite;
mod test_hygiene;
mod test_macro_flow;
mod token_streams;
mod traces;
mod versions;
mod while_working_macros;

fn main() -> std::process::ExitCode {
    // The MCP tests' stdio server is this binary re-executed (`tests/it/support/mcp_server.rs`).
    if let Some(log) = std::env::var_os(support::mcp_server::SERVE_ENV) {
        return support::mcp_server::serve_stdio(std::path::Path::new(&log));
    }
    support::harness::main()
}
