//! The answers to requests on a binding the agent does not offer (`ServerConfig::bindings`): each in
//! its binding's own error shape, naming the bindings the agent does offer, so a client that read
//! an old card, or guessed, learns where to go. It owns these refusals only; what is offered is the
//! configuration's, and the card lists the same (`registry::card`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::errors::{Kind, OpError};
use super::AppState;
use crate::model::Binding;

/// "this agent does not offer gRPC; it offers JSONRPC, HTTP+JSON (see its agent card)".
fn message(state: &AppState, binding: Binding) -> String {
    let offered: Vec<&str> = Binding::ALL
        .into_iter()
        .filter(|b| state.config.offers(*b))
        .map(Binding::name)
        .collect();
    let offered = if offered.is_empty() {
        "no binding".to_owned()
    } else {
        offered.join(", ")
    };
    format!("this agent does not offer {binding}; it offers {offered} (see its agent card)")
}

/// `POST /` when JSON-RPC is not offered: HTTP 404 with the JSON-RPC error -32601.
pub(super) async fn jsonrpc(State(state): State<Arc<AppState>>) -> Response {
    let error = OpError::new(Kind::NoSuchMethod, message(&state, Binding::JsonRpc));
    let body = super::jsonrpc::error(&serde_json::Value::Null, error);
    (StatusCode::NOT_FOUND, Json(body)).into_response()
}

/// An HTTP+JSON path when HTTP+JSON is not offered: 404 with a `google.rpc.Status` body
/// (`METHOD_NOT_FOUND`).
pub(super) async fn rest(State(state): State<Arc<AppState>>) -> Response {
    let error = OpError::new(Kind::NoSuchMethod, message(&state, Binding::HttpJson));
    super::rest::error_response(error)
}

/// A gRPC path when gRPC is not offered: gRPC's own `UNIMPLEMENTED` (12) as a Trailers-Only
/// response, which every gRPC client reads and shows (as for an unknown service). A build without
/// the `grpc` feature answers these paths with `grpc_unavailable` instead.
#[cfg(feature = "grpc")]
pub(super) async fn grpc(State(state): State<Arc<AppState>>) -> Response {
    // `grpc-message` is percent-encoded on the wire; the message is printable ASCII without `%`.
    let message = message(&state, Binding::Grpc);
    let mut response = StatusCode::OK.into_response();
    let headers = response.headers_mut();
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/grpc"),
    );
    headers.insert("grpc-status", axum::http::HeaderValue::from_static("12"));
    if let Ok(value) = message.parse() {
        headers.insert("grpc-message", value);
    }
    response
}
