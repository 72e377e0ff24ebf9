//! `radkit executor`: performs the commands serverless passes hand out (`EngineBuilder::dispatch`)
//! from a shared store, until stopped: claims them, performs each under its InvocationId and
//! journals its receipt (see [`crate::serverless::Executor`]). Prints one JSON line per command.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::serverless::{Executed, Executor};
use crate::store::Store;

/// Arguments of `radkit executor`.
#[derive(clap::Args)]
pub struct Args {
    /// Store URL (`postgres://…`).
    #[arg(long, env = "RADKIT_STORE")]
    store: String,
    /// Commands claimed at once at most.
    #[arg(long, default_value_t = 16)]
    limit: usize,
    /// How long a round may take (its claims last as long, and a margin).
    #[arg(long, default_value_t = 60_000)]
    round_ms: u64,
    /// Pause between rounds that found nothing, in ms.
    #[arg(long, default_value_t = 250)]
    poll_ms: u64,
    /// Run one round and exit.
    #[arg(long)]
    once: bool,
}

/// One line of what a command came to.
pub(crate) fn line(executed: &Executed) -> serde_json::Value {
    match executed {
        Executed::Recorded { id, ok } => serde_json::json!({"id": id, "recorded": true, "ok": ok}),
        Executed::Unknown { id } => {
            serde_json::json!({"id": id, "recorded": true, "unknown": true})
        }
        Executed::AlreadyDone { id } => serde_json::json!({"id": id, "already_done": true}),
        Executed::Busy { id } => serde_json::json!({"id": id, "busy": true}),
    }
}

/// Run `executor`.
pub async fn run(app: &super::App, args: Args) -> anyhow::Result<()> {
    let store: Arc<dyn Store> = open(&args.store).await?;
    let executor = Executor::from_builder(app.builder(store))?;
    loop {
        let deadline = Instant::now() + Duration::from_millis(args.round_ms);
        let done = executor.run(deadline, args.limit).await?;
        for executed in &done {
            println!("{}", line(executed));
        }
        if args.once {
            return Ok(());
        }
        if done.is_empty() {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(args.poll_ms)) => {}
                () = super::shutdown_signal() => return Ok(()),
            }
        }
    }
}

#[cfg(feature = "postgres")]
async fn open(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    if !super::is_postgres(url) {
        anyhow::bail!("an executor shares its store with the passes: give a `postgres://…` URL");
    }
    Ok(Arc::new(crate::store::PostgresStore::connect(url).await?))
}

#[cfg(not(feature = "postgres"))]
async fn open(_url: &str) -> anyhow::Result<Arc<dyn Store>> {
    anyhow::bail!("an executor needs a shared store: build radkit with the `postgres` feature")
}
