//! Retention ([`Store::prune`]): finished tasks deleted, then the journals of others compacted, in
//! one transaction of the writer thread. Each step seeks the partial index `tasks_finished`
//! (`compacted`, `status_at_ms`) from its oldest entry, so a pass costs what it removes, not the
//! number of tasks kept.

use super::*;

/// The tids of at most `?2` finished tasks with `compacted = {compacted}` whose status time is
/// before `?1`, oldest first; with `delivered`, only those whose push deliveries are all finished.
pub(super) fn due_sql(compacted: bool, delivered: bool) -> String {
    let delivered = match delivered {
        true => "AND NOT EXISTS (SELECT 1 FROM push_configs p WHERE p.tid = tasks.tid AND p.finished = 0)",
        false => "",
    };
    format!(
        "SELECT tid FROM tasks INDEXED BY tasks_finished
         WHERE state IN {} AND compacted = {} AND status_at_ms < ?1 {delivered}
         ORDER BY status_at_ms LIMIT ?2",
        sql_terminal_states(),
        u8::from(compacted)
    )
}

/// The tids [`due_sql`] finds.
fn due(
    tx: &rusqlite::Transaction<'_>,
    compacted: bool,
    delivered: bool,
    before_ms: i64,
    limit: usize,
) -> Result<Vec<i64>, rusqlite::Error> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = tx.prepare_cached(&due_sql(compacted, delivered))?;
    let rows = stmt.query_map(params![before_ms, limit], |r| r.get(0))?;
    rows.collect()
}

/// Prune in one immediate transaction; `last_seqs` (the writer's cache) forgets deleted tasks.
pub(super) fn prune(
    conn: &mut Connection,
    prune: &Prune,
    last_seqs: &mut HashMap<String, (i64, u64)>,
) -> Result<Pruned, StoreError> {
    let mut pruned = Pruned::default();
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mut deleted = Vec::new();
    if let Some(before) = prune.tasks_before_ms {
        // Compacted ones first: they are the oldest. A push delivery not finished by now never
        // will be: its config goes with the task.
        deleted = due(&tx, true, false, before, prune.limit)?;
        let rest = prune.limit.saturating_sub(deleted.len());
        if rest > 0 {
            deleted.extend(due(&tx, false, false, before, rest)?);
        }
        for tid in &deleted {
            for table in ["journal", "history", "artifacts", "push_configs", "tasks"] {
                tx.prepare_cached(&format!("DELETE FROM {table} WHERE tid = ?1"))?
                    .execute(params![tid])?;
            }
        }
        pruned.deleted = deleted.len() as u64;
    }
    if let Some(before) = prune.journals_before_ms {
        // A task whose push deliveries are not finished keeps its journal: the sender reads it.
        for tid in due(&tx, false, true, before, prune.limit)? {
            // The first append's row (seq 1) and the last one stay.
            tx.prepare_cached(
                "DELETE FROM journal WHERE tid = ?1 AND seq > 1
                   AND seq < (SELECT MAX(seq) FROM journal WHERE tid = ?1)",
            )?
            .execute(params![tid])?;
            tx.prepare_cached("UPDATE tasks SET compacted = 1 WHERE tid = ?1")?
                .execute(params![tid])?;
            pruned.compacted += 1;
        }
    }
    tx.commit()?;
    if !deleted.is_empty() {
        // Finished tasks leave the cache when they end; this keeps it exact whatever happens.
        let deleted: std::collections::HashSet<i64> = deleted.into_iter().collect();
        last_seqs.retain(|_, (tid, _)| !deleted.contains(tid));
    }
    Ok(pruned)
}
