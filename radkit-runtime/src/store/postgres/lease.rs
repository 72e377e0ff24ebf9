//! Leases: the `Leases` implementation (claim, acquire, renew, release) and the renewer that keeps
//! a worker's leases alive.

use super::*;

/// Lease renewal's connection, its own: a renewal never waits for a pooled connection behind the
/// reads of the very tasks whose leases it keeps. It is opened by the first renewal, on the runtime
/// that renews (the engine's lease keeper has a thread and a runtime of its own), and opened again
/// there when it broke.
pub(super) struct Renewer {
    pub(super) config: Config,
    pub(super) url: String,
    pub(super) client: tokio::sync::Mutex<Option<Client>>,
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

/// Journal rows `(seq, at_ms, body)` to the records after `after_seq`.
pub(super) fn decode_rows(
    task_id: &str,
    rows: &[Row],
    after_seq: u64,
) -> Result<Vec<JournalRecord>, StoreError> {
    let mut records = Vec::new();
    for r in rows {
        let seq = get_u64(r, "seq")?;
        let at_ms: i64 = get(r, "at_ms")?;
        let body: &str = get(r, "body")?;
        crate::store::decode_row(task_id, seq, at_ms, body, after_seq, &mut records)?;
    }
    Ok(records)
}

/// A lease row `(id, fence, cancel_requested)`.
pub(super) fn row_to_lease(r: &Row) -> Result<Lease, StoreError> {
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
                          AND EXISTS (SELECT 1 FROM UNNEST($5::text[], $6::text[]) AS s(id, v)
                                      WHERE s.id = skill_id
                                        AND (s.v = skill_version
                                             OR CASE WHEN skill_version ~ '^[0-9]{{1,18}}$'
                                                     THEN skill_version::bigint END
                                                < CASE WHEN s.v ~ '^<[0-9]{{1,18}}$'
                                                       THEN substr(s.v, 2)::bigint END))
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

    async fn holder(&self, task_id: &str) -> Result<Option<super::super::LeaseHolder>, StoreError> {
        let rows = self
            .rows(
                "SELECT lease_owner, fence, lease_expires_ms FROM radkit_tasks WHERE id = $1",
                &[&task_id],
            )
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let owner: Option<String> = get(row, "lease_owner")?;
        Ok(Some(super::super::LeaseHolder {
            expires_ms: get::<Option<i64>>(row, "lease_expires_ms")?.filter(|_| owner.is_some()),
            owner,
            token: u64::try_from(get::<i64>(row, "fence")?).unwrap_or(0),
        }))
    }

    async fn lease_log(
        &self,
        task_id: &str,
        limit: usize,
    ) -> Result<Vec<super::super::LeaseChange>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .rows(
                "SELECT * FROM (
                    SELECT l.fence, l.owner, l.claimed_at_ms, l.prior_owner, l.prior_expires_ms,
                           l.released_at_ms
                    FROM radkit_lease_log l JOIN radkit_tasks t ON t.tid = l.tid
                    WHERE t.id = $1 ORDER BY l.fence DESC LIMIT $2
                 ) newest ORDER BY fence",
                &[&task_id, &limit],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(super::super::LeaseChange {
                    token: get_u64(r, "fence")?,
                    owner: get(r, "owner")?,
                    claimed_at_ms: get(r, "claimed_at_ms")?,
                    prior_owner: get(r, "prior_owner")?,
                    prior_expires_ms: get(r, "prior_expires_ms")?,
                    released_at_ms: get(r, "released_at_ms")?,
                })
            })
            .collect()
    }

    async fn release(&self, owner: &str, task_id: &str, token: u64) -> Result<(), StoreError> {
        // A task given back with work left (the engine stops, or cannot run its version) is news
        // for the claimers; one that waits for input or a timer, or is finished, is not.
        self.rows(
            &format!(
                "WITH released AS (
                    UPDATE radkit_tasks SET lease_owner = NULL, lease_expires_ms = NULL
                    WHERE id = $1 AND lease_owner = $2 AND fence = $3
                    RETURNING state, wake_at_ms, cancel_requested
                 )
                 SELECT {notify} FROM released
                 WHERE state NOT IN {terminal}
                   AND ((state IN {claimable} AND wake_at_ms IS NULL) OR cancel_requested)",
                notify = listen::NOTIFY,
                terminal = sql_terminal_states(),
                claimable = sql_state_list(&CLAIMABLE),
            ),
            &[&task_id, &owner, &to_sql_int("fencing token", token)?],
        )
        .await?;
        Ok(())
    }

    async fn request_cancel(&self, task_id: &str) -> Result<(), StoreError> {
        // The news wakes the task's owner (which stops it) or, when nobody holds it, a claimer.
        self.rows(
            &format!(
                "WITH asked AS (
                    UPDATE radkit_tasks SET cancel_requested = TRUE WHERE id = $1 RETURNING 1
                 )
                 SELECT {notify} FROM asked",
                notify = listen::NOTIFY,
            ),
            &[&task_id],
        )
        .await?;
        Ok(())
    }

    fn wakeups(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.listener.subscribe())
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
