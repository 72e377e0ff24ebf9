//! The media types a request body may declare. A2A 1.0 bodies are JSON (`application/json` for
//! JSON-RPC, `application/a2a+json` for HTTP+JSON, spec §9.1, §11.1, §14.1); a body declared as
//! anything else is `ContentTypeNotSupportedError` before it is read. A request that declares no
//! type is read as JSON.

use axum::http::HeaderMap;

use super::errors::{Kind, OpError};

/// Whether the request's `Content-Type` is one of A2A's JSON types (`application/json`,
/// `application/a2a+json`, or another `application/*+json`), or absent.
pub(crate) fn check_json(headers: &HeaderMap) -> Result<(), OpError> {
    let Some(value) = headers.get(axum::http::header::CONTENT_TYPE) else {
        return Ok(());
    };
    let essence = value
        .to_str()
        .ok()
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase());
    match essence.as_deref() {
        Some("application/json") => Ok(()),
        Some(t) if t.starts_with("application/") && t.ends_with("+json") => Ok(()),
        _ => Err(OpError::new(
            Kind::ContentTypeNotSupported,
            format!(
                "content type `{}` is not supported; send `application/json` (JSON-RPC) or `application/a2a+json` (HTTP+JSON)",
                String::from_utf8_lossy(value.as_bytes()).chars().take(64).collect::<String>()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(content_type: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", content_type.parse().unwrap());
        headers
    }

    #[test]
    fn json_types_and_none_are_accepted_others_refused_with_32005() {
        assert!(check_json(&HeaderMap::new()).is_ok());
        for ok in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/A2A+JSON",
            "application/a2a+json",
        ] {
            assert!(check_json(&with(ok)).is_ok(), "{ok}");
        }
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "application/xml",
        ] {
            let error = check_json(&with(bad)).unwrap_err();
            assert_eq!(error.kind, Kind::ContentTypeNotSupported, "{bad}");
        }
    }
}
