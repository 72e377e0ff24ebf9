//! The writer thread: it owns the write connection and commits everything queued at that moment
//! (appends of many tasks) in one transaction, then answers each append.

use super::*;

/// What the writer thread is asked to do.
#[allow(clippy::large_enum_variant)] // appends are the common case: moved, never boxed
pub(super) enum Job {
    /// Commit an append (with the others queued beside it) and answer it.
    Append(Encoded, Reply),
    /// Prune finished tasks in a transaction of its own, after the appends queued before it.
    Prune(
        crate::store::Prune,
        oneshot::Sender<Result<Pruned, StoreError>>,
    ),
    /// Store a trained compression dictionary, after the appends queued before it, and then
    /// compress new appends with it.
    Dictionary(super::dictionary::Trained),
}

/// The writer thread: block for one job, take every other job queued, commit the appends among
/// them at once, answer all, then run the prunes (each its own bounded transaction), and wake the
/// checkpointer (`checkpoint`).
pub(super) fn writer_loop(
    mut conn: Connection,
    rx: mpsc::Receiver<Job>,
    stats: std::sync::Weak<Shared>,
    checkpointer: Option<super::checkpoint::Wake>,
) {
    let mut last_seqs: HashMap<String, (i64, u64)> = HashMap::new();
    while let Ok(first) = rx.recv() {
        let mut batch = Vec::new();
        let mut prunes = Vec::new();
        let mut dictionaries = Vec::new();
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Append(encoded, reply) => batch.push((encoded, reply)),
                Job::Prune(prune, reply) => prunes.push((prune, reply)),
                Job::Dictionary(trained) => dictionaries.push(trained),
            }
            if batch.len() < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            let count = batch.len();
            let results = commit_batch(&mut conn, &mut batch, &mut last_seqs);
            if let Some(shared) = stats.upgrade() {
                shared.commits.batch(count);
            }
            for ((_, reply), result) in batch.into_iter().zip(results) {
                let _ = reply.send(result);
            }
        }
        for (prune, reply) in prunes {
            let _ = reply.send(super::prune::prune(&mut conn, &prune, &mut last_seqs));
        }
        for trained in dictionaries {
            store_dictionary(&mut conn, &trained, &stats);
        }
        if let Some(checkpointer) = &checkpointer {
            checkpointer.committed();
        }
    }
}

/// Commit `trained` to the file, then hand it to the appends (never before: no row may name a
/// dictionary the file does not hold). A failure keeps compressing as before.
fn store_dictionary(
    conn: &mut Connection,
    trained: &super::dictionary::Trained,
    shared: &std::sync::Weak<Shared>,
) {
    let Some(shared) = shared.upgrade() else {
        return;
    };
    let installed = super::dictionary::store(conn, trained)
        .map_err(|e| e.to_string())
        .and_then(|()| shared.dictionaries.install(trained.id, &trained.dict));
    match installed {
        Ok(()) => tracing::info!(
            id = trained.id,
            bytes = trained.dict.len(),
            samples = trained.samples,
            held_out_before = trained.before,
            held_out_after = trained.after,
            trained_ms = trained.took.as_millis(),
            "sqlite: compressing with a dictionary trained on this file's bodies"
        ),
        Err(reason) => {
            tracing::warn!(id = trained.id, %reason, "sqlite: a compression dictionary not stored");
        }
    }
}

/// Most running tasks whose last seq the writer keeps (see [`commit_batch`]).
pub(super) const CACHED_SEQS: usize = 20_000;

/// Apply a batch in one transaction. A conflicting append is refused alone; a backend failure fails
/// the whole batch (nothing of it is committed).
///
/// `last_seqs` caches each task's last seq: the writer thread is the only writer of the journal and
/// task rows in this process (the push-config table has its own writes) (several processes must not write one SQLite file; use Postgres for that), so the cache is
/// exact once loaded. It holds tasks that are running: a task that ends or stops to wait for input
/// leaves it (its next append, maybe days later, reads its seq once), and it is dropped whole (its
/// memory with it) when a batch fails or it passes [`CACHED_SEQS`] tasks.
pub(super) fn commit_batch(
    conn: &mut Connection,
    batch: &mut [(Encoded, Reply)],
    last_seqs: &mut HashMap<String, (i64, u64)>,
) -> Vec<Result<(), StoreError>> {
    let mut results: Vec<Result<(), StoreError>> = Vec::with_capacity(batch.len());
    let outcome = (|| -> Result<(), rusqlite::Error> {
        // IMMEDIATE: the write lock is taken (waiting out the busy timeout) before anything is
        // read. Push-config writes (`sqlite/push.rs`) come from other connections; a deferred
        // transaction that read before one of them committed would fail with SQLITE_BUSY_SNAPSHOT
        // instead of waiting.
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for (encoded, _) in batch.iter() {
            results.push(apply_one(&tx, encoded, last_seqs)?);
        }
        tx.commit()
    })();
    match outcome {
        Ok(()) => {
            if last_seqs.len() > CACHED_SEQS {
                *last_seqs = HashMap::new();
            }
            results
        }
        Err(e) => {
            *last_seqs = HashMap::new();
            // Every append of the batch failed of the same error.
            let e = Arc::new(e);
            batch
                .iter()
                .map(|_| {
                    Err(StoreError::backend(
                        "committing to sqlite",
                        Box::new(e.clone()) as crate::store::BoxError,
                    ))
                })
                .collect()
        }
    }
}

pub(super) fn apply_one(
    tx: &rusqlite::Transaction<'_>,
    encoded: &Encoded,
    last_seqs: &mut HashMap<String, (i64, u64)>,
) -> Result<Result<(), StoreError>, rusqlite::Error> {
    let append = &encoded.append;
    let packed = &encoded.packed;
    // The writer's time for these entries: the journal's, the row's and the status's.
    let now = append.at_ms;
    let conflict = |expected| StoreError::Conflict {
        task_id: append.task_id.clone(),
        expected,
        got: append.first_seq,
    };
    let known = match last_seqs.get(&append.task_id) {
        Some(known) => Some(*known),
        None => tx
            .prepare_cached("SELECT tid, COALESCE((SELECT COALESCE(last_seq, seq) FROM journal j WHERE j.tid = tasks.tid ORDER BY seq DESC LIMIT 1), 0) FROM tasks WHERE id = ?1")?
            .query_row(params![append.task_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, u64>(1)?)))
            .optional()?,
    };
    let tid = match (&append.create, known) {
        (Some(record), None) if append.first_seq == 1 && record.id == append.task_id => {
            tx.prepare_cached(
                "INSERT INTO tasks (id, context_id, skill_id, skill_version, principal, state, created_at_ms, updated_at_ms, wake_at_ms, waits_on_call)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?
            .execute(params![
                record.id,
                record.context_id,
                record.skill_id,
                record.skill_version,
                record.principal,
                record.state.as_str(),
                record.created_at_ms,
                now,
                record.wake_at_ms,
                record.waits_on_call
            ])?;
            tx.last_insert_rowid()
        }
        (Some(_), _) | (None, None) => return Ok(Err(conflict(0))),
        (None, Some((_, last))) if last + 1 != append.first_seq => {
            return Ok(Err(conflict(last + 1)))
        }
        (None, Some((tid, _))) => tid,
    };
    tx.prepare_cached(
        "INSERT INTO journal (tid, seq, last_seq, at_ms, checkpoint, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        tid,
        encoded.first_seq,
        encoded.last_seq_column(),
        now,
        encoded.checkpoint,
        packed.body(&encoded.body)
    ])?;
    // The row changes only when the state, the status or the timer does: `last_seq` and
    // `updated_at_ms` are read from the journal, so a plain step writes no task-row page (one page
    // less per commit). The status message's rule reads the state before the append: SQLite
    // evaluates every `SET` expression against the row as it was.
    let view = &encoded.view;
    if append.state.is_some()
        || append.wake_at_ms.is_some()
        || append.waits_on_call.is_some()
        || append.migrated_to().is_some()
        || view.touched
        || view.settled == Some(true)
    {
        let (set_wake, wake) = match append.wake_at_ms {
            Some(w) => (true, w),
            None => (false, None),
        };
        tx.prepare_cached(
            "UPDATE tasks SET state = COALESCE(?1, state),
                wake_at_ms = CASE WHEN ?2 THEN ?3 ELSE wake_at_ms END,
                status_message = CASE WHEN NOT ?4 THEN status_message
                                      WHEN ?5 IS NOT NULL AND state <> ?5 THEN NULL
                                      WHEN ?6 THEN ?7 ELSE status_message END,
                status_at_ms = CASE WHEN ?4 THEN ?8 ELSE status_at_ms END,
                settled = COALESCE(?10, settled),
                waits_on_call = COALESCE(?11, waits_on_call),
                skill_version = COALESCE(?12, skill_version)
             WHERE tid = ?9",
        )?
        .execute(params![
            append.state.map(TaskState::as_str),
            set_wake,
            wake,
            view.touched,
            view.unless_state_was,
            view.set,
            view.message,
            now,
            tid,
            view.settled,
            append.waits_on_call,
            append.migrated_to()
        ])?;
    } else if view.settled == Some(false) {
        // A new visit (most appends) unsettles a settled task only: no row write otherwise.
        tx.prepare_cached("UPDATE tasks SET settled = 0 WHERE tid = ?1 AND settled = 1")?
            .execute(params![tid])?;
    }
    write_view_rows(tx, tid, view, packed)?;
    // Only an empty append at seq 0 could make `last_seq` negative; then the cache forgets the
    // task and the next append reads it from the journal.
    let stops = append
        .state
        .is_some_and(|s| s.is_terminal() || s == TaskState::InputRequired);
    match u64::try_from(encoded.last_seq) {
        Ok(last_seq) if !stops => {
            last_seqs.insert(append.task_id.clone(), (tid, last_seq));
        }
        _ => {
            last_seqs.remove(&append.task_id);
        }
    }
    Ok(Ok(()))
}

/// An append's history messages and artifact pieces (see [`view::MemView::apply`] for the rules).
pub(super) fn write_view_rows(
    tx: &rusqlite::Transaction<'_>,
    tid: i64,
    view: &EncodedView,
    packed: &super::packed::Packed,
) -> Result<(), rusqlite::Error> {
    for (i, (seq, body)) in view.history.iter().enumerate() {
        tx.prepare_cached("INSERT INTO history (tid, seq, body) VALUES (?1, ?2, ?3)")?
            .execute(params![tid, seq, packed.history(i, body)])?;
    }
    for (i, (seq, artifact_id, replaces, body)) in view.artifacts.iter().enumerate() {
        let pos: Option<i64> = tx
            .prepare_cached("SELECT MIN(pos) FROM artifacts WHERE tid = ?1 AND artifact_id = ?2")?
            .query_row(params![tid, artifact_id], |r| r.get(0))?;
        if *replaces {
            tx.prepare_cached("DELETE FROM artifacts WHERE tid = ?1 AND artifact_id = ?2")?
                .execute(params![tid, artifact_id])?;
        }
        tx.prepare_cached(
            "INSERT INTO artifacts (tid, seq, pos, artifact_id, body) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            tid,
            seq,
            pos.unwrap_or(*seq),
            artifact_id,
            packed.artifact(i, body)
        ])?;
    }
    Ok(())
}
