//! Where a cell's task lives, and how a restarted process opens it again: the same `MemoryStore`
//! (clones share data), the SQLite file reopened with `Durability::Full`, or a new connection to the
//! cell's own Postgres schema (dropped when the cell ends, also when it fails).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use radkit_runtime::engine::EngineBuilder;
use radkit_runtime::store::{Durability, MemoryStore, PostgresStore, SqliteStore, Store};

use super::Backend;
use crate::support::services;

/// The store of one cell.
pub enum Site {
    Memory(MemoryStore),
    Sqlite {
        _dir: tempfile::TempDir,
        path: PathBuf,
    },
    Postgres(Schema),
}

/// A fresh Postgres schema, dropped by [`Site::close`] or, when a cell fails, on drop.
pub struct Schema {
    name: String,
    url: String,
}

impl Schema {
    /// The URL whose sessions work in this schema.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        if self.name.is_empty() {
            return;
        }
        // Dropped while a runtime unwinds: drop the schema from a thread with its own runtime.
        let name = std::mem::take(&mut self.name);
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime to drop the schema");
            runtime.block_on(PostgresStore::drop_schema(&services::postgres_url(), &name))
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("note: a crash-matrix schema was not dropped: {dropped:?}");
        }
    }
}

impl Site {
    /// A new, empty store of `backend`.
    pub async fn new(backend: Backend) -> Site {
        match backend {
            Backend::Memory => Site::Memory(MemoryStore::new()),
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("a temporary directory");
                let path = dir.path().join("matrix.sqlite");
                Site::Sqlite { _dir: dir, path }
            }
            Backend::Postgres => {
                let (name, url) =
                    PostgresStore::create_schema(&services::postgres_url(), "radkit_matrix")
                        .await
                        .expect("create a test schema");
                Site::Postgres(Schema { name, url })
            }
        }
    }

    /// Open the store, as a process starting now would.
    pub async fn open(&self) -> Arc<dyn Store> {
        match self {
            Site::Memory(store) => Arc::new(store.clone()),
            Site::Sqlite { path, .. } => {
                Arc::new(SqliteStore::open(path, Durability::Full).expect("open the SQLite file"))
            }
            Site::Postgres(schema) => Arc::new(
                PostgresStore::connect(&schema.url)
                    .await
                    .expect("connect to the test schema"),
            ),
        }
    }

    /// Drop what the cell made (its Postgres schema; the SQLite directory goes with `self`).
    pub async fn close(self) {
        if let Site::Postgres(mut schema) = self {
            let name = std::mem::take(&mut schema.name);
            if let Err(e) = PostgresStore::drop_schema(&services::postgres_url(), &name).await {
                eprintln!("note: the crash-matrix schema {name} was not dropped: {e}");
            }
        }
    }

    /// Lease settings: the crashed engine's lease must expire soon so the fresh engine (on Postgres,
    /// recovery is a claim) takes the task over; the fresh engine's must outlive a busy machine's
    /// pauses, so it never loses the task to itself.
    pub fn leases(&self, builder: EngineBuilder, crashing: bool) -> EngineBuilder {
        match (self, crashing) {
            (Site::Postgres(_), true) => builder.lease_ttl(Duration::from_millis(300)),
            (Site::Postgres(_), false) => builder
                .lease_ttl(Duration::from_secs(5))
                .poll_interval(Duration::from_millis(20)),
            _ => builder,
        }
    }
}
