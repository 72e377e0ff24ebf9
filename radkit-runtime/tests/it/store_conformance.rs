//! Every store passes the same conformance suite; SQLite's own promises (reopen, pragmas, group
//! commit) are pinned here too.

use std::sync::Arc;

use async_trait::async_trait;
use radkit_runtime::journal::{Entry, JournalRecord};
use radkit_runtime::model::TaskState;
use radkit_runtime::store::{
    conformance, Append, Durability, MemoryStore, SqliteStore, Store, StoreError, TaskQuery,
    TaskRecord,
};

#[test(multi_thread)]
async fn memory_store_passes_the_conformance_suite() {
    conformance::run_all(Arc::new(MemoryStore::new())).await;
}

#[test(multi_thread)]
async fn sqlite_store_passes_the_conformance_suite_with_full_durability() {
    let dir = tempfile::tempdir().unwrap();
    conformance::run_all(Arc::new(
        SqliteStore::open(dir.path().join("s.sqlite"), Durability::Full).unwrap(),
    ))
    .await;
}

#[test(multi_thread)]
async fn sqlite_store_passes_the_conformance_suite_with_normal_durability() {
    let dir = tempfile::tempdir().unwrap();
    conformance::run_all(Arc::new(
        SqliteStore::open(dir.path().join("s.sqlite"), Durability::Normal).unwrap(),
    ))
    .await;
}

/// A store that never compacts: `MemoryStore` in everything, except that it answers the checkpoint
/// read with the whole journal and keeps every task (what the trait's defaults do).
pub(crate) struct NeverCompacts(pub(crate) MemoryStore);

#[async_trait]
impl Store for NeverCompacts {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
        self.0.append(append).await
    }
    async fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        self.0.task(task_id).await
    }
    async fn journal(&self, task_id: &str, after: u64) -> Result<Vec<JournalRecord>, StoreError> {
        self.0.journal(task_id, after).await
    }
    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        self.0.list(query).await
    }
    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        self.0.journal(task_id, 0).await
    }
}

/// The panic message of `check`, which must panic.
async fn failure_of(check: impl std::future::Future<Output = ()> + Send + 'static) -> String {
    let panic = tokio::spawn(check)
        .await
        .expect_err("the conformance check must fail")
        .into_panic();
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

#[test]
async fn the_checkpoint_check_fails_a_store_that_returns_the_whole_journal() {
    let store = Arc::new(NeverCompacts(MemoryStore::new()));
    let message = failure_of({
        let store = store.clone();
        async move { conformance::replay_reads_from_the_last_checkpoint(store.as_ref()).await }
    })
    .await;
    assert!(
        message.contains("from before the last checkpoint") && message.contains("never compacts"),
        "the check names what is wrong: {message}"
    );
    let message = failure_of(conformance::run_all(store)).await;
    assert!(
        message.contains("never compacts"),
        "and so does the whole suite: {message}"
    );
}

#[test]
async fn sqlite_data_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sqlite");
    {
        let store = SqliteStore::open(&path, Durability::Full).unwrap();
        conformance::round_trip(&store).await;
    }
    let store = SqliteStore::open(&path, Durability::Full).unwrap();
    let rows = store.list(Default::default()).await.unwrap();
    assert_eq!(rows.len(), 1);
    let journal = store.journal(&rows[0].id, 0).await.unwrap();
    // The creation, every entry, and the round trip's three status changes.
    assert_eq!(journal.len(), conformance::every_entry().len() + 4);
    // And appending continues at the right seq after reopen.
    store
        .append(Append::new(
            rows[0].id.clone(),
            rows[0].last_seq + 1,
            vec![Entry::StatusChanged {
                state: TaskState::Working,
            }],
        ))
        .await
        .unwrap();
}

#[test]
fn sqlite_uses_wal_and_the_chosen_synchronous_level() {
    let dir = tempfile::tempdir().unwrap();
    for (durability, expected) in [(Durability::Full, 2), (Durability::Normal, 1)] {
        let path = dir.path().join(format!("{expected}.sqlite"));
        let _store = SqliteStore::open(&path, durability).unwrap();
        let (mode, sync) = radkit_runtime::store::SqliteStore::pragmas(&path, durability).unwrap();
        assert_eq!(mode, "wal");
        assert_eq!(sync, expected, "{durability:?}");
    }
}

#[test(multi_thread)]
async fn sqlite_group_commit_batches_concurrent_appends() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("s.sqlite"), Durability::Full).unwrap();
    conformance::concurrent_appends(Arc::new(store.clone())).await;
    let stats = store.stats();
    assert!(
        stats.batches < stats.appends,
        "appends of many tasks share transactions: {stats:?}"
    );
}
