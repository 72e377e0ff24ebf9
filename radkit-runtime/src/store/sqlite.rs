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
use rusqlite::types::FromSql;
use rusqlite::{params, Connection, OptionalExtension, Row};
use tokio::sync::oneshot;

use super::view::{self, EncodedView, MemView, TaskView};
use super::{
    sql_terminal_states, Append, Encoded, Store, StoreError, StoreStats, TaskQuery, TaskRecord,
};
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
    // 4: a row holding a checkpoint says so in a typed column, set at append time from the entries
    // (`Encoded::checkpoint`), and the checkpoint index is on it. The backfill is the one place the
    // old comma-joined `kind` text is read (as exact names, not a substring); then it goes, since
    // nothing else reads it.
    "ALTER TABLE journal ADD COLUMN checkpoint INTEGER NOT NULL DEFAULT 0;
     UPDATE journal SET checkpoint = 1 WHERE instr(',' || kind || ',', ',checkpoint,') > 0;
     DROP INDEX journal_checkpoints;
     CREATE INDEX journal_checkpoints ON journal(tid, seq) WHERE checkpoint = 1;
     ALTER TABLE journal DROP COLUMN kind;",
    // 5: the task view (`store::view`): the status message on the row, history messages and artifact
    // pieces by the seq of the entry that made them. Filled for existing tasks by folding their
    // journals ([`backfill_views`]) in the same transaction.
    "ALTER TABLE tasks ADD COLUMN status_message TEXT;
     ALTER TABLE tasks ADD COLUMN status_at_ms INTEGER;
     ALTER TABLE tasks ADD COLUMN settled INTEGER NOT NULL DEFAULT 0;
     CREATE TABLE history (
        tid INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (tid, seq)
     ) WITHOUT ROWID;
     CREATE TABLE artifacts (
        tid INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        pos INTEGER NOT NULL,
        artifact_id TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (tid, seq)
     ) WITHOUT ROWID;
     CREATE INDEX artifacts_by_id ON artifacts(tid, artifact_id);",
    // 6: tasks newest status first (`Store::list_views`, A2A 1.0 `ListTasks`).
    "CREATE INDEX tasks_by_status_time ON tasks(status_at_ms DESC, id DESC);",
    // 7: push-notification configs beside their task, each with its delivery cursor (the seq of
    // the last update its webhook acknowledged), its retry schedule and its sender's lease
    // (`store::push`); claims read the configs of tasks not yet finished through a partial index.
    "CREATE TABLE push_configs (
        tid INTEGER NOT NULL,
        config_id TEXT NOT NULL,
        body TEXT NOT NULL,
        delivered_seq INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at_ms INTEGER NOT NULL DEFAULT 0,
        lease_owner TEXT,
        lease_until_ms INTEGER NOT NULL DEFAULT 0,
        finished INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (tid, config_id)
     ) WITHOUT ROWID;
     CREATE INDEX push_configs_live ON push_configs(next_at_ms) WHERE finished = 0;",
    // 8: the task waits on a call bound to its callee (`TaskRecord::waits_on_call`): recovery asks
    // such callees at once. Tasks waiting when this is applied keep `0` and are asked at their
    // recheck, as before.
    "ALTER TABLE tasks ADD COLUMN waits_on_call INTEGER NOT NULL DEFAULT 0;",
];

mod push;

/// The migration after which existing tasks get their view ([`backfill_views`]).
const VIEW_MIGRATION: usize = 5;

/// Column `name` of `row` as `T`: a `NULL`, a value of another type or an out-of-range number is a
/// [`StoreError::Column`] naming the column.
fn get<T: FromSql>(row: &Row<'_>, name: &'static str) -> Result<T, StoreError> {
    row.get(name).map_err(|e| StoreError::Column {
        column: name.into(),
        source: e.into(),
    })
}

fn connect(path: &Path, durability: Durability) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(|e| {
        StoreError::backend(format!("opening sqlite database {}", path.display()), e)
    })?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    let sync = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", sync)?;
    Ok(conn)
}

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    migrate_to(conn, MIGRATIONS.len())
}

/// Apply the migrations up to `target` (tests stop early to write rows in an old schema).
fn migrate_to(conn: &mut Connection, target: usize) -> Result<(), StoreError> {
    let version: usize = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version > MIGRATIONS.len() {
        return Err(StoreError::backend(
            "opening the sqlite database",
            format!(
                "database schema version {version} is newer than this radkit understands ({}); upgrade radkit",
                MIGRATIONS.len()
            ),
        ));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().take(target).skip(version) {
        let migration = |e: rusqlite::Error| {
            StoreError::backend(format!("applying sqlite schema migration {}", i + 1), e)
        };
        let tx = conn.transaction().map_err(migration)?;
        tx.execute_batch(sql).map_err(migration)?;
        if i + 1 == VIEW_MIGRATION {
            backfill_views(&tx)?;
        }
        tx.pragma_update(None, "user_version", i + 1)
            .map_err(migration)?;
        tx.commit().map_err(migration)?;
    }
    Ok(())
}

/// Give every task written before the view existed its view, folded from its journal. A task whose
/// journal does not decode keeps an empty view (it was unreadable already) and is logged.
fn backfill_views(tx: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    let tasks: Vec<(i64, String)> = {
        let mut stmt = tx.prepare("SELECT tid, id FROM tasks")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<Result<_, _>>()?
    };
    for (tid, id) in tasks {
        let records = match read_records(
            tx,
            "SELECT seq, at_ms, body FROM journal WHERE tid = ?1 ORDER BY seq",
            params![tid],
            &id,
            0,
        ) {
            Ok(records) => records,
            Err(e) => {
                tracing::warn!(task = %id, error = %e, "task view not filled: its journal does not decode");
                continue;
            }
        };
        let view = MemView::fold(&records);
        tx.execute(
            "UPDATE tasks SET status_message = ?1, status_at_ms = ?2, settled = ?3 WHERE tid = ?4",
            params![
                view.status_message.as_ref().map(view::json).transpose()?,
                view.status_at_ms,
                view.settled,
                tid
            ],
        )?;
        for (seq, message) in &view.history {
            tx.execute(
                "INSERT INTO history (tid, seq, body) VALUES (?1, ?2, ?3)",
                params![tid, super::to_sql_int("seq", *seq)?, view::json(message)?],
            )?;
        }
        for row in &view.artifacts {
            tx.execute(
                "INSERT INTO artifacts (tid, seq, pos, artifact_id, body) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    tid,
                    super::to_sql_int("seq", row.seq)?,
                    super::to_sql_int("seq", row.pos)?,
                    row.artifact.artifact_id,
                    view::json(&row.artifact)?
                ],
            )?;
        }
    }
    Ok(())
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
            .map_err(|e| StoreError::backend("starting the sqlite writer thread", e))?;
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
                    let c = Connection::open(&shared.path)?;
                    c.busy_timeout(std::time::Duration::from_secs(10))?;
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
        .map_err(|e| StoreError::backend("sqlite read task", e))?
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
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let seq: u64 = get(row, "seq")?;
        let at_ms: i64 = get(row, "at_ms")?;
        // Decoded straight from SQLite's buffer: no copy of the body.
        let body = row
            .get_ref("body")
            .and_then(|v| v.as_str().map_err(Into::into))
            .map_err(|e| StoreError::Column {
                column: "body".into(),
                source: e.into(),
            })?;
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

/// Most running tasks whose last seq the writer keeps (see [`commit_batch`]).
const CACHED_SEQS: usize = 20_000;

/// Apply a batch in one transaction. A conflicting append is refused alone; a backend failure fails
/// the whole batch (nothing of it is committed).
///
/// `last_seqs` caches each task's last seq: the writer thread is the only writer of the journal and
/// task rows in this process (the push-config table has its own writes) (several processes must not write one SQLite file; use Postgres for that), so the cache is
/// exact once loaded. It holds tasks that are running: a task that ends or stops to wait for input
/// leaves it (its next append, maybe days later, reads its seq once), and it is dropped whole (its
/// memory with it) when a batch fails or it passes [`CACHED_SEQS`] tasks.
fn commit_batch(
    conn: &mut Connection,
    batch: &mut [(Encoded, Reply)],
    last_seqs: &mut HashMap<String, (i64, u64)>,
) -> Vec<Result<(), StoreError>> {
    let mut results: Vec<Result<(), StoreError>> = Vec::with_capacity(batch.len());
    let outcome = (|| -> Result<(), rusqlite::Error> {
        // IMMEDIATE: the write lock is taken (waiting out the busy timeout) before anything is
        // read. Push-config writes (`sqlite/push.rs`) come from other connections; a deferred
        // transaction that read before one of them committed would fail with SQLITE_BUSY_SNAPSHOT
        // instead of waiting.
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let now = now_ms();
        for (encoded, _) in batch.iter() {
            results.push(apply_one(&tx, encoded, now, last_seqs)?);
        }
        tx.commit()
    })();
    match outcome {
        Ok(()) => {
            if last_seqs.len() > CACHED_SEQS {
                *last_seqs = HashMap::new();
            }
            results
        }
        Err(e) => {
            *last_seqs = HashMap::new();
            // Every append of the batch failed of the same error.
            let e = Arc::new(e);
            batch
                .iter()
                .map(|_| {
                    Err(StoreError::backend(
                        "committing to sqlite",
                        Box::new(e.clone()) as super::BoxError,
                    ))
                })
                .collect()
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
            .query_row(params![append.task_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, u64>(1)?)))
            .optional()?,
    };
    let tid = match (&append.create, known) {
        (Some(record), None) if append.first_seq == 1 && record.id == append.task_id => {
            tx.prepare_cached(
                "INSERT INTO tasks (id, context_id, skill_id, skill_version, principal, state, created_at_ms, updated_at_ms, wake_at_ms, waits_on_call)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
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
                record.wake_at_ms,
                record.waits_on_call
            ])?;
            tx.last_insert_rowid()
        }
        (Some(_), _) | (None, None) => return Ok(Err(conflict(0))),
        (None, Some((_, last))) if last + 1 != append.first_seq => {
            return Ok(Err(conflict(last + 1)))
        }
        (None, Some((tid, _))) => tid,
    };
    tx.prepare_cached(
        "INSERT INTO journal (tid, seq, last_seq, at_ms, checkpoint, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        tid,
        encoded.first_seq,
        encoded.last_seq_column(),
        now,
        encoded.checkpoint,
        encoded.body
    ])?;
    // The row changes only when the state, the status or the timer does: `last_seq` and
    // `updated_at_ms` are read from the journal, so a plain step writes no task-row page (one page
    // less per commit). The status message's rule reads the state before the append: SQLite
    // evaluates every `SET` expression against the row as it was.
    let view = &encoded.view;
    if append.state.is_some()
        || append.wake_at_ms.is_some()
        || append.waits_on_call.is_some()
        || view.touched
        || view.settled == Some(true)
    {
        let (set_wake, wake) = match append.wake_at_ms {
            Some(w) => (true, w),
            None => (false, None),
        };
        tx.prepare_cached(
            "UPDATE tasks SET state = COALESCE(?1, state),
                wake_at_ms = CASE WHEN ?2 THEN ?3 ELSE wake_at_ms END,
                status_message = CASE WHEN NOT ?4 THEN status_message
                                      WHEN ?5 IS NOT NULL AND state <> ?5 THEN NULL
                                      WHEN ?6 THEN ?7 ELSE status_message END,
                status_at_ms = CASE WHEN ?4 THEN ?8 ELSE status_at_ms END,
                settled = COALESCE(?10, settled),
                waits_on_call = COALESCE(?11, waits_on_call)
             WHERE tid = ?9",
        )?
        .execute(params![
            append.state.map(TaskState::as_str),
            set_wake,
            wake,
            view.touched,
            view.unless_state_was,
            view.set,
            view.message,
            now,
            tid,
            view.settled,
            append.waits_on_call
        ])?;
    } else if view.settled == Some(false) {
        // A new visit (most appends) unsettles a settled task only: no row write otherwise.
        tx.prepare_cached("UPDATE tasks SET settled = 0 WHERE tid = ?1 AND settled = 1")?
            .execute(params![tid])?;
    }
    write_view_rows(tx, tid, view)?;
    // Only an empty append at seq 0 could make `last_seq` negative; then the cache forgets the
    // task and the next append reads it from the journal.
    let stops = append
        .state
        .is_some_and(|s| s.is_terminal() || s == TaskState::InputRequired);
    match u64::try_from(encoded.last_seq) {
        Ok(last_seq) if !stops => {
            last_seqs.insert(append.task_id.clone(), (tid, last_seq));
        }
        _ => {
            last_seqs.remove(&append.task_id);
        }
    }
    Ok(Ok(()))
}

/// An append's history messages and artifact pieces (see [`view::MemView::apply`] for the rules).
fn write_view_rows(
    tx: &rusqlite::Transaction<'_>,
    tid: i64,
    view: &EncodedView,
) -> Result<(), rusqlite::Error> {
    for (seq, body) in &view.history {
        tx.prepare_cached("INSERT INTO history (tid, seq, body) VALUES (?1, ?2, ?3)")?
            .execute(params![tid, seq, body])?;
    }
    for (seq, artifact_id, replaces, body) in &view.artifacts {
        let pos: Option<i64> = tx
            .prepare_cached("SELECT MIN(pos) FROM artifacts WHERE tid = ?1 AND artifact_id = ?2")?
            .query_row(params![tid, artifact_id], |r| r.get(0))?;
        if *replaces {
            tx.prepare_cached("DELETE FROM artifacts WHERE tid = ?1 AND artifact_id = ?2")?
                .execute(params![tid, artifact_id])?;
        }
        tx.prepare_cached(
            "INSERT INTO artifacts (tid, seq, pos, artifact_id, body) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![tid, seq, pos.unwrap_or(*seq), artifact_id, body])?;
    }
    Ok(())
}

/// The view of task `id` (see [`Store::task_view`]), read in one read transaction.
fn read_view(
    conn: &Connection,
    id: &str,
    history: Option<usize>,
) -> Result<Option<TaskView>, StoreError> {
    // One snapshot for the three reads (WAL: the transaction sees one commit's state).
    let tx = conn.unchecked_transaction()?;
    read_view_in(&tx, id, history)
}

/// A page of views (see [`Store::list_views`]), read in one read transaction: the matching count,
/// the page's ids from the status-time index, then each view.
fn read_view_page(
    conn: &Connection,
    query: &super::ViewQuery,
) -> Result<super::ViewPage, StoreError> {
    use rusqlite::types::Value as Sql;
    let tx = conn.unchecked_transaction()?;
    let mut filter = String::from(" WHERE status_at_ms IS NOT NULL");
    let mut values: Vec<Sql> = Vec::new();
    let param = |values: &mut Vec<Sql>, value: Sql| {
        values.push(value);
        format!("?{}", values.len())
    };
    if let Some(p) = &query.principal {
        let p = param(&mut values, p.clone().into());
        filter.push_str(&format!(" AND principal = {p}"));
    }
    if let Some(c) = &query.context_id {
        let c = param(&mut values, c.clone().into());
        filter.push_str(&format!(" AND context_id = {c}"));
    }
    if let Some(state) = query.state {
        let s = param(&mut values, state.as_str().to_owned().into());
        filter.push_str(&format!(" AND state = {s}"));
    }
    if let Some(t) = query.status_since_ms {
        let t = param(&mut values, t.into());
        filter.push_str(&format!(" AND status_at_ms >= {t}"));
    }
    let total: i64 = tx.query_row(
        &format!("SELECT COUNT(*) FROM tasks{filter}"),
        rusqlite::params_from_iter(values.iter()),
        |r| r.get(0),
    )?;
    let mut page = filter;
    if let Some((at, id)) = &query.after {
        let at = param(&mut values, (*at).into());
        let id = param(&mut values, id.clone().into());
        page.push_str(&format!(" AND (status_at_ms, id) < ({at}, {id})"));
    }
    let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
    let ids: Vec<String> = {
        let mut stmt = tx.prepare(&format!(
            "SELECT id FROM tasks{page} ORDER BY status_at_ms DESC, id DESC LIMIT {limit}"
        ))?;
        let rows = stmt.query_map(rusqlite::params_from_iter(values.iter()), |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    let mut views = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(view) = read_view_in(&tx, &id, query.history)? {
            views.push(view);
        }
    }
    Ok(super::ViewPage {
        views,
        total: u64::try_from(total).unwrap_or(0),
    })
}

/// The view of task `id`, read with `tx` (the caller's read transaction).
fn read_view_in(
    tx: &Connection,
    id: &str,
    history: Option<usize>,
) -> Result<Option<TaskView>, StoreError> {
    let row = tx
        .prepare_cached(&format!(
            "SELECT {TASK_COLUMNS}, tid, status_message, status_at_ms, settled FROM tasks WHERE id = ?1"
        ))?
        .query(params![id])?
        .next()?
        .map(|r| -> Result<_, StoreError> {
            let message: Option<String> = get(r, "status_message")?;
            Ok((
                row_to_task(r)?,
                get::<i64>(r, "tid")?,
                message,
                get::<Option<i64>>(r, "status_at_ms")?,
                get::<bool>(r, "settled")?,
            ))
        })
        .transpose()?;
    let Some((record, tid, message, at_ms, settled)) = row else {
        return Ok(None);
    };
    let limit = history.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    let mut stmt = tx.prepare_cached(
        "SELECT body FROM (SELECT seq, body FROM history WHERE tid = ?1 ORDER BY seq DESC LIMIT ?2)
         ORDER BY seq",
    )?;
    let mut rows = stmt.query(params![tid, limit])?;
    let mut messages = Vec::new();
    while let Some(r) = rows.next()? {
        messages.push(view::decode(
            id,
            "a history message",
            &get::<String>(r, "body")?,
        )?);
    }
    let mut stmt =
        tx.prepare_cached("SELECT pos, body FROM artifacts WHERE tid = ?1 ORDER BY pos, seq")?;
    let mut rows = stmt.query(params![tid])?;
    let mut pieces = Vec::new();
    while let Some(r) = rows.next()? {
        let pos: u64 = get(r, "pos")?;
        pieces.push((
            pos,
            view::decode(id, "an artifact", &get::<String>(r, "body")?)?,
        ));
    }
    Ok(Some(TaskView {
        record,
        status_message: message
            .map(|m| view::decode(id, "the status message", &m))
            .transpose()?,
        status_at_ms: at_ms.unwrap_or_default(),
        history: messages,
        artifacts: view::join_pieces(pieces),
        settled,
    }))
}

/// A task row selected with [`TASK_COLUMNS`].
fn row_to_task(r: &Row<'_>) -> Result<TaskRecord, StoreError> {
    let id: String = get(r, "id")?;
    let state: String = get(r, "state")?;
    let state = TaskState::parse(&state).ok_or_else(|| StoreError::Corrupt {
        task_id: id.clone(),
        seq: 0,
        reason: format!("unknown task state `{state}`"),
    })?;
    Ok(TaskRecord {
        id,
        context_id: get(r, "context_id")?,
        skill_id: get(r, "skill_id")?,
        skill_version: get(r, "skill_version")?,
        principal: get(r, "principal")?,
        state,
        created_at_ms: get(r, "created_at_ms")?,
        updated_at_ms: get(r, "updated_at_ms")?,
        wake_at_ms: get(r, "wake_at_ms")?,
        waits_on_call: get(r, "waits_on_call")?,
        last_seq: get(r, "last_seq")?,
    })
}

/// The task rows `stmt` selects with `values`.
fn query_tasks(
    stmt: &mut rusqlite::Statement<'_>,
    values: impl rusqlite::Params,
) -> Result<Vec<TaskRecord>, StoreError> {
    let mut rows = stmt.query(values)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(row_to_task(row)?);
    }
    Ok(out)
}

const TASK_COLUMNS: &str = "id, context_id, skill_id, skill_version, principal, state, created_at_ms,
    COALESCE((SELECT at_ms FROM journal j WHERE j.tid = tasks.tid ORDER BY seq DESC LIMIT 1), created_at_ms)
        AS updated_at_ms,
    wake_at_ms, waits_on_call,
    COALESCE((SELECT COALESCE(last_seq, seq) FROM journal j WHERE j.tid = tasks.tid ORDER BY seq DESC LIMIT 1), 0)
        AS last_seq";

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
        self.read(move |conn| read_view(conn, &id, history)).await
    }

    async fn list_views(&self, query: &super::ViewQuery) -> Result<super::ViewPage, StoreError> {
        let query = query.clone();
        self.read(move |conn| read_view_page(conn, &query)).await
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
        self.read(move |conn| read_records(conn, REPLAY_SQL, params![id], &id, 0))
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
        self.read(move |conn| {
            read_records(
                conn,
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
}

/// The rows of [`Store::journal_for_replay`]: the first and those from the last checkpoint on (found
/// in the partial index `journal_checkpoints`).
const REPLAY_SQL: &str = "WITH t AS (SELECT tid FROM tasks WHERE id = ?1)
     SELECT seq, at_ms, body FROM journal
     WHERE tid = (SELECT tid FROM t)
       AND (seq = 1 OR seq >= (SELECT COALESCE(MAX(seq), 0) FROM journal
                               WHERE tid = (SELECT tid FROM t) AND checkpoint = 1))
     ORDER BY seq";

/// The `SELECT` of [`Store::list`] and its parameters (`?1`, `?2`, … in order).
fn list_sql(query: &TaskQuery) -> (String, Vec<rusqlite::types::Value>) {
    let mut sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE 1=1");
    let mut values: Vec<rusqlite::types::Value> = Vec::new();
    let mut param = |value: rusqlite::types::Value| {
        values.push(value);
        format!("?{}", values.len())
    };
    if query.non_terminal {
        sql.push_str(" AND state NOT IN ");
        sql.push_str(sql_terminal_states());
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
    if query.waits_on_call {
        sql.push_str(" AND waits_on_call = 1");
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
        }
    }

    fn task_row(id: &str) -> TaskRecord {
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
