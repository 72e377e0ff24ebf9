//! `serve`: serve a program's skills over A2A on a SQLite file (or, with the `postgres` feature,
//! Postgres).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

use super::App;
use crate::engine::{Engine, EngineBuilder};
use crate::model::{CardSigner, ExtendedCard};
use crate::server;
use crate::store::{Durability, SqliteStore};

/// Arguments of `radkit serve`.
#[derive(clap::Args)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080", env = "RADKIT_ADDR")]
    pub addr: String,
    /// Directory for the SQLite file (`radkit.sqlite`).
    #[arg(long, default_value = "data", env = "RADKIT_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Store URL: `sqlite://<path>` (default: `<data-dir>/radkit.sqlite`) or, in a build with the
    /// `postgres` feature, `postgres://…` (shared with other servers and `radkit worker`s through
    /// leases).
    #[arg(long, env = "RADKIT_STORE")]
    pub store: Option<String>,
    /// SQLite durability: `full` (default) or `normal`.
    #[arg(long, default_value = "full")]
    pub durability: String,
    /// Require `Authorization: Bearer <token>`; `token` or `token=principal` (repeatable; the first
    /// `=` ends the token). A token without a principal gets its own, `token-` and a hash of the
    /// token. Without `--token`, RADKIT_TOKENS holds the same values separated by whitespace.
    #[arg(long = "token")]
    pub tokens: Vec<String>,
    /// Public URL of the endpoint, if not `http://<addr>/` (behind a proxy). With it, the agents
    /// this one calls (`--agent`) that push notifications post their tasks' updates to
    /// `<public-url>/radkit/calls/<task>/<call>`, which wakes the calling task.
    #[arg(long)]
    pub public_url: Option<String>,
    /// The secret the call webhook's tokens are made from: keep it across restarts so that posts
    /// for calls made before a restart still wake their callers (without it, a random one per
    /// start; those calls are then found by their recheck).
    #[arg(long, env = "RADKIT_CALL_SECRET", hide_env_values = true)]
    pub call_secret: Option<String>,
    /// Models: `program` (default: the models the program configures; the `radkit` demo's are
    /// scripted, no network) or `openai` (every model name answered by an OpenAI-compatible
    /// endpoint from RADKIT_LLM_BASE_URL, RADKIT_LLM_API_KEY and RADKIT_LLM_MODEL; tools unchanged;
    /// with the `openai` feature).
    #[arg(long, default_value = "program", value_parser = LLM_VALUES)]
    pub llm: String,
    /// Most connections served at once (default 512); one more is answered 503 with the JSON-RPC
    /// error -32051 and closed. Each is a file descriptor: keep it well under `ulimit -n`.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: Option<u32>,
    /// Milliseconds a client may take to send a request's head, from its first byte (from the
    /// connection's opening, for its first request), and then its body (default 10000); then the
    /// connection is closed.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_ms: Option<u64>,
    /// Milliseconds a keep-alive connection may wait for its next request (default 60000); then it
    /// is closed. A stream being sent is never idle.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_ms: Option<u64>,
    /// Most `message/stream` and `tasks/resubscribe` streams open at once per principal (default
    /// 64; without `--token`, all callers are one); one more gets the JSON-RPC error -32052.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_streams: Option<u32>,
    /// The skill a message runs when it names none (metadata `skillId`): the id of a served skill
    /// (default: the program's choice; the `radkit` demo's is `research_loop_v2`).
    #[arg(long, value_name = "ID")]
    pub default_skill: Option<String>,
    /// The extended agent card served to callers with a token (`GetExtendedAgentCard`, 0.3
    /// `agent/getAuthenticatedExtendedCard`): a JSON file in the shape of an A2A 1.0 AgentCard whose
    /// `skills` are added to the public card's (one with a public skill's id replaces it) and whose
    /// other members are merged over the public card as an RFC 7396 merge patch. Needs `--token`.
    #[arg(long, value_name = "FILE")]
    pub extended_card: Option<PathBuf>,
    /// Sign the agent cards (A2A 1.0 §8.4, a JWS over the RFC 8785 form) with this PKCS#8 PEM
    /// private key: ECDSA P-256 (ES256) or P-384 (ES384), Ed25519 (EdDSA) or RSA (RS256).
    #[arg(long, value_name = "PEM")]
    pub card_key: Option<PathBuf>,
    /// The `kid` of the card signatures (default: the key's RFC 7638 JWK thumbprint).
    #[arg(long, value_name = "KID", requires = "card_key")]
    pub card_key_id: Option<String>,
    /// The `jku` of the card signatures: where verifiers fetch the public key (a JWK Set).
    #[arg(long, value_name = "URL", requires = "card_key")]
    pub card_jwks_url: Option<String>,
    /// Let push-notification webhooks point at private, loopback and link-local addresses
    /// (refused by default: an agent must not be turned against its own network). For tests and
    /// trusted networks.
    #[arg(long, env = "RADKIT_PUSH_ALLOW_PRIVATE")]
    pub push_allow_private: bool,
    /// Serve the public agent card in its A2A 1.0 form alone, without the 0.3 members beside it
    /// (for clients that all speak 1.0, and strict 1.0 validators); a 0.3 client cannot read it.
    #[arg(long)]
    pub card_1_0_only: bool,
    /// Also serve every skill as an MCP tool at `/mcp` (streamable HTTP, behind the same
    /// `--token`s): MCP hosts call durable skills; a question goes to the MCP client as an
    /// elicitation when it supports one, else the call answers with the `taskId` to continue.
    #[cfg(feature = "mcp")]
    #[arg(long)]
    pub mcp: bool,
    /// Do not serve the web console at `/console` (served by default, behind the same `--token`s).
    #[cfg(feature = "console")]
    #[arg(long)]
    pub no_console: bool,
    /// A principal that sees and acts on every task in the console (repeatable); others see their
    /// own. With `--token T=alice`, `--console-admin alice`.
    #[cfg(feature = "console")]
    #[arg(long = "console-admin", value_name = "PRINCIPAL")]
    pub console_admins: Vec<String>,
    /// The A2A agents this program's steps call (`--agent`, `--agent-token`).
    #[command(flatten)]
    pub agents: crate::cli::agents::AgentArgs,
    /// Lease settings (Postgres only).
    #[cfg(feature = "postgres")]
    #[command(flatten)]
    pub cluster: crate::cli::worker::ClusterArgs,
    /// Trace export (`--otlp-endpoint`, with the `otel` feature).
    #[command(flatten)]
    pub telemetry: crate::cli::telemetry::TraceArgs,
    /// How long finished tasks are kept (`--retain-journals`, `--retain-tasks`).
    #[command(flatten)]
    pub retention: crate::cli::retention::RetentionArgs,
    /// Start even though unfinished tasks in the SQLite file run on a skill version this binary
    /// does not serve and cannot move to the one it serves (refused by default, listing them; they
    /// stay in the store, refused until a binary that can run them starts). Not checked on
    /// Postgres, where workers of other versions may serve them during a rolling deploy.
    #[arg(long, env = "RADKIT_ALLOW_STRANDED")]
    pub allow_stranded: bool,
}

impl Args {
    /// Apply the connection, timeout and stream options that were given to `config`.
    fn limits(&self, config: &mut server::ServerConfig) {
        if let Some(n) = self.max_connections {
            config.max_connections = n as usize;
        }
        if let Some(ms) = self.header_timeout_ms {
            config.header_timeout = std::time::Duration::from_millis(ms);
        }
        if let Some(ms) = self.idle_timeout_ms {
            config.idle_timeout = std::time::Duration::from_millis(ms);
        }
        if let Some(n) = self.max_streams {
            config.max_streams_per_principal = n as usize;
        }
    }
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
        Some(url) if super::is_postgres(url) => anyhow::bail!(without_postgres(url)),
        Some(other) => anyhow::bail!("unknown store `{other}`; expected sqlite://<path>"),
    };
    SqliteStore::open(&path, durability).with_context(|| format!("opening {}", path.display()))
}

/// Why a Postgres URL cannot be opened where SQLite is expected.
#[cfg(feature = "postgres")]
fn without_postgres(url: &str) -> String {
    format!("`{url}` is a Postgres store; this command reads SQLite files")
}

/// Why a Postgres URL cannot be opened: this build has no Postgres store.
#[cfg(not(feature = "postgres"))]
fn without_postgres(url: &str) -> String {
    format!(
        "`{url}` is a Postgres store, and this program was built without radkit's `postgres` \
         feature: turn it on (`features = [\"postgres\"]` on the radkit dependency, \
         `--features postgres` for radkit's own binary) or use a SQLite store"
    )
}

/// The values `--llm` takes in this build: `program` (alias `scripted`), and with the `openai`
/// feature each native provider (`llm::Provider`).
#[cfg(feature = "openai")]
pub(crate) const LLM_VALUES: [&str; 7] = [
    "program",
    "scripted",
    "openai",
    "openai-responses",
    "anthropic",
    "gemini",
    "ollama",
];
/// The values `--llm` takes in this build: `program` (alias `scripted`); the providers need the
/// `openai` feature.
#[cfg(not(feature = "openai"))]
pub(crate) const LLM_VALUES: [&str; 2] = ["program", "scripted"];

/// The models `--llm` names: `program` (alias `scripted`: what the program configured) or, with
/// the `openai` feature, a provider (`openai`, `openai-responses`, `anthropic`, `gemini`, `ollama`:
/// every model name answered by that provider's `RADKIT_LLM_MODEL`, keeping the tools). Then, with
/// the `openai` feature, any model name `x` the program registered whose `RADKIT_LLM_X` is set
/// (`provider:model`, e.g. `RADKIT_LLM_CRITIC=anthropic:claude-sonnet-4-5`) gets that model.
pub fn with_models(builder: EngineBuilder, llm: &str) -> anyhow::Result<EngineBuilder> {
    let builder = match llm {
        "program" | "scripted" => builder,
        #[cfg(feature = "openai")]
        other => {
            let provider = crate::llm::Provider::parse(other).ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown --llm `{other}`; expected one of {}",
                    LLM_VALUES.join(", ")
                )
            })?;
            let model = crate::llm::from_env(provider).map_err(anyhow::Error::msg)?;
            builder.map_effects(|effects| effects.replace_models(model))
        }
        #[cfg(not(feature = "openai"))]
        other => anyhow::bail!(
            "unknown --llm `{other}`; expected one of {}",
            LLM_VALUES.join(", ")
        ),
    };
    #[cfg(feature = "openai")]
    let builder = per_name_models(builder, &|name| std::env::var(name).ok())?;
    Ok(builder)
}

/// The variable that names model `name`'s provider and model: `RADKIT_LLM_` and the name in upper
/// case, each character that is not a letter or a digit an underscore (`critic` -> `RADKIT_LLM_CRITIC`).
#[cfg(feature = "openai")]
pub(crate) fn model_var(name: &str) -> String {
    let upper: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("RADKIT_LLM_{upper}")
}

/// Every registered model name whose variable ([`model_var`]) is set gets the model it names.
#[cfg(feature = "openai")]
fn per_name_models(
    builder: EngineBuilder,
    var: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<EngineBuilder> {
    let mut chosen = Vec::new();
    for name in builder.model_names() {
        let key = model_var(&name);
        if let Some(spec) = var(&key).filter(|v| !v.trim().is_empty()) {
            let model = crate::llm::from_spec(spec.trim(), var)
                .map_err(|e| anyhow::anyhow!("{key}: {e}"))?;
            chosen.push((name, model));
        }
    }
    Ok(builder.map_effects(|mut effects| {
        for (name, model) in chosen {
            effects = effects.model(name, model);
        }
        effects
    }))
}

/// The `(token, principal)` pairs of the `--token` values, else of RADKIT_TOKENS (split on
/// whitespace, which a bearer token cannot contain; never on commas, which it can). A token without
/// `=principal` is its own principal under a name derived from it ([`server::token_principal`]), so
/// no two tokens share one and no part of a token is stored.
pub(crate) fn tokens(args: &[String], env: Option<&str>) -> Vec<(String, String)> {
    let values: Vec<&str> = if args.is_empty() {
        env.unwrap_or_default().split_whitespace().collect()
    } else {
        args.iter().map(String::as_str).collect()
    };
    values
        .into_iter()
        .filter(|t| !t.is_empty())
        .map(|t| match t.split_once('=') {
            Some((token, principal)) => (token.to_owned(), principal.to_owned()),
            None => (t.to_owned(), server::token_principal(t)),
        })
        .collect()
}

/// An error listing the served skills when `id` is not one of them. Checked on a memory store, so a
/// mistyped `--default-skill` is reported before `serve` opens (or creates) its own.
fn check_default_skill(app: &App, id: &str) -> anyhow::Result<()> {
    let skills = app
        .builder(std::sync::Arc::new(crate::store::MemoryStore::new()))
        .skills()?;
    if skills.iter().any(|s| s.info().id == id) {
        return Ok(());
    }
    let ids: Vec<&str> = skills.iter().map(|s| s.info().id.as_str()).collect();
    anyhow::bail!(
        "--default-skill `{id}` is not a skill this program serves; it serves {}",
        ids.join(", ")
    )
}

/// The extended card and the card signer the options name, read and checked before anything is
/// served.
fn card_settings(
    args: &Args,
    has_tokens: bool,
) -> anyhow::Result<(Option<ExtendedCard>, Option<Arc<CardSigner>>)> {
    let extended = match &args.extended_card {
        None => None,
        Some(_) if !has_tokens => anyhow::bail!(
            "--extended-card needs --token (or RADKIT_TOKENS): the extended card is for authenticated callers"
        ),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading --extended-card {}", path.display()))?;
            let json = serde_json::from_str(&text)
                .with_context(|| format!("--extended-card {} is not JSON", path.display()))?;
            Some(
                ExtendedCard::from_json(json)
                    .with_context(|| format!("--extended-card {}", path.display()))?,
            )
        }
    };
    let signer = match &args.card_key {
        None => None,
        Some(path) => {
            let pem = std::fs::read_to_string(path)
                .with_context(|| format!("reading --card-key {}", path.display()))?;
            let mut signer = CardSigner::from_pem(&pem)
                .with_context(|| format!("--card-key {}", path.display()))?;
            if let Some(kid) = &args.card_key_id {
                signer = signer.with_key_id(kid.clone());
            }
            if let Some(url) = &args.card_jwks_url {
                signer = signer.with_jwks_url(url.clone());
            }
            Some(Arc::new(signer))
        }
    };
    Ok((extended, signer))
}

/// Run `serve`.
pub async fn run(app: &App, args: Args) -> anyhow::Result<()> {
    // Exports (with `--otlp-endpoint`) until `run` returns, then flushes.
    let _traces = args.telemetry.init()?;
    if let Some(id) = &args.default_skill {
        check_default_skill(app, id)?;
    }
    let tokens = tokens(&args.tokens, std::env::var("RADKIT_TOKENS").ok().as_deref());
    let (extended_card, card_signer) = card_settings(&args, !tokens.is_empty())?;
    let (builder, location) = match args.store.as_deref() {
        #[cfg(feature = "postgres")]
        Some(url) if super::is_postgres(url) => {
            let store = crate::store::PostgresStore::connect(url).await?;
            (
                args.cluster.apply(app.builder(std::sync::Arc::new(store))),
                "postgres".to_owned(),
            )
        }
        other => {
            let store = open_sqlite(other, &args.data_dir, &args.durability)?;
            let path = store.path().display().to_string();
            let builder = app.builder(std::sync::Arc::new(store));
            match args.allow_stranded {
                true => (builder, path),
                false => (builder.refuse_stranded(), path),
            }
        }
    };
    let builder = match &args.default_skill {
        Some(id) => builder.default_skill(id.clone()),
        None => builder,
    }
    .push_allow_private(args.push_allow_private);
    let builder = args.agents.apply(builder);
    let builder = args.retention.apply(builder);
    let builder = match &args.public_url {
        Some(url) => {
            let builder = builder.call_webhook(url.clone());
            match &args.call_secret {
                Some(secret) => builder.call_webhook_secret(secret.as_bytes().to_vec()),
                None => builder,
            }
        }
        None => builder,
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
    config.tokens = tokens;
    config.extended_card = extended_card;
    config.card_signer = card_signer;
    config.card_0_3_members = !args.card_1_0_only;
    args.limits(&mut config);
    #[cfg(feature = "mcp")]
    {
        config.mcp = args.mcp;
    }
    #[cfg(feature = "console")]
    {
        config.console = !args.no_console;
        config.console_admins = args.console_admins.clone();
    }
    if let Some(signer) = &config.card_signer {
        tracing::info!(
            alg = signer.algorithm(),
            kid = signer.key_id(),
            "agent cards are signed; the public key is at /.well-known/jwks.json"
        );
    }
    let skills: Vec<String> = engine.skills().into_iter().map(|s| s.id).collect();
    // One line: tests and scripts read the first line for the address.
    #[cfg(feature = "mcp")]
    let mcp = match config.mcp {
        true => format!("; MCP tools: http://{local}/mcp"),
        false => String::new(),
    };
    #[cfg(not(feature = "mcp"))]
    let mcp = "";
    #[cfg(feature = "console")]
    let console = match config.console {
        true => format!("; console: http://{local}/console"),
        false => String::new(),
    };
    #[cfg(not(feature = "console"))]
    let console = "";
    println!("{} serving {} on http://{local}/ (card: http://{local}/.well-known/agent-card.json; store: {location}{mcp}{console})", config.name, skills.join(", "));
    // Memory a burst of clients used goes back to the system once they are gone.
    super::memory::spawn_trimmer();
    // On SIGINT or SIGTERM: stop serving, stop writing, and give leases back so that other
    // workers sharing a Postgres store take the tasks over at once.
    tokio::select! {
        served = server::serve(listener, engine.clone(), config) => served?,
        () = super::shutdown_signal() => {}
    }
    engine.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::tokens;

    fn args(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| (*v).to_owned()).collect()
    }

    #[test]
    fn a_token_is_never_split_on_commas_and_an_unnamed_one_gets_its_own_principal() {
        let got = tokens(&args(&["p,q=bob", "abcdSECRET1", "abcdOTHER2"]), None);
        assert_eq!(got[0], ("p,q".to_owned(), "bob".to_owned()));
        assert_eq!(got[1].0, "abcdSECRET1");
        assert_eq!(got[2].0, "abcdOTHER2");
        assert_ne!(got[1].1, got[2].1, "two unnamed tokens are two principals");
        for (_, principal) in &got[1..] {
            assert!(principal.starts_with("token-"), "{principal}");
            assert!(!principal.contains("abcd") && !principal.contains("SECRET"));
        }
    }

    #[test]
    fn radkit_tokens_is_split_on_whitespace_and_only_read_without_token_options() {
        let env = Some(" a,b=alice\n c=bob\tabcd \n");
        let got = tokens(&[], env);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0], ("a,b".to_owned(), "alice".to_owned()));
        assert_eq!(got[1], ("c".to_owned(), "bob".to_owned()));
        assert_eq!(got[2].0, "abcd");
        assert_eq!(
            tokens(&args(&["x=carol"]), env),
            vec![("x".to_owned(), "carol".to_owned())]
        );
        assert!(tokens(&[], None).is_empty());
        assert!(tokens(&[], Some("  \n")).is_empty());
    }

    #[cfg(feature = "openai")]
    #[test]
    fn a_registered_model_name_takes_the_model_its_variable_names_and_a_bad_spec_says_which_variable(
    ) {
        use crate::effects::Effects;
        use crate::llm::ScriptedModel;
        assert_eq!(super::model_var("critic"), "RADKIT_LLM_CRITIC");
        assert_eq!(
            super::model_var("fast-draft.v2"),
            "RADKIT_LLM_FAST_DRAFT_V2"
        );
        let builder = || {
            crate::engine::Engine::builder(crate::store::MemoryStore::new())
                .without_registered_skills()
                .effects(
                    Effects::new()
                        .model("critic", ScriptedModel::new(|_| Ok("scripted".into())))
                        .model("writer", ScriptedModel::new(|_| Ok("scripted".into()))),
                )
        };
        let env = |name: &str| match name {
            "RADKIT_LLM_CRITIC" => Some("ollama:llama3.2".to_owned()),
            _ => None,
        };
        assert!(super::per_name_models(builder(), &env).is_ok());
        let bad = |name: &str| match name {
            "RADKIT_LLM_WRITER" => Some("llama3.2".to_owned()),
            _ => None,
        };
        let Err(error) = super::per_name_models(builder(), &bad) else {
            panic!("a spec without a provider is refused");
        };
        let error = error.to_string();
        assert!(
            error.starts_with("RADKIT_LLM_WRITER:") && error.contains("provider:model"),
            "{error}"
        );
    }
}
