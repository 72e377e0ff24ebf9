//! `SqliteStore`'s push configs (`store::push`): the `push_configs` table of migration 7, keyed by
//! the task's row id. Written on pooled connections in `BEGIN IMMEDIATE` transactions (rare writes,
//! beside the journal's writer thread; the busy timeout orders them).

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};

use super::{get, SqliteStore};
use crate::store::push::{config_json, config_of, PushClaim, PushConfig, PushStore};
use crate::store::{to_sql_int, StoreError};

/// The configs due at `?1` that `?3` may claim (`?2`: exclusive), of task `?5` when it is not null,
/// with their task's id: unfinished, behind their task's journal, due, and not leased to another
/// sender (unless exclusive).
const DUE: &str = "SELECT t.id, p.tid, p.config_id, p.body, p.delivered_seq, p.attempts
     FROM push_configs p JOIN tasks t ON t.tid = p.tid
     WHERE p.finished = 0 AND p.next_at_ms <= ?1
       AND (p.lease_owner IS NULL OR p.lease_until_ms < ?1 OR (?2 AND p.lease_owner <> ?3))
       AND (?5 IS NULL OR t.id = ?5)
       AND p.delivered_seq < COALESCE((SELECT COALESCE(last_seq, seq) FROM journal j
            WHERE j.tid = p.tid ORDER BY seq DESC LIMIT 1), 0)";

/// Run `f` in a `BEGIN IMMEDIATE` transaction on `conn` (rolled back on error).
fn immediate<T>(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    match f(conn) {
        Ok(value) => {
            conn.execute_batch("COMMIT")?;
            Ok(value)
        }
        Err(e) => {
            // The transaction may be gone already (SQLite rolls back on some errors).
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// The row id of task `task_id`, if it exists.
fn tid(conn: &Connection, task_id: &str) -> Result<Option<i64>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT tid FROM tasks WHERE id = ?1")?
        .query_row(params![task_id], |r| r.get(0))
        .optional()?)
}

#[async_trait]
impl PushStore for SqliteStore {
    async fn put_push_config(
        &self,
        task_id: &str,
        config: &PushConfig,
        delivered_seq: u64,
    ) -> Result<(), StoreError> {
        let (task_id, id, body) = (task_id.to_owned(), config.id.clone(), config_json(config)?);
        let cursor = to_sql_int("seq", delivered_seq)?;
        self.read(move |conn| {
            immediate(conn, |conn| {
                let tid = tid(conn, &task_id)?.ok_or_else(|| StoreError::UnknownTask {
                    task_id: task_id.clone(),
                })?;
                conn.prepare_cached(
                    "INSERT INTO push_configs (tid, config_id, body, delivered_seq) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (tid, config_id) DO UPDATE SET body = excluded.body",
                )?
                .execute(params![tid, id, body, cursor])?;
                Ok(())
            })
        })
        .await
    }

    async fn push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> Result<Option<PushConfig>, StoreError> {
        let (task_id, id) = (task_id.to_owned(), config_id.to_owned());
        self.read(move |conn| {
            let body: Option<String> = conn
                .prepare_cached(
                    "SELECT p.body FROM push_configs p JOIN tasks t ON t.tid = p.tid
                     WHERE t.id = ?1 AND p.config_id = ?2",
                )?
                .query_row(params![task_id, id], |r| r.get(0))
                .optional()?;
            body.map(|b| config_of(&task_id, &b)).transpose()
        })
        .await
    }

    async fn push_configs(
        &self,
        task_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PushConfig>, StoreError> {
        let (task_id, after) = (task_id.to_owned(), after.unwrap_or("").to_owned());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT p.body FROM push_configs p JOIN tasks t ON t.tid = p.tid
                 WHERE t.id = ?1 AND p.config_id > ?2 ORDER BY p.config_id LIMIT ?3",
            )?;
            let mut rows = stmt.query(params![task_id, after, limit])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                let body: String = get(row, "body")?;
                out.push(config_of(&task_id, &body)?);
            }
            Ok(out)
        })
        .await
    }

    async fn push_deliveries(
        &self,
        task_id: &str,
    ) -> Result<Vec<crate::store::push::PushDelivery>, StoreError> {
        let task_id = task_id.to_owned();
        let now = crate::journal::now_ms();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT p.body, p.delivered_seq, p.attempts, p.next_at_ms, p.finished, p.lease_owner,
                        p.lease_until_ms
                 FROM push_configs p JOIN tasks t ON t.tid = p.tid
                 WHERE t.id = ?1 ORDER BY p.config_id",
            )?;
            let mut rows = stmt.query(params![task_id])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                let body: String = get(row, "body")?;
                let owner: Option<String> = get(row, "lease_owner")?;
                let until: i64 = get(row, "lease_until_ms")?;
                out.push(crate::store::push::PushDelivery {
                    config: config_of(&task_id, &body)?,
                    delivered_seq: u64::try_from(get::<i64>(row, "delivered_seq")?).unwrap_or(0),
                    attempts: u32::try_from(get::<i64>(row, "attempts")?).unwrap_or(u32::MAX),
                    next_at_ms: get(row, "next_at_ms")?,
                    finished: get(row, "finished")?,
                    sender: owner.filter(|_| until > now),
                });
            }
            Ok(out)
        })
        .await
    }

    async fn delete_push_config(&self, task_id: &str, config_id: &str) -> Result<bool, StoreError> {
        let (task_id, id) = (task_id.to_owned(), config_id.to_owned());
        self.read(move |conn| {
            let n = conn
                .prepare_cached(
                    "DELETE FROM push_configs WHERE config_id = ?2
                     AND tid = (SELECT tid FROM tasks WHERE id = ?1)",
                )?
                .execute(params![task_id, id])?;
            Ok(n > 0)
        })
        .await
    }

    async fn claim_push(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
        exclusive: bool,
        task_id: Option<&str>,
    ) -> Result<Vec<PushClaim>, StoreError> {
        let owner = owner.to_owned();
        let only = task_id.map(str::to_owned);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn| {
            // Most polls find nothing: look without the write lock first, so an idle sender never
            // holds up the journal's writer.
            let any: bool = conn
                .prepare_cached(&format!("SELECT EXISTS ({DUE} LIMIT ?4)"))?
                .query_row(params![now_ms, exclusive, owner, 1, only], |r| r.get(0))?;
            if !any {
                return Ok(Vec::new());
            }
            immediate(conn, |conn| {
                let mut stmt =
                    conn.prepare_cached(&format!("{DUE} ORDER BY p.next_at_ms LIMIT ?4"))?;
                let mut rows = stmt.query(params![now_ms, exclusive, owner, limit, only])?;
                let mut claims = Vec::new();
                while let Some(row) = rows.next()? {
                    let task_id: String = get(row, "id")?;
                    let tid: i64 = get(row, "tid")?;
                    let config_id: String = get(row, "config_id")?;
                    let body: String = get(row, "body")?;
                    let config = config_of(&task_id, &body)?;
                    claims.push((
                        tid,
                        config_id,
                        PushClaim {
                            task_id,
                            config,
                            delivered_seq: get(row, "delivered_seq")?,
                            attempts: get(row, "attempts")?,
                        },
                    ));
                }
                drop(rows);
                let mut lease = conn.prepare_cached(
                    "UPDATE push_configs SET lease_owner = ?3, lease_until_ms = ?4
                     WHERE tid = ?1 AND config_id = ?2",
                )?;
                let until = now_ms.saturating_add(lease_ms);
                for (tid, config_id, _) in &claims {
                    lease.execute(params![tid, config_id, owner, until])?;
                }
                Ok(claims.into_iter().map(|(_, _, claim)| claim).collect())
            })
        })
        .await
    }

    async fn push_delivered(
        &self,
        task_id: &str,
        config_id: &str,
        owner: &str,
        seq: u64,
        finished: bool,
        lease_until_ms: i64,
    ) -> Result<bool, StoreError> {
        let (task_id, id, owner) = (task_id.to_owned(), config_id.to_owned(), owner.to_owned());
        let seq = to_sql_int("seq", seq)?;
        self.read(move |conn| {
            let n = conn
                .prepare_cached(
                    "UPDATE push_configs SET delivered_seq = MAX(delivered_seq, ?4), attempts = 0,
                        lease_until_ms = ?5, finished = MAX(finished, ?6)
                     WHERE config_id = ?2 AND lease_owner = ?3
                       AND tid = (SELECT tid FROM tasks WHERE id = ?1)",
                )?
                .execute(params![task_id, id, owner, seq, lease_until_ms, finished])?;
            Ok(n > 0)
        })
        .await
    }

    async fn release_push(
        &self,
        task_id: &str,
        config_id: &str,
        owner: &str,
        attempts: u32,
        next_at_ms: i64,
    ) -> Result<(), StoreError> {
        let (task_id, id, owner) = (task_id.to_owned(), config_id.to_owned(), owner.to_owned());
        self.read(move |conn| {
            conn.prepare_cached(
                "UPDATE push_configs SET lease_owner = NULL, attempts = ?4, next_at_ms = ?5
                 WHERE config_id = ?2 AND lease_owner = ?3
                   AND tid = (SELECT tid FROM tasks WHERE id = ?1)",
            )?
            .execute(params![task_id, id, owner, attempts, next_at_ms])?;
            Ok(())
        })
        .await
    }
}
