//! Bearer-token authentication: a configured token maps to a principal; tasks are scoped to it.

use axum::http::HeaderMap;

use super::ServerConfig;

/// The principal of a request: `Ok(None)` when auth is off, `Err(())` when a valid token is missing.
pub(crate) fn principal(config: &ServerConfig, headers: &HeaderMap) -> Result<Option<String>, ()> {
    if config.tokens.is_empty() {
        return Ok(None);
    }
    let presented = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .ok_or(())?;
    config
        .tokens
        .iter()
        .find(|(token, _)| constant_time_eq(token.as_bytes(), presented.as_bytes()))
        .map(|(_, principal)| Some(principal.clone()))
        .ok_or(())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
