//! The A2A surface: 0.3 and 1.0 JSON-RPC 2.0 over HTTP POST (SSE for streams), 1.0 HTTP+JSON
//! (`rest`), 1.0 gRPC over HTTP/2 on the same port (`grpc`, with the `grpc` cargo feature), and the
//! agent card. It owns the protocols' concerns (auth, body limits, error codes) and turns requests
//! into engine calls; it never touches the store. One operation layer (`ops`, `open`, `push`, with
//! the typed `errors::OpError`) serves four thin bindings (`jsonrpc_v0_3`, `jsonrpc_v1`, `rest`,
//! `grpc`) that decode, call and render.

mod auth;
mod calls;
pub mod card;
mod connection;
#[cfg(feature = "console")]
mod console;
mod errors;
#[cfg(feature = "grpc")]
#[cfg_attr(docsrs, doc(cfg(feature = "grpc")))]
pub mod grpc;
#[cfg(any(test, not(feature = "grpc")))]
mod grpc_unavailable;
mod jsonrpc;
mod jsonrpc_v0_3;
mod jsonrpc_v1;
#[cfg(feature = "mcp")]
mod mcp;
mod media;
#[cfg(feature = "metrics")]
mod metrics;
mod offered;
mod open;
mod ops;
mod page_token;
mod push;
mod rest;
mod stream;
mod v1_requests;
mod version;
mod wire;

use std::sync::Arc;

use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::engine::Engine;
use crate::model::Binding;

pub use crate::config::ServerConfig;
pub use auth::token_principal;
pub use errors::codes;
pub use jsonrpc::RpcError;

pub(crate) struct AppState {
    pub engine: Engine,
    pub config: ServerConfig,
    /// `config.tokens` as digests: what a presented token is compared with.
    pub tokens: auth::Tokens,
    /// The streams open for each caller, within `config.max_streams_per_principal`.
    pub streams: Arc<open::Slots>,
    /// The public and extended agent cards, built and signed once.
    pub cards: card::Cards,
    /// The console's session and CSRF key.
    #[cfg(feature = "console")]
    pub sessions: console::Sessions,
}

/// The paths of the gRPC binding's RPCs, `/lf.a2a.v1.A2AService/<Method>`: served by `grpc`, or
/// answered by `grpc_unavailable` in a build without it.
const GRPC_PATH: &str = "/lf.a2a.v1.A2AService/{*method}";

/// The axum router: `POST /` (JSON-RPC), the REST paths, gRPC's `/lf.a2a.v1.A2AService/*`,
/// `GET /.well-known/agent-card.json` and, with the `metrics` feature, `GET /metrics`. Without the `grpc` feature, gRPC's paths answer every
/// request `UNIMPLEMENTED`, saying so; a binding `ServerConfig::bindings` leaves out is refused
/// the same way (`offered`).
pub fn router(engine: Engine, config: ServerConfig) -> Router {
    let limit = config.max_body_bytes;
    let tokens = auth::Tokens::new(&config.tokens);
    let streams = Arc::new(open::Slots::new(config.max_streams_per_principal));
    let cards = card::Cards::new(&engine.skills(), &config, engine.supports_push());
    #[cfg(feature = "console")]
    let sessions = console::Sessions::new(&config);
    let state = Arc::new(AppState {
        engine,
        config,
        tokens,
        streams,
        cards,
        #[cfg(feature = "console")]
        sessions,
    });
    let offers = |binding| state.config.offers(binding);
    let router = match offers(Binding::JsonRpc) {
        true => Router::new().route("/", post(rpc)),
        false => Router::new().route("/", post(offered::jsonrpc)),
    };
    let router = match offers(Binding::HttpJson) {
        true => router.merge(rest::routes()),
        false => router.merge(rest::refused(offered::rest)),
    };
    let router = router
        .route("/.well-known/agent-card.json", get(card::public_card))
        .route("/.well-known/agent.json", get(card::public_card))
        .route("/.well-known/jwks.json", get(card::jwks))
        .route("/radkit/calls/{task}/{call}", post(calls::notified));
    #[cfg(feature = "metrics")]
    let router = router.route("/metrics", get(metrics::scrape));
    #[cfg(feature = "grpc")]
    let router = match offers(Binding::Grpc) {
        true => router.route_service(GRPC_PATH, grpc::service(state.clone())),
        false => router.route(GRPC_PATH, axum::routing::any(offered::grpc)),
    };
    #[cfg(not(feature = "grpc"))]
    let router = router.route(GRPC_PATH, axum::routing::any(grpc_unavailable::answer));
    #[cfg(feature = "mcp")]
    let router = match state.config.mcp {
        true => router.merge(mcp::routes(state.clone())),
        false => router,
    };
    #[cfg(feature = "console")]
    let router = match state.config.console {
        true => router.merge(console::routes()),
        false => router,
    };
    router
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn(request_span))
        .with_state(state)
}

/// Run a request in an `a2a.request` span naming its binding, method and path; its parent is the
/// trace context the request carries (`traceparent`, with the `otel` feature), so the task, step
/// and command spans it starts continue the caller's trace.
async fn request_span(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let path = request.uri().path();
    let binding = if path.starts_with("/lf.a2a.v1.A2AService/") {
        "grpc"
    } else if path == "/" {
        "jsonrpc"
    } else {
        "http"
    };
    let span = tracing::info_span!(
        "a2a.request",
        otel.kind = "server",
        radkit.binding = binding,
        http.request.method = %request.method(),
        url.path = %path,
    );
    crate::telemetry::continue_trace(&span, request.headers());
    tracing::Instrument::instrument(next.run(request), span).await
}

/// Serve on `listener` until the future is dropped (which closes every connection): HTTP/1.1 with
/// keep-alive, at most `config.max_connections` connections at once (one more is answered 503
/// with the JSON-RPC error -32051 and closed), a connection closed when a request head takes longer
/// than `config.header_timeout` or a keep-alive wait longer than `config.idle_timeout`. A failed
/// accept (out of file descriptors) is logged and retried after a pause; it never ends the server.
pub async fn serve(
    listener: tokio::net::TcpListener,
    engine: Engine,
    config: ServerConfig,
) -> std::io::Result<()> {
    let limits = connection::Limits {
        max_connections: config.max_connections,
        header_timeout: config.header_timeout,
        idle_timeout: config.idle_timeout,
    };
    connection::accept_loop(listener, router(engine, config), limits).await
}

async fn rpc(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Response {
    let caller = match state.tokens.caller(&headers) {
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
    let body = match body {
        Ok(body) => body,
        // Over the limit: 413, and still a JSON-RPC envelope a client can read.
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                Json(jsonrpc::too_large(state.config.max_body_bytes)),
            )
                .into_response();
        }
        Err(rejection) => return rejection.into_response(),
    };
    let version = version::Version::of_request(&headers, uri.query());
    // A 1.0 body declared as something other than JSON is refused before it is read (its id with
    // it: a body of another type is not parsed). 0.3 clients predate the check (`curl -d` sends
    // `application/x-www-form-urlencoded`) and keep being read as JSON.
    if let Ok(version::Version::V1_0) = version {
        if let Err(error) = media::check_json(&headers) {
            return Json(version::Version::V1_0.rpc_error(&serde_json::Value::Null, error))
                .into_response();
        }
    }
    let request = match jsonrpc::parse(&body) {
        Ok(r) => r,
        Err(error) => return Json(error).into_response(),
    };
    match version {
        Ok(version::Version::V0_3) => {
            jsonrpc_v0_3::dispatch(state, caller, request, &headers).await
        }
        Ok(version::Version::V1_0) => jsonrpc_v1::dispatch(state, caller, request, &headers).await,
        // A version this agent does not speak is a 1.0-era error: its ErrorInfo is in `data`.
        Err(error) => Json(version::Version::V1_0.rpc_error(&request.id, error)).into_response(),
    }
}
