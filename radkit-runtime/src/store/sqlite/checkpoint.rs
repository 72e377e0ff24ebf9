//! The checkpointer thread: it copies committed WAL frames into the database file on a connection
//! of its own, so that a group commit seldom pays for a checkpoint.
//!
//! Why: by default SQLite checkpoints in the commit that takes the WAL past 1,000 pages; that
//! commit writes those pages into the database file and syncs it before it returns. On a large
//! file (a million waiting tasks) the pages are scattered, and that one commit takes several
//! milliseconds: the tail of every latency queued behind it.
//!
//! How:
//! - After each group commit the writer wakes this thread through a channel of one (a wake never
//!   blocks the writer; wakes that find it full are already covered). The thread waits [`PAUSE`],
//!   so that one checkpoint covers the commits of that while, then runs
//!   `PRAGMA wal_checkpoint(PASSIVE)`: it copies what is committed without taking a lock that a
//!   writer or a reader waits for.
//! - The WAL starts over from its beginning only when a write transaction begins with every frame
//!   copied, and under a steady stream of commits that moment may not come. So the writer keeps
//!   SQLite's own checkpoint at [`BACKSTOP_PAGES`]: when the WAL reaches it, that commit copies
//!   what this thread has not copied yet (while the thread keeps up, less than a [`PAUSE`] of
//!   commits) and the WAL starts over. Without this thread (it did not start) the writer checkpoints as SQLite does by default.
//! - Durability is SQLite's own: a checkpoint copies only committed frames, and syncs the WAL
//!   before and the database file after (under the store's `synchronous`) before any frame is
//!   reused.

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{connect, Durability};

/// How long the thread lets commits gather before it checkpoints them.
pub(super) const PAUSE: Duration = Duration::from_millis(50);

/// The WAL's pages at which a commit checkpoints itself, when this thread falls behind or the WAL
/// never finds a moment to start over (16 MB at 4 KB pages).
pub(super) const BACKSTOP_PAGES: i64 = 4_000;

/// The writer's side: wake the checkpointer after a commit.
pub(super) struct Wake(mpsc::SyncSender<()>);

impl Wake {
    pub fn committed(&self) {
        // Full: a wake is pending and covers this commit. Disconnected: the thread is gone and
        // the backstop checkpoints.
        let _ = self.0.try_send(());
    }
}

/// Start the checkpointer of the database at `path` and set the writer's `conn` to checkpoint
/// only at [`BACKSTOP_PAGES`]. `None` (logged) when it cannot start: `conn` then checkpoints as
/// SQLite does by default. The thread ends when the writer drops the [`Wake`].
pub(super) fn start(
    path: &Path,
    durability: Durability,
    conn: &rusqlite::Connection,
) -> Option<Wake> {
    let started = (|| -> Result<Wake, String> {
        let own = connect(path, durability).map_err(|e| e.to_string())?;
        let (tx, rx) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("radkit-sqlite-checkpoint".into())
            .spawn(move || run(&own, &rx))
            .map_err(|e| e.to_string())?;
        conn.pragma_update(None, "wal_autocheckpoint", BACKSTOP_PAGES)
            .map_err(|e| e.to_string())?;
        Ok(Wake(tx))
    })();
    started
        .map_err(|reason| {
            tracing::warn!(%reason, "sqlite: no checkpointer thread; commits checkpoint the WAL");
        })
        .ok()
}

fn run(conn: &rusqlite::Connection, wakes: &mpsc::Receiver<()>) {
    // Failing since this many checkpoints: the first failure is logged, and the recovery (a
    // full disk would otherwise log twenty times a second).
    let mut failing = 0u64;
    while wakes.recv().is_ok() {
        std::thread::sleep(PAUSE);
        let _ = wakes.try_recv();
        let started = Instant::now();
        match checkpoint(conn) {
            Ok((wal, copied)) => {
                if failing > 0 {
                    tracing::info!(failed = failing, "sqlite: checkpoints succeed again");
                    failing = 0;
                }
                tracing::trace!(
                    wal,
                    copied,
                    took_us = started.elapsed().as_micros(),
                    "sqlite: checkpointed"
                );
            }
            // The next commit wakes it again; the backstop bounds the WAL meanwhile.
            Err(e) => {
                if failing == 0 {
                    tracing::warn!(error = %e, "sqlite: a checkpoint failed; retried after the next commit");
                }
                failing += 1;
            }
        }
    }
}

/// `PRAGMA wal_checkpoint(PASSIVE)`: the WAL's frames, and how many of them are in the file now.
pub(super) fn checkpoint(conn: &rusqlite::Connection) -> rusqlite::Result<(i64, i64)> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
        Ok((r.get(1)?, r.get(2)?))
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Durability, SqliteStore};
    use super::BACKSTOP_PAGES;
    use crate::journal::Entry;
    use crate::model::Message;
    use crate::store::{Append, Store};

    fn task(id: &str, text_bytes: usize) -> Append {
        let text: String = std::iter::repeat_with(|| uuid::Uuid::new_v4().simple().to_string())
            .take(text_bytes / 32)
            .collect();
        let mut append = Append::new(
            id,
            1,
            vec![Entry::MessageReceived {
                message: Message::user_text(text),
            }],
        );
        append.create = Some(super::super::tests::task_row(id));
        append
    }

    fn len(path: &std::path::Path) -> u64 {
        std::fs::metadata(path).map_or(0, |m| m.len())
    }

    /// Forty commits (a few hundred WAL pages; SQLite's own checkpoint waits for 1,000) reach the
    /// database file with no further commit: the checkpointer thread copied them.
    #[tokio::test]
    async fn commits_reach_the_database_file_without_a_commit_checkpointing_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        let store = SqliteStore::open(&path, Durability::Normal).unwrap();
        let before = len(&path);
        for i in 0..40 {
            store.append(task(&format!("t{i}"), 2048)).await.unwrap();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while len(&path) < before + 40 * 1024 {
            assert!(
                std::time::Instant::now() < deadline,
                "the database file is {} bytes, {before} before 40 tasks of 2 KB",
                len(&path)
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Commits that never pause (the WAL never finds a moment with every frame copied to start
    /// over) still keep the WAL file near the backstop: the commit that reaches it copies the
    /// rest and the WAL starts over.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_of_commits_without_pause_keeps_the_wal_near_the_backstop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        let store = SqliteStore::open(&path, Durability::Normal).unwrap();
        let page: u64 = rusqlite::Connection::open(&path)
            .unwrap()
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        let backstop = u64::try_from(BACKSTOP_PAGES).unwrap() * page;
        // Three backstops' worth of tasks, from eight writers at once.
        let per_task = 8 * 1024;
        let tasks = usize::try_from(3 * backstop).unwrap() / per_task;
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let store = store.clone();
                tokio::spawn(async move {
                    for i in (w..tasks).step_by(8) {
                        store
                            .append(task(&format!("t{i}"), per_task))
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap();
        }
        let wal = len(&path.with_extension("sqlite-wal"));
        assert!(
            wal < 2 * backstop,
            "the WAL grew to {wal} bytes; the backstop is {backstop}"
        );
        assert!(len(&path) > 2 * backstop, "the tasks are not in the file");
    }
}
