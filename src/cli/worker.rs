//! `worker`: the engine without the HTTP surface, sharing a Postgres store with other workers
//! and servers. It claims runnable tasks through leases, renews them while it works and gives them
//! back when it stops (SIGINT or SIGTERM). It exists with the `postgres` cargo feature.

use std::time::Duration;

use anyhow::Context;

use super::App;
use crate::engine::{Engine, EngineBuilder};

/// Lease settings, shared by `radkit serve` and `radkit worker` (they matter on Postgres only).
#[derive(clap::Args, Clone)]
pub struct ClusterArgs {
    /// This process's name in leases (default: host, pid and a random suffix).
    #[arg(long, env = "RADKIT_WORKER_ID")]
    pub worker_id: Option<String>,
    /// How long a lease lasts without renewal, in ms: a dead worker's tasks are taken over after it.
    #[arg(long, default_value_t = 10_000)]
    pub lease_ms: u64,
    /// How often to claim runnable tasks (and poll for cancels and other workers' progress), in ms.
    #[arg(long, default_value_t = 100)]
    pub poll_ms: u64,
    /// Tasks this process drives at once.
    #[arg(long, default_value_t = 256)]
    pub max_tasks: usize,
}

impl ClusterArgs {
    /// Apply to an engine builder.
    pub fn apply(&self, builder: EngineBuilder) -> EngineBuilder {
        let builder = builder
            .lease_ttl(Duration::from_millis(self.lease_ms))
            .poll_interval(Duration::from_millis(self.poll_ms))
            .max_active_tasks(self.max_tasks);
        match &self.worker_id {
            Some(id) => builder.worker_id(id.clone()),
            None => builder,
        }
    }
}

/// Arguments of `radkit worker`.
#[derive(clap::Args)]
pub struct Args {
    /// The shared store: `postgres://…`.
    #[arg(long, env = "RADKIT_STORE")]
    pub store: String,
    /// Models: `program` (default) or `openai`, as for `serve`.
    #[arg(long, default_value = "program", value_parser = super::serve::LLM_VALUES)]
    pub llm: String,
    /// Also run the `bench` skill (what `bench concurrent --workers N` submits).
    #[arg(long, hide = true)]
    pub bench_skill: bool,
    /// Let push-notification webhooks point at private, loopback and link-local addresses
    /// (refused by default: an agent must not be turned against its own network). For tests and
    /// trusted networks.
    #[arg(long, env = "RADKIT_PUSH_ALLOW_PRIVATE")]
    pub push_allow_private: bool,
    /// The A2A agents this program's steps call (`--agent`, `--agent-token`), as for `serve`.
    #[command(flatten)]
    pub agents: super::agents::AgentArgs,
    /// Lease settings.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Trace export (`--otlp-endpoint`, with the `otel` feature).
    #[command(flatten)]
    pub telemetry: super::telemetry::TraceArgs,
    /// How long finished tasks are kept (`--retain-journals`, `--retain-tasks`), as for `serve`.
    #[command(flatten)]
    pub retention: super::retention::RetentionArgs,
}

/// Run `worker` until SIGINT or SIGTERM.
pub async fn run(app: &App, args: Args) -> anyhow::Result<()> {
    let _traces = args.telemetry.init()?;
    if !super::is_postgres(&args.store) {
        anyhow::bail!(
            "`{}` is not a shared store: a worker needs `postgres://…` (on SQLite, `radkit serve` runs every task itself)",
            args.store
        );
    }
    let store = crate::store::PostgresStore::connect(&args.store)
        .await
        .context("opening the Postgres store")?;
    let mut builder = args
        .cluster
        .apply(app.builder(std::sync::Arc::new(store)))
        .push_allow_private(args.push_allow_private);
    builder = args.agents.apply(builder);
    builder = args.retention.apply(builder);
    if args.bench_skill {
        builder = super::bench::with_bench_skill(builder)?;
    }
    let engine: Engine = super::serve::with_models(builder, &args.llm)?
        .start()
        .await?;
    println!(
        "worker {} claiming tasks of {}",
        engine.worker_id(),
        engine
            .skills()
            .into_iter()
            .map(|s| s.id)
            .collect::<Vec<_>>()
            .join(", ")
    );
    super::shutdown_signal().await;
    engine.shutdown().await;
    tracing::info!(worker = %engine.worker_id(), "stopped; leases given back");
    Ok(())
}
