//! The console's live streams (SSE). The task list's stream follows the engine's feed of changed
//! tasks ([`crate::engine::Engine::watch_changes`]) and sends each changed row the viewer may see:
//! `row` (its HTML, to replace or add), `gone` (it no longer matches the filters) and `counts`
//! (the state counts, at most once a second). A task's stream sends `changed` with the journal's
//! last seq when an append to it commits; the page then fetches its fragment. Both also read the
//! store every few seconds, for the tasks other workers of a shared store run. Each stream takes
//! one of the viewer's stream slots (`ServerConfig::max_streams_per_principal`), as A2A streams do.

use std::collections::{BTreeSet, HashMap};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde_json::json;

use super::super::AppState;
use super::list::{self, Params};
use super::session::{self, Viewer};
use crate::engine::TaskChange;
use crate::model::TaskId;

/// How often a stream reads the store for changes it was not told of.
const POLL: Duration = Duration::from_secs(3);

/// How long changes are gathered before the rows are read and sent.
const GATHER: Duration = Duration::from_millis(200);

/// Rows of the list stream remembered (id and last seq sent), to skip a row that did not change.
const REMEMBERED: usize = 4_096;

fn event(name: &str, data: serde_json::Value) -> Result<Event, Infallible> {
    Ok(Event::default().event(name).data(data.to_string()))
}

fn slot(state: &AppState, viewer: &Viewer) -> Result<super::super::open::Slot, Response> {
    state.streams.take(&viewer.caller).ok_or_else(|| {
        (
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "too many streams open: at most {} per caller",
                state.streams.limit()
            ),
        )
            .into_response()
    })
}

/// `GET /console/events?<the list's filters>`.
pub(super) async fn list_events(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(params): Query<Params>,
) -> Response {
    let Ok(viewer) = session::viewer(&state, &headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let filters = match params.parse() {
        Ok(filters) => filters,
        Err(text) => return (StatusCode::BAD_REQUEST, text).into_response(),
    };
    let slot = match slot(&state, &viewer) {
        Ok(slot) => slot,
        Err(refusal) => return refusal,
    };
    let changes = state.engine.watch_changes();
    let stream = list_stream(state, viewer, params, filters, changes, slot);
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn list_stream(
    state: Arc<AppState>,
    viewer: Viewer,
    params: Params,
    filters: list::Filters,
    mut changes: crate::engine::TaskChanges,
    slot: super::super::open::Slot,
) -> impl Stream<Item = Result<Event, Infallible>> {
    async_stream(move |tx| async move {
        let _slot = slot;
        let mut sent: HashMap<String, u64> = HashMap::new();
        let mut polled_since = crate::journal::now_ms();
        let mut poll = tokio::time::interval(POLL);
        poll.tick().await;
        loop {
            let mut ids: BTreeSet<String> = BTreeSet::new();
            tokio::select! {
                change = changes.next() => match change {
                    Some(TaskChange::Changed(id)) => { ids.insert(id.to_string()); }
                    Some(TaskChange::Missed(_)) => {
                        if tx.send(event("reload", json!({}))).await.is_err() { return; }
                        continue;
                    }
                    None => return,
                },
                _ = poll.tick() => {
                    // Tasks whose status changed since the last read (other workers' included).
                    let since = polled_since - 1_000;
                    polled_since = crate::journal::now_ms();
                    let mut query = filters.query(&viewer, 200);
                    query.state = None;
                    query.after = None;
                    query.status_since_ms = Some(since.max(filters.since_ms.unwrap_or(i64::MIN)));
                    if let Ok(page) = state.engine.list_views(&viewer.caller, query).await {
                        ids.extend(page.views.into_iter().map(|v| v.record.id));
                    }
                }
            }
            // Gather what else changes meanwhile, so that a busy task is read once.
            let gather = tokio::time::sleep(GATHER);
            tokio::pin!(gather);
            loop {
                tokio::select! {
                    _ = &mut gather => break,
                    change = changes.next() => match change {
                        Some(TaskChange::Changed(id)) => { ids.insert(id.to_string()); }
                        Some(TaskChange::Missed(_)) => break,
                        None => return,
                    }
                }
            }
            let mut any = false;
            for id in ids {
                let view = match state
                    .engine
                    .view(&viewer.caller, &TaskId::from(id.clone()), Some(0))
                    .await
                {
                    Ok(view) => view,
                    // Not the viewer's, or gone.
                    Err(_) => continue,
                };
                if sent.get(&id) == Some(&view.record.last_seq) {
                    continue;
                }
                if sent.len() >= REMEMBERED {
                    sent.clear();
                }
                sent.insert(id.clone(), view.record.last_seq);
                any = true;
                let mut query = filters.query(&viewer, 1);
                query.after = None;
                let data = match crate::store::view_matches(&view, &query) {
                    true => json!({ "id": id, "html": list::row(&view).into_string() }),
                    false => json!({ "id": id }),
                };
                let name = if data.get("html").is_some() {
                    "row"
                } else {
                    "gone"
                };
                if tx.send(event(name, data)).await.is_err() {
                    return;
                }
            }
            if any {
                if let Ok(counts) = list::counts(&state, &viewer, &params, &filters).await {
                    if tx
                        .send(event("counts", json!({ "html": counts.into_string() })))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    })
}

/// `GET /console/tasks/{id}/events`: `changed` with the journal's last seq, each time it grows.
pub(super) async fn task_events(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let Ok(viewer) = session::viewer(&state, &headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let task_id = TaskId::from(id);
    // Visible to the viewer, or nothing to follow.
    if let Err(e) = state.engine.view(&viewer.caller, &task_id, Some(0)).await {
        return match e {
            crate::engine::EngineError::TaskNotFound(_) => StatusCode::NOT_FOUND.into_response(),
            other => (StatusCode::INTERNAL_SERVER_ERROR, other.to_string()).into_response(),
        };
    }
    let slot = match slot(&state, &viewer) {
        Ok(slot) => slot,
        Err(refusal) => return refusal,
    };
    let mut changes = state.engine.watch_changes();
    let stream = async_stream(move |tx| async move {
        let _slot = slot;
        let mut last = 0u64;
        let mut poll = tokio::time::interval(POLL);
        loop {
            let seq = match state.engine.view(&viewer.caller, &task_id, Some(0)).await {
                Ok(view) => view.record.last_seq,
                Err(_) => return,
            };
            if seq != last {
                last = seq;
                if tx
                    .send(event("changed", json!({ "seq": seq })))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            // Until this task changes here, or the next read of the store.
            loop {
                tokio::select! {
                    _ = poll.tick() => break,
                    change = changes.next() => match change {
                        Some(TaskChange::Changed(id)) if *id == *task_id.as_str() => break,
                        Some(TaskChange::Missed(_)) => break,
                        Some(TaskChange::Changed(_)) => continue,
                        None => return,
                    }
                }
            }
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// A stream of what `produce` sends, produced while the stream is read; the producer stops when
/// the stream is dropped (its client gone), at its next send.
fn async_stream<F, Fut>(produce: F) -> impl Stream<Item = Result<Event, Infallible>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<Event, Infallible>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let task = tokio::spawn(produce(tx));
    let abort = AbortOnDrop(task);
    futures::stream::unfold((rx, abort), |(mut rx, abort)| async move {
        rx.recv().await.map(|item| (item, (rx, abort)))
    })
}

/// Stops the producer when the stream it feeds is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
