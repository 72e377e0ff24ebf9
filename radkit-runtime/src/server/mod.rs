//! The A2A 0.3 surface: JSON-RPC 2.0 over HTTP POST, SSE for `message/stream` and `tasks/resubscribe`,
//! and the agent card. It owns HTTP concerns (auth, body limits, error codes) and turns requests into
//! engine calls; it never touches the store.

mod auth;
pub mod card;
mod jsonrpc;
mod methods;
mod stream;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::engine::Engine;

pub use jsonrpc::{codes, RpcError};

/// How the server presents itself and what it accepts.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Agent name on the card.
    pub name: String,
    /// Agent description on the card.
    pub description: String,
    /// Agent version on the card.
    pub version: String,
    /// The public URL of the JSON-RPC endpoint (the card's `url`).
    pub url: String,
    /// Bearer tokens and the principal each one authenticates; empty means no auth.
    pub tokens: Vec<(String, String)>,
    /// Largest accepted request body, in bytes; larger bodies get 413 before parsing.
    pub max_body_bytes: usize,
    /// Most history messages returned when a client does not ask for a `historyLength`.
    pub max_history: usize,
}

impl ServerConfig {
    /// Defaults for an agent reachable at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        ServerConfig {
            name: "radkit agent".to_owned(),
            description: "Durable agent skills served over A2A by radkit.".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            url: url.into(),
            tokens: Vec::new(),
            max_body_bytes: 1024 * 1024,
            max_history: 1000,
        }
    }
}

pub(crate) struct AppState {
    pub engine: Engine,
    pub config: ServerConfig,
}

/// The axum router: `POST /` (JSON-RPC) and `GET /.well-known/agent-card.json`.
pub fn router(engine: Engine, config: ServerConfig) -> Router {
    let limit = config.max_body_bytes;
    let state = Arc::new(AppState { engine, config });
    Router::new()
        .route("/", post(rpc))
        .route("/.well-known/agent-card.json", get(agent_card))
        .route("/.well-known/agent.json", get(agent_card))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// Serve on `listener` until the process ends.
pub async fn serve(
    listener: tokio::net::TcpListener,
    engine: Engine,
    config: ServerConfig,
) -> std::io::Result<()> {
    axum::serve(listener, router(engine, config)).await
}

async fn agent_card(State(state): State<Arc<AppState>>) -> Json<crate::model::AgentCard> {
    Json(card::agent_card(&state.engine.skills(), &state.config))
}

async fn rpc(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let caller = match auth::caller(&state.config, &headers) {
        Ok(caller) => caller,
        Err(auth::Unauthorized) => {
            return (
                StatusCode::UNAUTHORIZED,
                [("www-authenticate", "Bearer")],
                Json(jsonrpc::unauthorized()),
            )
                .into_response();
        }
    };
    let request = match jsonrpc::parse(&body) {
        Ok(r) => r,
        Err(error) => return Json(error).into_response(),
    };
    methods::dispatch(state, caller, request).await
}
