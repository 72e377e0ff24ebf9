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
pub use otel::{otlp, otlp_layer, Otlp, OtlpLayer, TelemetryError};

/// The target of the engine's step, command and call spans in a task whose trace OpenTelemetry's
/// sampler dropped (see [`engine_span`]). Under `radkit_runtime`, so that a filter naming the crate
/// (`RUST_LOG=radkit_runtime=debug`) still covers them.
pub(crate) const UNSAMPLED: &str = "radkit_runtime::unsampled";

/// An `info` span of the engine inside `run`'s `task` span: the same name and fields either way,
/// but made at the [`UNSAMPLED`] target when the task's trace is not sampled, which the OTLP
/// layer leaves out. The layer would otherwise build an OpenTelemetry span for it, its
/// attributes formatted, only for the sampler to drop it when it ends: with head sampling
/// (`OTEL_TRACES_SAMPLER=parentbased_traceidratio`) most of what tracing costs. Log layers see
/// both targets alike.
macro_rules! engine_span {
    ($run:expr, $name:literal, $($fields:tt)*) => {
        if $run.unsampled.load(::std::sync::atomic::Ordering::Relaxed) {
            ::tracing::info_span!(target: $crate::telemetry::UNSAMPLED, $name, $($fields)*)
        } else {
            ::tracing::info_span!($name, $($fields)*)
        }
    };
}
pub(crate) use engine_span;

/// `future` (a task's run) to run in `span` (its `task` span), after asking OpenTelemetry's sampler
/// about the span's trace, now (with the `otel` feature and radkit's OTLP layer; nothing else
/// without). When the trace is not sampled, `unsampled` is set, so the run's step, command and
/// call spans are made where the exporter does not look ([`engine_span`]), and the trace's context
/// stays with the run, so that the requests its effects send still carry it (`traceparent` with
/// the sampled flag off: the services they reach leave the trace out too).
///
/// Not an `async fn`: one would hold `future` twice (as its argument and as what it awaits), and
/// a run's future is many kilobytes.
pub(crate) fn in_task_trace<F: std::future::Future>(
    span: &tracing::Span,
    unsampled: &std::sync::atomic::AtomicBool,
    future: F,
) -> impl std::future::Future<Output = F::Output> {
    #[cfg(feature = "otel")]
    {
        otel::in_task_trace(span, unsampled, future)
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = (span, unsampled);
        future
    }
}

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
