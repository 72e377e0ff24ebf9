//! `PostgresStore`: tasks and journals in PostgreSQL, for many workers on many machines.
//!
//! Appends go through one writer task that commits everything queued in one transaction (group
//! commit) with one multi-row `INSERT` for the journal rows of the whole batch. Each append locks its
//! task row (`FOR UPDATE`), checks the expected seq and, when the append carries a fencing token, that
//! the token is still the task's current one: a worker whose lease was taken over can no longer append.
//! Leases ([`Leases`]) are claimed with `FOR UPDATE SKIP LOCKED`. Schema changes are
//! versioned migrations applied at connect, one migrator at a time per schema (an advisory lock).
//!
//! Lock order: a statement that locks several task rows (the group-commit append, lease renewal, a
//! claim) locks them by `tid` (`ORDER BY tid FOR NO KEY UPDATE`) before it changes any, so two such
//! statements (a worker's renewal and its own append, say) at worst wait for each other and never
//! deadlock. Postgres breaks a deadlock only after `deadlock_timeout` (1 s by default) by aborting one
//! statement, and a renewal aborted that way can cost leases. Statements that lock one row (acquire,
//! release, a cancel request) cannot close a cycle. A statement that still loses a deadlock or a
//! serialization conflict (40P01, 40001) was rolled back whole and is run again
//! ([`StoreError::is_retryable`]).

use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::types::{FromSql, ToSql};
use tokio_postgres::{Client, Config, NoTls, Row, Statement};

use super::view::{self, MemView, TaskView};
use super::{
    describe, from_sql_int, sql_state_list, sql_terminal_states, to_sql_int, Append, BoxError,
    Encoded, Lease, Leases, Store, StoreError, TaskQuery, TaskRecord, CREATION_TOKEN,
};
use crate::journal::{now_ms, JournalRecord};
use crate::model::TaskState;

const MAX_BATCH: usize = 512;

/// Versioned migrations; `radkit_migrations` records the applied ones.
const MIGRATIONS: &[&str] = &[
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
];

mod push;

/// The migration after which existing tasks get their view ([`backfill_views`]).
const VIEW_MIGRATION: i32 = 8;

/// States in which a task without a timer is claimable work: the predicate of the
/// `radkit_tasks_runnable` index (migration 2), which a claim repeats so the planner uses it.
const CLAIMABLE: [TaskState; 2] = [TaskState::Submitted, TaskState::Working];

/// [`CREATION_TOKEN`] as stored (checked at compile time).
const CREATION_FENCE: i64 = {
    assert!(CREATION_TOKEN <= i64::MAX as u64);
    CREATION_TOKEN as i64
};

/// Column `name` of `row` as `T`: a `NULL` or a value of another type is a [`StoreError::Column`]
/// naming the column, never a panic.
fn get<'a, T: FromSql<'a>>(row: &'a Row, name: &'static str) -> Result<T, StoreError> {
    row.try_get(name).map_err(|e| StoreError::Column {
        column: name.into(),
        source: e.into(),
    })
}

/// Column `name` of `row`, a `BIGINT` that holds a `u64` (a seq or a token): a negative value is a
/// [`StoreError::Column`] too.
fn get_u64(row: &Row, name: &'static str) -> Result<u64, StoreError> {
    from_sql_int(name, get(row, name)?)
}

/// The session is gone: the server shut it down or the connection broke.
fn disconnected(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    e.is_closed()
        || e.code().is_some_and(|c| {
            *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CRASH_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW
        })
}

type Reply = oneshot::Sender<Result<(), StoreError>>;

/// A PostgreSQL-backed store. Cheap to clone.
#[derive(Clone)]
pub struct PostgresStore {
    /// Reads and lease operations (reconnects by itself).
    pool: Pool,
    /// Lease renewal's own connection (see [`Renewer`]).
    renewer: Arc<Renewer>,
    writer: mpsc::UnboundedSender<(Encoded, Reply)>,
    stats: Arc<Counters>,
}

#[derive(Default)]
struct Counters {
    batches: std::sync::atomic::AtomicU64,
    appends: std::sync::atomic::AtomicU64,
}

/// Connections for reads and leases.
const POOL_SIZE: usize = 8;

/// How long the writer's session may sit in an open transaction before the server ends it. Appends
/// are single statements (the server commits them without waiting for the client), but migrations run
/// in an explicit transaction under a table lock: a process frozen there (SIGSTOP, a VM pause) must not
/// block every other starter. Override with `options=-c idle_in_transaction_session_timeout=…` in the
/// URL.
const WRITER_IDLE_IN_TRANSACTION: &str = "1s";

/// The writer's own connection, reopened after it breaks (server restart, network, the timeout above).
async fn connect_writer(config: &Config, url: &str) -> Result<Client, StoreError> {
    let (client, connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| StoreError::backend(format!("connecting to {}", redact(url)), e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "postgres writer connection ended");
        }
    });
    if !url.contains("idle_in_transaction_session_timeout") {
        client
            .batch_execute(&format!(
                "SET idle_in_transaction_session_timeout = '{WRITER_IDLE_IN_TRANSACTION}'"
            ))
            .await?;
    }
    Ok(client)
}

#[cfg(feature = "testing")]
impl PostgresStore {
    /// Create a fresh schema in the database `url` names (tests, benchmarks): returns its name and a URL
    /// whose sessions work in it (`options=-csearch_path=<name>`).
    pub async fn create_schema(url: &str, prefix: &str) -> Result<(String, String), StoreError> {
        let config = parse_url(url)?;
        let client = connect_writer(&config, url).await?;
        let name = format!("{prefix}_{}", crate::model::new_id().replace('-', ""));
        client
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .await?;
        let sep = if url.contains('?') { '&' } else { '?' };
        Ok((
            name.clone(),
            format!("{url}{sep}options=-csearch_path%3D{name}"),
        ))
    }

    /// Drop a schema made by [`PostgresStore::create_schema`], with everything in it.
    pub async fn drop_schema(url: &str, name: &str) -> Result<(), StoreError> {
        let config = parse_url(url)?;
        let client = connect_writer(&config, url).await?;
        client
            .batch_execute(&format!("DROP SCHEMA {name} CASCADE"))
            .await?;
        Ok(())
    }
}

/// The connection settings in `url`.
fn parse_url(url: &str) -> Result<Config, StoreError> {
    Config::from_str(url)
        .map_err(|e| StoreError::backend(format!("parsing the Postgres URL {}", redact(url)), e))
}

/// The URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://…@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// The first key of the advisory lock migrations take (the second is the schema's name hashed), so
/// that it does not meet an application's own advisory locks on the same database: "radk".
const MIGRATION_LOCK: i32 = 0x7261_646b;

async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    migrate_to(client, MIGRATIONS.len()).await
}

/// Apply the migrations up to `target` (tests stop early to write rows in an old schema).
async fn migrate_to(client: &mut Client, target: usize) -> Result<(), StoreError> {
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
async fn backfill_views(tx: &tokio_postgres::Transaction<'_>) -> Result<(), StoreError> {
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

impl PostgresStore {
    /// Connect to `url` (`postgres://user@host:port/db`, libpq's key/value form also works), apply
    /// migrations and start the writer.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let config = parse_url(url)?;
        let mut writer = connect_writer(&config, url).await?;
        migrate(&mut writer).await?;
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .build()
            .map_err(|e| StoreError::backend("building the postgres connection pool", e))?;
        let (tx, rx) = mpsc::unbounded_channel();
        let queue: Queue = Arc::new(tokio::sync::Mutex::new(rx));
        let mut first = Some(writer);
        let stats = Arc::new(Counters::default());
        for _ in 0..WRITERS {
            tokio::spawn(writer_loop(
                config.clone(),
                url.to_owned(),
                first.take(),
                queue.clone(),
                stats.clone(),
            ));
        }
        Ok(PostgresStore {
            pool,
            renewer: Arc::new(Renewer {
                config,
                url: url.to_owned(),
                client: tokio::sync::Mutex::new(None),
            }),
            writer: tx,
            stats,
        })
    }

    /// Statements committed and appends in them, since connect.
    pub fn stats(&self) -> super::StoreStats {
        use std::sync::atomic::Ordering::Relaxed;
        super::StoreStats {
            batches: self.stats.batches.load(Relaxed),
            appends: self.stats.appends.load(Relaxed),
        }
    }

    async fn reader(&self) -> Result<deadpool_postgres::Object, StoreError> {
        Ok(self.pool.get().await?)
    }

    /// Run `statement` on a pooled connection. A connection the server closed (a restart, a
    /// failover, an administrator) is thrown away and the statement retried on the next one (at most
    /// once per pooled connection, then on a new one); a statement rolled back by a deadlock or a
    /// serialization conflict is run again after a short pause (up to [`ROUND_RETRIES`] times). Every
    /// statement run here is safe to repeat.
    async fn retrying<T, Fut>(
        &self,
        statement: impl Fn(deadpool_postgres::Object) -> Fut,
    ) -> Result<T, StoreError>
    where
        Fut: std::future::Future<
            Output = (deadpool_postgres::Object, Result<T, tokio_postgres::Error>),
        >,
    {
        let mut retries = 0;
        let mut conflicts = 0;
        loop {
            let (client, result) = statement(self.reader().await?).await;
            match result {
                Ok(value) => return Ok(value),
                Err(e) if conflicts < ROUND_RETRIES && rolled_back_by_conflict(&e) => {
                    conflicts += 1;
                    tracing::debug!(retries = conflicts, error = %describe(&e), "statement retried");
                    drop(client);
                    conflict_pause(conflicts).await;
                }
                Err(e) if retries <= POOL_SIZE && (client.is_closed() || disconnected(&e)) => {
                    tracing::warn!(error = %describe(&e), "postgres connection lost; retrying on a new one");
                    drop(deadpool_postgres::Object::take(client));
                    retries += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The rows of `sql` (see [`Self::retrying`]).
    async fn rows(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        self.retrying(|client| async move {
            let result = client.query(sql, params).await;
            (client, result)
        })
        .await
    }

    /// How many rows `sql` changed (see [`Self::retrying`]).
    async fn exec(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, StoreError> {
        self.retrying(|client| async move {
            let result = client.execute(sql, params).await;
            (client, result)
        })
        .await
    }
}

/// Lease renewal's connection, its own: a renewal never waits for a pooled connection behind the
/// reads of the very tasks whose leases it keeps. It is opened by the first renewal, on the runtime
/// that renews (the engine's lease keeper has a thread and a runtime of its own), and opened again
/// there when it broke.
struct Renewer {
    config: Config,
    url: String,
    client: tokio::sync::Mutex<Option<Client>>,
}

impl Renewer {
    /// The rows of `sql` on the renewal connection, `params` made afresh for each try (they hold
    /// the time): a broken connection is reopened once, a statement rolled back by a conflict run
    /// again (up to [`ROUND_RETRIES`] times).
    async fn rows<P>(&self, sql: &str, params: impl Fn() -> P) -> Result<Vec<Row>, StoreError>
    where
        P: AsRef<[Box<dyn ToSql + Sync + Send>]>,
    {
        let mut client = self.client.lock().await;
        let (mut reconnected, mut conflicts) = (false, 0);
        loop {
            let open = match client.take().filter(|c| !c.is_closed()) {
                Some(c) => c,
                None => connect_writer(&self.config, &self.url).await?,
            };
            let params = params();
            let refs: Vec<&(dyn ToSql + Sync)> = params
                .as_ref()
                .iter()
                .map(|p| &**p as &(dyn ToSql + Sync))
                .collect();
            match open.query(sql, &refs).await {
                Ok(rows) => {
                    *client = Some(open);
                    return Ok(rows);
                }
                Err(e) if conflicts < ROUND_RETRIES && rolled_back_by_conflict(&e) => {
                    *client = Some(open);
                    conflicts += 1;
                    conflict_pause(conflicts).await;
                }
                Err(e) if !reconnected && (open.is_closed() || disconnected(&e)) => {
                    tracing::warn!(error = %describe(&e), "postgres lease connection lost; reconnecting");
                    reconnected = true;
                }
                Err(e) => {
                    if !open.is_closed() {
                        *client = Some(open);
                    }
                    return Err(e.into());
                }
            }
        }
    }
}

/// Writer connections committing batches at once: while one waits for its commit to reach the disk,
/// the next batch is already on its way (the server merges their WAL flushes).
const WRITERS: usize = 2;

type Queue = Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<(Encoded, Reply)>>>;

/// One writer: take everything queued (up to [`MAX_BATCH`]), commit it, answer each caller.
async fn writer_loop(
    config: Config,
    url: String,
    client: Option<Client>,
    queue: Queue,
    stats: Arc<Counters>,
) {
    // Why the writer has no connection, for the appends it then fails.
    let mut not_connected: Option<Arc<StoreError>> = None;
    let mut client = match client {
        Some(c) => match prepared_writer(&config, &url, Some(c)).await {
            Ok(c) => Some(c),
            Err(e) => {
                not_connected = Some(Arc::new(e));
                None
            }
        },
        None => None,
    };
    loop {
        let batch = {
            let mut rx = queue.lock().await;
            let Some(first) = rx.recv().await else {
                return;
            };
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
            batch
        };
        if client.as_ref().is_none_or(|(c, _)| c.is_closed()) {
            client = match prepared_writer(&config, &url, None).await {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::error!(error = %e, "postgres writer cannot reconnect");
                    not_connected = Some(Arc::new(e));
                    None
                }
            };
        }
        // A failed batch fails each of its appends: their runs stop and are resumed from the journal
        // (by this worker or another), which holds exactly what was committed.
        let results = match client.as_ref() {
            Some((c, append)) => {
                let (results, broken) = commit_batch(c, append, &batch).await;
                if broken {
                    // Reconnect before the next batch.
                    client = None;
                }
                results
            }
            None => batch
                .iter()
                .map(|_| {
                    let why: BoxError = match &not_connected {
                        Some(e) => Box::new(e.clone()),
                        None => "no connection".into(),
                    };
                    Err(StoreError::backend("postgres writer is not connected", why))
                })
                .collect(),
        };
        stats
            .batches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        stats
            .appends
            .fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
        for ((_, reply), result) in batch.into_iter().zip(results) {
            let _ = reply.send(result);
        }
    }
}

/// A writer connection (`client`, or a new one) with the append statement prepared on it.
async fn prepared_writer(
    config: &Config,
    url: &str,
    client: Option<Client>,
) -> Result<(Client, Statement), StoreError> {
    let client = match client {
        Some(c) => c,
        None => connect_writer(config, url).await?,
    };
    let statement = client
        .prepare(APPEND_SQL)
        .await
        .map_err(|e| StoreError::backend("preparing the postgres append statement", e))?;
    Ok((client, statement))
}

/// Commit a batch: rounds in which each task appears once, each round one statement. A round that
/// fails fails its appends and every later one (earlier rounds stay committed); `true` when the
/// connection is gone.
async fn commit_batch(
    client: &Client,
    statement: &Statement,
    batch: &[(Encoded, Reply)],
) -> (Vec<Result<(), StoreError>>, bool) {
    let mut results: Vec<Option<Result<(), StoreError>>> = (0..batch.len()).map(|_| None).collect();
    let mut rest: Vec<usize> = (0..batch.len()).collect();
    while !rest.is_empty() {
        let mut seen = std::collections::HashSet::new();
        let (round, later): (Vec<usize>, Vec<usize>) = rest
            .iter()
            .partition(|i| seen.insert(batch[**i].0.append.task_id.as_str()));
        let appends: Vec<&Encoded> = round.iter().map(|i| &batch[*i].0).collect();
        // A round that lost a deadlock (against this or another worker's lease renewal, which
        // locks the same rows in another order) or a serialization conflict was rolled back whole:
        // run it again rather than fail its appends, whose runs would stop and be replayed.
        let mut retries = 0;
        let committed = loop {
            match commit_round(client, statement, &appends).await {
                Err(e) if rolled_back_by_conflict(&e) && retries < ROUND_RETRIES => {
                    retries += 1;
                    tracing::debug!(retries, error = %describe(&e), "append round retried");
                    conflict_pause(retries).await;
                }
                other => break other,
            }
        };
        match committed {
            Ok(round_results) => {
                for (i, result) in round.iter().zip(round_results) {
                    results[*i] = Some(result);
                }
            }
            Err(e) => {
                let broken = client.is_closed() || disconnected(&e);
                // This round and every later one fail of the same error.
                let e = Arc::new(e);
                let results = results
                    .into_iter()
                    .map(|r| {
                        r.unwrap_or_else(|| {
                            Err(StoreError::backend(
                                "appending to postgres",
                                Box::new(e.clone()) as BoxError,
                            ))
                        })
                    })
                    .collect();
                return (results, broken);
            }
        }
        rest = later;
    }
    let results = results
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                Err(StoreError::backend(
                    "postgres writer",
                    "append not attempted",
                ))
            })
        })
        .collect();
    (results, false)
}

/// Times a round rolled back by a deadlock or a serialization failure is run again.
const ROUND_RETRIES: u32 = 8;

/// The statement was rolled back whole because it lost a deadlock or a serialization conflict, so
/// running it again is safe.
fn rolled_back_by_conflict(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(code_rolled_back)
}

/// The statement lost a deadlock or a serialization conflict, so it was rolled back whole.
fn code_rolled_back(code: &tokio_postgres::error::SqlState) -> bool {
    use tokio_postgres::error::SqlState;
    *code == SqlState::T_R_DEADLOCK_DETECTED || *code == SqlState::T_R_SERIALIZATION_FAILURE
}

/// `error` or one of its causes is a Postgres server error saying the statement was rolled back
/// whole by a conflict ([`StoreError::is_retryable`]).
pub(crate) fn rolled_back(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(db) = e.downcast_ref::<tokio_postgres::error::DbError>() {
            return code_rolled_back(db.code());
        }
        next = e.source();
    }
    false
}

/// The text [`describe`] gives one error of a chain when it is Postgres's: a server error with its
/// severity, SQLSTATE, message, detail, hint and context; nothing for the error that wraps one
/// (tokio-postgres's "db error"); `None` for any other error.
pub(crate) fn error_text(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    use tokio_postgres::error::DbError;
    if let Some(db) = e.downcast_ref::<DbError>() {
        let mut text = format!(
            "postgres {} {}: {}",
            db.severity(),
            db.code().code(),
            db.message()
        );
        for (label, part) in [
            ("detail", db.detail()),
            ("hint", db.hint()),
            ("where", db.where_()),
        ] {
            if let Some(part) = part.filter(|p| !p.is_empty()) {
                text.push_str(&format!(" ({label}: {part})"));
            }
        }
        return Some(text);
    }
    e.source()
        .is_some_and(|s| s.is::<DbError>())
        .then(String::new)
}

/// A pause before running again a statement that lost a conflict: 2, 4, … 64 ms after the `retries`th
/// loss, plus as much jitter, so that the two sides of a conflict do not meet again.
async fn conflict_pause(retries: u32) {
    let pause = 1u64 << retries.clamp(1, 6);
    tokio::time::sleep(std::time::Duration::from_millis(
        pause + fastrand::u64(0..=pause),
    ))
    .await;
}

/// One statement, so one round trip and one implicit transaction, whatever the round's size: `locked`
/// takes the row locks of the tasks to update in `tid` order (see the module docs), the
/// `UPDATE` checks each task's expected seq and fencing token under the row lock (a row another
/// transaction holds is re-checked once it is free), the `INSERT` creates new tasks, and the journal
/// rows of exactly the appends that passed are inserted.
const APPEND_SQL: &str = "
WITH locked AS MATERIALIZED (
  SELECT tid FROM radkit_tasks WHERE id = ANY($2::text[]) ORDER BY tid FOR NO KEY UPDATE
), upd AS (
  UPDATE radkit_tasks t
  SET last_seq = v.last_seq, updated_at_ms = $1,
      state = COALESCE(v.state, t.state),
      wake_at_ms = CASE WHEN v.set_wake THEN v.wake ELSE t.wake_at_ms END,
      status_message = CASE WHEN NOT v.touched THEN t.status_message
                            WHEN v.unless_state_was IS NOT NULL AND t.state <> v.unless_state_was
                              THEN NULL
                            WHEN v.set_message THEN v.message ELSE t.status_message END,
      status_at_ms = CASE WHEN v.touched THEN $1 ELSE t.status_at_ms END,
      settled = COALESCE(v.settled, t.settled),
      waits_on_call = COALESCE(v.waits_on_call, t.waits_on_call)
  FROM locked,
       UNNEST($2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[], $7::bool[], $8::bigint[],
              $26::bool[], $27::text[], $28::bool[], $29::text[], $40::bool[], $42::bool[])
       AS v(id, first_seq, last_seq, fence, state, set_wake, wake, touched, unless_state_was,
            set_message, message, settled, waits_on_call)
  WHERE t.tid = locked.tid AND t.id = v.id AND t.last_seq = v.first_seq - 1
    AND (v.fence IS NULL OR t.fence = v.fence)
  RETURNING t.tid, t.id
), ins AS (
  INSERT INTO radkit_tasks (id, context_id, skill_id, skill_version, principal, state, created_at_ms,
                            updated_at_ms, wake_at_ms, last_seq, lease_owner, lease_expires_ms, fence,
                            status_message, status_at_ms, settled, waits_on_call)
  SELECT c.id, c.context_id, c.skill_id, c.skill_version, c.principal, c.state, c.created_at_ms, $1,
         c.wake, c.last_seq, c.owner, c.expires, c.fence, c.message,
         CASE WHEN c.touched THEN $1 END, COALESCE(c.settled, FALSE), c.waits_on_call
  FROM UNNEST($9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
              $15::bigint[], $16::bigint[], $17::bigint[], $18::text[], $19::bigint[], $20::bigint[],
              $30::text[], $31::bool[], $41::bool[], $43::bool[])
       AS c(id, context_id, skill_id, skill_version, principal, state, created_at_ms, wake, last_seq,
            owner, expires, fence, message, touched, settled, waits_on_call)
  ON CONFLICT (id) DO NOTHING
  RETURNING tid, id
), done AS (
  SELECT tid, id FROM upd UNION ALL SELECT tid, id FROM ins
), journal AS (
  INSERT INTO radkit_journal (tid, seq, last_seq, at_ms, checkpoint, body)
  SELECT done.tid, j.seq, j.last_seq, $1, j.checkpoint, j.body
  FROM UNNEST($21::text[], $22::bigint[], $25::bigint[], $23::bool[], $24::text[])
       AS j(id, seq, last_seq, checkpoint, body)
  JOIN done ON done.id = j.id
), history AS (
  INSERT INTO radkit_history (tid, seq, body)
  SELECT done.tid, h.seq, h.body
  FROM UNNEST($32::text[], $33::bigint[], $34::text[]) AS h(id, seq, body)
  JOIN done ON done.id = h.id
), replaced AS (
  DELETE FROM radkit_artifacts a
  USING UNNEST($35::text[], $37::text[], $38::bool[]) AS r(id, artifact_id, replaces), done
  WHERE r.replaces AND done.id = r.id AND a.tid = done.tid AND a.artifact_id = r.artifact_id
), artifacts AS (
  INSERT INTO radkit_artifacts (tid, seq, pos, artifact_id, body)
  SELECT done.tid, p.seq,
         COALESCE((SELECT MIN(a.pos) FROM radkit_artifacts a
                   WHERE a.tid = done.tid AND a.artifact_id = p.artifact_id), p.seq),
         p.artifact_id, p.body
  FROM UNNEST($35::text[], $36::bigint[], $37::text[], $39::text[]) AS p(id, seq, artifact_id, body)
  JOIN done ON done.id = p.id
)
SELECT id FROM done";

async fn commit_round(
    client: &Client,
    statement: &Statement,
    round: &[&Encoded],
) -> Result<Vec<Result<(), StoreError>>, tokio_postgres::Error> {
    let now = now_ms();
    // Updates.
    let mut u_id = Vec::new();
    let mut u_first = Vec::new();
    let mut u_last = Vec::new();
    let mut u_fence: Vec<Option<i64>> = Vec::new();
    let mut u_state: Vec<Option<&str>> = Vec::new();
    let mut u_set_wake = Vec::new();
    let mut u_wake: Vec<Option<i64>> = Vec::new();
    let mut u_waits: Vec<Option<bool>> = Vec::new();
    // Creates.
    let mut c_id = Vec::new();
    let mut c_context = Vec::new();
    let mut c_skill = Vec::new();
    let mut c_version = Vec::new();
    let mut c_principal: Vec<Option<&str>> = Vec::new();
    let mut c_state = Vec::new();
    let mut c_created = Vec::new();
    let mut c_wake: Vec<Option<i64>> = Vec::new();
    let mut c_last = Vec::new();
    let mut c_owner: Vec<Option<&str>> = Vec::new();
    let mut c_expires: Vec<Option<i64>> = Vec::new();
    let mut c_fence = Vec::new();
    let mut c_waits: Vec<bool> = Vec::new();
    // Journal rows: one per append.
    let mut j_id = Vec::new();
    let mut j_seq = Vec::new();
    let mut j_last: Vec<Option<i64>> = Vec::new();
    let mut j_checkpoint: Vec<bool> = Vec::new();
    let mut j_body: Vec<&str> = Vec::new();
    // Views: the status change of each update and create, history rows and artifact pieces.
    let mut u_touched = Vec::new();
    let mut u_unless: Vec<Option<&str>> = Vec::new();
    let mut u_set = Vec::new();
    let mut u_message: Vec<Option<&str>> = Vec::new();
    let mut c_message: Vec<Option<&str>> = Vec::new();
    let mut c_touched = Vec::new();
    let mut u_settled: Vec<Option<bool>> = Vec::new();
    let mut c_settled: Vec<Option<bool>> = Vec::new();
    let mut h_id = Vec::new();
    let mut h_seq = Vec::new();
    let mut h_body: Vec<&str> = Vec::new();
    let mut a_id = Vec::new();
    let mut a_seq = Vec::new();
    let mut a_artifact: Vec<&str> = Vec::new();
    let mut a_replaces = Vec::new();
    let mut a_body: Vec<&str> = Vec::new();
    let mut refused: Vec<Option<StoreError>> = Vec::with_capacity(round.len());
    for encoded in round {
        let append = &encoded.append;
        let last_seq = encoded.last_seq;
        let fence = match append
            .fence
            .map(|f| to_sql_int("fencing token", f))
            .transpose()
        {
            Ok(fence) => fence,
            Err(e) => {
                refused.push(Some(e));
                continue;
            }
        };
        match &append.create {
            Some(record) if append.first_seq == 1 && record.id == append.task_id => {
                c_id.push(record.id.as_str());
                c_context.push(record.context_id.as_str());
                c_skill.push(record.skill_id.as_str());
                c_version.push(record.skill_version.as_str());
                c_principal.push(record.principal.as_deref());
                c_state.push(append.state.unwrap_or(record.state).as_str());
                c_created.push(record.created_at_ms);
                c_wake.push(match append.wake_at_ms {
                    Some(wake) => wake,
                    None => record.wake_at_ms,
                });
                c_last.push(last_seq);
                c_owner.push(append.lease.as_ref().map(|l| l.owner.as_str()));
                c_expires.push(append.lease.as_ref().map(|l| now.saturating_add(l.ttl_ms)));
                c_fence.push(if append.lease.is_some() {
                    CREATION_FENCE
                } else {
                    0
                });
                c_message.push(encoded.view.message.as_deref());
                c_touched.push(encoded.view.touched);
                c_settled.push(encoded.view.settled);
                c_waits.push(append.waits_on_call.unwrap_or(record.waits_on_call));
            }
            Some(_) => {
                refused.push(Some(StoreError::Conflict {
                    task_id: append.task_id.clone(),
                    expected: 1,
                    got: append.first_seq,
                }));
                continue;
            }
            None => {
                u_id.push(append.task_id.as_str());
                u_first.push(encoded.first_seq);
                u_last.push(last_seq);
                u_fence.push(fence);
                u_state.push(append.state.map(|s| s.as_str()));
                u_set_wake.push(append.wake_at_ms.is_some());
                u_wake.push(append.wake_at_ms.flatten());
                u_waits.push(append.waits_on_call);
                u_touched.push(encoded.view.touched);
                u_unless.push(encoded.view.unless_state_was);
                u_set.push(encoded.view.set);
                u_message.push(encoded.view.message.as_deref());
                u_settled.push(encoded.view.settled);
            }
        }
        for (seq, body) in &encoded.view.history {
            h_id.push(append.task_id.as_str());
            h_seq.push(*seq);
            h_body.push(body.as_str());
        }
        for (seq, artifact_id, replaces, body) in &encoded.view.artifacts {
            a_id.push(append.task_id.as_str());
            a_seq.push(*seq);
            a_artifact.push(artifact_id.as_str());
            a_replaces.push(*replaces);
            a_body.push(body.as_str());
        }
        refused.push(None);
        j_id.push(append.task_id.as_str());
        j_seq.push(encoded.first_seq);
        j_last.push(encoded.last_seq_column());
        j_checkpoint.push(encoded.checkpoint);
        j_body.push(encoded.body.as_str());
    }
    let params: [&(dyn ToSql + Sync); 43] = [
        &now,
        &u_id,
        &u_first,
        &u_last,
        &u_fence,
        &u_state,
        &u_set_wake,
        &u_wake,
        &c_id,
        &c_context,
        &c_skill,
        &c_version,
        &c_principal,
        &c_state,
        &c_created,
        &c_wake,
        &c_last,
        &c_owner,
        &c_expires,
        &c_fence,
        &j_id,
        &j_seq,
        &j_checkpoint,
        &j_body,
        &j_last,
        &u_touched,
        &u_unless,
        &u_set,
        &u_message,
        &c_message,
        &c_touched,
        &h_id,
        &h_seq,
        &h_body,
        &a_id,
        &a_seq,
        &a_artifact,
        &a_replaces,
        &a_body,
        &u_settled,
        &c_settled,
        &u_waits,
        &c_waits,
    ];
    let committed = client.query(statement, &params).await?;
    // The statement has committed: an unreadable answer fails the round's appends, whose runs then
    // resume from the journal, which holds what was committed.
    let done = match committed
        .iter()
        .map(|r| get::<String>(r, "id"))
        .collect::<Result<std::collections::HashSet<String>, _>>()
    {
        Ok(done) => done,
        Err(e) => {
            let e = Arc::new(e);
            return Ok(round
                .iter()
                .map(|_| {
                    Err(StoreError::backend(
                        "reading which appends postgres committed",
                        Box::new(e.clone()) as BoxError,
                    ))
                })
                .collect());
        }
    };
    // Why the others were refused: read their rows now (rare; only to name the error).
    let failed: Vec<&str> = round
        .iter()
        .zip(&refused)
        .filter(|(e, r)| r.is_none() && !done.contains(&e.append.task_id))
        .map(|(e, _)| e.append.task_id.as_str())
        .collect();
    let mut rows: std::collections::HashMap<String, Result<(u64, u64), StoreError>> =
        std::collections::HashMap::new();
    if !failed.is_empty() {
        match client
            .query(
                "SELECT id, last_seq, fence FROM radkit_tasks WHERE id = ANY($1)",
                &[&failed],
            )
            .await
        {
            Ok(found) => {
                for r in found {
                    match get::<String>(&r, "id") {
                        Ok(id) => {
                            let position = get_u64(&r, "last_seq")
                                .and_then(|last| Ok((last, get_u64(&r, "fence")?)));
                            rows.insert(id, position);
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "could not read why appends were refused")
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not read why appends were refused"),
        }
    }
    Ok(round
        .iter()
        .zip(refused)
        .map(|(encoded, refused)| {
            let append = &encoded.append;
            if let Some(error) = refused {
                return Err(error);
            }
            if done.contains(&append.task_id) {
                return Ok(());
            }
            let conflict = |expected| StoreError::Conflict {
                task_id: append.task_id.clone(),
                expected,
                got: append.first_seq,
            };
            match (rows.remove(&append.task_id), append.fence) {
                _ if append.create.is_some() => Err(conflict(0)),
                (Some(Err(unreadable)), _) => Err(unreadable),
                (Some(Ok((_, fence))), Some(token)) if fence != token => Err(StoreError::Fenced {
                    task_id: append.task_id.clone(),
                    token,
                }),
                (Some(Ok((last, _))), _) => Err(conflict(last + 1)),
                (None, _) => Err(conflict(0)),
            }
        })
        .collect())
}

/// A task row selected with [`TASK_COLUMNS`].
fn row_to_task(r: &Row) -> Result<TaskRecord, StoreError> {
    let id: String = get(r, "id")?;
    let state: &str = get(r, "state")?;
    let state = TaskState::parse(state).ok_or_else(|| StoreError::Corrupt {
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
        last_seq: get_u64(r, "last_seq")?,
    })
}

const TASK_COLUMNS: &str = "id, context_id, skill_id, skill_version, principal, state, created_at_ms, updated_at_ms, wake_at_ms, waits_on_call, last_seq";

#[async_trait]
impl Store for PostgresStore {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
        let encoded = Encoded::new(append)?;
        let (reply, answer) = oneshot::channel();
        self.writer
            .send((encoded, reply))
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    async fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let row = self
            .rows(
                &format!("SELECT {TASK_COLUMNS} FROM radkit_tasks WHERE id = $1"),
                &[&task_id],
            )
            .await?
            .into_iter()
            .next();
        row.as_ref().map(row_to_task).transpose()
    }

    async fn task_view(
        &self,
        task_id: &str,
        history: Option<usize>,
    ) -> Result<Option<TaskView>, StoreError> {
        let limit = history.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        // One statement, so one snapshot: the row, the newest `limit` history messages (all when
        // NULL) and the artifact pieces in (pos, seq) order.
        let rows = self
            .rows(
                &format!(
                    "SELECT {TASK_COLUMNS}, status_message, status_at_ms, settled,
                       ARRAY(SELECT body FROM (SELECT seq, body FROM radkit_history h
                                               WHERE h.tid = t.tid ORDER BY seq DESC LIMIT $2) n
                             ORDER BY seq) AS history,
                       ARRAY(SELECT pos FROM radkit_artifacts a WHERE a.tid = t.tid
                             ORDER BY pos, seq) AS artifact_pos,
                       ARRAY(SELECT body FROM radkit_artifacts a WHERE a.tid = t.tid
                             ORDER BY pos, seq) AS artifact_body
                     FROM radkit_tasks t WHERE id = $1"
                ),
                &[&task_id, &limit],
            )
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let history: Vec<&str> = get(row, "history")?;
        let positions: Vec<i64> = get(row, "artifact_pos")?;
        let bodies: Vec<&str> = get(row, "artifact_body")?;
        let message: Option<&str> = get(row, "status_message")?;
        let mut pieces = Vec::with_capacity(bodies.len());
        for (pos, body) in positions.into_iter().zip(bodies) {
            pieces.push((
                from_sql_int("pos", pos)?,
                view::decode(task_id, "an artifact", body)?,
            ));
        }
        Ok(Some(TaskView {
            record: row_to_task(row)?,
            status_message: message
                .map(|m| view::decode(task_id, "the status message", m))
                .transpose()?,
            status_at_ms: get::<Option<i64>>(row, "status_at_ms")?.unwrap_or_default(),
            history: history
                .into_iter()
                .map(|m| view::decode(task_id, "a history message", m))
                .collect::<Result<_, _>>()?,
            artifacts: view::join_pieces(pieces),
            settled: get(row, "settled")?,
        }))
    }

    async fn journal(
        &self,
        task_id: &str,
        after_seq: u64,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        // The whole rest: a page without a limit.
        self.journal_page(task_id, after_seq, usize::MAX).await
    }

    async fn journal_page(
        &self,
        task_id: &str,
        after_seq: u64,
        appends: usize,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        let limit = i64::try_from(appends.max(1)).unwrap_or(i64::MAX);
        // From the row holding entry `after_seq + 1` on, `appends` rows: an index range, however
        // long the journal.
        let rows = self
            .rows(
                "SELECT j.seq, j.at_ms, j.body FROM radkit_journal j JOIN radkit_tasks t ON t.tid = j.tid
                 WHERE t.id = $1
                   AND j.seq >= COALESCE((SELECT MAX(c.seq) FROM radkit_journal c
                                          WHERE c.tid = t.tid AND c.seq <= $2::bigint + 1), 0)
                 ORDER BY j.seq LIMIT $3",
                &[&task_id, &to_sql_int("seq", after_seq)?, &limit],
            )
            .await?;
        decode_rows(task_id, &rows, after_seq)
    }

    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        let rows = self
            .rows(
                "SELECT j.seq, j.at_ms, j.body FROM radkit_journal j
                 JOIN radkit_tasks t ON t.tid = j.tid
                 WHERE t.id = $1
                   AND (j.seq = 1 OR j.seq >= (SELECT COALESCE(MAX(c.seq), 0) FROM radkit_journal c
                                               WHERE c.tid = t.tid AND c.checkpoint))
                 ORDER BY j.seq",
                &[&task_id],
            )
            .await?;
        decode_rows(task_id, &rows, 0)
    }

    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        let mut sql = format!("SELECT {TASK_COLUMNS} FROM radkit_tasks WHERE TRUE");
        let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
        if query.non_terminal {
            sql.push_str(" AND state NOT IN ");
            sql.push_str(sql_terminal_states());
        }
        if let Some(p) = query.principal.clone() {
            params.push(Box::new(p));
            sql.push_str(&format!(" AND principal = ${}", params.len()));
        }
        if let Some(t) = query.wake_due_ms {
            params.push(Box::new(t));
            sql.push_str(&format!(
                " AND wake_at_ms IS NOT NULL AND wake_at_ms <= ${}",
                params.len()
            ));
        }
        if query.waits_on_call {
            // `radkit_tasks_waiting_on_calls` (migration 11).
            sql.push_str(" AND waits_on_call");
        }
        if let Some(prefix) = query.id_prefix.as_deref().filter(|p| !p.is_empty()) {
            if prefix.contains('\0') {
                // Postgres text cannot hold NUL, so no id has this prefix (and it cannot be sent).
                return Ok(Vec::new());
            }
            // A range of `radkit_tasks_by_id_c` (migration 6): in "C", ids sort by UTF-8 bytes.
            params.push(Box::new(prefix.to_owned()));
            sql.push_str(&format!(" AND id COLLATE \"C\" >= ${}", params.len()));
            if let Some(upper) = super::prefix_upper_bound(prefix) {
                params.push(Box::new(upper));
                sql.push_str(&format!(" AND id COLLATE \"C\" < ${}", params.len()));
            }
        }
        match query.limit {
            Some(limit) => sql.push_str(&format!(
                " ORDER BY created_at_ms DESC, id DESC LIMIT {limit}"
            )),
            None => sql.push_str(" ORDER BY created_at_ms, id"),
        }
        let refs: Vec<&(dyn ToSql + Sync)> = params
            .iter()
            .map(|p| p.as_ref() as &(dyn ToSql + Sync))
            .collect();
        let rows = self.rows(sql.as_str(), &refs).await?;
        rows.iter().map(row_to_task).collect()
    }

    /// The count and the page's ids from the status-time index, then each view (its own snapshot:
    /// a task that changes between the two reads shows as it is when its view is read).
    async fn list_views(&self, query: &super::ViewQuery) -> Result<super::ViewPage, StoreError> {
        let mut filter = String::from(" WHERE status_at_ms IS NOT NULL");
        let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
        if let Some(p) = query.principal.clone() {
            params.push(Box::new(p));
            filter.push_str(&format!(" AND principal = ${}", params.len()));
        }
        if let Some(c) = query.context_id.clone() {
            params.push(Box::new(c));
            filter.push_str(&format!(" AND context_id = ${}", params.len()));
        }
        if let Some(state) = query.state {
            params.push(Box::new(state.as_str().to_owned()));
            filter.push_str(&format!(" AND state = ${}", params.len()));
        }
        if let Some(t) = query.status_since_ms {
            params.push(Box::new(t));
            filter.push_str(&format!(" AND status_at_ms >= ${}", params.len()));
        }
        fn refs(params: &[Box<dyn ToSql + Sync + Send>]) -> Vec<&(dyn ToSql + Sync)> {
            params
                .iter()
                .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                .collect()
        }
        let count = self
            .rows(
                &format!("SELECT COUNT(*) AS total FROM radkit_tasks{filter}"),
                &refs(&params),
            )
            .await?;
        let total: i64 = match count.first() {
            Some(row) => get(row, "total")?,
            None => 0,
        };
        let mut page = filter;
        if let Some((at, id)) = query.after.clone() {
            params.push(Box::new(at));
            let at = params.len();
            params.push(Box::new(id));
            page.push_str(&format!(
                " AND (status_at_ms, id) < (${at}, ${})",
                params.len()
            ));
        }
        let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
        let rows = self
            .rows(
                &format!(
                    "SELECT id FROM radkit_tasks{page} ORDER BY status_at_ms DESC, id DESC LIMIT {limit}"
                ),
                &refs(&params),
            )
            .await?;
        let mut views = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: String = get(row, "id")?;
            if let Some(view) = self.task_view(&id, query.history).await? {
                views.push(view);
            }
        }
        Ok(super::ViewPage {
            views,
            total: u64::try_from(total).unwrap_or(0),
        })
    }

    fn leases(&self) -> Option<&dyn Leases> {
        Some(self)
    }

    fn push(&self) -> Option<&dyn super::PushStore> {
        Some(self)
    }
}

/// Journal rows `(seq, at_ms, body)` to the records after `after_seq`.
fn decode_rows(
    task_id: &str,
    rows: &[Row],
    after_seq: u64,
) -> Result<Vec<JournalRecord>, StoreError> {
    let mut records = Vec::new();
    for r in rows {
        let seq = get_u64(r, "seq")?;
        let at_ms: i64 = get(r, "at_ms")?;
        let body: &str = get(r, "body")?;
        super::decode_row(task_id, seq, at_ms, body, after_seq, &mut records)?;
    }
    Ok(records)
}

/// A lease row `(id, fence, cancel_requested)`.
fn row_to_lease(r: &Row) -> Result<Lease, StoreError> {
    Ok(Lease {
        task_id: get(r, "id")?,
        token: get_u64(r, "fence")?,
        cancel_requested: get(r, "cancel_requested")?,
    })
}

#[async_trait]
impl Leases for PostgresStore {
    async fn claim(
        &self,
        owner: &str,
        skills: &[(String, String)],
        held: &[String],
        ttl_ms: i64,
        limit: usize,
    ) -> Result<Vec<Lease>, StoreError> {
        let now = now_ms();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let skill_ids: Vec<&str> = skills.iter().map(|(id, _)| id.as_str()).collect();
        let versions: Vec<&str> = skills.iter().map(|(_, v)| v.as_str()).collect();
        let rows = self.rows(&format!(
                    "UPDATE radkit_tasks SET lease_owner = $1, lease_expires_ms = $2, fence = fence + 1
                     WHERE tid IN (
                        SELECT tid FROM radkit_tasks
                        WHERE ((state IN {claimable} AND wake_at_ms IS NULL)
                               OR wake_at_ms <= $3 OR cancel_requested)
                          AND state NOT IN {terminal}
                          AND (lease_expires_ms IS NULL OR lease_expires_ms < $3)
                          AND (skill_id, skill_version) IN
                              (SELECT * FROM UNNEST($5::text[], $6::text[]))
                          AND NOT (id = ANY($7::text[]))
                        ORDER BY tid LIMIT $4 FOR UPDATE SKIP LOCKED)
                     RETURNING id, fence, cancel_requested",
                    claimable = sql_state_list(&CLAIMABLE),
                    terminal = sql_terminal_states(),
                ), &[&owner, &now.saturating_add(ttl_ms), &now, &limit, &skill_ids, &versions, &held]).await?;
        rows.iter().map(row_to_lease).collect()
    }

    async fn acquire(
        &self,
        owner: &str,
        task_id: &str,
        ttl_ms: i64,
    ) -> Result<Option<Lease>, StoreError> {
        let now = now_ms();
        let row = self.rows(&format!(
                    "UPDATE radkit_tasks SET lease_owner = $1, lease_expires_ms = $2, fence = fence + 1
                     WHERE id = $3 AND state NOT IN {terminal}
                       AND (lease_owner IS NULL OR lease_owner = $1 OR lease_expires_ms < $4)
                     RETURNING id, fence, cancel_requested",
                    terminal = sql_terminal_states(),
                ), &[&owner, &now.saturating_add(ttl_ms), &task_id, &now]).await?.into_iter().next();
        row.as_ref().map(row_to_lease).transpose()
    }

    async fn renew(
        &self,
        owner: &str,
        held: &[(String, u64)],
        ttl_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        if held.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = held.iter().map(|(id, _)| id.as_str()).collect();
        let tokens = held
            .iter()
            .map(|(_, t)| to_sql_int("fencing token", *t))
            .collect::<Result<Vec<i64>, _>>()?;
        let ids: Vec<String> = ids.into_iter().map(str::to_owned).collect();
        let owner = owner.to_owned();
        // The rows are locked in `tid` order first (see the module docs): the ids come in the order of
        // the engine's hash map. On the renewal's own connection ([`Renewer`]); the expiry is
        // computed as each try is sent.
        let rows = self
            .renewer
            .rows(
                "WITH locked AS MATERIALIZED (
                    SELECT t.tid FROM radkit_tasks t
                    JOIN UNNEST($2::text[], $3::bigint[]) AS v(id, fence)
                      ON t.id = v.id AND t.fence = v.fence
                    WHERE t.lease_owner = $4
                    ORDER BY t.tid FOR NO KEY UPDATE OF t
                 )
                 UPDATE radkit_tasks t SET lease_expires_ms = $1
                 FROM locked WHERE t.tid = locked.tid
                 RETURNING t.id",
                || -> [Box<dyn ToSql + Sync + Send>; 4] {
                    [
                        Box::new(now_ms().saturating_add(ttl_ms)),
                        Box::new(ids.clone()),
                        Box::new(tokens.clone()),
                        Box::new(owner.clone()),
                    ]
                },
            )
            .await?;
        let kept = rows
            .iter()
            .map(|r| get::<String>(r, "id"))
            .collect::<Result<std::collections::HashSet<String>, _>>()?;
        Ok(held
            .iter()
            .filter(|(id, _)| !kept.contains(id))
            .map(|(id, _)| id.clone())
            .collect())
    }

    async fn holds(&self, owner: &str, task_id: &str, token: u64) -> Result<bool, StoreError> {
        let rows = self
            .rows(
                "SELECT 1 AS held FROM radkit_tasks
                 WHERE id = $1 AND lease_owner = $2 AND fence = $3 AND lease_expires_ms > $4",
                &[
                    &task_id,
                    &owner,
                    &to_sql_int("fencing token", token)?,
                    &now_ms(),
                ],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    async fn release(&self, owner: &str, task_id: &str, token: u64) -> Result<(), StoreError> {
        self.exec(
            "UPDATE radkit_tasks SET lease_owner = NULL, lease_expires_ms = NULL
                 WHERE id = $1 AND lease_owner = $2 AND fence = $3",
            &[&task_id, &owner, &to_sql_int("fencing token", token)?],
        )
        .await?;
        Ok(())
    }

    async fn request_cancel(&self, task_id: &str) -> Result<(), StoreError> {
        self.exec(
            "UPDATE radkit_tasks SET cancel_requested = TRUE WHERE id = $1",
            &[&task_id],
        )
        .await?;
        Ok(())
    }

    async fn cancel_requests(&self, owner: &str) -> Result<Vec<String>, StoreError> {
        let rows = self
            .rows(
                &format!(
                    "SELECT id FROM radkit_tasks
                     WHERE lease_owner = $1 AND cancel_requested AND state NOT IN {}",
                    sql_terminal_states()
                ),
                &[&owner],
            )
            .await?;
        rows.iter().map(|r| get(r, "id")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_repeats_the_runnable_index_predicate() {
        let predicate = format!(
            "WHERE state IN {} OR wake_at_ms IS NOT NULL OR cancel_requested",
            sql_state_list(&CLAIMABLE)
        );
        assert!(MIGRATIONS[1].contains(&predicate), "{predicate}");
    }
}
