//! `PostgresStore`'s dispatched commands (`store::dispatch`): the `radkit_dispatch` table of
//! migration 12. Executors claim rows with `FOR UPDATE SKIP LOCKED`, so two never take one command,
//! and a claim that expires (its executor died) makes the row claimable again.

use async_trait::async_trait;

use super::{get, PostgresStore};
use crate::flow::{Cmd, InvocationId};
use crate::store::{DispatchStore, Dispatched, StoreError};

fn cmd_json(cmd: &Cmd) -> Result<String, StoreError> {
    serde_json::to_string(cmd).map_err(|e| StoreError::Corrupt {
        task_id: String::new(),
        seq: 0,
        reason: format!("a dispatched command does not serialize: {e}"),
    })
}

#[async_trait]
impl DispatchStore for PostgresStore {
    async fn dispatch(
        &self,
        task_id: &str,
        id: &InvocationId,
        cmd: &Cmd,
    ) -> Result<(), StoreError> {
        let body = cmd_json(cmd)?;
        let now = crate::journal::now_ms();
        self.exec(
            "INSERT INTO radkit_dispatch (id, task_id, cmd, created_at_ms) VALUES ($1, $2, $3, $4)
             ON CONFLICT (id) DO NOTHING",
            &[&id.as_str(), &task_id, &body, &now],
        )
        .await?;
        Ok(())
    }

    async fn claim_dispatched(
        &self,
        owner: &str,
        ttl_ms: i64,
        limit: usize,
    ) -> Result<Vec<Dispatched>, StoreError> {
        let now = crate::journal::now_ms();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .rows(
                "UPDATE radkit_dispatch SET claimed_by = $1, claimed_until_ms = $2, claims = claims + 1
                 WHERE id IN (SELECT id FROM radkit_dispatch WHERE claimed_until_ms <= $3
                              ORDER BY created_at_ms, id LIMIT $4 FOR UPDATE SKIP LOCKED)
                 RETURNING id, task_id, cmd, claims",
                &[&owner, &now.saturating_add(ttl_ms), &now, &limit],
            )
            .await?;
        rows.iter()
            .map(|row| {
                let task_id: String = get(row, "task_id")?;
                let body: String = get(row, "cmd")?;
                let cmd = serde_json::from_str(&body).map_err(|e| StoreError::Corrupt {
                    task_id: task_id.clone(),
                    seq: 0,
                    reason: format!("a dispatched command does not decode: {e}"),
                })?;
                let claims: i32 = get(row, "claims")?;
                Ok(Dispatched {
                    id: InvocationId::from_string(get::<String>(row, "id")?),
                    task_id,
                    cmd,
                    claims: u32::try_from(claims).unwrap_or(0),
                })
            })
            .collect()
    }

    async fn dispatch_done(&self, id: &InvocationId) -> Result<(), StoreError> {
        self.exec("DELETE FROM radkit_dispatch WHERE id = $1", &[&id.as_str()])
            .await?;
        Ok(())
    }
}
