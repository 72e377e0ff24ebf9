//! The A2A 0.3 surface: JSON-RPC 2.0 over HTTP POST, SSE for `message/stream` and `tasks/resubscribe`,
//! and the agent card. It owns HTTP concerns (auth, body limits, error codes) and turns requests into
//! engine calls; it never touches the store.

mod auth;
pub mod card;
mod errors;
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

pub use crate::config::ServerConfig;
pub use jsonrpc::{codes, RpcError};

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
