//! Bearer-token authentication: a configured token maps to a principal; tasks are scoped to it.

use axum::http::HeaderMap;

use super::ServerConfig;
use crate::engine::Caller;

/// A request without a valid bearer token, on a server that requires one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unauthorized;

/// Who sent a request: the operator when auth is off, else the principal of its token.
pub(crate) fn caller(config: &ServerConfig, headers: &HeaderMap) -> Result<Caller, Unauthorized> {
    if config.tokens.is_empty() {
        return Ok(Caller::Operator);
    }
    let presented = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .ok_or(Unauthorized)?;
    config
        .tokens
        .iter()
        .find(|(token, _)| constant_time_eq(token.as_bytes(), presented.as_bytes()))
        .map(|(_, principal)| Caller::principal(principal.clone()))
        .ok_or(Unauthorized)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
