//! `serve`: serve a program's skills over A2A JSON-RPC on a SQLite file (or Postgres).

use std::path::PathBuf;

use anyhow::Context;

use super::App;
use crate::server;
use crate::store::{Durability, SqliteStore};
use crate::{Engine, EngineBuilder};

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
    /// Models: `program` (default: the models the program configures; the `radkit` demo's are
    /// scripted, no network) or `openai` (every model name answered by an OpenAI-compatible
    /// endpoint from RADKIT_LLM_BASE_URL, RADKIT_LLM_API_KEY and RADKIT_LLM_MODEL; tools unchanged).
    #[arg(long, default_value = "program", value_parser = ["program", "scripted", "openai"])]
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

/// The models `--llm` names: `program` (alias `scripted`: what the program configured) or `openai`
/// (from the environment, replacing the program's models and keeping its tools).
pub fn with_models(builder: EngineBuilder, llm: &str) -> anyhow::Result<EngineBuilder> {
    match llm {
        "program" | "scripted" => Ok(builder),
        "openai" => {
            let model = crate::llm::OpenAiModel::from_env().map_err(anyhow::Error::msg)?;
            Ok(builder.map_effects(|effects| effects.replace_models(model)))
        }
        other => anyhow::bail!("unknown --llm `{other}`; expected `program` or `openai`"),
    }
}

/// Run `serve`.
pub async fn run(app: &App, args: Args) -> anyhow::Result<()> {
    super::init_tracing();
    let (builder, location) = match args.store.as_deref() {
        Some(url) if super::worker::is_postgres(url) => {
            let store = crate::store::PostgresStore::connect(url).await?;
            (
                args.cluster.apply(app.builder(std::sync::Arc::new(store))),
                "postgres".to_owned(),
            )
        }
        other => {
            let store = open_sqlite(other, &args.data_dir, &args.durability)?;
            let path = store.path().display().to_string();
            (app.builder(std::sync::Arc::new(store)), path)
        }
    };
    let engine: Engine = with_models(builder, &args.llm)?.start().await?;
    let listener = tokio::net::TcpListener::bind(&args.addr)
        .await
        .with_context(|| format!("binding {}", args.addr))?;
    let local = listener.local_addr()?;
    let mut config = app.server_config(
        &engine,
        args.public_url
            .clone()
            .unwrap_or_else(|| format!("http://{local}/")),
    );
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
    println!("{} serving {} on http://{local}/ (card: http://{local}/.well-known/agent-card.json; store: {location})", config.name, skills.join(", "));
    // On SIGINT or SIGTERM: stop serving, stop writing, and give leases back so that other
    // workers sharing a Postgres store take the tasks over at once.
    tokio::select! {
        served = server::serve(listener, engine.clone(), config) => served?,
        () = super::worker::shutdown_signal() => {}
    }
    engine.shutdown().await;
    Ok(())
}
