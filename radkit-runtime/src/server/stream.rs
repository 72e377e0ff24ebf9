//! SSE for `message/stream` and `tasks/resubscribe`: journal records become A2A update events, each
//! wrapped in the JSON-RPC response envelope of the request. The stream ends after the event marked
//! `final` (input-required or terminal) that reflects the task's current state. It also counts the
//! streams each caller has open ([`Slots`]), so that no principal holds more than its share.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::stream::{self, Stream, StreamExt};
use serde_json::Value;

use super::errors::engine_error;
use super::jsonrpc;
use crate::engine::{stream_event, Caller, StreamEvent, Subscription};
use crate::model::Task;

fn sse_event(id: &Value, result: impl serde::Serialize) -> Result<Event, Infallible> {
    Ok(Event::default().data(jsonrpc::ok(id, result).to_string()))
}

/// The streams open for each caller (the operator is one caller), each at most `limit`.
pub(crate) struct Slots {
    limit: usize,
    open: Mutex<HashMap<Caller, usize>>,
}

impl Slots {
    pub(crate) fn new(limit: usize) -> Self {
        Slots {
            limit,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The most streams one caller may have open.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// A slot for one more of `caller`'s streams, or `None` when it has `limit` open.
    pub(crate) fn take(self: &Arc<Self>, caller: &Caller) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(caller.clone()).or_insert(0);
        if *count >= self.limit {
            if *count == 0 {
                open.remove(caller);
            }
            return None;
        }
        *count += 1;
        Some(Slot {
            slots: self.clone(),
            caller: caller.clone(),
        })
    }
}

/// One open stream of a caller; given back when the stream is dropped (ended, or its client gone).
pub(crate) struct Slot {
    slots: Arc<Slots>,
    caller: Caller,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self
            .slots
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.caller) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.caller);
            }
        }
    }
}

struct Follow {
    sub: Subscription,
    id: Value,
    done: bool,
    /// Held for as long as the stream lives.
    _slot: Slot,
}

/// Stream `first` (if any), then every journal record after the subscription's start as an event,
/// until the update the subscription marks final; `done` ends the stream right after `first` (the
/// task was already settled). A subscription that fails (the store cannot be read) ends the stream
/// with a JSON-RPC error event, never silently. `slot` is given back when the stream is dropped.
pub(crate) fn sse(
    sub: Subscription,
    id: Value,
    first: Option<Task>,
    done: bool,
    slot: Slot,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let head = stream::iter(first.map(|task| sse_event(&id, task)));
    let follow = Follow {
        sub,
        id,
        done,
        _slot: slot,
    };
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
