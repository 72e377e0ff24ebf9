//! The log and trace set-up of `radkit serve` and `radkit worker`: logs to stderr (`RUST_LOG`),
//! and, with the `otel` feature and `--otlp-endpoint` (or `OTEL_EXPORTER_OTLP_ENDPOINT`), spans
//! exported over OTLP/HTTP through `radkit::telemetry`, flushed when the command returns.

/// The trace export options (none without the `otel` feature).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct TraceArgs {
    /// Export traces over OTLP/HTTP (protobuf) to this collector: its base URL, such as
    /// `http://localhost:4318` (spans are posted to `<url>/v1/traces`).
    #[cfg(feature = "otel")]
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// The service name the exported spans carry.
    #[cfg(feature = "otel")]
    #[arg(long, env = "OTEL_SERVICE_NAME", default_value = "radkit")]
    pub service_name: String,
}

/// What must live while the command runs: the OTLP exporter, which flushes when dropped.
pub struct Tracing {
    #[cfg(feature = "otel")]
    _otlp: Option<crate::telemetry::Otlp>,
}

impl TraceArgs {
    /// Start logging (and exporting, when asked); keep the answer until the command ends.
    pub fn init(&self) -> anyhow::Result<Tracing> {
        #[cfg(feature = "otel")]
        {
            let otlp = match &self.otlp_endpoint {
                Some(url) => Some(crate::telemetry::otlp(url, &self.service_name)?),
                None => None,
            };
            init_tracing(otlp.as_ref());
            Ok(Tracing { _otlp: otlp })
        }
        #[cfg(not(feature = "otel"))]
        {
            init_tracing(None);
            Ok(Tracing {})
        }
    }
}

/// The exporter a subscriber may feed: radkit's with the `otel` feature, none without.
#[cfg(feature = "otel")]
type Exporter = crate::telemetry::Otlp;
#[cfg(not(feature = "otel"))]
type Exporter = std::convert::Infallible;

/// Log to stderr (`RUST_LOG` overrides the default `info`) and, with `otlp`, export the spans too.
/// A subscriber set before (by the program, or a test) is kept.
pub fn init_tracing(otlp: Option<&Exporter>) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    #[cfg(feature = "otel")]
    let traces = otlp.map(|o| o.layer());
    #[cfg(not(feature = "otel"))]
    let traces = otlp.map(|_| tracing_subscriber::layer::Identity::new());
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(logs)
        .with(traces)
        .try_init();
}
