//! `radkit lambda http|sweep`: this program's skills as AWS Lambda functions
//! ([`crate::serverless::lambda`]), run by the Lambda Runtime API's loop (`AWS_LAMBDA_RUNTIME_API`,
//! set by the platform). `http` serves the A2A surface, each invocation one request over an engine
//! in serverless mode; `sweep` is the scheduled function that runs due timers and work left over.
//! Both share one store: Postgres (`--store postgres://…`) for real deployments, where concurrent
//! invocations meet at the tasks' leases.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::serverless::Passes;
use crate::store::Store;

/// Arguments of `radkit lambda`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    function: Function,
    /// Store URL (`postgres://…`, or `sqlite://<path>` for a single function instance).
    #[arg(long, global = true, env = "RADKIT_STORE")]
    store: Option<String>,
    /// Directory of the SQLite file when no `--store` is given.
    #[arg(
        long,
        global = true,
        default_value = "/tmp/radkit",
        env = "RADKIT_DATA_DIR"
    )]
    data_dir: PathBuf,
}

#[derive(clap::Subcommand)]
enum Function {
    /// The A2A surface (JSON-RPC 1.0 and 0.3, HTTP+JSON, the agent card) behind a Function URL,
    /// API Gateway or an ALB.
    Http {
        /// The function's public URL, as clients reach it (the card's interfaces).
        #[arg(long, env = "RADKIT_PUBLIC_URL")]
        public_url: String,
        /// `TOKEN=principal` (or `TOKEN` alone), as for `radkit serve`; RADKIT_TOKENS holds the
        /// same separated by whitespace.
        #[arg(long = "token")]
        tokens: Vec<String>,
    },
    /// The scheduled sweep: each invocation runs the tasks that have work now, delivers what is
    /// due, and prunes finished tasks when a retention is given.
    Sweep {
        /// Passes per invocation at most.
        #[arg(long, default_value_t = 64)]
        limit: usize,
        /// How long finished tasks are kept (`--retain-journals`, `--retain-tasks`).
        #[command(flatten)]
        retention: super::retention::RetentionArgs,
    },
    /// An executor: each invocation performs dispatched commands until its deadline.
    Executor {
        /// Commands per invocation at most.
        #[arg(long, default_value_t = 16)]
        limit: usize,
    },
}

/// Lambda's longest invocation: a pass never outlives it (the invocation's own deadline, which
/// the adapter reads from each invocation, is what bounds it in practice).
const LONGEST_INVOCATION: Duration = Duration::from_secs(15 * 60);

/// Run `lambda`.
pub async fn run(app: &super::App, args: Args) -> anyhow::Result<()> {
    let store: Arc<dyn Store> = match args.store.as_deref() {
        #[cfg(feature = "postgres")]
        Some(url) if super::is_postgres(url) => {
            Arc::new(crate::store::PostgresStore::connect(url).await?)
        }
        other => Arc::new(super::serve::open_sqlite(other, &args.data_dir, "full")?),
    };
    match args.function {
        Function::Http { public_url, tokens } => {
            let engine = app
                .builder(store)
                .serverless(LONGEST_INVOCATION)
                .start()
                .await?;
            let mut config = app.server_config(&engine, public_url);
            config.tokens =
                super::serve::tokens(&tokens, std::env::var("RADKIT_TOKENS").ok().as_deref());
            crate::serverless::lambda::serve_http(config, engine)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))
        }
        Function::Executor { limit } => {
            let executor = crate::serverless::Executor::from_builder(app.builder(store))?;
            crate::serverless::lambda::serve_executor(executor, limit)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))
        }
        Function::Sweep { limit, retention } => {
            let passes = Passes::from_builder(retention.apply(app.builder(store)))?;
            crate::serverless::lambda::serve_sweeps(passes, limit)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))
        }
    }
}
