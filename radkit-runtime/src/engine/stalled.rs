//! The tasks whose last run here stopped on a failed append, until an append of theirs succeeds
//! again or a run of theirs ends cleanly (single-engine stores). The run publishes `WriteFailed`
//! to the subscribers it has as it stops; a subscription that begins after that reads this mark
//! instead, so a blocking send or a stream attached a moment late is told the store is
//! unavailable at once rather than waiting for a write that cannot happen.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

#[derive(Default)]
pub(crate) struct Stalled {
    /// How many tasks are marked: an append's check costs one load while none is.
    count: AtomicUsize,
    tasks: Mutex<HashSet<String>>,
}

impl Stalled {
    fn lock(&self) -> MutexGuard<'_, HashSet<String>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A run of `task_id` stopped on a failed append (marked before its subscribers are told, so
    /// that a subscription begun in between sees one or the other).
    pub fn stall(&self, task_id: &str) {
        if self.lock().insert(task_id.to_owned()) {
            self.count.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// An append of `task_id` succeeded, or a run of it ended without a failed one.
    pub fn clear(&self, task_id: &str) {
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        if self.lock().remove(task_id) {
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Whether `task_id` is marked.
    pub fn is_stalled(&self, task_id: &str) -> bool {
        self.count.load(Ordering::SeqCst) > 0 && self.lock().contains(task_id)
    }
}

#[cfg(test)]
mod tests {
    use super::Stalled;

    #[test]
    fn a_mark_lasts_until_its_task_is_cleared_and_only_for_that_task() {
        let stalled = Stalled::default();
        assert!(!stalled.is_stalled("a"));
        stalled.stall("a");
        stalled.stall("a");
        assert!(stalled.is_stalled("a"));
        assert!(!stalled.is_stalled("b"));
        stalled.clear("b");
        assert!(stalled.is_stalled("a"));
        stalled.clear("a");
        assert!(!stalled.is_stalled("a"));
        stalled.stall("b");
        assert!(stalled.is_stalled("b"));
    }
}
