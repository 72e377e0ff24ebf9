//! Reads on the pooled read connections: journal records, task rows, task views and their pages,
//! and the SQL of `list` and of a replay.

use super::*;

/// Run a `(seq, at_ms, body)` query and decode the entries after `after_seq` of its rows; `task_id`
/// names corrupt entries.
pub(super) fn read_records(
    conn: &Connection,
    dictionaries: &Dictionaries,
    sql: &str,
    params: impl rusqlite::Params,
    task_id: &str,
    after_seq: u64,
) -> Result<Vec<JournalRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let seq: u64 = get(row, "seq")?;
        let at_ms: i64 = get(row, "at_ms")?;
        // Decoded straight from SQLite's buffer when the body is text (no copy), else from its
        // decompressed frame.
        let body = row.get_ref("body").map_err(|e| StoreError::Column {
            column: "body".into(),
            source: e.into(),
        })?;
        packed::unpacked(body, dictionaries, conn, |body| {
            crate::store::decode_row(task_id, seq, at_ms, body, after_seq, &mut out)
        })
        .map_err(|reason| StoreError::Corrupt {
            task_id: task_id.to_owned(),
            seq,
            reason,
        })??;
    }
    Ok(out)
}

/// Read row `r`'s `body` (text, or compressed: [`packed`]) with `read`.
fn body<R>(
    r: &rusqlite::Row<'_>,
    dictionaries: &Dictionaries,
    conn: &Connection,
    read: impl FnOnce(&str) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    let column = |source: crate::store::BoxError| StoreError::Column {
        column: "body".into(),
        source,
    };
    let value = r.get_ref("body").map_err(|e| column(e.into()))?;
    packed::unpacked(value, dictionaries, conn, read).map_err(|reason| column(reason.into()))?
}

/// The view of task `id` (see [`Store::task_view`]), read in one read transaction.
pub(super) fn read_view(
    conn: &Connection,
    dictionaries: &Dictionaries,
    id: &str,
    history: Option<usize>,
) -> Result<Option<TaskView>, StoreError> {
    // One snapshot for the three reads (WAL: the transaction sees one commit's state).
    let tx = conn.unchecked_transaction()?;
    read_view_in(&tx, dictionaries, id, history)
}

/// A page of views (see [`Store::list_views`]), read in one read transaction: the matching count,
/// the page's ids from the status-time index, then each view.
pub(super) fn read_view_page(
    conn: &Connection,
    dictionaries: &Dictionaries,
    query: &crate::store::ViewQuery,
) -> Result<crate::store::ViewPage, StoreError> {
    use rusqlite::types::Value as Sql;
    let tx = conn.unchecked_transaction()?;
    let (filter, mut values) = view_filter(query);
    let param = |values: &mut Vec<Sql>, value: Sql| {
        values.push(value);
        format!("?{}", values.len())
    };
    let total: i64 = tx.query_row(
        &format!("SELECT COUNT(*) FROM tasks{filter}"),
        rusqlite::params_from_iter(values.iter()),
        |r| r.get(0),
    )?;
    let mut page = filter;
    if let Some((at, id)) = &query.after {
        let at = param(&mut values, (*at).into());
        let id = param(&mut values, id.clone().into());
        page.push_str(&format!(" AND (status_at_ms, id) < ({at}, {id})"));
    }
    let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
    let ids: Vec<String> = {
        let mut stmt = tx.prepare(&format!(
            "SELECT id FROM tasks{page} ORDER BY status_at_ms DESC, id DESC LIMIT {limit}"
        ))?;
        let rows = stmt.query_map(rusqlite::params_from_iter(values.iter()), |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    let mut views = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(view) = read_view_in(&tx, dictionaries, &id, query.history)? {
            views.push(view);
        }
    }
    Ok(crate::store::ViewPage {
        views,
        total: u64::try_from(total).unwrap_or(0),
    })
}

/// How many tasks match `query`'s filters, by state (see [`Store::state_counts`]): one
/// `GROUP BY` over the filters of [`read_view_page`].
pub(super) fn read_state_counts(
    conn: &Connection,
    query: &crate::store::ViewQuery,
) -> Result<Vec<(TaskState, u64)>, StoreError> {
    let (filter, values) = view_filter(query);
    let mut stmt = conn.prepare(&format!(
        "SELECT state, COUNT(*) AS n FROM tasks{filter} GROUP BY state"
    ))?;
    let mut rows = stmt.query(rusqlite::params_from_iter(values.iter()))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let state: String = get(r, "state")?;
        let state = TaskState::parse(&state).ok_or_else(|| StoreError::Column {
            column: "state".into(),
            source: format!("unknown task state `{state}`").into(),
        })?;
        out.push((state, get(r, "n")?));
    }
    Ok(out)
}

/// The `WHERE` clause of a [`crate::store::ViewQuery`]'s filters (the cursor aside) and its
/// parameters (`?1`, `?2`, … in order): shared by the page, its count and the counts by state, so
/// that a filter added to the query applies to all three.
fn view_filter(query: &crate::store::ViewQuery) -> (String, Vec<rusqlite::types::Value>) {
    use rusqlite::types::Value as Sql;
    let mut filter = String::from(" WHERE status_at_ms IS NOT NULL");
    let mut values: Vec<Sql> = Vec::new();
    let mut param = |value: Sql| {
        values.push(value);
        format!("?{}", values.len())
    };
    if let Some(p) = &query.principal {
        filter.push_str(&format!(" AND principal = {}", param(p.clone().into())));
    }
    if let Some(c) = &query.context_id {
        filter.push_str(&format!(" AND context_id = {}", param(c.clone().into())));
    }
    if let Some(state) = query.state {
        let s = param(state.as_str().to_owned().into());
        filter.push_str(&format!(" AND state = {s}"));
    }
    if let Some(t) = query.status_since_ms {
        filter.push_str(&format!(" AND status_at_ms >= {}", param(t.into())));
    }
    if let Some(t) = query.status_before_ms {
        filter.push_str(&format!(" AND status_at_ms < {}", param(t.into())));
    }
    if let Some(skill) = &query.skill_id {
        filter.push_str(&format!(" AND skill_id = {}", param(skill.clone().into())));
    }
    // A range of the `id` index, as in `TaskQuery::id_prefix`.
    if let Some(prefix) = query.id_prefix.as_deref().filter(|p| !p.is_empty()) {
        filter.push_str(&format!(" AND id >= {}", param(prefix.to_owned().into())));
        if let Some(upper) = crate::store::prefix_upper_bound(prefix) {
            filter.push_str(&format!(" AND id < {}", param(upper.into())));
        }
    }
    (filter, values)
}

/// The view of task `id`, read with `tx` (the caller's read transaction).
pub(super) fn read_view_in(
    tx: &Connection,
    dictionaries: &Dictionaries,
    id: &str,
    history: Option<usize>,
) -> Result<Option<TaskView>, StoreError> {
    let row = tx
        .prepare_cached(&format!(
            "SELECT {TASK_COLUMNS}, tid, status_message, status_at_ms, settled FROM tasks WHERE id = ?1"
        ))?
        .query(params![id])?
        .next()?
        .map(|r| -> Result<_, StoreError> {
            let message: Option<String> = get(r, "status_message")?;
            Ok((
                row_to_task(r)?,
                get::<i64>(r, "tid")?,
                message,
                get::<Option<i64>>(r, "status_at_ms")?,
                get::<bool>(r, "settled")?,
            ))
        })
        .transpose()?;
    let Some((record, tid, message, at_ms, settled)) = row else {
        return Ok(None);
    };
    let limit = history.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    let mut stmt = tx.prepare_cached(
        "SELECT body FROM (SELECT seq, body FROM history WHERE tid = ?1 ORDER BY seq DESC LIMIT ?2)
         ORDER BY seq",
    )?;
    let mut rows = stmt.query(params![tid, limit])?;
    let mut messages = Vec::new();
    while let Some(r) = rows.next()? {
        messages.push(body(r, dictionaries, tx, |b| {
            view::decode(id, "a history message", b)
        })?);
    }
    let mut stmt =
        tx.prepare_cached("SELECT pos, body FROM artifacts WHERE tid = ?1 ORDER BY pos, seq")?;
    let mut rows = stmt.query(params![tid])?;
    let mut pieces = Vec::new();
    while let Some(r) = rows.next()? {
        let pos: u64 = get(r, "pos")?;
        pieces.push((
            pos,
            body(r, dictionaries, tx, |b| view::decode(id, "an artifact", b))?,
        ));
    }
    Ok(Some(TaskView {
        record,
        status_message: message
            .map(|m| view::decode(id, "the status message", &m))
            .transpose()?,
        status_at_ms: at_ms.unwrap_or_default(),
        history: messages,
        artifacts: view::join_pieces(pieces),
        settled,
    }))
}

/// A task row selected with [`TASK_COLUMNS`].
pub(super) fn row_to_task(r: &Row<'_>) -> Result<TaskRecord, StoreError> {
    let id: String = get(r, "id")?;
    let state: String = get(r, "state")?;
    let state = TaskState::parse(&state).ok_or_else(|| StoreError::Corrupt {
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
        last_seq: get(r, "last_seq")?,
    })
}

/// The task rows `stmt` selects with `values`.
pub(super) fn query_tasks(
    stmt: &mut rusqlite::Statement<'_>,
    values: impl rusqlite::Params,
) -> Result<Vec<TaskRecord>, StoreError> {
    let mut rows = stmt.query(values)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(row_to_task(row)?);
    }
    Ok(out)
}

pub(super) const TASK_COLUMNS: &str = "id, context_id, skill_id, skill_version, principal, state, created_at_ms,
    COALESCE((SELECT at_ms FROM journal j WHERE j.tid = tasks.tid ORDER BY seq DESC LIMIT 1), created_at_ms)
        AS updated_at_ms,
    wake_at_ms, waits_on_call,
    COALESCE((SELECT COALESCE(last_seq, seq) FROM journal j WHERE j.tid = tasks.tid ORDER BY seq DESC LIMIT 1), 0)
        AS last_seq";

/// The rows of [`Store::journal_for_replay`]: the first and those from the last checkpoint on (found
/// in the partial index `journal_checkpoints`).
pub(super) const REPLAY_SQL: &str = "WITH t AS (SELECT tid FROM tasks WHERE id = ?1)
     SELECT seq, at_ms, body FROM journal
     WHERE tid = (SELECT tid FROM t)
       AND (seq = 1 OR seq >= (SELECT COALESCE(MAX(seq), 0) FROM journal
                               WHERE tid = (SELECT tid FROM t) AND checkpoint = 1))
     ORDER BY seq";

/// The `SELECT` of [`Store::list`] and its parameters (`?1`, `?2`, … in order).
pub(super) fn list_sql(query: &TaskQuery) -> (String, Vec<rusqlite::types::Value>) {
    let mut sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE 1=1");
    let mut values: Vec<rusqlite::types::Value> = Vec::new();
    let mut param = |value: rusqlite::types::Value| {
        values.push(value);
        format!("?{}", values.len())
    };
    if query.non_terminal {
        sql.push_str(" AND state NOT IN ");
        sql.push_str(sql_terminal_states());
    }
    if let Some(p) = &query.principal {
        sql.push_str(&format!(" AND principal = {}", param(p.clone().into())));
    }
    if let Some(t) = query.wake_due_ms {
        sql.push_str(&format!(
            " AND wake_at_ms IS NOT NULL AND wake_at_ms <= {}",
            param(t.into())
        ));
    }
    if query.waits_on_call {
        sql.push_str(" AND waits_on_call = 1");
    }
    if query.skip_idle_input {
        sql.push_str(&format!(
            " AND NOT (state = '{}' AND wake_at_ms IS NULL)",
            TaskState::InputRequired.as_str()
        ));
    }
    // A range of the `id` index (BINARY collation: UTF-8 byte order), not `LIKE`, which is
    // case-insensitive here and would need `%` and `_` escaped.
    if let Some(prefix) = query.id_prefix.as_deref().filter(|p| !p.is_empty()) {
        sql.push_str(&format!(" AND id >= {}", param(prefix.to_owned().into())));
        if let Some(upper) = crate::store::prefix_upper_bound(prefix) {
            sql.push_str(&format!(" AND id < {}", param(upper.into())));
        }
    }
    match query.limit {
        Some(limit) => sql.push_str(&format!(
            " ORDER BY created_at_ms DESC, id DESC LIMIT {limit}"
        )),
        None => sql.push_str(" ORDER BY created_at_ms, id"),
    }
    (sql, values)
}

/// The statements of [`unfinished_versions`]: the first pair, the next version of a skill, the
/// first pair of the next skill. Each is one seek of the partial index `tasks_unfinished_versions`
/// (`INDEXED BY`: a query the index cannot answer is an error, not a scan). An `OR` of the last two
/// would not be: SQLite walks the index from its start for it.
pub(super) fn unfinished_versions_sql() -> [String; 3] {
    let head = format!(
        "SELECT skill_id, skill_version FROM tasks INDEXED BY tasks_unfinished_versions
         WHERE state NOT IN {}",
        sql_terminal_states()
    );
    let order = "ORDER BY skill_id, skill_version LIMIT 1";
    [
        format!("{head} {order}"),
        format!("{head} AND skill_id = ?1 AND skill_version > ?2 {order}"),
        format!("{head} AND skill_id > ?1 {order}"),
    ]
}

/// [`Store::unfinished_versions`]: a walk of the partial index `tasks_unfinished_versions`, one
/// or two seeks per pair, so it costs the number of pairs, not of tasks.
pub(super) fn unfinished_versions(conn: &Connection) -> Result<Vec<(String, String)>, StoreError> {
    let [first, next_version, next_skill] = unfinished_versions_sql();
    let pair = |r: &rusqlite::Row<'_>| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?));
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut found = conn
        .prepare_cached(&first)?
        .query_row([], pair)
        .optional()?;
    while let Some((skill, version)) = found {
        found = conn
            .prepare_cached(&next_version)?
            .query_row(rusqlite::params![skill, version], pair)
            .optional()?;
        if found.is_none() {
            found = conn
                .prepare_cached(&next_skill)?
                .query_row(rusqlite::params![skill], pair)
                .optional()?;
        }
        pairs.push((skill, version));
    }
    Ok(pairs)
}
