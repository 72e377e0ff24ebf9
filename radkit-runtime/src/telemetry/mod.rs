//! What radkit tells about itself while it runs: counters and histograms for Prometheus
//! (`metrics`; rendered at `/metrics` with the `metrics` cargo feature). It observes the engine,
//! the stores and the server; it never changes what they do, and nothing it records is a task's
//! data (labels are kinds, policies and outcomes, never ids).

pub(crate) mod metrics;
#[cfg(feature = "metrics")]
pub(crate) mod prometheus;

pub(crate) use metrics::Metrics;
