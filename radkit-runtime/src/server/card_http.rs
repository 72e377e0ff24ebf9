//! The agent card as an HTTP resource (spec §8.6.1): served with `Cache-Control`, a strong `ETag`
//! (a SHA-256 of the body) and `Last-Modified` (when the server built it), and answered `304 Not
//! Modified` to a conditional request (`If-None-Match`, or `If-Modified-Since`) for the same card.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// How long clients may cache the card without asking again, in seconds.
const MAX_AGE_SECS: u32 = 300;

/// The served card: its JSON body and validators.
pub(crate) struct CardDocument {
    body: axum::body::Bytes,
    etag: HeaderValue,
    last_modified: HeaderValue,
    built_at_secs: i64,
}

impl CardDocument {
    /// The document of `card`, built now.
    pub(crate) fn new(card: &impl serde::Serialize) -> Self {
        // A card is plain data: it always serializes; an empty object is never served silently
        // in its place, because `to_vec` of derived `Serialize` types over strings, maps and
        // vectors cannot fail.
        let body = serde_json::to_vec(card).unwrap_or_else(|_| b"{}".to_vec());
        let digest = Sha256::digest(&body);
        let tag: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        let now = chrono::Utc::now();
        let http_date = now.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        CardDocument {
            body: body.into(),
            etag: HeaderValue::from_str(&format!("\"{tag}\""))
                .unwrap_or(HeaderValue::from_static("\"card\"")),
            last_modified: HeaderValue::from_str(&http_date)
                .unwrap_or(HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT")),
            built_at_secs: now.timestamp(),
        }
    }

    /// Whether a conditional request already holds this card.
    fn not_modified(&self, headers: &HeaderMap) -> bool {
        if let Some(tags) = headers.get(header::IF_NONE_MATCH) {
            // `If-None-Match` wins over `If-Modified-Since` (RFC 9110 §13.2.2).
            let Ok(tags) = tags.to_str() else {
                return false;
            };
            let ours = self.etag.to_str().unwrap_or_default();
            return tags
                .split(',')
                .map(|t| t.trim().trim_start_matches("W/"))
                .any(|t| t == "*" || t == ours);
        }
        headers
            .get(header::IF_MODIFIED_SINCE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| chrono::DateTime::parse_from_rfc2822(v).ok())
            .is_some_and(|since| since.timestamp() >= self.built_at_secs)
    }

    /// The answer to `GET` of the card with `headers`.
    pub(crate) fn respond(&self, headers: &HeaderMap) -> Response {
        let validators = [
            (header::ETAG, self.etag.clone()),
            (header::LAST_MODIFIED, self.last_modified.clone()),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_str(&format!("public, max-age={MAX_AGE_SECS}"))
                    .unwrap_or(HeaderValue::from_static("no-cache")),
            ),
        ];
        if self.not_modified(headers) {
            return (StatusCode::NOT_MODIFIED, validators).into_response();
        }
        let content_type = (
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        (validators, [content_type], self.body.clone()).into_response()
    }
}
