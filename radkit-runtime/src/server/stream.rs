//! SSE for `message/stream` and `tasks/resubscribe`: journal records become A2A update events, each
//! wrapped in the JSON-RPC response envelope of the request. The stream ends after the event marked
//! `final` (input-required or terminal) that reflects the task's current state.

use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::stream::{self, Stream, StreamExt};
use serde_json::Value;

use super::errors::engine_error;
use super::jsonrpc;
use crate::engine::{stream_event, StreamEvent, Subscription};
use crate::model::Task;

fn sse_event(id: &Value, result: impl serde::Serialize) -> Result<Event, Infallible> {
    Ok(Event::default().data(jsonrpc::ok(id, result).to_string()))
}

struct Follow {
    sub: Subscription,
    id: Value,
    done: bool,
}

/// Stream `first` (if any), then every journal record after the subscription's start as an event,
/// until the update the subscription marks final; `done` ends the stream right after `first` (the
/// task was already settled). A subscription that fails (the store cannot be read) ends the stream
/// with a JSON-RPC error event, never silently.
pub(crate) fn sse(
    sub: Subscription,
    id: Value,
    first: Option<Task>,
    done: bool,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let head = stream::iter(first.map(|task| sse_event(&id, task)));
    let follow = Follow { sub, id, done };
    let tail = stream::unfold(follow, |mut f| async move {
        loop {
            if f.done {
                return None;
            }
            let update = match f.sub.next().await? {
                Ok(update) => update,
                Err(error) => {
                    f.done = true;
                    let error = engine_error(error, false);
                    let event = Event::default().data(jsonrpc::error(&f.id, error).to_string());
                    return Some((Ok(event), f));
                }
            };
            f.done = update.is_final;
            let Some(event) = stream_event(&f.sub.task_id, &f.sub.context_id, &update) else {
                continue;
            };
            let event = match event {
                StreamEvent::Status(status) => sse_event(&f.id, status),
                StreamEvent::Artifact(artifact) => sse_event(&f.id, artifact),
            };
            return Some((event, f));
        }
    });
    Sse::new(head.chain(tail)).keep_alive(KeepAlive::default())
}
