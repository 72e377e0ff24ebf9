//! The `radkit` command line over a program's own skills: `serve`, `worker`, `tasks`, `graph` and
//! `bench`. One call gives a binary all of it:
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     radkit::cli::main() // every skill registered with #[flow_skill] in this program
//! }
//! ```
//!
//! [`App`] adds what registration cannot: step tables and reducers, models and tools, hooks, the
//! agent's name on its card. The `radkit` binary itself is an [`App`] over the demo skills. This
//! module exists only with the `cli` cargo feature (on by default); it owns argument parsing and
//! logging, and reaches the engine only through [`EngineBuilder`]. What it offers follows the
//! other features: `worker`, `--store postgres://…` and the lease options come with `postgres`,
//! `bench a2a --binding grpc` with `grpc`, `--llm openai` with `openai`.

mod agents;
mod alloc_count;
mod bench;
mod bench_a2a;
#[cfg(feature = "postgres")]
mod bench_cluster;
#[cfg(feature = "console")]
mod bench_console;
mod bench_fanout;
mod bench_floor;
#[cfg(feature = "grpc")]
mod bench_grpc;
mod bench_idle;
mod bench_machine;
mod bench_reads;
mod bench_soak;
mod bench_streams;
mod bench_telemetry;
mod executor;
mod graph;
#[cfg(feature = "lambda")]
mod lambda;
mod memory;
mod pass;
#[cfg(feature = "postgres")]
mod proc_cpu;
mod retention;
mod serve;
mod tasks;
mod telemetry;
#[cfg(feature = "postgres")]
mod worker;

pub use alloc_count::{thread_allocations, CountingAllocator};

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};

use crate::engine::{Engine, EngineBuilder};
use crate::server::ServerConfig;
use crate::store::Store;

/// The whole CLI over the skills registered with `#[flow_skill]` in this program, with no models or
/// tools configured. Use [`App`] to add them.
pub fn main() -> ExitCode {
    App::new().main()
}

type Configure = dyn Fn(EngineBuilder) -> EngineBuilder + Send + Sync;

/// A command-line program serving a set of skills: what [`main`] runs, with room for the skills,
/// models and tools registration cannot provide.
///
/// ```no_run
/// use radkit::effects::Effects;
/// use radkit::llm::ScriptedModel;
///
/// fn main() -> std::process::ExitCode {
///     radkit::cli::App::new()
///         .name("greeter")
///         .description("Greets people.")
///         .engine(|builder| {
///             builder.effects(Effects::new().default_model(ScriptedModel::new(|_| {
///                 Ok(serde_json::json!("hello"))
///             })))
///         })
///         .main()
/// }
/// ```
#[derive(Clone)]
pub struct App {
    configure: Vec<Arc<Configure>>,
    name: Option<String>,
    description: Option<String>,
}

impl Default for App {
    fn default() -> Self {
        Self::new()
    }
}

impl App {
    /// The registered skills, no models or tools; the card is named after the executable.
    pub fn new() -> Self {
        App {
            configure: Vec::new(),
            name: None,
            description: None,
        }
    }

    /// Configure every engine this program builds (`serve`, `worker`, `graph`, `bench idle
    /// --skill`): add skills ([`EngineBuilder::skill`]), choose a subset
    /// ([`EngineBuilder::only_skills`]), set effects, hooks or the default skill. Called once per
    /// engine; calls accumulate in order.
    pub fn engine(
        mut self,
        configure: impl Fn(EngineBuilder) -> EngineBuilder + Send + Sync + 'static,
    ) -> Self {
        self.configure.push(Arc::new(configure));
        self
    }

    /// The agent's name on its card (default: the executable's name).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The agent's description on its card (default: a list of its skills).
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Parse the process's arguments and run the command; errors are printed to stderr.
    pub fn main(self) -> ExitCode {
        self.main_from(std::env::args_os())
    }

    /// Parse `args` (the first one is the program name) and run the command.
    pub fn main_from<I, T>(self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let name = executable_name();
        let mut command = <Cli as clap::CommandFactory>::command()
            .name(name.clone())
            .bin_name(name);
        let parsed = command
            .try_get_matches_from_mut(args)
            .and_then(|matches| <Cli as clap::FromArgMatches>::from_arg_matches(&matches))
            .and_then(|cli| cli.check(&mut command).map(|()| cli));
        let cli = match parsed {
            Ok(cli) => cli,
            Err(e) => {
                // Help and version go to stdout with success, mistakes to stderr with status 2.
                let _ = e.print();
                return if e.use_stderr() {
                    ExitCode::from(2)
                } else {
                    ExitCode::SUCCESS
                };
            }
        };
        match self.run(cli) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        }
    }

    fn run(self, cli: Cli) -> anyhow::Result<()> {
        // Before any thread starts: the allocators are set up (see `memory`).
        memory::configure_allocators();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async move {
            match cli.command {
                Command::Serve(args) => serve::run(&self, *args).await,
                #[cfg(feature = "postgres")]
                Command::Worker(args) => worker::run(&self, args).await,
                Command::Bench(args) => bench::run(&self, args).await,
                Command::Graph(args) => graph::run(&self, args).await,
                Command::Tasks(args) => tasks::run(&self, args).await,
                Command::Pass(args) => pass::run(&self, args).await,
                Command::Executor(args) => executor::run(&self, args).await,
                #[cfg(feature = "lambda")]
                Command::Lambda(args) => lambda::run(&self, args).await,
            }
        })
    }

    /// An engine builder over `store` with this program's configuration applied.
    pub fn builder(&self, store: Arc<dyn Store>) -> EngineBuilder {
        self.configure
            .iter()
            .fold(Engine::builder_arc(store), |builder, configure| {
                configure(builder)
            })
    }

    /// The card settings for an engine serving `engine`'s skills at `url`.
    pub(crate) fn server_config(&self, engine: &Engine, url: String) -> ServerConfig {
        let mut config = ServerConfig::new(url);
        config.name = self.name.clone().unwrap_or_else(executable_name);
        config.description = self.description.clone().unwrap_or_else(|| {
            let names: Vec<String> = engine.skills().into_iter().map(|s| s.name).collect();
            format!("Serves {} over A2A with radkit.", names.join(", "))
        });
        config
    }
}

fn executable_name() -> String {
    std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "radkit agent".to_owned())
}

#[derive(Parser)]
#[command(version, about = "Durable agent skills over A2A")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

impl Cli {
    /// What clap cannot check value by value (the `--agent-token`s against the `--agent`s), as a
    /// clap error of the subcommand, so it reads and exits like any other mistake in the arguments.
    fn check(&self, command: &mut clap::Command) -> Result<(), clap::Error> {
        let (subcommand, agents) = match &self.command {
            Command::Serve(args) => ("serve", &args.agents),
            #[cfg(feature = "postgres")]
            Command::Worker(args) => ("worker", &args.agents),
            _ => return Ok(()),
        };
        agents.check().map_err(|message| {
            let kind = clap::error::ErrorKind::ArgumentConflict;
            match command.find_subcommand_mut(subcommand) {
                Some(sub) => sub.error(kind, message),
                None => command.error(kind, message),
            }
        })
    }
}

#[derive(Subcommand)]
enum Command {
    /// Serve this program's skills over A2A JSON-RPC (SQLite by default).
    Serve(Box<serve::Args>),
    /// Claim and run tasks of this program's skills from a shared Postgres store, without HTTP.
    #[cfg(feature = "postgres")]
    Worker(worker::Args),
    /// Run the engine benchmarks (build with --release).
    Bench(bench::Args),
    /// Print a skill's step graph as Mermaid (`--list` lists the skills).
    Graph(graph::Args),
    /// List tasks or show a task's journal as a timeline.
    Tasks(tasks::Args),
    /// One serverless invocation: run one event (a message, a wake, a cancel, a sweep) as one pass
    /// over the store, then exit.
    Pass(pass::Args),
    /// Perform the commands serverless passes hand to executors (`EngineBuilder::dispatch`), from a
    /// shared Postgres store, until stopped.
    Executor(executor::Args),
    /// Run as an AWS Lambda function: `http` (the A2A surface) or `sweep` (scheduled).
    #[cfg(feature = "lambda")]
    Lambda(lambda::Args),
}

/// True for a Postgres URL.
pub fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

/// Log to stderr; `RUST_LOG` overrides the default `info`.
pub fn init_tracing() {
    telemetry::init_tracing(None);
}

#[cfg(test)]
mod tests {
    /// clap's own consistency checks over every subcommand (unique ids, valid defaults), which it
    /// otherwise runs only when that subcommand is parsed.
    #[test]
    fn the_command_line_is_consistent() {
        <super::Cli as clap::CommandFactory>::command().debug_assert();
    }
}
