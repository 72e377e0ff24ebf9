//! Retention: how long finished tasks are kept ([`Retention`]), and the pruner that holds the store
//! to it. Every engine that takes part in the work prunes (on a shared store the pruners share it:
//! `Store::prune` is safe to run at once); a pass asks the store for batches of [`BATCH`] until
//! none is full, so a backlog drains in one pass and each transaction stays short.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{EngineError, Inner};
use crate::store::{Prune, Pruned, Store, StoreError};

/// How long finished tasks are kept ([`EngineBuilder::retention`](super::EngineBuilder::retention)).
/// Both periods count from when the task finished (its status time), and by default both are
/// forever.
///
/// A task is finished when it ended (`completed`, `failed`, `canceled`, `rejected`); one that runs
/// or waits is never pruned, however old. A finished task whose push notification configs have not
/// all delivered its end keeps its whole journal (the sender reads it) until they have; it is
/// deleted at `task` all the same, its configs with it (a webhook that has not acknowledged the
/// end by then never will).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    /// How long a finished task keeps its whole journal (every step, command and receipt the
    /// console's timeline shows); then it is compacted to its first append (the task's creation
    /// and the message that made it) and its last (its end). Its row and view stay: `tasks/get`,
    /// `ListTasks` and the console's task page show it as before, a resubscribe replays the two
    /// appends, and a retried send with the first message's id is still recognized. `None`: forever.
    pub journal: Option<Duration>,
    /// How long a finished task is kept at all; then it is deleted (row, view, journal, push
    /// configs) and `tasks/get` answers that no such task exists. A send that repeats the message
    /// that created it (same `messageId`) then starts a new task. `None`: forever.
    pub task: Option<Duration>,
}

impl Retention {
    /// Keep every task forever (the default).
    pub const FOREVER: Retention = Retention {
        journal: None,
        task: None,
    };

    /// True when nothing is ever pruned.
    pub fn keeps_everything(&self) -> bool {
        self.journal.is_none() && self.task.is_none()
    }

    /// How often the pruner looks: a tenth of the shorter period, between one second and a
    /// minute; `None` when nothing is pruned.
    pub fn period(&self) -> Option<Duration> {
        let shortest = match (self.journal, self.task) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return None,
        };
        Some((shortest / 10).clamp(Duration::from_secs(1), Duration::from_secs(60)))
    }

    /// The store's cutoffs at `now_ms`: tasks that finished before them are due.
    pub fn prune_at(&self, now_ms: i64, limit: usize) -> Prune {
        let before = |keep: Option<Duration>| {
            keep.map(|keep| {
                now_ms.saturating_sub(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX))
            })
        };
        Prune {
            journals_before_ms: before(self.journal),
            tasks_before_ms: before(self.task),
            limit,
        }
    }
}

impl super::Engine {
    /// One pass of retention now, what the pruner does every [`Retention::period`]: the journals
    /// of tasks that finished more than `retention.journal` ago compacted, the tasks that finished
    /// more than `retention.task` ago deleted, in batches until none is due. Nothing when the
    /// engine keeps every task. Safe beside the pruner and other engines' pruners.
    pub async fn prune_finished(&self) -> Result<Pruned, EngineError> {
        if self.inner.config.retention.keeps_everything() {
            return Ok(Pruned::default());
        }
        Ok(self.inner.prune_finished(usize::MAX).await?)
    }
}

/// Tasks compacted, and tasks deleted, per store call.
pub(crate) const BATCH: usize = 256;

/// One pass of `retention` over `store`, as every host runs it (the engine's pruner, a serverless
/// sweep): batches of [`BATCH`] at the cutoffs of the pass's start, until one is not full or
/// `go_on` (given the batches done) says stop; `counted` sees each batch.
pub(crate) async fn prune_pass(
    store: &dyn Store,
    retention: &Retention,
    go_on: impl Fn(usize) -> bool,
    counted: impl Fn(Pruned),
) -> Result<Pruned, StoreError> {
    let prune = retention.prune_at(crate::journal::now_ms(), BATCH);
    let mut total = Pruned::default();
    let mut done = 0;
    while go_on(done) {
        let pruned = store.prune(&prune).await?;
        counted(pruned);
        done += 1;
        total.compacted += pruned.compacted;
        total.deleted += pruned.deleted;
        if !pruned.more(BATCH) {
            break;
        }
        // Let the appends queued meanwhile go first.
        tokio::task::yield_now().await;
    }
    Ok(total)
}

impl Inner {
    /// One pass: batches until none is full, or `max_batches` of them, each counted.
    pub(super) async fn prune_finished(&self, max_batches: usize) -> Result<Pruned, StoreError> {
        let go_on = |done: usize| done < max_batches && !self.halted.load(Ordering::SeqCst);
        let counted = |pruned: Pruned| self.metrics.pruned(pruned.compacted, pruned.deleted);
        prune_pass(self.store.as_ref(), &self.config.retention, go_on, counted).await
    }

    /// Start pruning (once), when retention is set: one batch now, so that a store that cannot
    /// prune is refused when the engine starts, then a pass every [`Retention::period`] on the
    /// engine's runtime, until the engine halts or is dropped.
    pub(super) async fn start_pruner(self: &Arc<Self>) -> Result<(), EngineError> {
        let Some(period) = self.config.retention.period() else {
            return Ok(());
        };
        if self.pruner_started.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        match self.prune_finished(1).await {
            Err(StoreError::Unsupported { what }) => {
                self.pruner_started.store(false, Ordering::SeqCst);
                return Err(EngineError::Config(format!(
                    "retention is set, but this store does not support {what}: it keeps every task"
                )));
            }
            Err(e) => {
                tracing::warn!(error = %e, "pruning finished tasks failed; retrying in {period:?}")
            }
            Ok(pruned) => log(pruned),
        }
        tokio::spawn(prune_every(Arc::downgrade(self), period));
        Ok(())
    }
}

fn log(pruned: Pruned) {
    if pruned != Pruned::default() {
        tracing::debug!(
            journals = pruned.compacted,
            tasks = pruned.deleted,
            "finished tasks pruned"
        );
    }
}

/// The pruner: a pass every `period` (holding the engine weakly), the first one at once.
async fn prune_every(engine: Weak<Inner>, period: Duration) {
    loop {
        {
            let Some(engine) = engine.upgrade() else {
                return;
            };
            if engine.halted.load(Ordering::SeqCst) {
                return;
            }
            match engine.prune_finished(usize::MAX).await {
                Ok(pruned) => log(pruned),
                Err(e) => {
                    tracing::warn!(error = %e, "pruning finished tasks failed; retrying in {period:?}")
                }
            }
        }
        tokio::time::sleep(period).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pruner_looks_a_tenth_of_the_shortest_period_between_a_second_and_a_minute() {
        let days = |n: u64| Some(Duration::from_secs(n * 86_400));
        let keep = |journal, task| Retention { journal, task };
        assert_eq!(Retention::FOREVER.period(), None);
        assert_eq!(
            keep(days(1), days(30)).period(),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            keep(None, Some(Duration::from_secs(30))).period(),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            keep(Some(Duration::ZERO), None).period(),
            Some(Duration::from_secs(1))
        );
        let prune = keep(Some(Duration::from_secs(2)), None).prune_at(10_000, 7);
        assert_eq!(
            prune,
            Prune {
                journals_before_ms: Some(8_000),
                tasks_before_ms: None,
                limit: 7
            }
        );
        // A period too long for the clock prunes nothing rather than everything.
        let prune = keep(None, Some(Duration::MAX)).prune_at(10_000, 1);
        assert!(prune.tasks_before_ms.is_some_and(|t| t < 0), "{prune:?}");
    }
}
