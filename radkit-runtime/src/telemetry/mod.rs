//! What radkit tells about itself while it runs: counters and histograms for Prometheus (rendered
//! at `/metrics` with the `metrics` cargo feature) and, with the `otel` feature, its `tracing`
//! spans exported as OpenTelemetry traces over OTLP (`otlp_layer`), with the W3C trace context
//! taken from incoming A2A requests and passed on in outbound HTTP requests. It observes the
//! engine, the stores and the server; it never changes what they do, and nothing it records as a
//! metric label is a task's data (labels are kinds, policies and outcomes, never ids). It names no
//! other module of the crate: what it shows is handed to it as labels and numbers, so any layer
//! (the client, the models, the engine, the server) may report to it without a cycle.

pub(crate) mod metrics;
#[cfg(feature = "otel")]
mod otel;
#[cfg(feature = "metrics")]
pub(crate) mod prometheus;

pub(crate) use metrics::Metrics;
#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub use otel::{otlp, otlp_layer, Otlp, TelemetryError};

/// `request` with the current span's W3C trace context in its headers, so that the service it
/// goes to continues the trace (with the `otel` feature; unchanged without it).
pub(crate) fn traced(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    #[cfg(feature = "otel")]
    {
        let mut headers = http::HeaderMap::new();
        otel::inject(&mut headers);
        request.headers(headers)
    }
    #[cfg(not(feature = "otel"))]
    request
}

/// The current span's W3C trace context as (name, value) pairs (`traceparent`, and `tracestate`
/// when it has one), for outbound requests that are not reqwest's: gRPC metadata, an MCP
/// request's `_meta`. None without the `otel` feature or outside a traced span.
#[cfg(any(feature = "grpc", feature = "mcp"))]
pub(crate) fn trace_context() -> Vec<(String, String)> {
    #[cfg(feature = "otel")]
    {
        otel::context_pairs()
    }
    #[cfg(not(feature = "otel"))]
    Vec::new()
}

/// Make `span`'s parent the trace context an incoming request's `headers` carry, if any (with the
/// `otel` feature; nothing without it).
#[cfg_attr(not(feature = "otel"), allow(unused_variables))]
pub(crate) fn continue_trace(span: &tracing::Span, headers: &axum::http::HeaderMap) {
    #[cfg(feature = "otel")]
    otel::continue_trace(span, headers);
}
