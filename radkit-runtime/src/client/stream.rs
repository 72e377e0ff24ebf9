//! An SSE stream (JSON-RPC's `message/stream`, `tasks/resubscribe`, `SendStreamingMessage`,
//! `SubscribeToTask`; HTTP+JSON's `message:stream` and `:subscribe`) as a stream of events that
//! ends where the task settles: at a terminal or interrupted (`input-required`, `auth-required`)
//! state ([`Ending`], which the gRPC binding's streams use too). Over JSON-RPC every SSE event is
//! one JSON-RPC response to the request, over HTTP+JSON a bare `StreamResponse`; an `error` event
//! or an error response ends the stream with that error, and a connection that closes before the
//! task settled ends it with [`ClientError::StreamClosed`], so the caller knows to poll instead.

use std::collections::VecDeque;

use futures::stream::{self, BoxStream, StreamExt};
use reqwest::Url;

use super::rest::RestCall;
use super::sse::{SseEvent, SseParser};
use super::transport::{excerpt, Call, Opened, OpenedPlain, Transport};
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

/// How the stream's request is made and its events read.
pub(crate) enum Framing {
    /// A JSON-RPC call; each event is a JSON-RPC response to it.
    JsonRpc {
        /// The version and tenant.
        dialect: Dialect,
        /// The call.
        call: Call,
    },
    /// An HTTP+JSON request; each event is a bare `StreamResponse`.
    Rest(RestCall),
}

/// Where a stream of events ends: after an event that shows the task settled, or after an error.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ending {
    follows: Follows,
    /// Events seen so far.
    seen: usize,
    /// The last event showed a settled state: the peer may close the stream now.
    settled: bool,
}

impl Ending {
    pub(crate) fn new(follows: Follows) -> Self {
        Ending {
            follows,
            seen: 0,
            settled: false,
        }
    }

    /// Whether the stream ends with `item`.
    pub(crate) fn ends_with(&mut self, item: &Result<StreamEvent, ClientError>) -> bool {
        let first = self.seen == 0;
        self.seen += 1;
        match item {
            Err(_) => true,
            Ok(event) => {
                let (ends, settled) = self.ends(event, first);
                self.settled = settled;
                ends
            }
        }
    }

    /// True when the last event showed the task settled (a close after it is no early end).
    pub(crate) fn settled(&self) -> bool {
        self.settled
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

struct Follow {
    transport: Transport,
    url: Url,
    framing: Framing,
    phase: Phase,
    parser: SseParser,
    ready: VecDeque<SseEvent>,
    ending: Ending,
}

/// The events of a stream made with `framing` (an error building it is the stream's one item).
pub(crate) fn follow(
    transport: Transport,
    url: Url,
    framing: Result<Framing, ClientError>,
    follows: Follows,
) -> BoxStream<'static, Result<StreamEvent, ClientError>> {
    let framing = match framing {
        Ok(framing) => framing,
        Err(e) => return stream::once(async move { Err(e) }).boxed(),
    };
    let parser = SseParser::new(transport.max_body);
    let state = Follow {
        transport,
        url,
        framing,
        phase: Phase::Start,
        parser,
        ready: VecDeque::new(),
        ending: Ending::new(follows),
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
                    if self.ending.settled() {
                        return None;
                    }
                    return Some(Err(self.closed()));
                }
                Phase::Start => match self.open().await {
                    Ok(response) => self.phase = Phase::Reading(response),
                    Err(item) => {
                        self.phase = Phase::Answered;
                        return Some(self.yielding(item));
                    }
                },
                Phase::Reading(response) => {
                    let url = self.url.as_str();
                    match self.transport.next_chunk(url, response).await {
                        Ok(Some(chunk)) => match self.parser.push(&chunk) {
                            Ok(events) => self.ready.extend(events),
                            Err(e) => {
                                let e = self.protocol(&format!("holds {e}"));
                                return Some(self.yielding(Err(e)));
                            }
                        },
                        Ok(None) => {
                            self.phase = Phase::Done;
                            if self.ending.settled() {
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

    /// Send the request: the SSE response, or the one item a whole answer holds (an error, or a
    /// JSON-RPC answer that is not a stream).
    async fn open(&mut self) -> Result<reqwest::Response, Result<StreamEvent, ClientError>> {
        match &self.framing {
            Framing::JsonRpc { dialect, call } => {
                match self.transport.open(&self.url, dialect.version, call).await {
                    Ok(Opened::Sse(response)) => Ok(response),
                    Ok(Opened::Json(envelope)) => Err(call
                        .result_of(envelope)
                        .and_then(|result| dialect.event(call, result))),
                    Err(e) => Err(Err(e)),
                }
            }
            Framing::Rest(call) => {
                let request = call.request(&self.transport, "text/event-stream");
                match self.transport.open_plain(&self.url, request).await {
                    Ok(OpenedPlain::Sse(response)) => Ok(response),
                    Ok(OpenedPlain::Other(answer)) if !(200..300).contains(&answer.status) => {
                        Err(Err(call.error(&answer)))
                    }
                    Ok(OpenedPlain::Other(answer)) => Err(Err(call.protocol(&format!(
                        "is not an event stream: {}",
                        excerpt(&String::from_utf8_lossy(&answer.body))
                    )))),
                    Err(e) => Err(Err(e)),
                }
            }
        }
    }

    fn protocol(&self, problem: &str) -> ClientError {
        match &self.framing {
            Framing::JsonRpc { call, .. } => call.protocol(problem),
            Framing::Rest(call) => call.protocol(problem),
        }
    }

    /// The event an SSE event holds (`None` for one without data, which peers send as pings).
    fn item(&self, sse: SseEvent) -> Option<Result<StreamEvent, ClientError>> {
        if sse.data.trim().is_empty() {
            return None;
        }
        let (dialect, call) = match &self.framing {
            Framing::JsonRpc { dialect, call } => (dialect, call),
            Framing::Rest(call) => return Some(call.event(&sse.event, &sse.data)),
        };
        let envelope = serde_json::from_str(&sse.data).map_err(|e| {
            call.protocol(&format!(
                "holds an SSE event that is not JSON ({e}): {}",
                excerpt(&sse.data)
            ))
        });
        if sse.event == "error" {
            // The JSON-RPC error it holds; anything else there is still the end of the stream.
            let error = match envelope.map(|v| call.result_of(v)) {
                Ok(Err(e)) | Err(e) => e,
                Ok(Ok(_)) => call.protocol(&format!(
                    "holds an SSE `error` event without an error: {}",
                    excerpt(&sse.data)
                )),
            };
            return Some(Err(error));
        }
        Some(
            envelope
                .and_then(|v| call.result_of(v))
                .and_then(|result| dialect.event(call, result)),
        )
    }

    /// `item` on its way out: an error or an event that ends the stream closes it.
    fn yielding(
        &mut self,
        item: Result<StreamEvent, ClientError>,
    ) -> Result<StreamEvent, ClientError> {
        if self.ending.ends_with(&item) {
            self.phase = Phase::Done;
            self.ready.clear();
        }
        item
    }
}
