//! `GET /metrics` (the `metrics` cargo feature): the engine's counters and the gauges read for the
//! scrape, in the OpenMetrics text format Prometheus reads. Behind the same bearer tokens as the A2A
//! API when tokens are configured (a scraper sends `Authorization: Bearer`); without the feature the
//! path is not routed (404).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{auth, AppState};
use crate::telemetry::prometheus;

/// The scrape: 401 without a valid token (when tokens are configured), 503 when the store cannot be
/// read, else the text.
pub(crate) async fn scrape(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if let Err(auth::Unauthorized) = state.tokens.caller(&headers) {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "a bearer token is required\n",
        )
            .into_response();
    }
    let read = match state.engine.scrape(state.streams.open()).await {
        Ok(read) => read,
        Err(e) => {
            tracing::warn!(error = %e, "metrics scrape: the store could not be read");
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "the store could not be read\n",
            )
                .into_response();
        }
    };
    let text = prometheus::render(state.engine.metric_families(), read);
    ([(header::CONTENT_TYPE, prometheus::CONTENT_TYPE)], text).into_response()
}
