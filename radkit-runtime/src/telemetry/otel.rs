//! The `otel` feature: radkit's `tracing` spans exported as OpenTelemetry traces over OTLP
//! (HTTP/protobuf), and the W3C trace context (`traceparent`, `tracestate`) read from incoming A2A
//! requests and written into outbound HTTP requests. The exporter, the SDK's batching and the
//! bridge from `tracing` are the OpenTelemetry project's crates (`opentelemetry-otlp`,
//! `opentelemetry_sdk`, `tracing-opentelemetry`); what is radkit's is the HTTP client the exporter
//! posts with (radkit's reqwest, on a runtime of its own so that a flush never waits on the
//! program's) and where the context goes in and out. Nothing here is global: a program adds the
//! layer to its own subscriber, and spans reach it through whichever subscriber is current.

use std::any::TypeId;
use std::fmt;
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HeaderExtractor, HeaderInjector, HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, Tracer};
use opentelemetry_sdk::Resource;
use tracing::span;
use tracing_opentelemetry::{OpenTelemetryLayer, OpenTelemetrySpanExt};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// How many ended spans wait for export before new ones are dropped, unless
/// `OTEL_BSP_MAX_QUEUE_SIZE` says otherwise.
const QUEUE_SPANS: usize = 16_384;

/// How long one export may take before it is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the OTLP exporter could not be set up or flushed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The endpoint is not an `http://` or `https://` URL.
    #[error("OTLP endpoint `{0}` is not an http:// or https:// URL")]
    Endpoint(String),
    /// The exporter or its runtime could not be built.
    #[error("could not build the OTLP exporter: {0}")]
    Build(String),
    /// Spans could not be exported (the collector is unreachable or refused them).
    #[error("could not export spans: {0}")]
    Export(String),
}

/// The `tracing` layer of [`Otlp::layer`]: OpenTelemetry's, shown only what it exports. It leaves
/// out the engine's spans in traces the sampler dropped (target `radkit_runtime::unsampled`) when
/// they are made, and does not watch spans being entered and left: radkit's step and task spans
/// are entered on every poll of their futures, and OpenTelemetry's layer would look each one up
/// and stamp its end time every time it is left (a span ends when it closes instead, right after
/// its last poll). Everything else it hands on as it comes, so
/// `tracing_opentelemetry::OpenTelemetrySpanExt` (a span's trace context, its parent) works
/// through it.
pub struct OtlpLayer<S> {
    inner: OpenTelemetryLayer<S, Tracer>,
}

impl<S> fmt::Debug for OtlpLayer<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtlpLayer").finish_non_exhaustive()
    }
}

impl<S> Layer<S> for OtlpLayer<S>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    fn on_register_dispatch(&self, subscriber: &tracing::Dispatch) {
        self.inner.on_register_dispatch(subscriber);
    }

    fn on_layer(&mut self, subscriber: &mut S) {
        self.inner.on_layer(subscriber);
    }

    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        if attrs.metadata().target() != super::UNSAMPLED {
            self.inner.on_new_span(attrs, id, ctx);
        }
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        self.inner.on_record(id, values, ctx);
    }

    fn on_follows_from(&self, id: &span::Id, follows: &span::Id, ctx: Context<'_, S>) {
        self.inner.on_follows_from(id, follows, ctx);
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        self.inner.on_event(event, ctx);
    }

    fn on_close(&self, id: span::Id, ctx: Context<'_, S>) {
        self.inner.on_close(id, ctx);
    }

    fn on_id_change(&self, old: &span::Id, new: &span::Id, ctx: Context<'_, S>) {
        self.inner.on_id_change(old, new, ctx);
    }

    // SAFETY: the pointers are to `self` or come from the inner layer's `downcast_raw` (which
    // `OpenTelemetrySpanExt` asks for its context accessor); both live as long as `self`.
    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        if id == TypeId::of::<Self>() {
            return Some(self as *const Self as *const ());
        }
        // SAFETY: forwarded with the caller's own guarantees.
        unsafe { self.inner.downcast_raw(id) }
    }
}

/// An OTLP trace exporter: spans go out in batches to `<endpoint>/v1/traces`. Make the layer that
/// feeds it with [`Otlp::layer`]; spans still buffered are exported by [`Otlp::flush`], and by
/// [`Otlp::shutdown`] or when it is dropped.
pub struct Otlp {
    provider: SdkTracerProvider,
}

impl fmt::Debug for Otlp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Otlp").finish_non_exhaustive()
    }
}

/// An OTLP exporter to `endpoint` (the collector's base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT`
/// gives it: `http://localhost:4318`; traces are posted to its `/v1/traces`) whose spans name
/// their service `service_name`.
pub fn otlp(endpoint: &str, service_name: &str) -> Result<Otlp, TelemetryError> {
    let base = endpoint.trim_end_matches('/');
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(TelemetryError::Endpoint(endpoint.to_owned()));
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("{base}/v1/traces"))
        .with_timeout(EXPORT_TIMEOUT)
        .with_http_client(ExportClient::new()?)
        .build()
        .map_err(|e| TelemetryError::Build(e.to_string()))?;
    // The spec's default queue (2,048 spans) overflows under a thousand concurrent tasks and drops
    // spans; `OTEL_BSP_MAX_QUEUE_SIZE` still decides when it is set.
    let mut batch = BatchConfigBuilder::default();
    if std::env::var_os("OTEL_BSP_MAX_QUEUE_SIZE").is_none() {
        batch = batch.with_max_queue_size(QUEUE_SPANS);
    }
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(batch.build())
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(
            Resource::builder()
                .with_service_name(service_name.to_owned())
                .build(),
        )
        .build();
    Ok(Otlp { provider })
}

/// A `tracing` layer exporting radkit's spans to `endpoint` over OTLP, and the exporter behind it
/// (keep it for as long as the layer is used; dropping it flushes and stops the export). Add the
/// layer to the program's subscriber:
///
/// ```no_run
/// # use radkit_runtime as radkit;
/// # fn main() -> Result<(), radkit::telemetry::TelemetryError> {
/// use tracing_subscriber::layer::SubscriberExt;
/// let (layer, otlp) = radkit::telemetry::otlp_layer("http://localhost:4318", "my-agent")?;
/// let subscriber = tracing_subscriber::registry().with(layer);
/// tracing::subscriber::set_global_default(subscriber).expect("no other subscriber");
/// // … serve; at shutdown:
/// otlp.shutdown();
/// # Ok(()) }
/// ```
pub fn otlp_layer<S>(
    endpoint: &str,
    service_name: &str,
) -> Result<(OtlpLayer<S>, Otlp), TelemetryError>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    let otlp = otlp(endpoint, service_name)?;
    Ok((otlp.layer(), otlp))
}

impl Otlp {
    /// A layer that turns the spans of the subscriber it is added to into OpenTelemetry spans for
    /// this exporter. Spans carry their fields; not their source location (the line of radkit's
    /// engine that made a step's span is the same for every step, and three more attributes on
    /// every span cost the export more than they tell), their busy and idle times nor their thread
    /// (a step's future moves between threads), and entering one does not make it OpenTelemetry's
    /// current context (radkit reads a span's context from the span itself). Each of those would
    /// cost time on every span, or on every poll of every instrumented future.
    pub fn layer<S>(&self) -> OtlpLayer<S>
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        OtlpLayer {
            inner: tracing_opentelemetry::layer()
                .with_tracer(self.provider.tracer("radkit"))
                .with_location(false)
                .with_tracked_inactivity(false)
                .with_threads(false)
                .with_context_activation(false),
        }
    }

    /// Export every span ended so far. It blocks until the collector answered: from async code call
    /// it in `tokio::task::spawn_blocking`.
    pub fn flush(&self) -> Result<(), TelemetryError> {
        self.provider
            .force_flush()
            .map_err(|e| TelemetryError::Export(e.to_string()))
    }

    /// Export what is buffered and stop. Blocks like [`Otlp::flush`].
    pub fn shutdown(self) {
        // Dropping does it.
    }
}

impl Drop for Otlp {
    fn drop(&mut self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::debug!(error = %e, "OTLP exporter shut down with an error");
        }
    }
}

/// The exporter's HTTP client: radkit's reqwest, its requests run on a one-thread runtime owned
/// by the exporter (the SDK's batch processor calls it from a thread of its own, outside any
/// runtime).
struct ExportClient {
    client: reqwest::Client,
    runtime: OwnRuntime,
}

impl fmt::Debug for ExportClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExportClient").finish_non_exhaustive()
    }
}

impl ExportClient {
    fn new() -> Result<Self, TelemetryError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("radkit-otlp")
            .enable_all()
            .build()
            .map_err(|e| TelemetryError::Build(e.to_string()))?;
        let client = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| TelemetryError::Build(e.to_string()))?;
        Ok(ExportClient {
            client,
            runtime: OwnRuntime(Some(runtime)),
        })
    }
}

#[async_trait::async_trait]
impl HttpClient for ExportClient {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.client.clone();
        let Some(runtime) = &self.runtime.0 else {
            return Err("the OTLP exporter's runtime is gone".into());
        };
        let answer = runtime.spawn(async move {
            let response = client.execute(request).await?;
            let mut answer = http::Response::builder().status(response.status());
            for (name, value) in response.headers() {
                answer = answer.header(name, value);
            }
            let body = response.bytes().await?;
            Ok::<_, HttpError>(answer.body(body)?)
        });
        answer.await?
    }
}

/// A runtime that may be dropped anywhere, inside async code too (it stops in the background).
struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

tokio::task_local! {
    /// The trace context of a task whose trace the sampler dropped, for the requests its run sends:
    /// its step, command and call spans have no OpenTelemetry span to read it from.
    static UNSAMPLED_TRACE: opentelemetry::Context;
}

/// See [`super::in_task_trace`].
pub(crate) fn in_task_trace<F: std::future::Future>(
    span: &tracing::Span,
    unsampled: &std::sync::atomic::AtomicBool,
    future: F,
) -> impl std::future::Future<Output = F::Output> {
    use futures::future::Either;
    use opentelemetry::trace::TraceContextExt as _;
    // Reading the context starts the OpenTelemetry span: the sampler decides here.
    let context = span.context();
    let span_context = context.span().span_context().clone();
    let dropped = span_context.is_valid() && !span_context.is_sampled();
    // A run may be driven again, in another trace.
    unsampled.store(dropped, std::sync::atomic::Ordering::Relaxed);
    if dropped {
        Either::Left(UNSAMPLED_TRACE.scope(context, future))
    } else {
        Either::Right(future)
    }
}

/// The trace context requests sent now carry: the current span's, or, inside a span the exporter
/// leaves out, that of the unsampled task it runs for.
fn current_context() -> opentelemetry::Context {
    use opentelemetry::trace::TraceContextExt as _;
    let context = tracing::Span::current().context();
    if context.span().span_context().is_valid() {
        return context;
    }
    UNSAMPLED_TRACE.try_with(Clone::clone).unwrap_or(context)
}

/// Make `span`'s parent the trace context `headers` carry (`traceparent`, `tracestate`), if they
/// carry one: an A2A request's span continues its caller's trace.
pub(crate) fn continue_trace(span: &tracing::Span, headers: &http::HeaderMap) {
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    use opentelemetry::trace::TraceContextExt as _;
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// Write the current span's trace context into `headers`: the outbound request joins the trace.
pub(crate) fn inject(headers: &mut http::HeaderMap) {
    let context = current_context();
    TraceContextPropagator::new().inject_context(&context, &mut HeaderInjector(headers));
}

/// The current span's trace context as (name, value) pairs; none when it has no valid context.
#[cfg(any(feature = "grpc", feature = "mcp"))]
pub(crate) fn context_pairs() -> Vec<(String, String)> {
    let context = current_context();
    let mut pairs = std::collections::HashMap::<String, String>::new();
    TraceContextPropagator::new().inject_context(&context, &mut pairs);
    let mut pairs: Vec<_> = pairs.into_iter().collect();
    pairs.sort();
    pairs
}
