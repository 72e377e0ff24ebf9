//! The `radkit` command: serve skills over A2A, run workers, benchmark the engine, inspect tasks.

use clap::{Parser, Subcommand};

mod cli;

#[derive(Parser)]
#[command(name = "radkit", version, about = "Durable agent skills over A2A")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the registered skills over A2A JSON-RPC (SQLite by default).
    Serve(cli::serve::Args),
    /// Claim and run tasks from a shared Postgres store, without the HTTP surface.
    Worker(cli::worker::Args),
    /// Run the engine benchmarks (build with --release).
    Bench(cli::bench::Args),
    /// Print a skill's step graph as Mermaid.
    Graph(cli::graph::Args),
    /// List tasks or show a task's journal as a timeline.
    Tasks(cli::tasks::Args),
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => cli::serve::run(args).await,
            Command::Worker(args) => cli::worker::run(args).await,
            Command::Bench(args) => cli::bench::run(args).await,
            Command::Graph(args) => cli::graph::run(args).await,
            Command::Tasks(args) => cli::tasks::run(args).await,
        }
    })
}
