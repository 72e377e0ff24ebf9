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
use deadpool_postgres::{Manager, ManagerConfig, Pool, QueueMode, RecyclingMethod};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::types::{FromSql, ToSql};
use tokio_postgres::{Client, Config, NoTls, Row, Statement};

use super::view::{self, MemView, TaskView};
use super::{
    describe, from_sql_int, sql_state_list, sql_terminal_states, to_sql_int, Append, BoxError,
    Encoded, Lease, Leases, Prune, Pruned, Store, StoreError, TaskQuery, TaskRecord,
    CREATION_TOKEN,
};
use crate::journal::{now_ms, JournalRecord};
use crate::model::TaskState;

const MAX_BATCH: usize = 512;

mod dispatch;
mod lease;
mod listen;
mod prune;
mod push;
mod schema;
mod write;

use lease::*;
use schema::*;
pub use write::APPEND_SQL;
use write::*;
pub(crate) use write::{error_text, rolled_back};

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
    stats: Arc<super::Commits>,
    /// The connection that hears of claimable work ([`Leases::wakeups`]).
    listener: Arc<listen::Listener>,
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

    /// A session set up as the store's writers set theirs up (`WRITER_SESSION`, the append
    /// statement prepared), for the test that checks the plan those sessions make; not part of
    /// the API.
    #[doc(hidden)]
    pub async fn writer_session(url: &str) -> Result<Client, StoreError> {
        let config = parse_url(url)?;
        Ok(prepared_writer(&config, url, None).await?.0)
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
            // The connection used last is used next: only a burst opens or wakes more. A statement
            // is prepared and planned per connection, and the server plans each anew for its
            // first five executions there (then keeps a generic plan) with caches that a new
            // backend fills as it goes; handed out in turn, every one of the eight stayed cold
            // (a worker's loads and lease statements were planned at nearly every execution).
            .queue_mode(QueueMode::Lifo)
            .build()
            .map_err(|e| StoreError::backend("building the postgres connection pool", e))?;
        let (tx, rx) = mpsc::unbounded_channel();
        let queue: Queue = Arc::new(tokio::sync::Mutex::new(rx));
        let mut first = Some(writer);
        let stats = Arc::new(super::Commits::default());
        let turns = Arc::new(write::Turns::default());
        for _ in 0..WRITERS {
            tokio::spawn(writer_loop(
                config.clone(),
                url.to_owned(),
                first.take(),
                queue.clone(),
                stats.clone(),
                turns.clone(),
            ));
        }
        Ok(PostgresStore {
            pool,
            renewer: Arc::new(Renewer {
                config: config.clone(),
                url: url.to_owned(),
                client: tokio::sync::Mutex::new(None),
            }),
            writer: tx,
            stats,
            listener: Arc::new(listen::Listener::new(config, url.to_owned())),
        })
    }

    /// Statements committed and appends in them, since connect.
    pub fn stats(&self) -> super::StoreStats {
        self.stats.stats()
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
        let mut replanned = false;
        loop {
            let (client, result) = statement(self.reader().await?).await;
            match result {
                Ok(value) => return Ok(value),
                Err(e) if !replanned && stale_statement(&e) => {
                    // The table changed under a statement prepared on this connection (a column's
                    // type altered by a newer version's migration) or the server forgot it:
                    // prepare again.
                    tracing::debug!(error = %describe(&e), "prepared statements of a pooled connection dropped");
                    client.statement_cache.clear();
                    replanned = true;
                }
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

    /// The rows of `sql` (see [`Self::retrying`]), prepared once per pooled connection: the first
    /// use parses and plans it there, every later one only binds and executes it (one round trip
    /// instead of two). Statements carry every value as a parameter, so their texts are a bounded
    /// set (a few per filter combination) and each connection's cache stays small.
    async fn rows(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        self.retrying(|client| async move {
            let result = match client.prepare_cached(sql).await {
                Ok(statement) => client.query(&statement, params).await,
                Err(e) => Err(e),
            };
            (client, result)
        })
        .await
    }

    /// How many rows `sql` changed, prepared as [`Self::rows`] prepares its statement.
    async fn exec(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, StoreError> {
        self.retrying(|client| async move {
            let result = match client.prepare_cached(sql).await {
                Ok(statement) => client.execute(&statement, params).await,
                Err(e) => Err(e),
            };
            (client, result)
        })
        .await
    }
}

/// `e` says a statement prepared on the connection no longer fits the tables (`cached plan must
/// not change result type`) or no longer exists there: preparing it again fixes both.
fn stale_statement(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    e.code().is_some_and(|code| {
        *code == SqlState::FEATURE_NOT_SUPPORTED || *code == SqlState::INVALID_SQL_STATEMENT_NAME
    })
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

/// A task's journal for replay: its first row (the creation) and the rows from its last
/// checkpoint on. The task's `tid` is looked up first and the journal read as index ranges of
/// `(tid, seq)`: a join of the two tables leaves the plan to the statistics, and while those are
/// young (a new database, a journal that grew since the last `ANALYZE`) Postgres picked a hash
/// join over a scan of the whole journal, 7.7 ms a load on average, 53 ms at worst, in
/// `bench concurrent --workers`.
pub const JOURNAL_FOR_REPLAY: &str =
    "WITH t AS MATERIALIZED (SELECT tid FROM radkit_tasks WHERE id = $1)
     SELECT seq, at_ms, body FROM radkit_journal WHERE tid = (SELECT tid FROM t) AND seq = 1
     UNION ALL
     SELECT seq, at_ms, body FROM radkit_journal
     WHERE tid = (SELECT tid FROM t) AND seq > 1
       AND seq >= (SELECT COALESCE(MAX(c.seq), 0) FROM radkit_journal c
                   WHERE c.tid = (SELECT tid FROM t) AND c.checkpoint)
     ORDER BY seq";

/// `appends` rows of a task's journal from the row holding entry `after_seq + 1` on: index
/// ranges of `(tid, seq)` however long the journal and whatever the statistics say (see
/// [`JOURNAL_FOR_REPLAY`]). Parameters: the task id, `after_seq`, the row limit.
pub const JOURNAL_PAGE: &str = "WITH t AS MATERIALIZED (SELECT tid FROM radkit_tasks WHERE id = $1)
     SELECT seq, at_ms, body FROM radkit_journal
     WHERE tid = (SELECT tid FROM t)
       AND seq >= COALESCE((SELECT MAX(c.seq) FROM radkit_journal c
                            WHERE c.tid = (SELECT tid FROM t) AND c.seq <= $2::bigint + 1), 0)
     ORDER BY seq LIMIT $3";

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
        let rows = self
            .rows(
                JOURNAL_PAGE,
                &[&task_id, &to_sql_int("seq", after_seq)?, &limit],
            )
            .await?;
        decode_rows(task_id, &rows, after_seq)
    }

    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        let rows = self.rows(JOURNAL_FOR_REPLAY, &[&task_id]).await?;
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
        if query.skip_idle_input {
            sql.push_str(&format!(
                " AND NOT (state = '{}' AND wake_at_ms IS NULL)",
                TaskState::InputRequired.as_str()
            ));
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
            Some(limit) => {
                params.push(Box::new(i64::try_from(limit).unwrap_or(i64::MAX)));
                sql.push_str(&format!(
                    " ORDER BY created_at_ms DESC, id DESC LIMIT ${}",
                    params.len()
                ));
            }
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
        let (filter, mut params) = view_filter(query);
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
        params.push(Box::new(i64::try_from(query.limit).unwrap_or(i64::MAX)));
        let rows = self
            .rows(
                &format!(
                    "SELECT id FROM radkit_tasks{page} ORDER BY status_at_ms DESC, id DESC LIMIT ${}",
                    params.len()
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

    async fn state_counts(
        &self,
        query: &super::ViewQuery,
    ) -> Result<Vec<(TaskState, u64)>, StoreError> {
        let (filter, params) = view_filter(query);
        let rows = self
            .rows(
                &format!("SELECT state, COUNT(*) AS n FROM radkit_tasks{filter} GROUP BY state"),
                &refs(&params),
            )
            .await?;
        rows.iter()
            .map(|row| {
                let state: &str = get(row, "state")?;
                let state = TaskState::parse(state).ok_or_else(|| StoreError::Column {
                    column: "state".into(),
                    source: format!("unknown task state `{state}`").into(),
                })?;
                Ok((state, get_u64(row, "n")?))
            })
            .collect()
    }

    async fn prune(&self, prune: &Prune) -> Result<Pruned, StoreError> {
        self.prune_finished(prune).await
    }

    fn commit_stats(&self) -> Option<super::StoreStats> {
        Some(self.stats())
    }

    fn leases(&self) -> Option<&dyn Leases> {
        Some(self)
    }

    fn dispatch(&self) -> Option<&dyn super::DispatchStore> {
        Some(self)
    }

    fn push(&self) -> Option<&dyn super::PushStore> {
        Some(self)
    }
}

/// Boxed parameters as the borrowed list a statement takes.
fn refs(params: &[Box<dyn ToSql + Sync + Send>]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// The `WHERE` clause of a [`super::ViewQuery`]'s filters (the cursor aside) and its parameters
/// (`$1`, `$2`, … in order): shared by `list_views` (the page and its count) and `state_counts`, so
/// that a filter added to the query applies to both.
fn view_filter(query: &super::ViewQuery) -> (String, Vec<Box<dyn ToSql + Sync + Send>>) {
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
    if let Some(t) = query.status_before_ms {
        params.push(Box::new(t));
        filter.push_str(&format!(" AND status_at_ms < ${}", params.len()));
    }
    if let Some(skill) = query.skill_id.clone() {
        params.push(Box::new(skill));
        filter.push_str(&format!(" AND skill_id = ${}", params.len()));
    }
    if let Some(prefix) = query.id_prefix.as_deref().filter(|p| !p.is_empty()) {
        if prefix.contains('\0') {
            // Postgres text cannot hold NUL, so no id has this prefix (and it cannot be sent).
            filter.push_str(" AND FALSE");
        } else {
            // A range of `radkit_tasks_by_id_c` (migration 6), as in `TaskQuery::id_prefix`.
            params.push(Box::new(prefix.to_owned()));
            filter.push_str(&format!(" AND id COLLATE \"C\" >= ${}", params.len()));
            if let Some(upper) = super::prefix_upper_bound(prefix) {
                params.push(Box::new(upper));
                filter.push_str(&format!(" AND id COLLATE \"C\" < ${}", params.len()));
            }
        }
    }
    (filter, params)
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

    /// Retention's queries repeat the predicate of the partial index they seek.
    #[test]
    fn a_prune_repeats_the_finished_index_predicate() {
        let predicate = format!("WHERE state IN {}", sql_terminal_states());
        let migration = MIGRATIONS
            .iter()
            .find(|m| m.contains("radkit_tasks_finished"))
            .expect("the migration of the finished-tasks index");
        assert!(migration.contains(&predicate), "{predicate}");
        for sql in [
            prune::delete_sql(true),
            prune::delete_sql(false),
            prune::compact_sql(),
        ] {
            assert!(
                sql.contains(&format!("{predicate} AND compacted = ")),
                "{sql}"
            );
        }
    }
}
