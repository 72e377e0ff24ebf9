//! The engine's feed of changed tasks: the id of every task an append of this process committed to,
//! for readers that follow many tasks at once (the console's live task list). Each reader gets its
//! own bounded queue; one that lags misses ids and is told so, and re-reads what it shows from the
//! store. Nothing is sent while nobody listens.

use std::sync::Arc;

use tokio::sync::broadcast;

/// Task ids buffered per reader before it lags.
const CAPACITY: usize = 1024;

/// The broadcast of changed task ids.
pub(crate) struct Changes {
    tx: broadcast::Sender<Arc<str>>,
}

impl Default for Changes {
    fn default() -> Self {
        Changes {
            tx: broadcast::channel(CAPACITY).0,
        }
    }
}

impl Changes {
    /// An append to `task_id` committed.
    pub(crate) fn committed(&self, task_id: &str) {
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send(Arc::from(task_id));
        }
    }

    /// A new reader: every id committed from now on.
    pub(crate) fn watch(&self) -> TaskChanges {
        TaskChanges {
            rx: self.tx.subscribe(),
        }
    }
}

/// A reader of the tasks an engine changes ([`crate::engine::Engine::watch_changes`]).
pub struct TaskChanges {
    rx: broadcast::Receiver<Arc<str>>,
}

/// What [`TaskChanges::next`] tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskChange {
    /// An append to this task committed (one id per append; the same task may come many times).
    Changed(Arc<str>),
    /// The reader fell behind and this many ids were dropped: re-read what depends on them.
    Missed(u64),
}

impl TaskChanges {
    /// The next change; `None` when the engine is gone.
    pub async fn next(&mut self) -> Option<TaskChange> {
        match self.rx.recv().await {
            Ok(id) => Some(TaskChange::Changed(id)),
            Err(broadcast::error::RecvError::Lagged(n)) => Some(TaskChange::Missed(n)),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}
