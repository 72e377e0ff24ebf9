//! A JSON-RPC stream (`message/stream`, `tasks/resubscribe`, `SendStreamingMessage`,
//! `SubscribeToTask`) as a stream of events that ends where the task settles: at a terminal or
//! interrupted (`input-required`, `auth-required`) state. Every SSE event is one JSON-RPC response
//! to the request; an `error` event or an error response ends the stream with that error, and a
//! connection that closes before the task settled ends it with [`ClientError::StreamClosed`], so
//! the caller knows to poll instead.

use std::collections::VecDeque;

use futures::stream::{self, BoxStream, StreamExt};
use reqwest::Url;

use super::sse::{SseEvent, SseParser};
use super::transport::{excerpt, Call, Opened, Transport};
use super::wire::Dialect;
use super::{ClientError, StreamEvent};
use crate::model::TaskState;

/// Which request the stream answers, for deciding where it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Follows {
    /// A send: a task snapshot in an interrupted state does not end it (it may show the state
    /// the message just sent answers), and a message as the first event is the whole reply.
    Send,
    /// A subscription: any event in a settled state ends it.
    Subscription,
}

enum Phase {
    /// The request is not sent yet.
    Start,
    /// Reading SSE.
    Reading(reqwest::Response),
    /// The peer answered with plain JSON and it has been yielded: the stream is over.
    Answered,
    /// Nothing more.
    Done,
}

struct Follow {
    transport: Transport,
    url: Url,
    dialect: Dialect,
    call: Call,
    follows: Follows,
    phase: Phase,
    parser: SseParser,
    ready: VecDeque<SseEvent>,
    /// Events yielded so far.
    yielded: usize,
    /// The last event yielded showed a settled state: the peer may close the stream now.
    settled: bool,
}

/// The events of `call` (an error building it is the stream's one item).
pub(crate) fn follow(
    transport: Transport,
    url: Url,
    dialect: Dialect,
    call: Result<Call, ClientError>,
    follows: Follows,
) -> BoxStream<'static, Result<StreamEvent, ClientError>> {
    let call = match call {
        Ok(call) => call,
        Err(e) => return stream::once(async move { Err(e) }).boxed(),
    };
    let parser = SseParser::new(transport.max_body);
    let state = Follow {
        transport,
        url,
        dialect,
        call,
        follows,
        phase: Phase::Start,
        parser,
        ready: VecDeque::new(),
        yielded: 0,
        settled: false,
    };
    stream::unfold(state, |mut f| async move {
        let item = f.next().await?;
        Some((item, f))
    })
    .boxed()
}

/// The states a task stops at for now: terminal, or waiting for the client.
fn settled(state: TaskState) -> bool {
    state.is_terminal() || matches!(state, TaskState::InputRequired | TaskState::AuthRequired)
}

impl Follow {
    async fn next(&mut self) -> Option<Result<StreamEvent, ClientError>> {
        loop {
            if let Some(sse) = self.ready.pop_front() {
                match self.item(sse) {
                    Some(item) => return Some(self.yielding(item)),
                    None => continue,
                }
            }
            match &mut self.phase {
                Phase::Done => return None,
                Phase::Answered => {
                    self.phase = Phase::Done;
                    if self.settled {
                        return None;
                    }
                    return Some(Err(self.closed()));
                }
                Phase::Start => {
                    match self
                        .transport
                        .open(&self.url, self.dialect.version, &self.call)
                        .await
                    {
                        Ok(Opened::Sse(response)) => self.phase = Phase::Reading(response),
                        Ok(Opened::Json(envelope)) => {
                            self.phase = Phase::Answered;
                            let item = self
                                .call
                                .result_of(envelope)
                                .and_then(|result| self.dialect.event(&self.call, result));
                            return Some(self.yielding(item));
                        }
                        Err(e) => return Some(self.yielding(Err(e))),
                    }
                }
                Phase::Reading(response) => {
                    let url = self.url.as_str();
                    match self.transport.next_chunk(url, response).await {
                        Ok(Some(chunk)) => match self.parser.push(&chunk) {
                            Ok(events) => self.ready.extend(events),
                            Err(e) => {
                                let e = self.call.protocol(&format!("holds {e}"));
                                return Some(self.yielding(Err(e)));
                            }
                        },
                        Ok(None) => {
                            self.phase = Phase::Done;
                            if self.settled {
                                return None;
                            }
                            return Some(Err(self.closed()));
                        }
                        Err(e) => return Some(self.yielding(Err(e))),
                    }
                }
            }
        }
    }

    fn closed(&self) -> ClientError {
        ClientError::StreamClosed {
            url: self.url.to_string(),
        }
    }

    /// The event an SSE event holds (`None` for one without data, which peers send as pings).
    fn item(&self, sse: SseEvent) -> Option<Result<StreamEvent, ClientError>> {
        if sse.data.trim().is_empty() {
            return None;
        }
        let envelope = serde_json::from_str(&sse.data).map_err(|e| {
            self.call.protocol(&format!(
                "holds an SSE event that is not JSON ({e}): {}",
                excerpt(&sse.data)
            ))
        });
        if sse.event == "error" {
            // The JSON-RPC error it holds; anything else there is still the end of the stream.
            let error = match envelope.map(|v| self.call.result_of(v)) {
                Ok(Err(e)) | Err(e) => e,
                Ok(Ok(_)) => self.call.protocol(&format!(
                    "holds an SSE `error` event without an error: {}",
                    excerpt(&sse.data)
                )),
            };
            return Some(Err(error));
        }
        Some(
            envelope
                .and_then(|v| self.call.result_of(v))
                .and_then(|result| self.dialect.event(&self.call, result)),
        )
    }

    /// `item` on its way out: an error or an event that ends the stream closes it.
    fn yielding(
        &mut self,
        item: Result<StreamEvent, ClientError>,
    ) -> Result<StreamEvent, ClientError> {
        let first = self.yielded == 0;
        self.yielded += 1;
        let ends = match &item {
            Err(_) => true,
            Ok(event) => {
                let (ends, settled) = self.ends(event, first);
                self.settled = settled;
                ends
            }
        };
        if ends {
            self.phase = Phase::Done;
            self.ready.clear();
        }
        item
    }

    /// Whether `event` ends the stream, and whether it shows the task settled (so the peer may
    /// close the stream after it).
    fn ends(&self, event: &StreamEvent, first: bool) -> (bool, bool) {
        match event {
            StreamEvent::Status(status) => {
                let settled = status.is_final || settled(status.status.state);
                (settled, settled)
            }
            StreamEvent::Task(task) => {
                let state = task.status.state;
                let ends = match self.follows {
                    Follows::Subscription => settled(state),
                    Follows::Send => state.is_terminal(),
                };
                (ends, settled(state))
            }
            StreamEvent::Message(_) => {
                let whole = first && self.follows == Follows::Send;
                (whole, whole)
            }
            StreamEvent::Artifact(_) => (false, false),
        }
    }
}
