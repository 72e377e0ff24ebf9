//! The engine's counters: what it records on its hot path as steps run, commands settle, receipts
//! commit and leases change hands. With the `metrics` feature each record is an atomic add (and, for
//! a labelled counter, a read-locked lookup of its small, bounded label set); without it
//! [`Metrics`] holds nothing and every record compiles to nothing. Gauges read at scrape time (tasks
//! by state, open streams) are not here: `prometheus` reads them when `/metrics` is asked.

use std::time::Instant;

/// The engine's counters, shared by its runs; cheap to clone. The default records nothing (a run
/// made outside an engine, a build without the `metrics` feature). Labels are `&'static str`s the
/// engine names (kinds, policies, outcomes), so no task's data can become a label.
#[derive(Clone, Default)]
pub(crate) struct Metrics {
    #[cfg(feature = "metrics")]
    pub(crate) families: Option<std::sync::Arc<super::prometheus::Families>>,
}

#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
impl Metrics {
    /// Counters that record (with the `metrics` feature; without it, the default).
    pub(crate) fn recording() -> Self {
        Metrics {
            #[cfg(feature = "metrics")]
            families: Some(Default::default()),
        }
    }

    /// A step visit ended: its transition's kind, or why it made none.
    pub(crate) fn step(&self, outcome: &'static str) {
        #[cfg(feature = "metrics")]
        if let Some(f) = &self.families {
            f.steps.get_or_create(&[("outcome", outcome)]).inc();
        }
    }

    /// A performed command of `kind` and `policy` got its receipt, `ok` or an error.
    pub(crate) fn command(&self, kind: &'static str, policy: &'static str, ok: bool) {
        #[cfg(feature = "metrics")]
        if let Some(f) = &self.families {
            let outcome = if ok { "ok" } else { "error" };
            f.commands
                .get_or_create(&[("kind", kind), ("policy", policy), ("outcome", outcome)])
                .inc();
        }
    }

    /// An attempt of a command failed transiently and is tried again.
    pub(crate) fn retry(&self, kind: &'static str, policy: &'static str) {
        #[cfg(feature = "metrics")]
        if let Some(f) = &self.families {
            f.retries
                .get_or_create(&[("kind", kind), ("policy", policy)])
                .inc();
        }
    }

    /// An append holding receipts recorded at `recorded` committed now.
    pub(crate) fn receipts_committed(&self, recorded: &[Instant]) {
        #[cfg(feature = "metrics")]
        if let Some(f) = &self.families {
            if recorded.is_empty() {
                return;
            }
            let now = Instant::now();
            for at in recorded {
                f.receipt_commit
                    .observe(now.saturating_duration_since(*at).as_secs_f64());
            }
        }
    }

    /// This engine claimed `n` leases.
    pub(crate) fn lease_claims(&self, n: usize) {
        #[cfg(feature = "metrics")]
        if let Some(f) = &self.families {
            f.lease_claims.inc_by(u64::try_from(n).unwrap_or(u64::MAX));
        }
    }

    /// A lease of a run still going was taken over by another engine.
    pub(crate) fn lease_taken_over(&self) {
        #[cfg(feature = "metrics")]
        if let Some(f) = &self.families {
            f.lease_takeovers.inc();
        }
    }

    /// Retention compacted `journals` finished tasks' journals and deleted `tasks` finished tasks.
    pub(crate) fn pruned(&self, journals: u64, tasks: u64) {
        #[cfg(feature = "metrics")]
        if let Some(f) = &self.families {
            f.pruned
                .get_or_create(&[("what", "journal")])
                .inc_by(journals);
            f.pruned.get_or_create(&[("what", "task")]).inc_by(tasks);
        }
    }

    /// The store refused an append for its stale fencing token.
    pub(crate) fn fenced(&self) {
        #[cfg(feature = "metrics")]
        if let Some(f) = &self.families {
            f.fenced.inc();
        }
    }
}
