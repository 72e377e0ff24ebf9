//! `PostgresStore`'s push configs (`store::push`): the `radkit_push_configs` table of migration 10,
//! keyed by the task's row id. Several workers claim deliveries at once: a claim locks the rows it
//! takes with `FOR UPDATE SKIP LOCKED` and leases them, so a config's updates have one sender at a
//! time; every statement runs through the pool's retrying helpers.

use async_trait::async_trait;

use super::{get, get_u64, PostgresStore};
use crate::store::push::{config_json, config_of, PushClaim, PushConfig, PushStore};
use crate::store::{to_sql_int, StoreError};

#[async_trait]
impl PushStore for PostgresStore {
    async fn put_push_config(
        &self,
        task_id: &str,
        config: &PushConfig,
        delivered_seq: u64,
    ) -> Result<(), StoreError> {
        let body = config_json(config)?;
        let cursor = to_sql_int("seq", delivered_seq)?;
        let n = self
            .exec(
                "INSERT INTO radkit_push_configs (tid, config_id, body, delivered_seq)
                 SELECT tid, $2, $3, $4 FROM radkit_tasks WHERE id = $1
                 ON CONFLICT (tid, config_id) DO UPDATE SET body = excluded.body",
                &[&task_id, &config.id, &body, &cursor],
            )
            .await?;
        if n == 0 {
            return Err(StoreError::UnknownTask {
                task_id: task_id.to_owned(),
            });
        }
        Ok(())
    }

    async fn push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> Result<Option<PushConfig>, StoreError> {
        let rows = self
            .rows(
                "SELECT p.body FROM radkit_push_configs p JOIN radkit_tasks t ON t.tid = p.tid
                 WHERE t.id = $1 AND p.config_id = $2",
                &[&task_id, &config_id],
            )
            .await?;
        rows.first()
            .map(|row| config_of(task_id, get(row, "body")?))
            .transpose()
    }

    async fn push_configs(
        &self,
        task_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PushConfig>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let after = after.unwrap_or("");
        let rows = self
            .rows(
                "SELECT p.body FROM radkit_push_configs p JOIN radkit_tasks t ON t.tid = p.tid
                 WHERE t.id = $1 AND p.config_id COLLATE \"C\" > $2
                 ORDER BY p.config_id COLLATE \"C\" LIMIT $3",
                &[&task_id, &after, &limit],
            )
            .await?;
        rows.iter()
            .map(|row| config_of(task_id, get(row, "body")?))
            .collect()
    }

    async fn push_deliveries(
        &self,
        task_id: &str,
    ) -> Result<Vec<crate::store::push::PushDelivery>, StoreError> {
        let now = crate::journal::now_ms();
        let rows = self
            .rows(
                "SELECT p.body, p.delivered_seq, p.attempts, p.next_at_ms, p.finished,
                        p.lease_owner, p.lease_until_ms
                 FROM radkit_push_configs p JOIN radkit_tasks t ON t.tid = p.tid
                 WHERE t.id = $1 ORDER BY p.config_id COLLATE \"C\"",
                &[&task_id],
            )
            .await?;
        rows.iter()
            .map(|row| {
                let owner: Option<String> = get(row, "lease_owner")?;
                let until: i64 = get(row, "lease_until_ms")?;
                Ok(crate::store::push::PushDelivery {
                    config: config_of(task_id, get(row, "body")?)?,
                    delivered_seq: u64::try_from(get::<i64>(row, "delivered_seq")?).unwrap_or(0),
                    attempts: u32::try_from(get::<i32>(row, "attempts")?).unwrap_or(u32::MAX),
                    next_at_ms: get(row, "next_at_ms")?,
                    finished: get(row, "finished")?,
                    sender: owner.filter(|_| until > now),
                })
            })
            .collect()
    }

    async fn delete_push_config(&self, task_id: &str, config_id: &str) -> Result<bool, StoreError> {
        let n = self
            .exec(
                "DELETE FROM radkit_push_configs WHERE config_id = $2
                 AND tid = (SELECT tid FROM radkit_tasks WHERE id = $1)",
                &[&task_id, &config_id],
            )
            .await?;
        Ok(n > 0)
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
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let until = now_ms.saturating_add(lease_ms);
        let rows = self
            .rows(
                "UPDATE radkit_push_configs p SET lease_owner = $1, lease_until_ms = $2
                 FROM radkit_tasks t
                 WHERE t.tid = p.tid AND (p.tid, p.config_id) IN (
                    SELECT q.tid, q.config_id FROM radkit_push_configs q
                    JOIN radkit_tasks u ON u.tid = q.tid
                    WHERE NOT q.finished AND q.delivered_seq < u.last_seq AND q.next_at_ms <= $3
                      AND (q.lease_owner IS NULL OR q.lease_until_ms < $3
                           OR ($5 AND q.lease_owner <> $1))
                      AND ($6::text IS NULL OR u.id = $6)
                    ORDER BY q.next_at_ms LIMIT $4
                    FOR UPDATE OF q SKIP LOCKED)
                 RETURNING t.id, p.body, p.delivered_seq, p.attempts",
                &[&owner, &until, &now_ms, &limit, &exclusive, &task_id],
            )
            .await?;
        rows.iter()
            .map(|row| {
                let task_id: String = get(row, "id")?;
                let config = config_of(&task_id, get(row, "body")?)?;
                let attempts: i32 = get(row, "attempts")?;
                Ok(PushClaim {
                    config,
                    delivered_seq: get_u64(row, "delivered_seq")?,
                    attempts: u32::try_from(attempts).unwrap_or(0),
                    task_id,
                })
            })
            .collect()
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
        let seq = to_sql_int("seq", seq)?;
        let n = self
            .exec(
                "UPDATE radkit_push_configs
                 SET delivered_seq = GREATEST(delivered_seq, $4), attempts = 0, lease_until_ms = $5,
                     finished = finished OR $6
                 WHERE config_id = $2 AND lease_owner = $3
                   AND tid = (SELECT tid FROM radkit_tasks WHERE id = $1)",
                &[
                    &task_id,
                    &config_id,
                    &owner,
                    &seq,
                    &lease_until_ms,
                    &finished,
                ],
            )
            .await?;
        Ok(n > 0)
    }

    async fn release_push(
        &self,
        task_id: &str,
        config_id: &str,
        owner: &str,
        attempts: u32,
        next_at_ms: i64,
    ) -> Result<(), StoreError> {
        let attempts = i32::try_from(attempts).unwrap_or(i32::MAX);
        self.exec(
            "UPDATE radkit_push_configs SET lease_owner = NULL, attempts = $4, next_at_ms = $5
             WHERE config_id = $2 AND lease_owner = $3
               AND tid = (SELECT tid FROM radkit_tasks WHERE id = $1)",
            &[&task_id, &config_id, &owner, &attempts, &next_at_ms],
        )
        .await?;
        Ok(())
    }
}
