//! The `metrics` feature's side of [`Metrics`](super::Metrics): the counters as
//! `prometheus-client` families, and one scrape rendered in the OpenMetrics text format with the
//! gauges the engine read for it (tasks by state from the store, tasks in hand and waiting, open
//! streams, the store's batch sizes), handed in as plain numbers. A scrape builds its own registry
//! over clones of the counters, so it takes no lock the engine's hot path takes.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

/// The content type of [`render`]'s text.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels<const N: usize> = [(&'static str, &'static str); N];

/// The engine's counters.
pub(crate) struct Families {
    pub(crate) steps: Family<Labels<1>, Counter>,
    pub(crate) commands: Family<Labels<3>, Counter>,
    pub(crate) retries: Family<Labels<2>, Counter>,
    pub(crate) receipt_commit: Histogram,
    pub(crate) lease_claims: Counter,
    pub(crate) lease_takeovers: Counter,
    pub(crate) fenced: Counter,
    pub(crate) pruned: Family<Labels<1>, Counter>,
}

impl Default for Families {
    fn default() -> Self {
        Families {
            steps: Family::default(),
            commands: Family::default(),
            retries: Family::default(),
            // 0.25 ms to about 4 s.
            receipt_commit: Histogram::new(exponential_buckets(0.000_25, 2.0, 15)),
            lease_claims: Counter::default(),
            lease_takeovers: Counter::default(),
            fenced: Counter::default(),
            pruned: Family::default(),
        }
    }
}

/// What a scrape reads besides the counters.
pub(crate) struct Scrape {
    /// Tasks by state (`Store::state_counts`), states by their A2A names.
    pub tasks: Vec<(&'static str, u64)>,
    /// Tasks waiting for input (`input-required`).
    pub input_required: u64,
    /// Tasks this engine holds in memory.
    pub in_hand: usize,
    /// Timers this process set and has not seen fire.
    pub timers: usize,
    /// Calls to other agents or skills this process follows.
    pub calls: usize,
    /// Streams open to clients (SSE and gRPC server streams).
    pub streams: usize,
    /// The store's commits, if it group-commits.
    pub store: Option<Batches>,
}

/// A store's committed transactions as a histogram of their appends.
pub(crate) struct Batches {
    /// Transactions.
    pub count: u64,
    /// Appends in them.
    pub appends: u64,
    /// Each bucket's upper bound (appends) and its own count (not cumulative); the last bucket
    /// also counts larger transactions.
    pub buckets: Vec<(u64, u64)>,
}

/// The counters and `scrape`'s gauges in the OpenMetrics text format ([`CONTENT_TYPE`]).
pub(crate) fn render(families: Option<&Families>, scrape: Scrape) -> String {
    let mut registry = Registry::with_prefix("radkit");
    let tasks = Family::<Labels<1>, Gauge>::default();
    for (state, n) in &scrape.tasks {
        tasks.get_or_create(&[("state", state)]).set(gauge(*n));
    }
    registry.register("tasks", "Tasks in the store, by state", tasks);
    registry.register(
        "tasks_in_hand",
        "Tasks this engine holds in memory (running, or waiting briefly)",
        gauge_of(scrape.in_hand),
    );
    let waiting = Family::<Labels<1>, Gauge>::default();
    waiting
        .get_or_create(&[("on", "input")])
        .set(gauge(scrape.input_required));
    waiting
        .get_or_create(&[("on", "timer")])
        .set(gauge(scrape.timers));
    waiting
        .get_or_create(&[("on", "call")])
        .set(gauge(scrape.calls));
    registry.register(
        "tasks_waiting",
        "Tasks waiting: for input (in the store), on a timer or a call (followed by this process)",
        waiting,
    );
    registry.register(
        "streams_open",
        "Streams open to clients (SSE, gRPC server streams)",
        gauge_of(scrape.streams),
    );
    if let Some(batches) = scrape.store {
        registry.register(
            "store_batch_appends",
            "Appends per committed store transaction (group commit)",
            BatchSizes(batches),
        );
    }
    if let Some(f) = families {
        registry.register("steps", "Step visits, by how they ended", f.steps.clone());
        registry.register(
            "commands",
            "Performed commands that got their receipt, by kind, policy and outcome",
            f.commands.clone(),
        );
        registry.register(
            "command_retries",
            "Command attempts that failed transiently and were tried again",
            f.retries.clone(),
        );
        registry.register_with_unit(
            "receipt_commit",
            "Time from a command's result to its receipt being committed",
            Unit::Seconds,
            f.receipt_commit.clone(),
        );
        registry.register(
            "lease_claims",
            "Task leases this engine claimed",
            f.lease_claims.clone(),
        );
        registry.register(
            "lease_takeovers",
            "Leases of running tasks another engine took over from this one",
            f.lease_takeovers.clone(),
        );
        registry.register(
            "fencing_rejections",
            "Appends the store refused for a stale fencing token",
            f.fenced.clone(),
        );
        registry.register(
            "tasks_pruned",
            "Finished tasks this engine's retention compacted (`what=\"journal\"`) or deleted (`what=\"task\"`)",
            f.pruned.clone(),
        );
    }
    let mut text = String::new();
    // Writing to a `String` cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    text
}

/// A count as a gauge's value.
fn gauge(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// A gauge holding `n`.
fn gauge_of(n: usize) -> Gauge {
    let g = Gauge::default();
    g.set(gauge(n));
    g
}

/// The store's batch sizes as a histogram (its buckets are counted by the store's writers).
struct BatchSizes(Batches);

impl std::fmt::Debug for BatchSizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchSizes")
            .field("count", &self.0.count)
            .finish_non_exhaustive()
    }
}

impl EncodeMetric for BatchSizes {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        // Each bucket's own count: the encoder writes them cumulative. The last bound's bucket also
        // holds larger batches, so none is left for `+Inf` alone.
        let buckets: Vec<(f64, u64)> = self
            .0
            .buckets
            .iter()
            .map(|(bound, n)| (*bound as f64, *n))
            .chain([(f64::INFINITY, 0)])
            .collect();
        encoder.encode_histogram::<NoLabelSet>(self.0.appends as f64, self.0.count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}
