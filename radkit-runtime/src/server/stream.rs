//! SSE for `message/stream` and `tasks/resubscribe`: journal records become A2A update events, each
//! wrapped in the JSON-RPC response envelope of the request. The stream ends after the event marked
//! `final` (input-required or terminal) that reflects the task's current state. It also counts the
//! streams each caller has open ([`Slots`]), so that no principal holds more than its share.
//!
//! **Resumable**: every event carries `id: <journal seq>` (the seq of the record it shows; the opening
//! task, the seq it reflects). A client that reconnects with `Last-Event-ID: <seq>` gets exactly the
//! events after that one, from the journal, on any server sharing the store and after a restart.
//! A stream that cannot start answers with one SSE `error` event holding the JSON-RPC error, so a
//! streaming client reads the error as it reads any event.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::stream::{self, Stream, StreamExt};
use serde_json::Value;

use super::errors::engine_error;
use super::jsonrpc;
use super::methods::Opened;
use super::wire::Wire;
use crate::engine::{stream_event, Caller, Subscription};
use crate::model::Task;

/// How a binding frames each event's data.
#[derive(Debug, Clone)]
pub(crate) enum Envelope {
    /// JSON-RPC: every event is the response to the request with this id.
    JsonRpc(Value),
    /// HTTP+JSON: every event is the item itself; an error is `{"error": <google.rpc.Status>}`.
    Bare,
}

impl Envelope {
    fn frame(&self, wire: Wire, item: Result<Value, jsonrpc::RpcError>) -> Value {
        match (self, item) {
            (Envelope::JsonRpc(id), Ok(item)) => jsonrpc::ok(id, item),
            (Envelope::JsonRpc(id), Err(error)) => wire.rpc_error(id, error),
            (Envelope::Bare, Ok(item)) => item,
            (Envelope::Bare, Err(error)) => super::rest::status_body(&error).1,
        }
    }
}

/// The event of journal seq `seq`: `item` (or the error that writing it gave) framed by `envelope`.
/// An error is an `error` event (the SSE event name the official SDKs raise as the error it holds;
/// clients that ignore event names read the same data).
fn sse_event(
    envelope: &Envelope,
    wire: Wire,
    seq: Option<u64>,
    item: Result<Value, jsonrpc::RpcError>,
) -> Result<Event, Infallible> {
    let failed = item.is_err();
    let mut event = Event::default().data(envelope.frame(wire, item).to_string());
    if let Some(seq) = seq {
        event = event.id(seq.to_string());
    }
    if failed {
        event = event.event("error");
    }
    Ok(event)
}

/// The answer to a streaming JSON-RPC request that cannot start: an SSE stream of one `error`
/// event, the JSON-RPC error for request `id` in `wire`'s form.
pub(crate) fn error(id: &Value, wire: Wire, error: jsonrpc::RpcError) -> axum::response::Response {
    use axum::response::IntoResponse;
    let event = sse_event(&Envelope::JsonRpc(id.clone()), wire, None, Err(error));
    Sse::new(stream::iter([event])).into_response()
}

/// The journal seq a reconnecting client saw last (its `Last-Event-ID` header), if it sent one.
pub(crate) fn last_event_id(
    headers: &axum::http::HeaderMap,
) -> Result<Option<u64>, jsonrpc::RpcError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| {
            jsonrpc::RpcError::new(
                jsonrpc::codes::INVALID_PARAMS,
                "`Last-Event-ID` must be the id of an event of this stream (a journal seq)",
            )
        })
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

/// One item of an opened stream, before a binding frames it: the opening task, an update event, or
/// the error that ended the stream (the store could not be read). Tasks and events carry the
/// journal seq they reflect (SSE's event id).
pub(crate) enum Item {
    /// The task as it is now, at journal seq `.1`.
    Task(Task, u64),
    /// An update, journal seq `.1`.
    Event(crate::engine::StreamEvent, u64),
    /// The stream ends with this error.
    Error(jsonrpc::RpcError),
}

struct Follow {
    sub: Subscription,
    done: bool,
    until_end: bool,
    /// Held for as long as the stream lives.
    _slot: Slot,
}

/// The items of an opened stream: its first task (if any), then every journal record after the
/// subscription's start as an event, until the update the subscription marks final, or with
/// `until_end` the task's `terminal` record (`done` ends it right after the first task: the task
/// was already settled). A subscription that fails ends the stream with an [`Item::Error`], never
/// silently. The caller's slot is given back when the stream is dropped.
pub(crate) fn items(opened: Opened) -> impl Stream<Item = Item> + Send {
    let Opened {
        sub,
        first,
        done,
        until_end,
        slot,
    } = opened;
    let head = stream::iter(first.map(|(task, seq)| Item::Task(task, seq)));
    let follow = Follow {
        sub,
        done,
        until_end,
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
                    return Some((Item::Error(engine_error(error, false)), f));
                }
            };
            f.done = match f.until_end {
                true => matches!(update.record.entry, crate::journal::Entry::Terminal { .. }),
                false => update.is_final,
            };
            let Some(event) = stream_event(&f.sub.task_id, &f.sub.context_id, &update) else {
                continue;
            };
            return Some((Item::Event(event, update.seq()), f));
        }
    });
    head.chain(tail)
}

/// An opened stream as SSE: each item written for `wire`, framed by `envelope`, with its journal
/// seq as the event id (an error event has none).
pub(crate) fn sse(
    opened: Opened,
    envelope: Envelope,
    wire: Wire,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let events = items(opened).map(move |item| match item {
        Item::Task(task, seq) => sse_event(&envelope, wire, Some(seq), wire.task_item(task)),
        Item::Event(event, seq) => sse_event(&envelope, wire, Some(seq), wire.event_item(event)),
        Item::Error(error) => sse_event(&envelope, wire, None, Err(error)),
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}
