//! Retention ([`Store::prune`]) on Postgres: finished tasks deleted, then the journals of others
//! compacted, each a single statement that locks the rows it takes with `SKIP LOCKED`, so that
//! workers pruning at once share the work instead of waiting on each other. Each seeks the partial
//! index `radkit_tasks_finished` (`compacted`, `status_at_ms`) from its oldest entry, so a pass
//! costs what it removes, not the number of tasks kept.

use super::*;

/// The finished tasks with `compacted` whose status time is before `$1`, oldest first, at most
/// `$2`, leaving out those another pruner holds; with `delivered`, only those whose push
/// deliveries are all finished.
fn due(compacted: bool, delivered: bool) -> String {
    let delivered = match delivered {
        true => {
            "AND NOT EXISTS (SELECT 1 FROM radkit_push_configs p
                             WHERE p.tid = radkit_tasks.tid AND NOT p.finished)"
        }
        false => "",
    };
    format!(
        "SELECT tid, id FROM radkit_tasks
         WHERE state IN {} AND compacted = {compacted} AND status_at_ms < $1 {delivered}
         ORDER BY status_at_ms LIMIT $2
         FOR UPDATE SKIP LOCKED",
        sql_terminal_states()
    )
}

/// Delete the tasks [`due`] finds, with everything that belongs to them (the lease log goes by
/// its `ON DELETE CASCADE`; a push config whose delivery has not finished by now never will). The
/// foreign keys are checked at the statement's end, once every part is gone.
pub(super) fn delete_sql(compacted: bool) -> String {
    format!(
        "WITH gone AS ({}),
         journal AS (DELETE FROM radkit_journal WHERE tid IN (SELECT tid FROM gone)),
         history AS (DELETE FROM radkit_history WHERE tid IN (SELECT tid FROM gone)),
         artifacts AS (DELETE FROM radkit_artifacts WHERE tid IN (SELECT tid FROM gone)),
         pushes AS (DELETE FROM radkit_push_configs WHERE tid IN (SELECT tid FROM gone)),
         dispatched AS (DELETE FROM radkit_dispatch WHERE task_id IN (SELECT id FROM gone))
         DELETE FROM radkit_tasks WHERE tid IN (SELECT tid FROM gone) RETURNING tid",
        due(compacted, false)
    )
}

/// Compact the journals of the tasks [`due`] finds whose push deliveries are finished (the sender
/// reads the journal): the first append's row (seq 1) and the last one stay.
pub(super) fn compact_sql() -> String {
    format!(
        "WITH due AS ({}),
         cut AS (DELETE FROM radkit_journal j USING due
                 WHERE j.tid = due.tid AND j.seq > 1
                   AND j.seq < (SELECT MAX(m.seq) FROM radkit_journal m WHERE m.tid = due.tid))
         UPDATE radkit_tasks t SET compacted = TRUE FROM due WHERE t.tid = due.tid
         RETURNING t.tid",
        due(false, true)
    )
}

impl PostgresStore {
    /// [`Store::prune`]: each statement is its own transaction, safe to repeat.
    pub(super) async fn prune_finished(&self, prune: &Prune) -> Result<Pruned, StoreError> {
        let mut pruned = Pruned::default();
        let limit = i64::try_from(prune.limit).unwrap_or(i64::MAX);
        if let Some(before) = prune.tasks_before_ms {
            // Compacted ones first: they are the oldest.
            for compacted in [true, false] {
                let rest = limit - i64::try_from(pruned.deleted).unwrap_or(i64::MAX);
                if rest <= 0 {
                    break;
                }
                let gone = self.rows(&delete_sql(compacted), &[&before, &rest]).await?;
                pruned.deleted += gone.len() as u64;
            }
        }
        if let Some(before) = prune.journals_before_ms {
            let cut = self.rows(&compact_sql(), &[&before, &limit]).await?;
            pruned.compacted = cut.len() as u64;
        }
        Ok(pruned)
    }
}
