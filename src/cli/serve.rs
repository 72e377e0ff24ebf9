//! `radkit serve`: serve the demo skills over A2A JSON-RPC on a SQLite file (or Postgres).

use std::path::PathBuf;

use anyhow::Context;
use radkit::demo;
use radkit::server::{self, ServerConfig};
use radkit::store::{Durability, SqliteStore};
use radkit::{Engine, EngineBuilder};

/// Arguments of `radkit serve`.
#[derive(clap::Args)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080", env = "RADKIT_ADDR")]
    pub addr: String,
    /// Directory for the SQLite file (`radkit.sqlite`).
    #[arg(long, default_value = "data", env = "RADKIT_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Store URL: `sqlite://<path>` (default: `<data-dir>/radkit.sqlite`) or `postgres://…` (shared
    /// with other servers and `radkit worker`s through leases).
    #[arg(long, env = "RADKIT_STORE")]
    pub store: Option<String>,
    /// SQLite durability: `full` (default) or `normal`.
    #[arg(long, default_value = "full")]
    pub durability: String,
    /// Require `Authorization: Bearer <token>`; `token` or `token=principal` (repeatable).
    #[arg(long = "token", env = "RADKIT_TOKENS", value_delimiter = ',')]
    pub tokens: Vec<String>,
    /// Public URL of the endpoint, if not `http://<addr>/` (behind a proxy).
    #[arg(long)]
    pub public_url: Option<String>,
    /// Models: `scripted` (default, no network) or `openai` (an OpenAI-compatible endpoint from
    /// RADKIT_LLM_BASE_URL, RADKIT_LLM_API_KEY and RADKIT_LLM_MODEL).
    #[arg(long, default_value = "scripted")]
    pub llm: String,
    /// Lease settings (Postgres only).
    #[command(flatten)]
    pub cluster: crate::cli::worker::ClusterArgs,
}

/// Open the store an `--store`/`--data-dir` pair names.
pub fn open_sqlite(
    store: Option<&str>,
    data_dir: &std::path::Path,
    durability: &str,
) -> anyhow::Result<SqliteStore> {
    let durability = match durability {
        "full" => Durability::Full,
        "normal" => Durability::Normal,
        other => anyhow::bail!("unknown durability `{other}`; expected `full` or `normal`"),
    };
    let path = match store {
        None => data_dir.join("radkit.sqlite"),
        Some(url) if url.starts_with("sqlite://") => PathBuf::from(&url["sqlite://".len()..]),
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            anyhow::bail!("`{url}` is a Postgres store; this command reads SQLite files")
        }
        Some(other) => anyhow::bail!("unknown store `{other}`; expected sqlite://<path>"),
    };
    SqliteStore::open(&path, durability).with_context(|| format!("opening {}", path.display()))
}

/// The models `--llm` names: `scripted` (the builder's own) or `openai` (from the environment).
pub fn with_models(builder: EngineBuilder, llm: &str) -> anyhow::Result<EngineBuilder> {
    match llm {
        "scripted" => Ok(builder),
        "openai" => {
            let model = radkit::llm::OpenAiModel::from_env().map_err(anyhow::Error::msg)?;
            Ok(builder.effects(demo::ticker::with_tick_tool(
                radkit::effects::Effects::new().default_model(model),
            )))
        }
        other => anyhow::bail!("unknown --llm `{other}`; expected `scripted` or `openai`"),
    }
}

/// Run `radkit serve`.
pub async fn run(args: Args) -> anyhow::Result<()> {
    crate::cli::init_tracing();
    let (builder, location) = match args.store.as_deref() {
        Some(url) if crate::cli::worker::is_postgres(url) => {
            let store = radkit::store::PostgresStore::connect(url).await?;
            (
                args.cluster.apply(demo::engine_builder(store)),
                "postgres".to_owned(),
            )
        }
        other => {
            let store = open_sqlite(other, &args.data_dir, &args.durability)?;
            let path = store.path().display().to_string();
            (demo::engine_builder(store), path)
        }
    };
    let engine: Engine = with_models(builder, &args.llm)?.start().await?;
    let listener = tokio::net::TcpListener::bind(&args.addr)
        .await
        .with_context(|| format!("binding {}", args.addr))?;
    let local = listener.local_addr()?;
    let mut config = ServerConfig::new(
        args.public_url
            .clone()
            .unwrap_or_else(|| format!("http://{local}/")),
    );
    config.name = "radkit research agent".to_owned();
    config.description = "Drafts, critiques and revises research notes, asking a human when the critic is unsure (scripted model).".to_owned();
    config.tokens = args
        .tokens
        .iter()
        .filter(|t| !t.is_empty())
        .map(|t| match t.split_once('=') {
            Some((token, principal)) => (token.to_owned(), principal.to_owned()),
            None => (
                t.clone(),
                format!("token-{}", &t.chars().take(4).collect::<String>()),
            ),
        })
        .collect();
    let skills: Vec<String> = engine.skills().into_iter().map(|s| s.id).collect();
    println!("radkit serving {} on http://{local}/ (card: http://{local}/.well-known/agent-card.json; store: {location})", skills.join(", "));
    // On SIGINT or SIGTERM: stop serving, stop writing, and give leases back so that other
    // workers sharing a Postgres store take the tasks over at once.
    tokio::select! {
        served = server::serve(listener, engine.clone(), config) => served?,
        () = crate::cli::worker::shutdown_signal() => {}
    }
    engine.shutdown().await;
    Ok(())
}
