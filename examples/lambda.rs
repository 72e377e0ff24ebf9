//! A durable skill deployed as two AWS Lambda functions sharing one Postgres database: `http`
//! serves the A2A surface behind a Function URL (each request one pass), `sweep` runs on a
//! schedule and finishes what passes left (due timers, work cut off by an invocation's deadline).
//!
//! ```sh
//! # the deployment steps are in docs/serverless.md ("Deploying on AWS Lambda")
//! cargo lambda build --release --example lambda --features lambda,postgres
//! ```
//!
//! The function reads its configuration from its environment: `RADKIT_STORE` (a `postgres://…`
//! URL), `RADKIT_FUNCTION` (`http` or `sweep`), `RADKIT_PUBLIC_URL` (the Function URL, for the
//! card; `http` only) and `RADKIT_TOKENS` (bearer tokens, `TOKEN=principal` separated by
//! whitespace; `http` only).

use std::sync::Arc;
use std::time::Duration;

use radkit::engine::Engine;
use radkit::prelude::*;
use radkit::server::ServerConfig;
use radkit::serverless::{lambda, Passes};
use radkit::store::PostgresStore;

/// Drafts a reply with a model, then asks a human to approve it before it is sent.
#[derive(Default)]
pub struct Reply;

#[flow_skill(id = "reply", name = "Reply")]
impl Reply {
    /// Draft, then wait (for days, costing nothing) for the human.
    #[step(start)]
    async fn draft(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let draft: String = ctx.llm("writer").run(msg).await?;
        let question = format!("Send this? {draft}");
        await_input!(slot = "approval", message = question, carry = draft)
    }

    /// The human's answer.
    #[step(resume_from = "draft")]
    async fn decide(&self, ctx: &StepCtx, draft: String, answer: Content) -> StepResult {
        if answer.joined_texts().trim().eq_ignore_ascii_case("yes") {
            ctx.complete(format!("Sent: {draft}"), vec![])
        } else {
            ctx.reject("not approved")
        }
    }
}

/// A variable of the function's environment.
fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("the function's environment has no `{name}`"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let store = Arc::new(PostgresStore::connect(&env("RADKIT_STORE")?).await?);
    // A scripted model keeps the example self-contained; use `radkit::llm::OpenAiModel` for real.
    let effects = Effects::new().model(
        "writer",
        radkit::llm::ScriptedModel::new(|request| {
            Ok(radkit::serde_json::json!(format!(
                "Thanks for your note: {}",
                request.input
            )))
        }),
    );
    let builder = Engine::builder_arc(store).effects(effects);
    match env("RADKIT_FUNCTION")?.as_str() {
        "sweep" => lambda::serve_sweeps(Passes::from_builder(builder)?, 64).await,
        _ => {
            // Lambda's longest invocation; each invocation's own deadline bounds its passes.
            let engine = builder
                .serverless(Duration::from_secs(15 * 60))
                .start()
                .await?;
            let mut config = ServerConfig::new(env("RADKIT_PUBLIC_URL")?);
            config.name = "reply-agent".to_owned();
            config.tokens = std::env::var("RADKIT_TOKENS")
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|t| t.split_once('='))
                .map(|(token, principal)| (token.to_owned(), principal.to_owned()))
                .collect();
            lambda::serve_http(config, engine).await
        }
    }
}
