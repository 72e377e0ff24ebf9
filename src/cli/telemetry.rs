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
    let filter = log_filter(std::env::var("RUST_LOG").ok().as_deref());
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

/// The filter of `RUST_LOG` (`info` when it is unset or empty). A directive list without span
/// filters (`info`, `radkit_runtime=debug,hyper=warn`) is a [`Targets`] filter, decided once per
/// callsite; only one that filters by span (`[task{skill=ask}]=debug`) needs an `EnvFilter`, which
/// tracks every span and takes a lock shared by every thread on each enter and exit of any span
/// (the engine's step spans are entered on each poll of a step). Directives that are no filter
/// are said so on stderr, and the logs stay at `info`.
///
/// [`Targets`]: tracing_subscriber::filter::Targets
fn log_filter(
    directives: Option<&str>,
) -> Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync> {
    let directives = directives.map(str::trim).filter(|d| !d.is_empty());
    let directives = directives.unwrap_or("info");
    // `Targets` would take `[task]` for a target's name: span filters go to `EnvFilter`.
    if !directives.contains(['[', '{']) {
        if let Ok(targets) = directives.parse::<tracing_subscriber::filter::Targets>() {
            return Box::new(targets);
        }
    }
    match tracing_subscriber::EnvFilter::try_new(directives) {
        Ok(filter) => Box::new(filter),
        Err(e) => {
            eprintln!("RUST_LOG=`{directives}` is not a filter ({e}); logging at info");
            Box::new(tracing_subscriber::filter::Targets::new().with_default(tracing::Level::INFO))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::log_filter;
    use tracing::Level;
    use tracing_subscriber::layer::SubscriberExt;

    /// What `check` finds enabled under a subscriber filtered by `RUST_LOG=directives`.
    fn under(directives: Option<&str>, check: impl FnOnce() -> bool) -> bool {
        let subscriber = tracing_subscriber::registry().with(log_filter(directives));
        tracing::subscriber::with_default(subscriber, check)
    }

    #[test]
    fn rust_log_unset_or_empty_logs_at_info() {
        for directives in [None, Some(""), Some("  ")] {
            assert!(under(directives, || tracing::enabled!(Level::INFO)));
            assert!(!under(directives, || tracing::enabled!(Level::DEBUG)));
        }
    }

    #[test]
    fn rust_log_without_span_filters_filters_by_target_and_level() {
        let directives = Some("warn,radkit_runtime=debug");
        assert!(under(directives, || {
            tracing::enabled!(target: "radkit_runtime::engine", Level::DEBUG)
        }));
        assert!(!under(directives, || {
            tracing::enabled!(target: "radkit_runtime::engine", Level::TRACE)
        }));
        assert!(!under(
            directives,
            || tracing::enabled!(target: "hyper", Level::INFO)
        ));
        assert!(under(
            directives,
            || tracing::enabled!(target: "hyper", Level::WARN)
        ));
    }

    #[test]
    fn rust_log_with_a_span_filter_still_filters_inside_that_span() {
        let directives = Some("warn,[task]=debug");
        assert!(under(directives, || {
            let span = tracing::error_span!("task");
            let _entered = span.enter();
            tracing::enabled!(Level::DEBUG)
        }));
        assert!(!under(directives, || tracing::enabled!(Level::DEBUG)));
    }

    #[test]
    fn a_rust_log_that_is_no_filter_logs_at_info() {
        let directives = Some("radkit=[[nonsense");
        assert!(under(directives, || tracing::enabled!(Level::INFO)));
        assert!(!under(directives, || tracing::enabled!(Level::DEBUG)));
    }
}
