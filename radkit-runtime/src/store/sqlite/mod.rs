//! `SqliteStore`: the embedded default. One file, WAL, `synchronous=FULL` unless NORMAL is chosen.
//!
//! Writes go through one writer thread that owns the write connection and commits everything queued
//! at that moment — appends of many tasks — in one transaction (group commit), so throughput across
//! tasks is bounded by the disk's fsync rate times the batch size, not one fsync per step. A
//! checkpointer thread copies the WAL into the database file beside it (`checkpoint`), so that a
//! commit seldom does. Reads use a small pool of separate connections on the blocking thread pool.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};

use async_trait::async_trait;
use rusqlite::types::FromSql;
use rusqlite::{params, Connection, OptionalExtension, Row};
use tokio::sync::oneshot;

use super::view::{self, EncodedView, MemView, TaskView};
use super::{
    sql_terminal_states, Append, Encoded, Prune, Pruned, Store, StoreError, StoreStats, TaskQuery,
    TaskRecord,
};
use crate::journal::JournalRecord;
use crate::model::TaskState;

/// How hard a commit waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=FULL`: a committed step survives power loss. The default.
    #[default]
    Full,
    /// `synchronous=NORMAL`: survives a process crash; the last commits may be lost on power loss.
    Normal,
}

/// Most appends committed in one transaction.
const MAX_BATCH: usize = 1024;

/// Most reads at once, each on a pooled connection of its own: a read beyond them waits for one
/// to finish instead of opening (and preparing statements on) a connection it then drops — which
/// was most of the process's CPU with a thousand tasks reading at once.
const READERS: usize = 8;

type Reply = oneshot::Sender<Result<(), StoreError>>;

struct Shared {
    writer: Mutex<mpsc::Sender<Job>>,
    readers: Mutex<Vec<Connection>>,
    /// A permit per read in flight ([`READERS`]): the pool never needs more connections.
    read_permits: Arc<tokio::sync::Semaphore>,
    path: PathBuf,
    commits: super::Commits,
    /// The file's zstd dictionaries (`dictionary`), for appends and reads alike.
    dictionaries: Arc<Dictionaries>,
}

/// A SQLite-backed store. Cheap to clone; the writer thread stops when the last clone is dropped.
#[derive(Clone)]
pub struct SqliteStore {
    shared: Arc<Shared>,
}

mod checkpoint;
mod dictionary;
pub(crate) mod packed;
mod prune;
mod push;
mod read;
mod schema;
mod write;

use dictionary::Dictionaries;
use read::*;
use schema::*;
use write::*;

/// Column `name` of `row` as `T`: a `NULL`, a value of another type or an out-of-range number is a
/// [`StoreError::Column`] naming the column.
fn get<T: FromSql>(row: &Row<'_>, name: &'static str) -> Result<T, StoreError> {
    row.get(name).map_err(|e| StoreError::Column {
        column: name.into(),
        source: e.into(),
    })
}

impl SqliteStore {
    /// Open (creating if needed) the database at `path` with `durability`, and start its writer.
    pub fn open(path: impl AsRef<Path>, durability: Durability) -> Result<Self, StoreError> {
        let path = path.as_ref().to_owned();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::backend(format!("creating directory {}", dir.display()), e)
            })?;
        }
        let mut conn = connect(&path, durability)?;
        migrate(&mut conn)?;
        let dictionaries = Arc::new(Dictionaries::load(&conn)?);
        let wake = checkpoint::start(&path, durability, &conn);
        let (tx, rx) = mpsc::channel::<Job>();
        let shared = Arc::new(Shared {
            writer: Mutex::new(tx),
            readers: Mutex::new(Vec::new()),
            read_permits: Arc::new(tokio::sync::Semaphore::new(READERS)),
            path: path.clone(),
            commits: super::Commits::default(),
            dictionaries,
        });
        let stats = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("radkit-sqlite-writer".into())
            .spawn(move || writer_loop(conn, rx, stats, wake))
            .map_err(|e| StoreError::backend("starting the sqlite writer thread", e))?;
        Ok(SqliteStore { shared })
    }

    /// Open with FULL durability.
    pub fn open_default(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open(path, Durability::Full)
    }

    /// Commit statistics since open.
    pub fn stats(&self) -> StoreStats {
        self.shared.commits.stats()
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Train a dictionary on `sample` on a thread of its own, and have `writer` store it if it is
    /// kept (see `dictionary`); appends compress with it once it is committed.
    fn train(&self, sample: dictionary::Sample, writer: mpsc::Sender<Job>) {
        let dictionaries = self.shared.dictionaries.clone();
        let spawned = std::thread::Builder::new()
            .name("radkit-sqlite-dictionary".into())
            .spawn(move || {
                match dictionary::train(&sample, dictionaries.encoder().as_deref()) {
                    Ok(trained) if !dictionaries.has(trained.id) => {
                        let _ = writer.send(Job::Dictionary(trained));
                    }
                    Ok(_) => {}
                    Err(reason) => {
                        tracing::debug!(%reason, "sqlite: no compression dictionary kept");
                    }
                }
                let judged = dictionaries.note_judged();
                tracing::debug!(judged, "sqlite: a compression sample judged");
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "sqlite: the compression dictionary's thread did not start");
        }
    }

    /// Run `f` on a pooled read connection on the blocking pool, once one of the [`READERS`] is
    /// free.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let shared = self.shared.clone();
        let permit = shared
            .read_permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| StoreError::backend("sqlite read permits", e))?;
        tokio::task::spawn_blocking(move || {
            // Held until the read is done, also when its caller stopped waiting for it.
            let _permit = permit;
            let pooled = shared
                .readers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop();
            let conn = match pooled {
                Some(c) => c,
                None => {
                    let c = Connection::open(&shared.path)?;
                    c.busy_timeout(std::time::Duration::from_secs(10))?;
                    c
                }
            };
            let result = f(&conn);
            let mut pool = shared.readers.lock().unwrap_or_else(|p| p.into_inner());
            if pool.len() < READERS {
                pool.push(conn);
            }
            result
        })
        .await
        .map_err(|e| StoreError::backend("sqlite read task", e))?
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
        let mut encoded = Encoded::new(append)?;
        encoded.packed = packed::Packed::new(&encoded, &self.shared.dictionaries);
        let sample = self.shared.dictionaries.offer(&encoded);
        let (reply, answer) = oneshot::channel();
        {
            let writer = self.shared.writer.lock().unwrap_or_else(|p| p.into_inner());
            writer
                .send(Job::Append(encoded, reply))
                .map_err(|_| StoreError::Closed)?;
            if let Some(sample) = sample {
                self.train(sample, writer.clone());
            }
        }
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Run by the writer thread between its group commits, so that pruning never waits for the
    /// write lock against the appends (nor they against it for longer than one bounded batch).
    async fn prune(&self, prune: &Prune) -> Result<Pruned, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.shared
            .writer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(Job::Prune(*prune, reply))
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    async fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let id = task_id.to_owned();
        self.read(move |conn| {
            let mut stmt =
                conn.prepare_cached(&format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1"))?;
            Ok(query_tasks(&mut stmt, params![id])?.pop())
        })
        .await
    }

    async fn task_view(
        &self,
        task_id: &str,
        history: Option<usize>,
    ) -> Result<Option<TaskView>, StoreError> {
        let id = task_id.to_owned();
        let dictionaries = self.shared.dictionaries.clone();
        self.read(move |conn| read_view(conn, &dictionaries, &id, history))
            .await
    }

    async fn list_views(&self, query: &super::ViewQuery) -> Result<super::ViewPage, StoreError> {
        let query = query.clone();
        let dictionaries = self.shared.dictionaries.clone();
        self.read(move |conn| read_view_page(conn, &dictionaries, &query))
            .await
    }

    async fn state_counts(
        &self,
        query: &super::ViewQuery,
    ) -> Result<Vec<(TaskState, u64)>, StoreError> {
        let query = query.clone();
        self.read(move |conn| read_state_counts(conn, &query)).await
    }

    fn commit_stats(&self) -> Option<StoreStats> {
        Some(self.stats())
    }

    async fn journal(
        &self,
        task_id: &str,
        after_seq: u64,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        // The whole rest: a page without a limit.
        self.journal_page(task_id, after_seq, usize::MAX).await
    }

    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        let id = task_id.to_owned();
        let dictionaries = self.shared.dictionaries.clone();
        self.read(move |conn| read_records(conn, &dictionaries, REPLAY_SQL, params![id], &id, 0))
            .await
    }

    async fn journal_page(
        &self,
        task_id: &str,
        after_seq: u64,
        appends: usize,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        let id = task_id.to_owned();
        let limit = i64::try_from(appends.max(1)).unwrap_or(i64::MAX);
        let dictionaries = self.shared.dictionaries.clone();
        self.read(move |conn| {
            read_records(
                conn,
                &dictionaries,
                // From the row holding entry `after_seq + 1` on, `appends` rows: an index range,
                // however long the journal.
                "WITH t AS (SELECT tid FROM tasks WHERE id = ?1)
                 SELECT seq, at_ms, body FROM journal
                 WHERE tid = (SELECT tid FROM t)
                   AND seq >= COALESCE((SELECT MAX(seq) FROM journal
                                        WHERE tid = (SELECT tid FROM t) AND seq <= ?2 + 1), 0)
                 ORDER BY seq LIMIT ?3",
                params![id, super::to_sql_int("seq", after_seq)?, limit],
                &id,
                after_seq,
            )
        })
        .await
    }

    fn push(&self) -> Option<&dyn super::PushStore> {
        Some(self)
    }

    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        self.read(move |conn| {
            let (sql, values) = list_sql(&query);
            let mut stmt = conn.prepare(&sql)?;
            query_tasks(&mut stmt, rusqlite::params_from_iter(values))
        })
        .await
    }

    async fn unfinished_versions(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.read(read::unfinished_versions).await
    }
}

#[cfg(feature = "testing")]
impl SqliteStore {
    /// The reference the sequential benchmark is judged against: the mean latency of one durable SQLite
    /// commit (WAL, `synchronous=FULL`, one small row per transaction) on a fresh file at `path`, over
    /// `commits` transactions.
    pub fn commit_latency(path: &Path, commits: u32) -> Result<std::time::Duration, StoreError> {
        let conn = connect(path, Durability::Full)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
        )?;
        let started = std::time::Instant::now();
        for i in 0..commits {
            conn.execute(
                "INSERT INTO t (body) VALUES (?1)",
                params![format!("commit {i}")],
            )?;
        }
        Ok(started.elapsed() / commits.max(1))
    }

    /// The `journal_mode` and `synchronous` a connection opened like the store's gets (for tests and
    /// `radkit doctor`-style checks): `("wal", 2)` is WAL with FULL.
    pub fn pragmas(path: &Path, durability: Durability) -> Result<(String, i64), StoreError> {
        let conn = connect(path, durability)?;
        let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
        let sync: i64 = conn.pragma_query_value(None, "synchronous", |r| r.get(0))?;
        Ok((mode, sync))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Entry;

    /// How SQLite runs `list` for `query`: the `detail` lines of `EXPLAIN QUERY PLAN`.
    fn plan(query: &TaskQuery) -> String {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        let (sql, values) = list_sql(query);
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let details = stmt
            .query_map(rusqlite::params_from_iter(values), |r| {
                r.get::<_, String>(3)
            })
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        details.join("\n")
    }

    /// Retention's partial index spells the terminal states as its queries do, and each of its
    /// queries seeks it (`INDEXED BY`: preparing one it cannot answer fails).
    #[test]
    fn a_prune_pass_seeks_the_finished_tasks_index() {
        let sql = super::schema::MIGRATIONS[9];
        assert!(
            sql.contains(&format!("state IN {}", sql_terminal_states())),
            "migration 10 lists other terminal states than {}",
            sql_terminal_states()
        );
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        for (compacted, delivered) in [(false, true), (false, false), (true, false)] {
            let mut stmt = conn
                .prepare(&format!(
                    "EXPLAIN QUERY PLAN {}",
                    super::prune::due_sql(compacted, delivered)
                ))
                .unwrap();
            let plan = stmt
                .query_map(params![0, 10], |r| r.get::<_, String>(3))
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap()
                .join("\n");
            assert!(
                plan.contains("tasks_finished (compacted=? AND status_at_ms<?)"),
                "{plan}"
            );
            assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        }
    }

    /// The partial indexes of migration 9 spell the terminal states as the queries do: were a
    /// state added to `TaskState::TERMINAL` and not there, SQLite would scan instead.
    #[test]
    fn a_start_reads_recoverable_tasks_and_unfinished_versions_through_their_partial_indexes() {
        let query = TaskQuery {
            non_terminal: true,
            skip_idle_input: true,
            ..TaskQuery::default()
        };
        let recover = plan(&query);
        assert!(
            recover.contains("USING INDEX tasks_to_recover"),
            "{recover}"
        );
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        let sql = super::schema::MIGRATIONS[8];
        assert!(
            sql.contains(&format!("state NOT IN {}", sql_terminal_states())),
            "migration 9 lists other terminal states than {}",
            sql_terminal_states()
        );
        // `INDEXED BY`: an error if the index cannot answer the walk; and each step is a seek,
        // not a walk from the start of the index.
        assert_eq!(read::unfinished_versions(&conn).unwrap(), Vec::new());
        let [first, next_version, next_skill] = read::unfinished_versions_sql();
        let explain = |sql: &str, params: &[&dyn rusqlite::ToSql]| {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows = stmt.query_map(params, |r| r.get::<_, String>(3)).unwrap();
            rows.collect::<Result<Vec<_>, _>>().unwrap().join("\n")
        };
        let plan = explain(&first, &[]);
        assert!(
            plan.contains("USING INDEX tasks_unfinished_versions"),
            "{plan}"
        );
        let plan = explain(&next_version, &[&"skill", &"1"]);
        assert!(
            plan.contains("tasks_unfinished_versions (skill_id=? AND skill_version>?)"),
            "{plan}"
        );
        let plan = explain(&next_skill, &[&"skill"]);
        assert!(
            plan.contains("tasks_unfinished_versions (skill_id>?)"),
            "{plan}"
        );
    }

    #[test]
    fn an_id_prefix_is_a_range_of_the_id_index_not_a_scan() {
        for query in [
            TaskQuery {
                id_prefix: Some("0b3f".into()),
                ..TaskQuery::default()
            },
            TaskQuery {
                id_prefix: Some("0b3f%_".into()),
                principal: Some("alice".into()),
                non_terminal: true,
                limit: Some(10),
                ..TaskQuery::default()
            },
        ] {
            let plan = plan(&query);
            assert!(
                plan.contains("SEARCH tasks USING INDEX sqlite_autoindex_tasks_1 (id>? AND id<?)"),
                "{query:?}:\n{plan}"
            );
        }
    }

    fn checkpoint(visit: u64) -> Entry {
        Entry::Checkpoint {
            visit,
            state: serde_json::Value::Null,
            status: TaskState::Working,
            compensable: Vec::new(),
            runs_on: None,
        }
    }

    /// A working task's row, as an append that creates it carries.
    pub(super) fn task_row(id: &str) -> TaskRecord {
        TaskRecord {
            id: id.into(),
            context_id: "c".into(),
            skill_id: "s".into(),
            skill_version: "1".into(),
            principal: None,
            state: TaskState::Working,
            created_at_ms: 0,
            updated_at_ms: 0,
            wake_at_ms: None,
            waits_on_call: false,
            last_seq: 0,
        }
    }

    /// `(seq, checkpoint)` of every journal row, in order.
    fn checkpoint_flags(conn: &Connection) -> Vec<(i64, bool)> {
        conn.prepare("SELECT seq, checkpoint FROM journal ORDER BY tid, seq")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn migration_4_backfills_the_checkpoint_column_from_the_old_kind_text_and_drops_it() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate_to(&mut conn, 3).unwrap();
        // Rows as the previous version wrote them: one entry per row (before migration 3) or one
        // row per append with its kinds comma-joined.
        conn.execute_batch(
            "INSERT INTO tasks (tid, id, context_id, skill_id, skill_version, state, created_at_ms, updated_at_ms)
                VALUES (1, 't', 'c', 's', '1', 'working', 0, 0);
             INSERT INTO journal (tid, seq, last_seq, at_ms, kind, body) VALUES
                (1, 1, 2, 0, 'task_created,message_received', '[]'),
                (1, 3, NULL, 0, 'checkpoint', '{}'),
                (1, 4, 6, 0, 'transitioned,checkpoint,activated', '[]'),
                (1, 7, NULL, 0, 'checkpoints', '{}'),
                (1, 8, 9, 0, 'activated,checkpoint', '[]'),
                (1, 10, 11, 0, 'no_checkpoint,activated', '[]');",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        assert_eq!(
            checkpoint_flags(&conn),
            [
                (1, false),
                (3, true),
                (4, true),
                (7, false),
                (8, true),
                (10, false)
            ]
        );
        let columns: Vec<String> = conn
            .prepare("SELECT name FROM pragma_table_info('journal')")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(columns.contains(&"checkpoint".to_owned()), "{columns:?}");
        assert!(!columns.contains(&"kind".to_owned()), "{columns:?}");
    }

    #[test]
    fn the_last_checkpoint_is_found_in_the_partial_index() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {REPLAY_SQL}"))
            .unwrap()
            .query_map(params!["t"], |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let plan = plan.join("\n");
        assert!(
            plan.contains("USING COVERING INDEX journal_checkpoints"),
            "{plan}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_beyond_the_pool_wait_for_a_connection_instead_of_opening_one() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("reads.sqlite"), Durability::Full).unwrap();
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let reads = (0..64).map(|_| {
            let (store, now, most) = (store.clone(), now.clone(), most.clone());
            tokio::spawn(async move {
                store
                    .read(move |conn| {
                        let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(at_once, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(2));
                        let one: i64 = conn.query_row("SELECT 1", [], |r| r.get(0))?;
                        now.fetch_sub(1, Ordering::SeqCst);
                        Ok(one)
                    })
                    .await
            })
        });
        for read in futures::future::join_all(reads).await {
            assert_eq!(read.unwrap().unwrap(), 1);
        }
        let most = most.load(Ordering::SeqCst);
        assert!(
            most <= READERS,
            "{most} reads ran at once, on as many connections"
        );
        let pooled = store.shared.readers.lock().unwrap().len();
        assert!(pooled <= READERS, "{pooled} connections kept");
    }

    #[tokio::test]
    async fn an_append_holding_a_checkpoint_sets_the_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        let store = SqliteStore::open_default(&path).unwrap();
        let mut create = Append::new("t", 1, vec![Entry::CancelRequested]);
        create.create = Some(task_row("t"));
        store.append(create).await.unwrap();
        let entries = vec![
            Entry::CancelRequested,
            checkpoint(1),
            Entry::CancelRequested,
        ];
        store.append(Append::new("t", 2, entries)).await.unwrap();
        store
            .append(Append::new("t", 5, vec![checkpoint(2)]))
            .await
            .unwrap();
        store
            .append(Append::new("t", 6, vec![Entry::CancelRequested]))
            .await
            .unwrap();
        let conn = Connection::open(&path).unwrap();
        assert_eq!(
            checkpoint_flags(&conn),
            [(1, false), (2, true), (5, true), (6, false)]
        );
        let replay: Vec<u64> = store
            .journal_for_replay("t")
            .await
            .unwrap()
            .iter()
            .map(|r| r.seq)
            .collect();
        assert_eq!(replay, [1, 5, 6]);
    }

    /// Long bodies are zstd frames in BLOBs (`packed`), short ones text; rows an earlier version
    /// wrote as text read beside them, and a damaged frame is a corrupt entry named by its seq.
    #[tokio::test]
    async fn long_bodies_are_stored_compressed_beside_text_ones_and_a_damaged_frame_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        let store = SqliteStore::open_default(&path).unwrap();
        let long = crate::model::Message::user_text("all work and no play ".repeat(20));
        let received = Entry::MessageReceived {
            message: long.clone(),
        };
        let mut create = Append::new("t", 1, vec![received.clone()]);
        create.create = Some(task_row("t"));
        store.append(create).await.unwrap();
        store
            .append(Append::new("t", 2, vec![Entry::CancelRequested]))
            .await
            .unwrap();
        let conn = Connection::open(&path).unwrap();
        let types = |conn: &Connection, sql: &str| -> Vec<String> {
            let mut stmt = conn.prepare(sql).unwrap();
            let rows = stmt.query_map([], |r| r.get(0)).unwrap();
            rows.collect::<Result<_, _>>().unwrap()
        };
        let journal = "SELECT typeof(body) FROM journal ORDER BY seq";
        assert_eq!(types(&conn, journal), ["blob", "text"]);
        assert_eq!(types(&conn, "SELECT typeof(body) FROM history"), ["blob"]);
        let stored: i64 = conn
            .query_row("SELECT length(body) FROM journal WHERE seq = 1", [], |r| {
                r.get(0)
            })
            .unwrap();
        let text = serde_json::to_string(&received).unwrap();
        assert!(stored * 3 < text.len() as i64, "{stored} of {}", text.len());
        // A row as radkit wrote it before compression: text, read beside the frames.
        conn.execute(
            "INSERT INTO journal (tid, seq, at_ms, checkpoint, body) VALUES (1, 3, 0, 0, ?1)",
            [&text],
        )
        .unwrap();
        let entries: Vec<Entry> = store
            .journal("t", 0)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.entry)
            .collect();
        assert_eq!(
            entries,
            [received.clone(), Entry::CancelRequested, received]
        );
        let view = store.task_view("t", None).await.unwrap().unwrap();
        assert_eq!(view.history, [long]);
        // A frame cut short: the entry it held is corrupt, not a panic nor an empty journal.
        conn.execute(
            "UPDATE journal SET body = substr(body, 1, length(body) - 4) WHERE seq = 1",
            [],
        )
        .unwrap();
        match store.journal("t", 0).await {
            Err(StoreError::Corrupt {
                seq: 1, task_id, ..
            }) => assert_eq!(task_id, "t"),
            other => panic!("expected a corrupt entry, got {other:?}"),
        }
    }

    /// The entries of research-loop-like task `i`: a user message, a visit with its state.
    fn researched(i: usize) -> Vec<Entry> {
        let topic = format!(
            "topic {i}: durable execution for agents, part {}",
            i * 7 % 13
        );
        vec![
            Entry::MessageReceived {
                message: crate::model::Message {
                    message_id: format!("message-{i}"),
                    ..crate::model::Message::user_text(format!(
                        "Research {topic} and draft a summary with sources."
                    ))
                },
            },
            Entry::Activated {
                visit: 1,
                step: "critique".into(),
                state: serde_json::json!({ "critique": [
                    format!("Draft on: {topic}"),
                    [{ "draft": format!("Draft on: {topic}"), "note": "Add sources.", "cycle": i % 5 }],
                ] }),
                event: crate::flow::Event::Enter,
            },
            Entry::Transitioned {
                visit: 1,
                next: crate::journal::TransitionKind::AwaitInput,
                state: Some(serde_json::json!({ "human_input": [format!("Draft on: {topic}")] })),
            },
        ]
    }

    /// Frames' dictionary ids in `table`, in row order (`0`: none; text rows are left out).
    fn frame_dictionaries(conn: &Connection, table: &str) -> Vec<u32> {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT body FROM {table} WHERE typeof(body) = 'blob' ORDER BY tid, seq"
            ))
            .unwrap();
        let rows = stmt.query_map([], |r| r.get::<_, Vec<u8>>(0)).unwrap();
        rows.map(|frame| {
            zstd::zstd_safe::get_dict_id_from_frame(&frame.unwrap()).map_or(0, |id| id.get())
        })
        .collect()
    }

    /// Once a sample of the file's bodies is taken, a dictionary trained on it is committed to
    /// `zstd_dicts`, and only then do new frames name it; they are smaller than the frames of
    /// the same shape before; every task reads back whole after a reopen; and a frame whose
    /// dictionary is gone is a corrupt entry, not a panic. A store that opened the file before the
    /// dictionary existed reads it from the file.
    #[tokio::test]
    async fn frames_use_a_dictionary_trained_on_the_files_bodies_only_once_it_is_committed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        let store = SqliteStore::open(&path, Durability::Normal).unwrap();
        // A reader that opened the file before any dictionary (as `radkit tasks` beside a server).
        let reader = SqliteStore::open(&path, Durability::Normal).unwrap();
        let conn = Connection::open(&path).unwrap();
        let dictionaries = |conn: &Connection| -> Vec<i64> {
            let mut stmt = conn.prepare("SELECT id FROM zstd_dicts").unwrap();
            let rows = stmt.query_map([], |r| r.get(0)).unwrap();
            rows.collect::<Result<_, _>>().unwrap()
        };
        let append_task = |store: &SqliteStore, i: usize| {
            let mut create = Append::new(format!("t{i}"), 1, researched(i));
            create.create = Some(task_row(&format!("t{i}")));
            let store = store.clone();
            async move { store.append(create).await.unwrap() }
        };
        let mut tasks = 0;
        // Appended until the sample is full and the trained dictionary committed (bounded: a
        // sample is `SAMPLE_BYTES`, each task about 700 bytes of bodies).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while dictionaries(&conn).is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "no dictionary after {tasks} tasks"
            );
            append_task(&store, tasks).await;
            tasks += 1;
        }
        let id = u32::try_from(dictionaries(&conn)[0]).unwrap();
        let before = frame_dictionaries(&conn, "journal");
        assert!(
            before.iter().all(|&d| d == 0),
            "a frame named a dictionary before its commit"
        );
        let plain = tasks;
        // The appends packed between the commit and the dictionary's hand-over still have none;
        // from the first that names it, all do.
        while frame_dictionaries(&conn, "journal").last() != Some(&id) {
            assert!(tasks < plain + 100, "no frame names the dictionary");
            append_task(&store, tasks).await;
            tasks += 1;
        }
        let named = tasks - 1;
        for _ in 0..50 {
            append_task(&store, tasks).await;
            tasks += 1;
        }
        let after = frame_dictionaries(&conn, "journal");
        assert!(after[plain..named].iter().all(|&d| d == 0));
        assert_eq!(after[named..], [id; 51]);
        assert!(frame_dictionaries(&conn, "history").ends_with(&[id; 51]));
        // Journals are rowid-ordered by task here (one append per task): task `i` is tid `i + 1`.
        let size = |from: usize, to: usize| -> i64 {
            conn.query_row(
                "SELECT SUM(length(body)) FROM journal WHERE tid > ?1 AND tid <= ?2",
                params![from, to],
                |r| r.get(0),
            )
            .unwrap()
        };
        let (without, with) = (size(plain - 50, plain), size(named, named + 50));
        assert!(
            with * 2 < without,
            "50 tasks' journals: {with} bytes with it, {without} without"
        );
        let last = format!("t{}", tasks - 1);
        assert_eq!(reader.journal(&last, 0).await.unwrap().len(), 3);
        assert_eq!(
            reader
                .task_view(&last, None)
                .await
                .unwrap()
                .unwrap()
                .history
                .len(),
            1
        );
        drop(reader);
        // Reopened: every task reads back, those written before the dictionary and after.
        drop(store);
        let store = SqliteStore::open(&path, Durability::Normal).unwrap();
        for i in [0, plain - 1, named, tasks - 1] {
            let entries: Vec<Entry> = store
                .journal(&format!("t{i}"), 0)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.entry)
                .collect();
            assert_eq!(entries, researched(i), "task t{i}");
            let view = store
                .task_view(&format!("t{i}"), None)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(view.history.len(), 1);
        }
        // Reopened with the dictionary gone (a damaged file): its rows are corrupt entries.
        drop(store);
        conn.execute("DELETE FROM zstd_dicts", []).unwrap();
        let store = SqliteStore::open(&path, Durability::Normal).unwrap();
        store.journal("t0", 0).await.unwrap();
        match store.journal(&format!("t{}", tasks - 1), 0).await {
            Err(StoreError::Corrupt { seq: 1, reason, .. }) => {
                assert!(reason.contains(&format!("dictionary {id}")), "{reason}")
            }
            other => panic!("expected a corrupt entry, got {other:?}"),
        }
    }

    /// A second start on the same workload samples and trains again, but keeps no second
    /// dictionary: the file's own is not beaten by a tenth on the same kind of bodies. (The
    /// bodies repeat every 700 tasks: left to grow, the numbers in them gain a digit between the
    /// two samples, a drift that a new dictionary does beat by 15%.)
    #[tokio::test]
    async fn a_second_start_on_the_same_workload_keeps_no_new_dictionary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        let conn = Connection::open(&path).unwrap();
        let stored = |conn: &Connection| -> i64 {
            conn.query_row("SELECT COUNT(*) FROM zstd_dicts", [], |r| r.get(0))
                .unwrap()
        };
        let mut tasks = 0;
        for start in 0..2 {
            let store = SqliteStore::open(&path, Durability::Normal).unwrap();
            // Appended until this start's sample is judged (bounded: a sample is
            // `SAMPLE_BYTES`, each task about 700 bytes of bodies).
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
            while store.shared.dictionaries.judged() == 0 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "start {start}: no sample judged after {tasks} tasks"
                );
                let mut create = Append::new(format!("t{tasks}"), 1, researched(tasks % 700));
                create.create = Some(task_row(&format!("t{tasks}")));
                store.append(create).await.unwrap();
                tasks += 1;
            }
            // The writer stores a kept dictionary after the batch it arrived beside: two more
            // appends, one after the other, are answered only after that.
            for _ in 0..2 {
                let mut create = Append::new(format!("t{tasks}"), 1, researched(tasks % 700));
                create.create = Some(task_row(&format!("t{tasks}")));
                store.append(create).await.unwrap();
                tasks += 1;
            }
            assert_eq!(stored(&conn), 1, "start {start}");
        }
    }

    #[tokio::test]
    async fn a_mistyped_column_is_a_typed_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        let store = SqliteStore::open_default(&path).unwrap();
        let mut create = Append::new("t", 1, vec![Entry::CancelRequested]);
        create.create = Some(task_row("t"));
        store.append(create).await.unwrap();
        let conn = Connection::open(&path).unwrap();
        conn.execute("UPDATE tasks SET created_at_ms = 'yesterday'", [])
            .unwrap();
        match store.task("t").await {
            Err(StoreError::Column { column, .. }) => assert_eq!(column, "created_at_ms"),
            other => panic!("expected a column error, got {other:?}"),
        }
        conn.execute("UPDATE tasks SET created_at_ms = 0", [])
            .unwrap();
        conn.execute("UPDATE journal SET seq = -1", []).unwrap();
        match store.journal("t", 0).await {
            Err(e @ StoreError::Column { .. }) => {
                assert!(e.to_string().starts_with("store column `seq`"), "{e}")
            }
            other => panic!("expected a column error, got {other:?}"),
        }
    }
}
