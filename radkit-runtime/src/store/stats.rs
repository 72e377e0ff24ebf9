//! What a store's writer committed: transactions, appends, and how many appends each transaction
//! held (group commit's batch sizes). The writers count with atomics as they commit; readers (the
//! benchmarks, `/metrics`) take a [`StoreStats`] copy. It never touches the database.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The upper bounds of [`StoreStats::batch_sizes`]' buckets: appends per committed transaction, in
/// powers of two up to the stores' largest batch (SQLite's 1024).
pub const BATCH_SIZE_BOUNDS: [u64; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/// Write statistics: how many appends were committed in how many transactions, and in batches of
/// which sizes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Committed transactions.
    pub batches: u64,
    /// Appends committed.
    pub appends: u64,
    /// Transactions by their number of appends: `batch_sizes[i]` counts those with more appends
    /// than `BATCH_SIZE_BOUNDS[i - 1]` and at most `BATCH_SIZE_BOUNDS[i]` (the last bucket also
    /// counts any larger).
    pub batch_sizes: [u64; BATCH_SIZE_BOUNDS.len()],
}

/// The counters a store's writers add to as they commit: a few relaxed atomic adds per
/// transaction. Only the SQL stores have writers.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
#[derive(Debug, Default)]
pub(crate) struct Commits {
    batches: AtomicU64,
    appends: AtomicU64,
    sizes: [AtomicU64; BATCH_SIZE_BOUNDS.len()],
}

#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
impl Commits {
    /// One transaction of `appends` appends was committed (or failed whole: the writers count what
    /// they tried to commit, so a failing store still shows its batches).
    pub(crate) fn batch(&self, appends: usize) {
        let appends = u64::try_from(appends).unwrap_or(u64::MAX);
        self.batches.fetch_add(1, Relaxed);
        self.appends.fetch_add(appends, Relaxed);
        let bucket = BATCH_SIZE_BOUNDS
            .iter()
            .position(|bound| appends <= *bound)
            .unwrap_or(BATCH_SIZE_BOUNDS.len() - 1);
        self.sizes[bucket].fetch_add(1, Relaxed);
    }

    /// The counts now.
    pub(crate) fn stats(&self) -> StoreStats {
        StoreStats {
            batches: self.batches.load(Relaxed),
            appends: self.appends.load(Relaxed),
            batch_sizes: std::array::from_fn(|i| self.sizes[i].load(Relaxed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_counted_in_the_smallest_bucket_that_holds_it() {
        let commits = Commits::default();
        for size in [1, 2, 3, 1024, 2000] {
            commits.batch(size);
        }
        let stats = commits.stats();
        assert_eq!((stats.batches, stats.appends), (5, 3030));
        assert_eq!(stats.batch_sizes, [1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 2]);
    }
}
