//! `PostgresStore`: tasks and journals in PostgreSQL, for many workers on many machines.
//!
//! Appends go through one writer task that commits everything queued in one transaction (group
//! commit) with one multi-row `INSERT` for the journal rows of the whole batch. Each append locks its
//! task row (`FOR UPDATE`), checks the expected seq and, when the append carries a fencing token, that
//! the token is still the task's current one: a worker whose lease was taken over can no longer append.
//! Leases ([`Leases`]) are claimed with `FOR UPDATE SKIP LOCKED`. Schema changes are
//! versioned migrations applied at connect.

use std::str::FromStr;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, NoTls};

use super::{
    Append, Encoded, Lease, Leases, Store, StoreError, TaskQuery, TaskRecord, CREATION_TOKEN,
};
use crate::journal::{now_ms, Entry, JournalRecord};
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
];

/// The terminal states, as SQL.
const TERMINAL: &str = "('completed', 'canceled', 'failed', 'rejected')";

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

type Reply = oneshot::Sender<Result<(), StoreError>>;

/// A PostgreSQL-backed store. Cheap to clone.
#[derive(Clone)]
pub struct PostgresStore {
    /// Reads and lease operations (reconnects by itself).
    pool: Pool,
    writer: mpsc::UnboundedSender<(Encoded, Reply)>,
}

/// Connections for reads and leases.
const POOL_SIZE: usize = 8;

/// How long the writer's session may sit in an open transaction before the server ends it. A worker
/// paused mid-commit (SIGSTOP, a VM freeze) would otherwise keep its task rows locked, and no other
/// worker could take them over when its leases expire. Override with `options=-c
/// idle_in_transaction_session_timeout=…` in the URL.
const WRITER_IDLE_IN_TRANSACTION: &str = "1s";

/// The writer's own connection, reopened after it breaks (server restart, network, the timeout above).
async fn connect_writer(config: &Config, url: &str) -> Result<Client, StoreError> {
    let (client, connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| StoreError::Backend(format!("connecting to {}: {e}", redact(url))))?;
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
            .await
            .map_err(backend)?;
    }
    Ok(client)
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

async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    client
        .batch_execute("CREATE TABLE IF NOT EXISTS radkit_migrations (version INT PRIMARY KEY)")
        .await
        .map_err(backend)?;
    // One migrator at a time, across processes.
    let tx = client.transaction().await.map_err(backend)?;
    tx.batch_execute("LOCK TABLE radkit_migrations IN EXCLUSIVE MODE")
        .await
        .map_err(backend)?;
    let applied: i32 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM radkit_migrations",
            &[],
        )
        .await
        .map_err(backend)?
        .get(0);
    let applied = usize::try_from(applied).unwrap_or(0);
    if applied > MIGRATIONS.len() {
        return Err(StoreError::Backend(format!(
            "database schema version {applied} is newer than this radkit understands ({})",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
        tx.batch_execute(sql).await.map_err(backend)?;
        let version = i32::try_from(i + 1).unwrap_or(i32::MAX);
        tx.execute(
            "INSERT INTO radkit_migrations (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(backend)?;
    }
    tx.commit().await.map_err(backend)
}

impl PostgresStore {
    /// Connect to `url` (`postgres://user@host:port/db`, libpq's key/value form also works), apply
    /// migrations and start the writer.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let config = Config::from_str(url)
            .map_err(|e| StoreError::Backend(format!("bad Postgres URL {}: {e}", redact(url))))?;
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
            .map_err(backend)?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(writer_loop(config, url.to_owned(), writer, rx));
        Ok(PostgresStore { pool, writer: tx })
    }

    async fn reader(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(backend)
    }
}

async fn writer_loop(
    config: Config,
    url: String,
    client: Client,
    mut rx: mpsc::UnboundedReceiver<(Encoded, Reply)>,
) {
    let mut client = Some(client);
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        if client.as_ref().is_none_or(Client::is_closed) {
            client = match connect_writer(&config, &url).await {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::error!(error = %e, "postgres writer cannot reconnect");
                    None
                }
            };
        }
        // A failed batch fails each of its appends: their runs stop and are resumed from the journal
        // (by this worker or another), which holds exactly what was committed.
        let results = match client.as_mut() {
            Some(c) => match commit_batch(c, &batch).await {
                Ok(results) => results,
                Err(e) => batch.iter().map(|_| Err(backend(&e))).collect(),
            },
            None => batch
                .iter()
                .map(|_| Err(StoreError::Backend("postgres writer is not connected".into())))
                .collect(),
        };
        for ((_, reply), result) in batch.into_iter().zip(results) {
            let _ = reply.send(result);
        }
    }
}

/// One transaction, a handful of round trips whatever the batch size: lock every task row of the
/// batch at once (in `tid` order, so concurrent writers cannot deadlock), check each append against
/// the rows, insert all journal rows with multi-row `INSERT`s, update all rows with one `UPDATE`.
async fn commit_batch(
    client: &mut Client,
    batch: &[(Encoded, Reply)],
) -> Result<Vec<Result<(), StoreError>>, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    let now = now_ms();
    let ids: Vec<&str> = batch
        .iter()
        .map(|(e, _)| e.append.task_id.as_str())
        .collect();
    // id -> (tid, last seq, fence)
    let mut rows_by_id: std::collections::HashMap<String, (i64, u64, u64)> = tx
        .query("SELECT tid, id, last_seq, fence FROM radkit_tasks WHERE id = ANY($1) ORDER BY tid FOR UPDATE", &[&ids])
        .await?
        .iter()
        .map(|r| (r.get::<_, String>(1), (r.get::<_, i64>(0), r.get::<_, i64>(2) as u64, r.get::<_, i64>(3) as u64)))
        .collect();
    let mut results = Vec::with_capacity(batch.len());
    let mut journal: Vec<(i64, i64, &'static str, &str)> = Vec::new();
    // tid -> (last seq, state, wake change)
    let mut updates: std::collections::BTreeMap<
        i64,
        (i64, Option<&'static str>, Option<Option<i64>>),
    > = std::collections::BTreeMap::new();
    for (encoded, _) in batch {
        let append = &encoded.append;
        let conflict = |expected| StoreError::Conflict {
            task_id: append.task_id.clone(),
            expected,
            got: append.first_seq,
        };
        let lease_owner = append.lease.as_ref().map(|l| l.owner.as_str());
        let lease_expires = append.lease.as_ref().map(|l| now + l.ttl_ms);
        let creation_fence = if append.lease.is_some() {
            CREATION_TOKEN as i64
        } else {
            0
        };
        let tid = match (&append.create, rows_by_id.get(&append.task_id).copied()) {
            (Some(record), None) if append.first_seq == 1 && record.id == append.task_id => {
                let row = tx
                    .query_one(
                        "INSERT INTO radkit_tasks (id, context_id, skill_id, skill_version, principal, state, created_at_ms, updated_at_ms, wake_at_ms, lease_owner, lease_expires_ms, fence)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING tid",
                        &[&record.id, &record.context_id, &record.skill_id, &record.skill_version, &record.principal, &record.state.as_str(), &record.created_at_ms, &now, &record.wake_at_ms, &lease_owner, &lease_expires, &creation_fence],
                    )
                    .await?;
                row.get::<_, i64>(0)
            }
            (Some(_), _) | (None, None) => {
                results.push(Err(conflict(0)));
                continue;
            }
            // A stale writer is told it was fenced off, whatever seq it thought came next.
            (None, Some((_, _, fence))) if append.fence.is_some_and(|f| f != fence) => {
                results.push(Err(StoreError::Fenced {
                    task_id: append.task_id.clone(),
                    token: append.fence.unwrap_or_default(),
                }));
                continue;
            }
            (None, Some((_, last, _))) if last + 1 != append.first_seq => {
                results.push(Err(conflict(last + 1)));
                continue;
            }
            (None, Some((tid, _, _))) => tid,
        };
        let fence = rows_by_id.get(&append.task_id).map(|r| r.2).unwrap_or(0);
        let mut seq = append.first_seq as i64;
        for (kind, body) in &encoded.rows {
            journal.push((tid, seq, kind, body.as_str()));
            seq += 1;
        }
        let last_seq = seq - 1;
        rows_by_id.insert(append.task_id.clone(), (tid, last_seq as u64, fence));
        let entry = updates.entry(tid).or_insert((last_seq, None, None));
        entry.0 = last_seq;
        if let Some(state) = append.state {
            entry.1 = Some(state.as_str());
        }
        if let Some(wake) = append.wake_at_ms {
            entry.2 = Some(wake);
        }
        results.push(Ok(()));
    }
    for chunk in journal.chunks(2000) {
        let mut sql =
            String::from("INSERT INTO radkit_journal (tid, seq, at_ms, kind, body) VALUES ");
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(chunk.len() * 5);
        for (i, (tid, seq, kind, body)) in chunk.iter().enumerate() {
            if i > 0 {
                sql.push(',');
            }
            let b = i * 5;
            sql.push_str(&format!(
                "(${}, ${}, ${}, ${}, ${})",
                b + 1,
                b + 2,
                b + 3,
                b + 4,
                b + 5
            ));
            params.extend([tid as &(dyn ToSql + Sync), seq, &now, kind, body]);
        }
        tx.execute(sql.as_str(), &params).await?;
    }
    if !updates.is_empty() {
        let tids: Vec<i64> = updates.keys().copied().collect();
        let last: Vec<i64> = updates.values().map(|u| u.0).collect();
        let states: Vec<Option<&str>> = updates.values().map(|u| u.1).collect();
        let set_wake: Vec<bool> = updates.values().map(|u| u.2.is_some()).collect();
        let wakes: Vec<Option<i64>> = updates.values().map(|u| u.2.flatten()).collect();
        tx.execute(
            "UPDATE radkit_tasks t SET last_seq = v.last_seq, updated_at_ms = $6, state = COALESCE(v.state, t.state),
                    wake_at_ms = CASE WHEN v.set_wake THEN v.wake ELSE t.wake_at_ms END
             FROM UNNEST($1::bigint[], $2::bigint[], $3::text[], $4::bool[], $5::bigint[]) AS v(tid, last_seq, state, set_wake, wake)
             WHERE t.tid = v.tid",
            &[&tids, &last, &states, &set_wake, &wakes, &now],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(results)
}

fn row_to_task(r: &tokio_postgres::Row) -> Result<TaskRecord, StoreError> {
    let id: String = r.get(0);
    let state: String = r.get(5);
    let state = TaskState::parse(&state).ok_or_else(|| StoreError::Corrupt {
        task_id: id.clone(),
        seq: 0,
        reason: format!("unknown task state `{state}`"),
    })?;
    Ok(TaskRecord {
        id,
        context_id: r.get(1),
        skill_id: r.get(2),
        skill_version: r.get(3),
        principal: r.get(4),
        state,
        created_at_ms: r.get(6),
        updated_at_ms: r.get(7),
        wake_at_ms: r.get(8),
        last_seq: r.get::<_, i64>(9) as u64,
    })
}

const TASK_COLUMNS: &str = "id, context_id, skill_id, skill_version, principal, state, created_at_ms, updated_at_ms, wake_at_ms, last_seq";

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
            .reader()
            .await?
            .query_opt(
                &format!("SELECT {TASK_COLUMNS} FROM radkit_tasks WHERE id = $1"),
                &[&task_id],
            )
            .await
            .map_err(backend)?;
        row.as_ref().map(row_to_task).transpose()
    }

    async fn journal(
        &self,
        task_id: &str,
        after_seq: u64,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        let rows = self
            .reader()
            .await?
            .query(
                "SELECT j.seq, j.at_ms, j.body FROM radkit_journal j JOIN radkit_tasks t ON t.tid = j.tid
                 WHERE t.id = $1 AND j.seq > $2 ORDER BY j.seq",
                &[&task_id, &(after_seq as i64)],
            )
            .await
            .map_err(backend)?;
        rows.iter()
            .map(|r| {
                let seq = r.get::<_, i64>(0) as u64;
                let body: String = r.get(2);
                let entry: Entry =
                    serde_json::from_str(&body).map_err(|e| StoreError::Corrupt {
                        task_id: task_id.to_owned(),
                        seq,
                        reason: e.to_string(),
                    })?;
                Ok(JournalRecord {
                    seq,
                    at_ms: r.get(1),
                    entry,
                })
            })
            .collect()
    }

    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        let mut sql = format!("SELECT {TASK_COLUMNS} FROM radkit_tasks WHERE TRUE");
        let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
        if query.non_terminal {
            sql.push_str(" AND state NOT IN ('completed', 'canceled', 'failed', 'rejected')");
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
        let rows = self
            .reader()
            .await?
            .query(sql.as_str(), &refs)
            .await
            .map_err(backend)?;
        rows.iter().map(row_to_task).collect()
    }

    fn leases(&self) -> Option<&dyn Leases> {
        Some(self)
    }
}

fn row_to_lease(r: &tokio_postgres::Row) -> Lease {
    Lease {
        task_id: r.get(0),
        token: r.get::<_, i64>(1) as u64,
        cancel_requested: r.get(2),
    }
}

#[async_trait]
impl Leases for PostgresStore {
    async fn claim(
        &self,
        owner: &str,
        ttl_ms: i64,
        limit: usize,
    ) -> Result<Vec<Lease>, StoreError> {
        let now = now_ms();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .reader()
            .await?
            .query(
                &format!(
                    "UPDATE radkit_tasks SET lease_owner = $1, lease_expires_ms = $2, fence = fence + 1
                     WHERE tid IN (
                        SELECT tid FROM radkit_tasks
                        WHERE ((state IN ('submitted', 'working') AND wake_at_ms IS NULL)
                               OR wake_at_ms <= $3 OR cancel_requested)
                          AND state NOT IN {TERMINAL}
                          AND (lease_expires_ms IS NULL OR lease_expires_ms < $3)
                        ORDER BY tid LIMIT $4 FOR UPDATE SKIP LOCKED)
                     RETURNING id, fence, cancel_requested"
                ),
                &[&owner, &(now + ttl_ms), &now, &limit],
            )
            .await
            .map_err(backend)?;
        Ok(rows.iter().map(row_to_lease).collect())
    }

    async fn acquire(
        &self,
        owner: &str,
        task_id: &str,
        ttl_ms: i64,
    ) -> Result<Option<Lease>, StoreError> {
        let now = now_ms();
        let row = self
            .reader()
            .await?
            .query_opt(
                &format!(
                    "UPDATE radkit_tasks SET lease_owner = $1, lease_expires_ms = $2, fence = fence + 1
                     WHERE id = $3 AND state NOT IN {TERMINAL}
                       AND (lease_owner IS NULL OR lease_owner = $1 OR lease_expires_ms < $4)
                     RETURNING id, fence, cancel_requested"
                ),
                &[&owner, &(now + ttl_ms), &task_id, &now],
            )
            .await
            .map_err(backend)?;
        Ok(row.as_ref().map(row_to_lease))
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
        let tokens: Vec<i64> = held.iter().map(|(_, t)| *t as i64).collect();
        let rows = self
            .reader()
            .await?
            .query(
                "UPDATE radkit_tasks t SET lease_expires_ms = $1
                 FROM UNNEST($2::text[], $3::bigint[]) AS v(id, fence)
                 WHERE t.id = v.id AND t.fence = v.fence AND t.lease_owner = $4
                 RETURNING t.id",
                &[&(now_ms() + ttl_ms), &ids, &tokens, &owner],
            )
            .await
            .map_err(backend)?;
        let kept: std::collections::HashSet<String> = rows.iter().map(|r| r.get(0)).collect();
        Ok(held
            .iter()
            .filter(|(id, _)| !kept.contains(id))
            .map(|(id, _)| id.clone())
            .collect())
    }

    async fn release(&self, owner: &str, task_id: &str, token: u64) -> Result<(), StoreError> {
        self.reader()
            .await?
            .execute(
                "UPDATE radkit_tasks SET lease_owner = NULL, lease_expires_ms = NULL
                 WHERE id = $1 AND lease_owner = $2 AND fence = $3",
                &[&task_id, &owner, &(token as i64)],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn request_cancel(&self, task_id: &str) -> Result<(), StoreError> {
        self.reader()
            .await?
            .execute(
                "UPDATE radkit_tasks SET cancel_requested = TRUE WHERE id = $1",
                &[&task_id],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn cancel_requests(&self, owner: &str) -> Result<Vec<String>, StoreError> {
        let rows = self
            .reader()
            .await?
            .query(
                &format!(
                    "SELECT id FROM radkit_tasks
                     WHERE lease_owner = $1 AND cancel_requested AND state NOT IN {TERMINAL}"
                ),
                &[&owner],
            )
            .await
            .map_err(backend)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}
