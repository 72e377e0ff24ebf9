//! The Postgres schema: its migrations (one version step each, under an advisory lock) and the
//! backfill of the task views added by migration 8.

use super::*;

/// Versioned migrations; `radkit_migrations` records the applied ones.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: tasks (with lease columns) and journal.
    "CREATE TABLE radkit_tasks (
        tid BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        context_id TEXT NOT NULL,
        skill_id TEXT NOT NULL,
        skill_version TEXT NOT NULL,
        principal TEXT,
        state TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        wake_at_ms BIGINT,
        last_seq BIGINT NOT NULL DEFAULT 0,
        lease_owner TEXT,
        lease_expires_ms BIGINT,
        fence BIGINT NOT NULL DEFAULT 0
     );
     CREATE INDEX radkit_tasks_by_state ON radkit_tasks(state);
     CREATE INDEX radkit_tasks_by_wake ON radkit_tasks(wake_at_ms) WHERE wake_at_ms IS NOT NULL;
     CREATE TABLE radkit_journal (
        tid BIGINT NOT NULL REFERENCES radkit_tasks(tid),
        seq BIGINT NOT NULL,
        at_ms BIGINT NOT NULL,
        kind TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (tid, seq)
     );",
    // 2: cancel requests reach the lease owner; claims find runnable tasks by index.
    "ALTER TABLE radkit_tasks ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE;
     CREATE INDEX radkit_tasks_runnable ON radkit_tasks(tid)
        WHERE state IN ('submitted', 'working') OR wake_at_ms IS NOT NULL OR cancel_requested;
     CREATE INDEX radkit_tasks_by_owner ON radkit_tasks(lease_owner) WHERE lease_owner IS NOT NULL;",
    // 3: room on each page for the row's next version, so that updates of a task row stay on its page
    // (HOT) and touch no index.
    "ALTER TABLE radkit_tasks SET (fillfactor = 50);",
    // 4: one journal row per append: `body` is then a JSON array of the entries `seq..=last_seq`
    // (a row without `last_seq` holds the one entry at `seq`, as every row did before).
    "ALTER TABLE radkit_journal ADD COLUMN last_seq BIGINT;",
    // 5: where each task's last checkpoint is (the row of an append that holds one).
    "CREATE INDEX radkit_journal_checkpoints ON radkit_journal(tid, seq)
        WHERE kind LIKE '%checkpoint%';",
    // 6: tasks by id prefix (`TaskQuery::id_prefix`) as an index range. The unique index on `id` is
    // in the database's collation, where the ids with a prefix need not be one range (en-US sorts
    // `aB` between `ab` and `ac`, so `ab <= id < ac` finds it); in "C" (UTF-8 byte order) they are.
    "CREATE INDEX radkit_tasks_by_id_c ON radkit_tasks (id COLLATE \"C\");",
    // 7: a row holding a checkpoint says so in a typed column, set at append time from the entries
    // (`Encoded::checkpoint`), and the checkpoint index is on it. The backfill is the one place the
    // old comma-joined `kind` text is read (as exact names, not a substring). `kind` stays, nullable
    // and no longer written, so that a worker of the previous version sharing this database during
    // an upgrade can still append: its rows have `checkpoint = FALSE`, which only makes a replay
    // start at an earlier checkpoint.
    "ALTER TABLE radkit_journal ADD COLUMN checkpoint BOOLEAN NOT NULL DEFAULT FALSE;
     UPDATE radkit_journal SET checkpoint = TRUE
        WHERE 'checkpoint' = ANY (string_to_array(kind, ','));
     DROP INDEX radkit_journal_checkpoints;
     CREATE INDEX radkit_journal_checkpoints ON radkit_journal(tid, seq) WHERE checkpoint;
     ALTER TABLE radkit_journal ALTER COLUMN kind DROP NOT NULL;",
    // 8: the task view (`store::view`): the status message on the row, history messages and
    // artifact pieces by the seq of the entry that made them. Filled for existing tasks by folding
    // their journals ([`backfill_views`]) in the same transaction. Workers of an earlier version do
    // not keep the view: stop them before starting this one on a shared database.
    "ALTER TABLE radkit_tasks ADD COLUMN status_message TEXT, ADD COLUMN status_at_ms BIGINT,
        ADD COLUMN settled BOOLEAN NOT NULL DEFAULT FALSE;
     CREATE TABLE radkit_history (
        tid BIGINT NOT NULL REFERENCES radkit_tasks(tid),
        seq BIGINT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (tid, seq)
     );
     CREATE TABLE radkit_artifacts (
        tid BIGINT NOT NULL REFERENCES radkit_tasks(tid),
        seq BIGINT NOT NULL,
        pos BIGINT NOT NULL,
        artifact_id TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (tid, seq)
     );
     CREATE INDEX radkit_artifacts_by_id ON radkit_artifacts(tid, artifact_id);",
    // 9: tasks newest status first (`Store::list_views`, A2A 1.0 `ListTasks`).
    "CREATE INDEX radkit_tasks_by_status_time ON radkit_tasks(status_at_ms DESC, id DESC);",
    // 10: push-notification configs beside their task, each with its delivery cursor (the seq of
    // the last update its webhook acknowledged), its retry schedule and its sender's lease
    // (`store::push`): several workers claim deliveries with `FOR UPDATE SKIP LOCKED`, reading the
    // configs of tasks not yet finished through a partial index.
    "CREATE TABLE radkit_push_configs (
        tid BIGINT NOT NULL REFERENCES radkit_tasks(tid),
        config_id TEXT NOT NULL,
        body TEXT NOT NULL,
        delivered_seq BIGINT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at_ms BIGINT NOT NULL DEFAULT 0,
        lease_owner TEXT,
        lease_until_ms BIGINT NOT NULL DEFAULT 0,
        finished BOOLEAN NOT NULL DEFAULT FALSE,
        PRIMARY KEY (tid, config_id)
     );
     CREATE INDEX radkit_push_configs_live ON radkit_push_configs(next_at_ms) WHERE NOT finished;",
    // 11: the task waits on a call bound to its callee (`TaskRecord::waits_on_call`): a worker that
    // starts asks such callees at once, finding the tasks through a partial index. Tasks waiting
    // when this is applied keep `FALSE` and are asked at their recheck, as before; workers of an
    // earlier version leave the column as it is.
    "ALTER TABLE radkit_tasks ADD COLUMN waits_on_call BOOLEAN NOT NULL DEFAULT FALSE;
     CREATE INDEX radkit_tasks_waiting_on_calls ON radkit_tasks(tid) WHERE waits_on_call;",
    // 12: commands handed to executors (`store::DispatchStore`): a to-do list beside the journal,
    // claimed oldest first; a row goes once its receipt is journaled.
    "CREATE TABLE radkit_dispatch (
        id TEXT PRIMARY KEY,
        task_id TEXT NOT NULL,
        cmd TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        claimed_by TEXT,
        claimed_until_ms BIGINT NOT NULL DEFAULT 0,
        claims INTEGER NOT NULL DEFAULT 0
     );
     CREATE INDEX radkit_dispatch_claimable ON radkit_dispatch(claimed_until_ms, created_at_ms);",
    // 13: every lease a task was given (`Leases::lease_log`, the console's timeline): one row per
    // fencing token with its owner, when it was taken, from whom (the owner whose lease had run out:
    // a takeover) and when it was given back. Written by triggers on the task row, so every path
    // that takes or gives back a lease (a claim, `acquire`, a task created leased, `release`, and
    // workers of an earlier version) is logged, and nothing on the hot path of an append: the
    // triggers fire only when `fence` or `lease_owner` is set, which a step's append never does.
    // `SET search_path FROM CURRENT` keeps the function writing to the log of its own schema.
    "CREATE TABLE radkit_lease_log (
        tid BIGINT NOT NULL REFERENCES radkit_tasks(tid) ON DELETE CASCADE,
        fence BIGINT NOT NULL,
        owner TEXT NOT NULL,
        claimed_at_ms BIGINT NOT NULL,
        prior_owner TEXT,
        prior_expires_ms BIGINT,
        released_at_ms BIGINT,
        PRIMARY KEY (tid, fence)
     );
     CREATE FUNCTION radkit_log_lease() RETURNS trigger LANGUAGE plpgsql
     SET search_path FROM CURRENT AS $$
     DECLARE
        now_ms BIGINT := (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
     BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO radkit_lease_log (tid, fence, owner, claimed_at_ms)
            VALUES (NEW.tid, NEW.fence, NEW.lease_owner, now_ms)
            ON CONFLICT (tid, fence) DO NOTHING;
        ELSIF NEW.fence IS DISTINCT FROM OLD.fence AND NEW.lease_owner IS NOT NULL THEN
            INSERT INTO radkit_lease_log
                (tid, fence, owner, claimed_at_ms, prior_owner, prior_expires_ms)
            VALUES (NEW.tid, NEW.fence, NEW.lease_owner, now_ms, OLD.lease_owner,
                    CASE WHEN OLD.lease_owner IS NOT NULL THEN OLD.lease_expires_ms END)
            ON CONFLICT (tid, fence) DO NOTHING;
        ELSIF NEW.lease_owner IS NULL AND OLD.lease_owner IS NOT NULL THEN
            UPDATE radkit_lease_log SET released_at_ms = now_ms
            WHERE tid = NEW.tid AND fence = NEW.fence AND released_at_ms IS NULL;
        END IF;
        RETURN NULL;
     END $$;
     CREATE TRIGGER radkit_lease_taken AFTER INSERT ON radkit_tasks
        FOR EACH ROW WHEN (NEW.lease_owner IS NOT NULL) EXECUTE FUNCTION radkit_log_lease();
     CREATE TRIGGER radkit_lease_changed AFTER UPDATE OF fence, lease_owner ON radkit_tasks
        FOR EACH ROW WHEN (OLD.fence IS DISTINCT FROM NEW.fence
                           OR OLD.lease_owner IS DISTINCT FROM NEW.lease_owner)
        EXECUTE FUNCTION radkit_log_lease();",
    // 14: retention (`Store::prune`): finished tasks by whether their journal was compacted, then
    // by status time (when they finished), so that each pass of a pruner seeks the oldest ones it
    // has work for, however many were compacted before. The `WHERE` is the pruning queries' own,
    // term for term (a unit test compares), or the planner would not use it. A worker of an
    // earlier version sharing the database leaves the column as it is.
    "ALTER TABLE radkit_tasks ADD COLUMN compacted BOOLEAN NOT NULL DEFAULT FALSE;
     CREATE INDEX radkit_tasks_finished ON radkit_tasks(compacted, status_at_ms)
        WHERE state IN ('completed', 'canceled', 'failed', 'rejected');",
];

/// The migration after which existing tasks get their view ([`backfill_views`]).
pub(super) const VIEW_MIGRATION: i32 = 8;

/// The first key of the advisory lock migrations take (the second is the schema's name hashed), so
/// that it does not meet an application's own advisory locks on the same database: "radk".
pub(super) const MIGRATION_LOCK: i32 = 0x7261_646b;

pub(super) async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    migrate_to(client, MIGRATIONS.len()).await
}

/// Apply the migrations up to `target` (tests stop early to write rows in an old schema).
pub(super) async fn migrate_to(client: &mut Client, target: usize) -> Result<(), StoreError> {
    // One migrator at a time per schema, across processes, from the very first statement: two
    // processes starting on a fresh database at once would otherwise both create `radkit_migrations`
    // (one of them failing on a unique violation in `pg_type`). The lock is the transaction's, so it
    // is released at commit or rollback, and by the server when a frozen starter's session times out.
    let tx = client.transaction().await?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext(COALESCE(current_schema(), '')))",
        &[&MIGRATION_LOCK],
    )
    .await
    .map_err(|e| StoreError::backend("taking the postgres migration lock", e))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS radkit_migrations (version INT PRIMARY KEY);
         LOCK TABLE radkit_migrations IN EXCLUSIVE MODE",
    )
    .await
    .map_err(|e| StoreError::backend("creating the postgres migrations table", e))?;
    let row = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) AS version FROM radkit_migrations",
            &[],
        )
        .await?;
    let applied: i32 = get(&row, "version")?;
    let applied = usize::try_from(applied).map_err(|e| StoreError::Column {
        column: "radkit_migrations.version".into(),
        source: format!("{applied} is negative: {e}").into(),
    })?;
    if applied > MIGRATIONS.len() {
        return Err(StoreError::backend(
            "opening the postgres database",
            format!(
                "database schema version {applied} is newer than this radkit understands ({}); upgrade radkit",
                MIGRATIONS.len()
            ),
        ));
    }
    for (version, sql) in (1i32..).zip(MIGRATIONS).take(target).skip(applied) {
        let migration = |e: tokio_postgres::Error| {
            StoreError::backend(format!("applying postgres schema migration {version}"), e)
        };
        tx.batch_execute(sql).await.map_err(migration)?;
        if version == VIEW_MIGRATION {
            backfill_views(&tx).await?;
        }
        tx.execute(
            "INSERT INTO radkit_migrations (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(migration)?;
    }
    tx.commit().await?;
    Ok(())
}

/// Give every task written before the view existed its view, folded from its journal. A task whose
/// journal does not decode keeps an empty view (it was unreadable already) and is logged.
pub(super) async fn backfill_views(tx: &tokio_postgres::Transaction<'_>) -> Result<(), StoreError> {
    let tasks = tx.query("SELECT tid, id FROM radkit_tasks", &[]).await?;
    for task in &tasks {
        let tid: i64 = get(task, "tid")?;
        let id: String = get(task, "id")?;
        let rows = tx
            .query(
                "SELECT seq, at_ms, body FROM radkit_journal WHERE tid = $1 ORDER BY seq",
                &[&tid],
            )
            .await?;
        let records = match decode_rows(&id, &rows, 0) {
            Ok(records) => records,
            Err(e) => {
                tracing::warn!(task = %id, error = %e, "task view not filled: its journal does not decode");
                continue;
            }
        };
        let view = MemView::fold(&records);
        let message = view.status_message.as_ref().map(view::json).transpose()?;
        tx.execute(
            "UPDATE radkit_tasks SET status_message = $1, status_at_ms = $2, settled = $3
             WHERE tid = $4",
            &[&message, &view.status_at_ms, &view.settled, &tid],
        )
        .await?;
        for (seq, message) in &view.history {
            tx.execute(
                "INSERT INTO radkit_history (tid, seq, body) VALUES ($1, $2, $3)",
                &[&tid, &to_sql_int("seq", *seq)?, &view::json(message)?],
            )
            .await?;
        }
        for row in &view.artifacts {
            tx.execute(
                "INSERT INTO radkit_artifacts (tid, seq, pos, artifact_id, body) VALUES ($1, $2, $3, $4, $5)",
                &[
                    &tid,
                    &to_sql_int("seq", row.seq)?,
                    &to_sql_int("seq", row.pos)?,
                    &row.artifact.artifact_id,
                    &view::json(&row.artifact)?,
                ],
            )
            .await?;
        }
    }
    Ok(())
}
