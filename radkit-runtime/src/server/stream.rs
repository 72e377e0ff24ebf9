//! SSE for `message/stream` and `tasks/resubscribe`: journal records become A2A update events, each
//! wrapped in the JSON-RPC response envelope of the request. The stream ends after the event marked
//! `final` (input-required or terminal) that reflects the task's current state. It also counts the
//! streams each caller has open ([`Slots`]), so that no principal holds more than its share.
//!
//! **Resumable**: every event carries `id: <journal seq>` (the seq of the record it shows; the opening
//! task, the seq it reflects). A client that reconnects with `Last-Event-ID: <seq>` gets exactly the
//! events after that one, from the journal, on any server sharing the store and after a restart.
//! The pieces of a streamed model call's text (`ctx.llm(..).stream_status()`) are the exception: they
//! are not journaled, so they carry no id (a reconnecting client resumes after the last journaled
//! event, and sees the call's answer whole when it is journaled).
//! A stream that cannot start answers with one SSE `error` event holding the JSON-RPC error, so a
//! streaming client reads the error as it reads any event.

use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::stream::{self, Stream, StreamExt};
use serde_json::Value;

use super::errors::{Kind, OpError};
use super::jsonrpc;
use super::open::{items, Item, Opened};
use super::version::Version;

/// How a binding frames each event's data.
#[derive(Debug, Clone)]
pub(crate) enum Envelope {
    /// JSON-RPC: every event is the response to the request with this id.
    JsonRpc(Value),
    /// HTTP+JSON: every event is the item itself; an error is `{"error": <google.rpc.Status>}`.
    Bare,
}

impl Envelope {
    fn frame(&self, wire: Version, item: Result<Value, OpError>) -> Value {
        match (self, item) {
            (Envelope::JsonRpc(id), Ok(item)) => jsonrpc::ok(id, item),
            (Envelope::JsonRpc(id), Err(error)) => wire.rpc_error(id, error),
            (Envelope::Bare, Ok(item)) => item,
            (Envelope::Bare, Err(error)) => super::errors::http_body(&error).1,
        }
    }
}

/// The event of journal seq `seq`: `item` (or the error that writing it gave) framed by `envelope`.
/// An error is an `error` event (the SSE event name the official SDKs raise as the error it holds;
/// clients that ignore event names read the same data).
fn sse_event(
    envelope: &Envelope,
    wire: Version,
    seq: Option<u64>,
    item: Result<Value, OpError>,
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
pub(crate) fn error(id: &Value, wire: Version, error: OpError) -> axum::response::Response {
    use axum::response::IntoResponse;
    let event = sse_event(&Envelope::JsonRpc(id.clone()), wire, None, Err(error));
    Sse::new(stream::iter([event])).into_response()
}

/// The journal seq a reconnecting client saw last (its `Last-Event-ID` header), if it sent one.
pub(crate) fn last_event_id(headers: &axum::http::HeaderMap) -> Result<Option<u64>, OpError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| {
            OpError::new(
                Kind::InvalidInput,
                "`Last-Event-ID` must be the id of an event of this stream (a journal seq)",
            )
        })
}

/// An opened stream as SSE: each item written for `wire`, framed by `envelope`, with its journal
/// seq as the event id (an error event has none).
pub(crate) fn sse(
    opened: Opened,
    envelope: Envelope,
    wire: Version,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let events = items(opened).map(move |item| match item {
        Item::Task(task, seq) => sse_event(&envelope, wire, Some(seq), wire.task_item(task)),
        Item::Message(message, seq) => {
            sse_event(&envelope, wire, Some(seq), wire.message_item(message))
        }
        Item::Event(event, seq) => sse_event(&envelope, wire, Some(seq), wire.event_item(event)),
        Item::Live(event) => sse_event(&envelope, wire, None, wire.event_item(event)),
        Item::Error(error) => sse_event(&envelope, wire, None, Err(error)),
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}
