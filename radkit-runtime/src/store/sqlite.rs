//! `SqliteStore`: the embedded default. One file, WAL, `synchronous=FULL` unless NORMAL is chosen.
//!
//! Writes go through one writer thread that owns the write connection and commits everything queued
//! at that moment — appends of many tasks — in one transaction (group commit), so throughput across
//! tasks is bounded by the disk's fsync rate times the batch size, not one fsync per step. Reads use a
//! small pool of separate connections on the blocking thread pool.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::oneshot;

use super::{Append, Encoded, Store, StoreError, StoreStats, TaskQuery, TaskRecord};
use crate::journal::{now_ms, JournalRecord};
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

type Reply = oneshot::Sender<Result<(), StoreError>>;

struct Shared {
    writer: Mutex<mpsc::Sender<(Encoded, Reply)>>,
    readers: Mutex<Vec<Connection>>,
    path: PathBuf,
    batches: AtomicU64,
    appends: AtomicU64,
}

/// A SQLite-backed store. Cheap to clone; the writer thread stops when the last clone is dropped.
#[derive(Clone)]
pub struct SqliteStore {
    shared: Arc<Shared>,
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

/// Schema migrations, applied in order at open; `PRAGMA user_version` counts the applied ones.
///
/// The journal is a rowid table in global append order, so one group commit writes a few contiguous
/// pages instead of one page per task; `(tid, seq)` is a small integer index (unique: no duplicate
/// seq can ever be stored) that finds one task's entries.
const MIGRATIONS: &[&str] = &[
    // 1: tasks and journal.
    "CREATE TABLE tasks (
        tid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        context_id TEXT NOT NULL,
        skill_id TEXT NOT NULL,
        skill_version TEXT NOT NULL,
        principal TEXT,
        state TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        wake_at_ms INTEGER
     );
     CREATE INDEX tasks_by_state ON tasks(state);
     CREATE INDEX tasks_by_wake ON tasks(wake_at_ms) WHERE wake_at_ms IS NOT NULL;
     CREATE TABLE journal (
        pos INTEGER PRIMARY KEY,
        tid INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        at_ms INTEGER NOT NULL,
        kind TEXT NOT NULL,
        body TEXT NOT NULL
     );
     CREATE UNIQUE INDEX journal_by_task ON journal(tid, seq);",
    // 2: where each task's last checkpoint is (one small index entry per checkpoint).
    "CREATE INDEX journal_checkpoints ON journal(tid, seq) WHERE kind = 'checkpoint';",
    // 3: one journal row per append: `body` is then a JSON array of the entries `seq..=last_seq` (a
    // row without `last_seq` holds the one entry at `seq`); its `kind` lists the entries' kinds.
    "ALTER TABLE journal ADD COLUMN last_seq INTEGER;
     DROP INDEX journal_checkpoints;
     CREATE INDEX journal_checkpoints ON journal(tid, seq) WHERE kind LIKE '%checkpoint%';",
];

fn connect(path: &Path, durability: Durability) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(backend)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(backend)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(backend)?;
    let sync = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", sync)
        .map_err(backend)?;
    Ok(conn)
}

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let version: usize = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(backend)?;
    if version > MIGRATIONS.len() {
        return Err(StoreError::Backend(format!(
            "database schema version {version} is newer than this radkit understands ({}); upgrade radkit",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
        let tx = conn.transaction().map_err(backend)?;
        tx.execute_batch(sql).map_err(backend)?;
        tx.pragma_update(None, "user_version", i + 1)
            .map_err(backend)?;
        tx.commit().map_err(backend)?;
    }
    Ok(())
}

impl SqliteStore {
    /// Open (creating if needed) the database at `path` with `durability`, and start its writer.
    pub fn open(path: impl AsRef<Path>, durability: Durability) -> Result<Self, StoreError> {
        let path = path.as_ref().to_owned();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::Backend(format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        let mut conn = connect(&path, durability)?;
        migrate(&mut conn)?;
        let (tx, rx) = mpsc::channel::<(Encoded, Reply)>();
        let shared = Arc::new(Shared {
            writer: Mutex::new(tx),
            readers: Mutex::new(Vec::new()),
            path: path.clone(),
            batches: AtomicU64::new(0),
            appends: AtomicU64::new(0),
        });
        let stats = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("radkit-sqlite-writer".into())
            .spawn(move || writer_loop(conn, rx, stats))
            .map_err(backend)?;
        Ok(SqliteStore { shared })
    }

    /// Open with FULL durability.
    pub fn open_default(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open(path, Durability::Full)
    }

    /// Commit statistics since open.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            batches: self.shared.batches.load(Ordering::Relaxed),
            appends: self.shared.appends.load(Ordering::Relaxed),
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Run `f` on a pooled read connection on the blocking pool.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || {
            let pooled = shared
                .readers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop();
            let conn = match pooled {
                Some(c) => c,
                None => {
                    let c = Connection::open(&shared.path).map_err(backend)?;
                    c.busy_timeout(std::time::Duration::from_secs(10))
                        .map_err(backend)?;
                    c
                }
            };
            let result = f(&conn);
            let mut pool = shared.readers.lock().unwrap_or_else(|p| p.into_inner());
            if pool.len() < 8 {
                pool.push(conn);
            }
            result
        })
        .await
        .map_err(backend)?
    }
}

/// Run a `(seq, at_ms, body)` query and decode the entries after `after_seq` of its rows; `task_id`
/// names corrupt entries.
fn read_records(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    task_id: &str,
    after_seq: u64,
) -> Result<Vec<JournalRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).map_err(backend)?;
    let mut rows = stmt.query(params).map_err(backend)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(backend)? {
        let seq = row.get::<_, i64>(0).map_err(backend)? as u64;
        let at_ms = row.get::<_, i64>(1).map_err(backend)?;
        // Decoded straight from SQLite's buffer: no copy of the body.
        let body = row.get_ref(2).map_err(backend)?.as_str().map_err(backend)?;
        super::decode_row(task_id, seq, at_ms, body, after_seq, &mut out)?;
    }
    Ok(out)
}

/// The writer thread: block for one append, take everything else queued, commit once, answer all.
fn writer_loop(
    mut conn: Connection,
    rx: mpsc::Receiver<(Encoded, Reply)>,
    stats: std::sync::Weak<Shared>,
) {
    let mut last_seqs: HashMap<String, (i64, u64)> = HashMap::new();
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let count = batch.len() as u64;
        let results = commit_batch(&mut conn, &mut batch, &mut last_seqs);
        if let Some(shared) = stats.upgrade() {
            shared.batches.fetch_add(1, Ordering::Relaxed);
            shared.appends.fetch_add(count, Ordering::Relaxed);
        }
        for ((_, reply), result) in batch.into_iter().zip(results) {
            let _ = reply.send(result);
        }
    }
}

/// Apply a batch in one transaction. A conflicting append is refused alone; a backend failure fails
/// the whole batch (nothing of it is committed).
///
/// `last_seqs` caches each task's last seq: the writer thread is the only writer of the file in this
/// process (several processes must not write one SQLite file; use Postgres for that), so the cache is
/// exact once loaded. It is cleared when a batch fails and pruned when tasks end.
fn commit_batch(
    conn: &mut Connection,
    batch: &mut [(Encoded, Reply)],
    last_seqs: &mut HashMap<String, (i64, u64)>,
) -> Vec<Result<(), StoreError>> {
    let mut results: Vec<Result<(), StoreError>> = Vec::with_capacity(batch.len());
    let outcome = (|| -> Result<(), rusqlite::Error> {
        let tx = conn.transaction()?;
        let now = now_ms();
        for (encoded, _) in batch.iter() {
            results.push(apply_one(&tx, encoded, now, last_seqs)?);
        }
        tx.commit()
    })();
    match outcome {
        Ok(()) => {
            if last_seqs.len() > 100_000 {
                last_seqs.clear();
            }
            results
        }
        Err(e) => {
            last_seqs.clear();
            batch.iter().map(|_| Err(backend(&e))).collect()
        }
    }
}

fn apply_one(
    tx: &rusqlite::Transaction<'_>,
    encoded: &Encoded,
    now: i64,
    last_seqs: &mut HashMap<String, (i64, u64)>,
) -> Result<Result<(), StoreError>, rusqlite::Error> {
    let append = &encoded.append;
    let conflict = |expected| StoreError::Conflict {
        task_id: append.task_id.clone(),
        expected,
        got: append.first_seq,
    };
    let known = match last_seqs.get(&append.task_id) {
        Some(known) => Some(*known),
        None => tx
            .prepare_cached("SELECT tid, COALESCE((SELECT COALESCE(last_seq, seq) FROM journal j WHERE j.tid = tasks.tid ORDER BY seq DESC LIMIT 1), 0) FROM tasks WHERE id = ?1")?
            .query_row(params![append.task_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as u64)))
            .optional()?,
    };
    let tid = match (&append.create, known) {
        (Some(record), None) if append.first_seq == 1 && record.id == append.task_id => {
            tx.prepare_cached(
                "INSERT INTO tasks (id, context_id, skill_id, skill_version, principal, state, created_at_ms, updated_at_ms, wake_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                record.id,
                record.context_id,
                record.skill_id,
                record.skill_version,
                record.principal,
                record.state.as_str(),
                record.created_at_ms,
                now,
                record.wake_at_ms
            ])?;
            tx.last_insert_rowid()
        }
        (Some(_), _) | (None, None) => return Ok(Err(conflict(0))),
        (None, Some((_, last))) if last + 1 != append.first_seq => {
            return Ok(Err(conflict(last + 1)))
        }
        (None, Some((tid, _))) => tid,
    };
    let (kind, body, last) = encoded.journal_row();
    tx.prepare_cached(
        "INSERT INTO journal (tid, seq, last_seq, at_ms, kind, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![tid, append.first_seq as i64, last, now, kind, body])?;
    let last_seq = append.first_seq + encoded.rows.len() as u64 - 1;
    // The row changes only when the state or the timer does: `last_seq` and `updated_at_ms` are read
    // from the journal, so a plain step writes no task-row page (one page less per commit).
    if append.state.is_some() || append.wake_at_ms.is_some() {
        let (set_wake, wake) = match append.wake_at_ms {
            Some(w) => (true, w),
            None => (false, None),
        };
        tx.prepare_cached(
            "UPDATE tasks SET state = COALESCE(?1, state), wake_at_ms = CASE WHEN ?2 THEN ?3 ELSE wake_at_ms END WHERE tid = ?4",
        )?
        .execute(params![append.state.map(TaskState::as_str), set_wake, wake, tid])?;
    }
    if append.state.is_some_and(TaskState::is_terminal) {
        last_seqs.remove(&append.task_id);
    } else {
        last_seqs.insert(append.task_id.clone(), (tid, last_seq));
    }
    Ok(Ok(()))
}

fn row_to_task(r: &rusqlite::Row<'_>) -> rusqlite::Result<(TaskRecord, String)> {
    let state: String = r.get(5)?;
    Ok((
        TaskRecord {
            id: r.get(0)?,
            context_id: r.get(1)?,
            skill_id: r.get(2)?,
            skill_version: r.get(3)?,
            principal: r.get(4)?,
            state: TaskState::Unknown,
            created_at_ms: r.get(6)?,
            updated_at_ms: r.get(7)?,
            wake_at_ms: r.get(8)?,
            last_seq: r.get::<_, i64>(9)? as u64,
        },
        state,
    ))
}

fn finish_row((mut record, state): (TaskRecord, String)) -> Result<TaskRecord, StoreError> {
    record.state = TaskState::parse(&state).ok_or_else(|| StoreError::Corrupt {
        task_id: record.id.clone(),
        seq: 0,
        reason: format!("unknown task state `{state}`"),
    })?;
    Ok(record)
}

const TASK_COLUMNS: &str = "id, context_id, skill_id, skill_version, principal, state, created_at_ms,
    COALESCE((SELECT at_ms FROM journal j WHERE j.tid = tasks.tid ORDER BY seq DESC LIMIT 1), created_at_ms),
    wake_at_ms,
    COALESCE((SELECT COALESCE(last_seq, seq) FROM journal j WHERE j.tid = tasks.tid ORDER BY seq DESC LIMIT 1), 0)";

#[async_trait]
impl Store for SqliteStore {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
        let encoded = Encoded::new(append)?;
        let (reply, answer) = oneshot::channel();
        self.shared
            .writer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send((encoded, reply))
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    async fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let id = task_id.to_owned();
        self.read(move |conn| {
            let row = conn
                .prepare_cached(&format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1"))
                .map_err(backend)?
                .query_row(params![id], row_to_task)
                .optional()
                .map_err(backend)?;
            row.map(finish_row).transpose()
        })
        .await
    }

    async fn journal(
        &self,
        task_id: &str,
        after_seq: u64,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        let id = task_id.to_owned();
        self.read(move |conn| {
            read_records(
                conn,
                // From the row holding entry `after_seq + 1` on: an index range, however long the
                // journal.
                "WITH t AS (SELECT tid FROM tasks WHERE id = ?1)
                 SELECT seq, at_ms, body FROM journal
                 WHERE tid = (SELECT tid FROM t)
                   AND seq >= COALESCE((SELECT MAX(seq) FROM journal
                                        WHERE tid = (SELECT tid FROM t) AND seq <= ?2 + 1), 0)
                 ORDER BY seq",
                params![id, after_seq as i64],
                &id,
                after_seq,
            )
        })
        .await
    }

    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        let id = task_id.to_owned();
        self.read(move |conn| {
            read_records(
                conn,
                "WITH t AS (SELECT tid FROM tasks WHERE id = ?1)
                 SELECT seq, at_ms, body FROM journal
                 WHERE tid = (SELECT tid FROM t)
                   AND (seq = 1 OR seq >= (SELECT COALESCE(MAX(seq), 0) FROM journal
                                           WHERE tid = (SELECT tid FROM t) AND kind LIKE '%checkpoint%'))
                 ORDER BY seq",
                params![id],
                &id,
                0,
            )
        })
        .await
    }

    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        self.read(move |conn| {
            let (sql, values) = list_sql(&query);
            let mut stmt = conn.prepare(&sql).map_err(backend)?;
            let mut rows = stmt
                .query(rusqlite::params_from_iter(values))
                .map_err(backend)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(backend)? {
                out.push(finish_row(row_to_task(row).map_err(backend)?)?);
            }
            Ok(out)
        })
        .await
    }
}

/// The `SELECT` of [`Store::list`] and its parameters (`?1`, `?2`, … in order).
fn list_sql(query: &TaskQuery) -> (String, Vec<rusqlite::types::Value>) {
    let mut sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE 1=1");
    let mut values: Vec<rusqlite::types::Value> = Vec::new();
    let mut param = |value: rusqlite::types::Value| {
        values.push(value);
        format!("?{}", values.len())
    };
    if query.non_terminal {
        sql.push_str(" AND state NOT IN ('completed', 'canceled', 'failed', 'rejected')");
    }
    if let Some(p) = &query.principal {
        sql.push_str(&format!(" AND principal = {}", param(p.clone().into())));
    }
    if let Some(t) = query.wake_due_ms {
        sql.push_str(&format!(
            " AND wake_at_ms IS NOT NULL AND wake_at_ms <= {}",
            param(t.into())
        ));
    }
    // A range of the `id` index (BINARY collation: UTF-8 byte order), not `LIKE`, which is
    // case-insensitive here and would need `%` and `_` escaped.
    if let Some(prefix) = query.id_prefix.as_deref().filter(|p| !p.is_empty()) {
        sql.push_str(&format!(" AND id >= {}", param(prefix.to_owned().into())));
        if let Some(upper) = super::prefix_upper_bound(prefix) {
            sql.push_str(&format!(" AND id < {}", param(upper.into())));
        }
    }
    match query.limit {
        Some(limit) => sql.push_str(&format!(
            " ORDER BY created_at_ms DESC, id DESC LIMIT {limit}"
        )),
        None => sql.push_str(" ORDER BY created_at_ms, id"),
    }
    (sql, values)
}

/// The reference the sequential benchmark is judged against: the mean latency of one durable SQLite
/// commit (WAL, `synchronous=FULL`, one small row per transaction) on a fresh file at `path`, over
/// `commits` transactions.
pub fn commit_latency(path: &Path, commits: u32) -> Result<std::time::Duration, StoreError> {
    let conn = connect(path, Durability::Full)?;
    conn.execute_batch("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        .map_err(backend)?;
    let started = std::time::Instant::now();
    for i in 0..commits {
        conn.execute(
            "INSERT INTO t (body) VALUES (?1)",
            params![format!("commit {i}")],
        )
        .map_err(backend)?;
    }
    Ok(started.elapsed() / commits.max(1))
}

/// The `journal_mode` and `synchronous` a connection opened like the store's gets (for tests and
/// `radkit doctor`-style checks): `("wal", 2)` is WAL with FULL.
pub fn pragmas(path: &Path, durability: Durability) -> Result<(String, i64), StoreError> {
    let conn = connect(path, durability)?;
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .map_err(backend)?;
    let sync: i64 = conn
        .pragma_query_value(None, "synchronous", |r| r.get(0))
        .map_err(backend)?;
    Ok((mode, sync))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
