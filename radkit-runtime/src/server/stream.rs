//! SSE for `message/stream` and `tasks/resubscribe`: journal records become A2A update events, each
//! wrapped in the JSON-RPC response envelope of the request. The stream ends after the event marked
//! `final` (input-required or terminal) that reflects the task's current state.

use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::stream::{self, Stream, StreamExt};
use serde_json::Value;

use super::jsonrpc;
use crate::engine::{stream_event, StreamEvent, Subscription};
use crate::journal::Entry;
use crate::model::{Task, TaskState};

fn sse_event(id: &Value, result: impl serde::Serialize) -> Result<Event, Infallible> {
    Ok(Event::default().data(jsonrpc::ok(id, result).to_string()))
}

struct Follow {
    sub: Subscription,
    id: Value,
    done: bool,
}

/// Stream `first` (if any), then every journal record after the subscription's start as an event;
/// `done` ends the stream right after `first` (the task was already settled).
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
            let record = f.sub.next().await?;
            let Some(event) = stream_event(&f.sub.task_id, &f.sub.context_id, &record) else {
                continue;
            };
            let event = match event {
                StreamEvent::Status(mut status) => {
                    if status.is_final && status.status.state == TaskState::InputRequired {
                        // A past question in a replay is not the end of the story: it is final only if
                        // nothing already journaled answers it.
                        let answered = f.sub.upcoming().any(|r| {
                            matches!(
                                r.entry,
                                Entry::MessageReceived { .. }
                                    | Entry::Activated { .. }
                                    | Entry::Terminal { .. }
                            )
                        });
                        status.is_final = !answered;
                    }
                    f.done = status.is_final;
                    sse_event(&f.id, status)
                }
                StreamEvent::Artifact(artifact) => sse_event(&f.id, artifact),
            };
            return Some((event, f));
        }
    });
    Sse::new(head.chain(tail)).keep_alive(KeepAlive::default())
}
