//! The engine's counters: what it records on its hot path as steps run, commands settle, receipts
//! commit and leases change hands. With the `metrics` feature each record is an atomic add (and, for
//! a labelled counter, a read-locked lookup of its small, bounded label set); without it
//! [`Metrics`] holds nothing and every record compiles to nothing. Gauges read at scrape time (tasks
//! by state, open streams) are not here: `prometheus` reads them when `/metrics` is asked.

use std::time::Instant;

use crate::flow::{CmdKind, EffectPolicy, Receipt, StepError, Transition};

/// The engine's counters, shared by its runs; cheap to clone. The default records nothing (a run
/// made outside an engine, a build without the `metrics` feature).
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

    /// A step visit ended with `result`.
    pub(crate) fn step<S>(&self, result: &Result<Transition<S>, StepError>) {
        #[cfg(feature = "metrics")]
        if let Some(f) = &self.families {
            f.steps
                .get_or_create(&[("outcome", step_outcome(result))])
                .inc();
        }
    }

    /// A performed command (`kind`, `policy`) got its receipt.
    pub(crate) fn command(&self, kind: &CmdKind, policy: EffectPolicy, receipt: &Receipt) {
        #[cfg(feature = "metrics")]
        if let Some(f) = &self.families {
            let outcome = match receipt.outcome {
                Ok(_) => "ok",
                Err(_) => "error",
            };
            f.commands
                .get_or_create(&[
                    ("kind", kind.kind_name()),
                    ("policy", policy_name(policy)),
                    ("outcome", outcome),
                ])
                .inc();
        }
    }

    /// An attempt of a command failed transiently and is tried again.
    pub(crate) fn retry(&self, kind: &CmdKind, policy: EffectPolicy) {
        #[cfg(feature = "metrics")]
        if let Some(f) = &self.families {
            f.retries
                .get_or_create(&[("kind", kind.kind_name()), ("policy", policy_name(policy))])
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

    /// The store refused an append for its stale fencing token.
    pub(crate) fn fenced(&self) {
        #[cfg(feature = "metrics")]
        if let Some(f) = &self.families {
            f.fenced.inc();
        }
    }
}

/// The label of a step visit's end: its transition's kind, or why it made none.
#[cfg(feature = "metrics")]
fn step_outcome<S>(result: &Result<Transition<S>, StepError>) -> &'static str {
    match result {
        Ok(t) => crate::journal::TransitionKind::from(&t.next).as_str(),
        Err(StepError::Suspended) => "suspended",
        Err(StepError::Halted) => "halted",
        Err(StepError::Canceled) => "canceled",
        Err(StepError::Interrupted) => "interrupted",
        Err(StepError::Rejected(_)) => "rejected",
        Err(_) => "failed",
    }
}

/// The label of an effect policy.
#[cfg(feature = "metrics")]
fn policy_name(policy: EffectPolicy) -> &'static str {
    match policy {
        EffectPolicy::Idempotent => "idempotent",
        EffectPolicy::AtLeastOnce => "at_least_once",
        EffectPolicy::AtMostOnce => "at_most_once",
        EffectPolicy::Compensate => "compensate",
    }
}
