//! Every store passes the same conformance suite; SQLite's own promises (reopen, pragmas, group
//! commit) are pinned here too.

use std::sync::Arc;

use radkit_runtime::journal::Entry;
use radkit_runtime::model::TaskState;
use radkit_runtime::store::{conformance, Append, Durability, MemoryStore, SqliteStore, Store};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store_passes_the_conformance_suite() {
    conformance::run_all(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_passes_the_conformance_suite_with_full_durability() {
    let dir = tempfile::tempdir().unwrap();
    conformance::run_all(Arc::new(
        SqliteStore::open(dir.path().join("s.sqlite"), Durability::Full).unwrap(),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_passes_the_conformance_suite_with_normal_durability() {
    let dir = tempfile::tempdir().unwrap();
    conformance::run_all(Arc::new(
        SqliteStore::open(dir.path().join("s.sqlite"), Durability::Normal).unwrap(),
    ))
    .await;
}

#[tokio::test]
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
    assert_eq!(journal.len(), conformance::every_entry().len() + 2);
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
        let (mode, sync) = radkit_runtime::store::sqlite::pragmas(&path, durability).unwrap();
        assert_eq!(mode, "wal");
        assert_eq!(sync, expected, "{durability:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
