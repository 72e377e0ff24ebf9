//! The gRPC binding's paths in a build without the `grpc` cargo feature: every request gets a clear
//! answer saying what is missing and what is served instead, never a bare 404. It owns nothing
//! else; the agent card of such a build lists no gRPC interface (`registry::card`).

use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

/// What the answer says. `grpc-message` is percent-encoded on the wire except for printable ASCII
/// other than `%`, which is all this is.
const MESSAGE: &str = "this agent was built without gRPC (radkit's `grpc` cargo feature); \
                       it serves A2A over JSON-RPC and HTTP+JSON on this port";

/// A gRPC request (`content-type: application/grpc…`) gets gRPC's own `UNIMPLEMENTED` (12) with
/// the message, as a Trailers-Only response (HTTP 200, the status in the headers, no body): what
/// every gRPC client reads and shows, as it would for an unknown service. Anything else sent to
/// these paths gets HTTP 501 with the message as text.
pub(super) async fn answer(headers: HeaderMap) -> Response {
    let grpc = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"));
    if grpc {
        [
            (CONTENT_TYPE.as_str(), "application/grpc"),
            ("grpc-status", "12"),
            ("grpc-message", MESSAGE),
        ]
        .into_response()
    } else {
        (StatusCode::NOT_IMPLEMENTED, MESSAGE).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_grpc_request_is_unimplemented_with_a_message_and_any_other_a_501() {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, "application/grpc+proto".parse().unwrap());
        let response = answer(headers).await;
        assert_eq!(response.status(), StatusCode::OK);
        let h = response.headers();
        assert_eq!(h["content-type"], "application/grpc");
        assert_eq!(h["grpc-status"], "12");
        assert!(h["grpc-message"]
            .to_str()
            .unwrap()
            .contains("`grpc` cargo feature"));
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        assert!(body.is_empty(), "a Trailers-Only response has no body");

        let response = answer(HeaderMap::new()).await;
        assert_eq!(response.status(), StatusCode::NOT_IMPLEMENTED);
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        assert!(std::str::from_utf8(&body)
            .unwrap()
            .contains("JSON-RPC and HTTP+JSON"));
    }
}
