//! The SQLite schema: its migrations (one `user_version` step each), how a connection is opened,
//! and the backfill of the task views added by migration 5.

use super::*;

/// Schema migrations, applied in order at open; `PRAGMA user_version` counts the applied ones.
///
/// The journal is a rowid table in global append order, so one group commit writes a few contiguous
/// pages instead of one page per task; `(tid, seq)` is a small integer index (unique: no duplicate
/// seq can ever be stored) that finds one task's entries.
pub(super) const MIGRATIONS: &[&str] = &[
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
    // 9: a start reads only what it must, whatever the number of tasks that wait for input: the
    // skill versions of unfinished tasks (`Store::unfinished_versions`, one seek per pair) and the
    // tasks recovery takes (`TaskQuery { non_terminal, skip_idle_input }`) each have a partial
    // index. Their `WHERE` is the queries' own, term for term (the terminal states as
    // `sql_terminal_states` lists them; a unit test compares), or SQLite would not use them.
    "CREATE INDEX tasks_unfinished_versions ON tasks(skill_id, skill_version)
        WHERE state NOT IN ('completed', 'canceled', 'failed', 'rejected');
     CREATE INDEX tasks_to_recover ON tasks(created_at_ms, id)
        WHERE state NOT IN ('completed', 'canceled', 'failed', 'rejected')
          AND NOT (state = 'input-required' AND wake_at_ms IS NULL);",
    // 10: retention (`Store::prune`): finished tasks by whether their journal was compacted, then
    // by status time (when they finished), so that each pass of the pruner seeks the oldest ones
    // it has work for, however many it compacted before. The `WHERE` spells the terminal states as
    // `sql_terminal_states` does (a unit test compares).
    "ALTER TABLE tasks ADD COLUMN compacted INTEGER NOT NULL DEFAULT 0;
     CREATE INDEX tasks_finished ON tasks(compacted, status_at_ms)
        WHERE state IN ('completed', 'canceled', 'failed', 'rejected');",
    // 11: journal, history and artifact bodies may be zstd frames in BLOBs (`sqlite::packed`);
    // TEXT ones read as before, and a radkit from before this step refuses the file (its schema is
    // newer) rather than read a compressed body as corrupt. And the status-time index ascends:
    // statuses are mostly set in time order, so new keys land at the index's right edge, which
    // SQLite fills whole; descending, they landed at its left edge and every page split left two
    // half-empty pages (49% of its bytes were free). Pages of views read it backwards, as fast.
    "DROP INDEX tasks_by_status_time;
     CREATE INDEX tasks_by_status_time ON tasks(status_at_ms, id);",
    // 12: the zstd dictionaries frames may be compressed with (`sqlite::dictionary`), by the id
    // each frame's header names. Never deleted: rows of any age name theirs.
    "CREATE TABLE zstd_dicts (
        id INTEGER PRIMARY KEY,
        dict BLOB NOT NULL,
        trained_at_ms INTEGER NOT NULL,
        samples INTEGER NOT NULL
     );",
];

/// The migration after which existing tasks get their view ([`backfill_views`]).
pub(super) const VIEW_MIGRATION: usize = 5;

pub(super) fn connect(path: &Path, durability: Durability) -> Result<Connection, StoreError> {
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

pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    migrate_to(conn, MIGRATIONS.len())
}

/// Apply the migrations up to `target` (tests stop early to write rows in an old schema).
pub(super) fn migrate_to(conn: &mut Connection, target: usize) -> Result<(), StoreError> {
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
pub(super) fn backfill_views(tx: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    let tasks: Vec<(i64, String)> = {
        let mut stmt = tx.prepare("SELECT tid, id FROM tasks")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<Result<_, _>>()?
    };
    for (tid, id) in tasks {
        let records = match read_records(
            tx,
            // Before migration 12: no dictionaries.
            &super::dictionary::Dictionaries::none(),
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
                params![
                    tid,
                    crate::store::to_sql_int("seq", *seq)?,
                    view::json(message)?
                ],
            )?;
        }
        for row in &view.artifacts {
            tx.execute(
                "INSERT INTO artifacts (tid, seq, pos, artifact_id, body) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    tid,
                    crate::store::to_sql_int("seq", row.seq)?,
                    crate::store::to_sql_int("seq", row.pos)?,
                    row.artifact.artifact_id,
                    view::json(&row.artifact)?
                ],
            )?;
        }
    }
    Ok(())
}
