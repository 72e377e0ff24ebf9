//! One module per subcommand.

pub mod bench;
pub mod bench_cluster;
pub mod graph;
pub mod serve;
pub mod tasks;
pub mod worker;

/// Log to stderr; `RUST_LOG` overrides the default `info`.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
