//! radkit-runtime's integration tests, one binary (`cargo test -p radkit-runtime --test it`): a
//! module per subject, the shared builders and the harness in `support`. `#[test]` here is
//! `radkit-test-macros`' attribute (made the crate's `test` by `#[macro_use]` below, so no module can
//! fall back to libtest's, which this `harness = false` binary would never run): it registers the
//! test with `support::harness`, which runs every test under libtest's command line and reports a
//! test whose service is missing as ignored. Select a subject with its module path:
//! `cargo test -p radkit-runtime --test it call_order::`.

#[macro_use]
extern crate radkit_test_macros;

mod support;

mod call_order;
mod calls_child;
mod crash_matrix;
mod engine_checkpoint;
mod engine_crash;
mod engine_flow;
mod engine_kill9;
mod engine_replay_prop;
mod hooks_permissions;
mod llm_openai;
mod llm_providers;
mod llm_scripted;
mod module_cycles;
mod parallel_effects;
mod promises;
mod retention;
mod step_table_edges;
mod store_conformance;
mod store_postgres;
mod store_postgres_news;
mod subscription;
mod suite;
mod token_streaming;
mod tools_registry;
mod waiting;
mod while_working;

fn main() -> std::process::ExitCode {
    support::harness::main()
}
