//! The writers: appends queued from every task, committed in rounds (one transaction each, retried
//! on a serialization conflict), and how a rolled-back or failed statement is told and described.

use super::*;

/// Writer connections: one commits whatever is queued; the other commits a batch beside it only
/// while the backlog is large (see [`BESIDE`]).
pub(super) const WRITERS: usize = 2;

/// Appends queued while a writer commits that make the other commit beside it at once; fewer wait
/// for that commit to end (gathering what arrives meanwhile) and are then committed. Each
/// statement costs the server a fixed part, so small batches side by side cost more than one batch
/// of both; a large backlog gains from a second statement on the server's other cores
/// (`bench concurrent` on Postgres, see docs/benchmarks.md).
const BESIDE: usize = 64;

/// How long a writer waits for another's commit to end before it commits its own batch beside
/// it anyway: a commit that slow (a lock wait, a stalled connection) is not one to gather behind.
const GATHER_AT_MOST: std::time::Duration = std::time::Duration::from_millis(50);

/// How many writers are committing, and news when a commit ends.
#[derive(Default)]
pub(super) struct Turns {
    busy: std::sync::atomic::AtomicUsize,
    idle: tokio::sync::Notify,
}

pub(super) type Queue = Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<(Encoded, Reply)>>>;

/// Take what is queued behind `batch`'s first append, up to [`MAX_BATCH`].
fn drain(rx: &mut mpsc::UnboundedReceiver<(Encoded, Reply)>, batch: &mut Vec<(Encoded, Reply)>) {
    while batch.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(next) => batch.push(next),
            Err(_) => break,
        }
    }
}

/// One writer: take everything queued (up to [`MAX_BATCH`]), commit it, answer each caller. While
/// another writer commits, it waits for that commit to end, gathering, unless [`BESIDE`] appends
/// are queued.
pub(super) async fn writer_loop(
    config: Config,
    url: String,
    client: Option<Client>,
    queue: Queue,
    stats: Arc<super::super::Commits>,
    turns: Arc<Turns>,
) {
    use std::sync::atomic::Ordering;
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
            let Some(head) = rx.recv().await else {
                return;
            };
            let mut batch = vec![head];
            drain(&mut rx, &mut batch);
            let gather_until = tokio::time::Instant::now() + GATHER_AT_MOST;
            while batch.len() < BESIDE {
                // Registered before the look at `busy`, so the end of a commit is not missed.
                let idle = turns.idle.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                if turns.busy.load(Ordering::SeqCst) == 0 {
                    break;
                }
                tokio::select! {
                    next = rx.recv() => match next {
                        Some(next) => {
                            batch.push(next);
                            drain(&mut rx, &mut batch);
                        }
                        None => break,
                    },
                    () = &mut idle => break,
                    () = tokio::time::sleep_until(gather_until) => break,
                }
            }
            batch
        };
        turns.busy.fetch_add(1, Ordering::SeqCst);
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
        turns.busy.fetch_sub(1, Ordering::SeqCst);
        turns.idle.notify_waiters();
        stats.batch(batch.len());
        for ((_, reply), result) in batch.into_iter().zip(results) {
            let _ = reply.send(result);
        }
    }
}

/// How a writer's session plans [`APPEND_SQL`], the one statement it runs: once, whatever the
/// batch. With the server's default (`plan_cache_mode = auto`) a prepared statement is planned
/// for each execution while such custom plans look cheaper than the generic one, and for a
/// worker's small batches they did: 0.7–1 ms of the server's CPU for each append statement of
/// ten CTEs, most of them (`pg_stat_statements`, three workers at 100 × 100: 355 plans in 1,128
/// executions, against 12 in 624 for one engine's larger batches). Every lookup of the generic
/// plan is by index (`enable_seqscan = off`): a generic plan is made from the statistics of the
/// moment, and one made while the tables were small must not scan them whole once they are not.
/// A test pins the plan such a session makes
/// (`store_postgres::the_append_statement_plans_once_and_reads_by_index`).
pub(super) const WRITER_SESSION: &str =
    "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off";

/// A writer connection (`client`, or a new one) with the append statement prepared on it.
pub(super) async fn prepared_writer(
    config: &Config,
    url: &str,
    client: Option<Client>,
) -> Result<(Client, Statement), StoreError> {
    let client = match client {
        Some(c) => c,
        None => connect_writer(config, url).await?,
    };
    client
        .batch_execute(WRITER_SESSION)
        .await
        .map_err(|e| StoreError::backend("setting up the postgres writer session", e))?;
    let statement = client
        .prepare(APPEND_SQL)
        .await
        .map_err(|e| StoreError::backend("preparing the postgres append statement", e))?;
    Ok((client, statement))
}

/// Commit a batch: rounds in which each task appears once, each round one statement. A round that
/// fails fails its appends and every later one (earlier rounds stay committed); `true` when the
/// connection is gone.
pub(super) async fn commit_batch(
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
pub(super) const ROUND_RETRIES: u32 = 8;

/// The statement was rolled back whole because it lost a deadlock or a serialization conflict, so
/// running it again is safe.
pub(super) fn rolled_back_by_conflict(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(code_rolled_back)
}

/// The statement lost a deadlock or a serialization conflict, so it was rolled back whole.
pub(super) fn code_rolled_back(code: &tokio_postgres::error::SqlState) -> bool {
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
pub(super) async fn conflict_pause(retries: u32) {
    let pause = 1u64 << retries.clamp(1, 6);
    tokio::time::sleep(std::time::Duration::from_millis(
        pause + fastrand::u64(0..=pause),
    ))
    .await;
}

/// One statement, so one round trip and one implicit transaction, whatever the round's size: `locked`
/// takes the row locks of the tasks to update in `tid` order (see the module docs) before the
/// `UPDATE` touches a row (the count of its rows is a condition of no row, which the server
/// evaluates once, first; a join with it was a nested loop over all its rows for each row
/// updated in the generic plan the writers use, see `WRITER_SESSION`), the
/// `UPDATE` checks each task's expected seq and fencing token under the row lock (a row another
/// transaction holds is re-checked once it is free), the `INSERT` creates new tasks, and the journal
/// rows of exactly the appends that passed are inserted. When a task it wrote is left runnable and
/// unleased (created or answered by an engine that does not run it), `wake` notifies the claimers
/// (`listen::NOTIFY`, one row with a `NULL` id); the states are `CLAIMABLE`'s.
pub const APPEND_SQL: &str = "
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
      status_at_ms = CASE WHEN v.touched THEN v.at ELSE t.status_at_ms END,
      settled = COALESCE(v.settled, t.settled),
      waits_on_call = COALESCE(v.waits_on_call, t.waits_on_call),
      skill_version = COALESCE(v.skill_version, t.skill_version),
      lease_owner = CASE WHEN v.state IN ('completed', 'canceled', 'failed', 'rejected')
                         THEN NULL ELSE t.lease_owner END,
      lease_expires_ms = CASE WHEN v.state IN ('completed', 'canceled', 'failed', 'rejected')
                              THEN NULL ELSE t.lease_expires_ms END
  FROM UNNEST($2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[], $7::bool[], $8::bigint[],
              $26::bool[], $27::text[], $28::bool[], $29::text[], $40::bool[], $42::bool[],
              $44::bigint[], $47::text[])
       AS v(id, first_seq, last_seq, fence, state, set_wake, wake, touched, unless_state_was,
            set_message, message, settled, waits_on_call, at, skill_version)
  WHERE (SELECT count(*) FROM locked) >= 0
    AND t.id = v.id AND t.last_seq = v.first_seq - 1
    AND (v.fence IS NULL OR t.fence = v.fence)
  RETURNING t.tid, t.id,
            t.lease_owner IS NULL AND t.wake_at_ms IS NULL AND t.state IN ('submitted', 'working')
              AS free
), ins AS (
  INSERT INTO radkit_tasks (id, context_id, skill_id, skill_version, principal, state, created_at_ms,
                            updated_at_ms, wake_at_ms, last_seq, lease_owner, lease_expires_ms, fence,
                            status_message, status_at_ms, settled, waits_on_call)
  SELECT c.id, c.context_id, c.skill_id, c.skill_version, c.principal, c.state, c.created_at_ms, $1,
         c.wake, c.last_seq, c.owner, c.expires, c.fence, c.message,
         CASE WHEN c.touched THEN c.at END, COALESCE(c.settled, FALSE), c.waits_on_call
  FROM UNNEST($9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
              $15::bigint[], $16::bigint[], $17::bigint[], $18::text[], $19::bigint[], $20::bigint[],
              $30::text[], $31::bool[], $41::bool[], $43::bool[], $45::bigint[])
       AS c(id, context_id, skill_id, skill_version, principal, state, created_at_ms, wake, last_seq,
            owner, expires, fence, message, touched, settled, waits_on_call, at)
  ON CONFLICT (id) DO NOTHING
  RETURNING tid, id,
            lease_owner IS NULL AND wake_at_ms IS NULL AND state IN ('submitted', 'working') AS free
), done AS (
  SELECT tid, id, free FROM upd UNION ALL SELECT tid, id, free FROM ins
), journal AS (
  INSERT INTO radkit_journal (tid, seq, last_seq, at_ms, checkpoint, body)
  SELECT done.tid, j.seq, j.last_seq, j.at, j.checkpoint, j.body
  FROM UNNEST($21::text[], $22::bigint[], $25::bigint[], $23::bool[], $24::text[], $46::bigint[])
       AS j(id, seq, last_seq, checkpoint, body, at)
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
), wake AS (
  SELECT pg_notify('radkit_work', COALESCE(current_schema(), '')) FROM done WHERE free LIMIT 1
)
SELECT id FROM done UNION ALL SELECT NULL FROM wake";

pub(super) async fn commit_round(
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
    // Each append's own time (the writer's): journal rows and status times.
    let mut u_at: Vec<i64> = Vec::new();
    // The version a task moved to (`migrated`), for its row.
    let mut u_version: Vec<Option<&str>> = Vec::new();
    let mut c_at: Vec<i64> = Vec::new();
    let mut j_at: Vec<i64> = Vec::new();
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
                c_at.push(append.at_ms);
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
                u_at.push(append.at_ms);
                u_version.push(append.migrated_to());
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
        j_at.push(append.at_ms);
    }
    let params: [&(dyn ToSql + Sync); 47] = [
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
        &u_at,
        &c_at,
        &j_at,
        &u_version,
    ];
    let committed = client.query(statement, &params).await?;
    // The statement has committed: an unreadable answer fails the round's appends, whose runs then
    // resume from the journal, which holds what was committed.
    let done = match committed
        .iter()
        .filter_map(|r| get::<Option<String>>(r, "id").transpose())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The append that finishes a task gives its lease back (`Leases::release`'s contract): it
    /// spells the terminal states as a literal.
    #[test]
    fn the_append_statement_frees_the_lease_of_a_task_it_finishes() {
        let clear = format!("v.state IN {}", sql_terminal_states());
        assert_eq!(APPEND_SQL.matches(&clear).count(), 2, "{clear}");
    }

    #[test]
    fn the_append_statement_notifies_as_listeners_expect_for_claimable_states() {
        assert!(APPEND_SQL.contains(listen::NOTIFY));
        let states = sql_state_list(&CLAIMABLE);
        assert_eq!(
            APPEND_SQL.matches(&format!("state IN {states}")).count(),
            2,
            "{states}"
        );
    }
}
