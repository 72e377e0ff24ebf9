//! Opening a stream of a task, once for every binding: a streamed send (the task it starts or
//! continues) or a subscription to a task, fresh or resumed after the journal seq a reconnecting
//! client saw last (`Last-Event-ID`). What comes out is an [`Opened`] stream whose [`items`] every
//! binding frames its own way (SSE for JSON-RPC and HTTP+JSON, gRPC's server stream). It also
//! counts the streams each caller has open ([`Slots`]), so that no principal holds more than its
//! share.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::stream::{self, Stream, StreamExt};

use super::errors::{engine_error, Kind, OpError};
use super::ops;
use super::AppState;
use crate::engine::{stream_event, token_event, Caller, Followed, Subscription};
use crate::model::{Task, TaskId};

/// What a stream follows.
pub(crate) enum Target {
    /// A streamed send (0.3 `message/stream`, 1.0 `SendStreamingMessage`, REST
    /// `POST /message:stream`): the task as it is now, then every journal record after it. With a
    /// resume (a retried send with the same `messageId` names the same task) nothing is sent again.
    Send(Box<ops::Send>),
    /// A subscription (0.3 `tasks/resubscribe`, 1.0 `SubscribeToTask`, REST
    /// `GET /tasks/{id}:subscribe`). With `until_end` (1.0) it follows the task through
    /// `input-required` to its end (spec §3.1.6), opens with the task as it is now, and a task that
    /// has ended is refused with `UnsupportedOperationError` (unless the request resumes a stream
    /// that has not seen its end); otherwise (0.3) it replays the journal from its start and ends
    /// where the task settles.
    Task {
        /// The task.
        id: TaskId,
        /// Follow the task to its end (1.0).
        until_end: bool,
    },
}

impl Target {
    /// A streamed send.
    pub(crate) fn send(send: ops::Send) -> Self {
        Target::Send(Box::new(send))
    }
}

/// A stream opened for a client, whatever binding frames it: the subscription, the task to send
/// first (with the seq it reflects), whether the stream ends right after it, whether it follows the
/// task to its end or only until it settles, and the caller's stream slot, held while the stream
/// lives.
pub(crate) struct Opened {
    pub sub: crate::engine::Subscription,
    pub first: Option<(Task, u64)>,
    /// The stream is this one message, which answers the send directly (`first` is `None`).
    pub answer: Option<(crate::model::Message, u64)>,
    pub done: bool,
    /// Follow the task through `input-required` until it ends (1.0 `SubscribeToTask`, spec
    /// §3.1.6: "the stream MUST terminate when the task reaches a terminal state"); otherwise the
    /// stream ends where the task settles, an interrupted state included (sends, 0.3 resubscribe).
    pub until_end: bool,
    pub slot: Slot,
}

/// Open the stream of `target` for `caller`, after journal seq `resume` when a client reconnects.
/// The caller's stream slot is taken first: a stream refused never started a task its client
/// cannot follow. An error before the stream starts is the binding's to frame (a JSON-RPC error
/// event, an HTTP status, a gRPC status).
pub(crate) async fn open(
    state: &AppState,
    caller: &Caller,
    target: Result<Target, OpError>,
    resume: Option<u64>,
) -> Result<Opened, OpError> {
    let slot = state
        .streams
        .take(caller)
        .ok_or_else(|| OpError::too_many_streams(state.streams.limit()))?;
    let max_history = Some(state.config.max_history);
    let mut answer = None;
    let (task_id, first, after, done, until_end) = match target? {
        Target::Send(send) => {
            let send = *send;
            // A resumed stream sends nothing again (a reply would answer the task twice): it
            // follows the task the first send named.
            let task_id = match resume {
                Some(_) => state
                    .engine
                    .task_of_message(caller, &send.message)
                    .ok_or_else(|| {
                        OpError::new(
                            Kind::InvalidInput,
                            "a stream resumed with `Last-Event-ID` must repeat the message it was opened with (its `messageId` or `taskId`)",
                        )
                    })?,
                None => ops::start(state, caller, &send).await?,
            };
            // The stream of a send that creates a task starts at the task's first record, whatever
            // the task did meanwhile: every client sees `submitted`, then each update in order. A
            // reply's stream starts where the task stands.
            let snapshot = match (resume, &send.message.task_id) {
                (None, None) => {
                    state
                        .engine
                        .snapshot_at_start(caller, &task_id, max_history)
                        .await
                }
                _ => state.engine.snapshot(caller, &task_id, max_history).await,
            }
            .map_err(|e| engine_error(e, false))?;
            let direct = resume.is_none() && ops::answers_with_message(state, &send)?;
            if direct {
                // The stream is one message: the task is waited for (as a blocking send waits),
                // and a task that did not complete streams as any other.
                let settled = tokio::time::timeout(
                    ops::BLOCKING_WAIT,
                    state.engine.snapshot_settled(caller, &task_id, max_history),
                )
                .await;
                if let Ok(settled) = settled {
                    let settled = settled.map_err(|e| engine_error(e, false))?;
                    if let Some(message) = ops::direct_answer(&settled.task) {
                        answer = Some((message, settled.last_seq));
                    }
                }
            }
            match resume {
                _ if answer.is_some() => {
                    let seq = answer.as_ref().map_or(0, |(_, seq)| *seq);
                    (task_id, None, seq, true, false)
                }
                Some(seq) => {
                    let done = resumed(state, caller, &task_id, snapshot.last_seq, seq).await?;
                    (task_id, None, seq, done, false)
                }
                None => {
                    let seq = snapshot.last_seq;
                    (
                        task_id,
                        Some((snapshot.task, seq)),
                        seq,
                        snapshot.is_final,
                        false,
                    )
                }
            }
        }
        Target::Task { id, until_end } => {
            let (mut first, mut after, mut done) = (None, resume.unwrap_or(0), false);
            if resume.is_some() || until_end {
                let snapshot = state
                    .engine
                    .snapshot(caller, &id, max_history)
                    .await
                    .map_err(|e| engine_error(e, false))?;
                match resume {
                    // A 1.0 subscription follows the task to its end: a reconnect that saw the
                    // last event of an ended task has nothing more to get.
                    Some(seq) if until_end => {
                        past_journal(snapshot.last_seq, seq)?;
                        done = snapshot.task.status.state.is_terminal() && seq >= snapshot.last_seq;
                    }
                    // A reconnect continues after what it saw, the end included if it has not
                    // seen it.
                    Some(seq) => done = resumed(state, caller, &id, snapshot.last_seq, seq).await?,
                    None if snapshot.task.status.state.is_terminal() => {
                        return Err(OpError::new(
                            Kind::Unsupported,
                            format!(
                                "task {id} has ended ({}); there is nothing to subscribe to",
                                snapshot.task.status.state.as_str()
                            ),
                        ))
                    }
                    // 1.0: the stream opens with the task as it is now, then what follows until it
                    // ends.
                    None => {
                        after = snapshot.last_seq;
                        first = Some((snapshot.task, snapshot.last_seq));
                    }
                }
            }
            (id, first, after, done, until_end)
        }
    };
    let sub = state
        .engine
        .subscribe_from(caller, &task_id, after)
        .await
        .map_err(|e| engine_error(e, false))?;
    Ok(Opened {
        sub,
        first,
        answer,
        done,
        until_end,
        slot,
    })
}

/// `Last-Event-ID` `seq` must be an event of the task's journal (which ends at `last_seq`).
fn past_journal(last_seq: u64, seq: u64) -> Result<(), OpError> {
    if seq > last_seq {
        return Err(OpError::new(
            Kind::InvalidInput,
            format!("`Last-Event-ID` {seq} is past the task's last event ({last_seq})"),
        ));
    }
    Ok(())
}

/// Whether a stream of `task_id` resumed after event `seq` has nothing more to say (the client saw the
/// event that settled the task), or an error when `seq` is past the task's journal (no event of it
/// had that id).
async fn resumed(
    state: &AppState,
    caller: &Caller,
    task_id: &TaskId,
    last_seq: u64,
    seq: u64,
) -> Result<bool, OpError> {
    past_journal(last_seq, seq)?;
    state
        .engine
        .settled_by(caller, task_id, seq)
        .await
        .map_err(|e| engine_error(e, false))
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

    /// How many streams are open now, every caller's.
    #[cfg(feature = "metrics")]
    pub(crate) fn open(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .sum()
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
    /// The message that answers a streamed send directly (the whole stream), at journal seq `.1`.
    Message(crate::model::Message, u64),
    /// An update, journal seq `.1`.
    Event(crate::engine::StreamEvent, u64),
    /// A piece of a streamed model call's text, not journaled (no seq: a client that reconnects
    /// resumes after the last journaled event, and sees the answer whole when it is journaled).
    Live(crate::engine::StreamEvent),
    /// The stream ends with this error.
    Error(OpError),
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
        answer,
        done,
        until_end,
        slot,
    } = opened;
    let head = stream::iter(
        first
            .map(|(task, seq)| Item::Task(task, seq))
            .into_iter()
            .chain(answer.map(|(message, seq)| Item::Message(message, seq))),
    );
    let follow = Follow {
        sub: sub.with_tokens(),
        done,
        until_end,
        _slot: slot,
    };
    let tail = stream::unfold(follow, |mut f| async move {
        loop {
            if f.done {
                return None;
            }
            let update = match f.sub.next_followed().await? {
                Ok(Followed::Update(update)) => update,
                Ok(Followed::Tokens(chunk)) => {
                    let (task, context) = (&f.sub.task_id, &f.sub.context_id);
                    let at = chrono::Utc::now().timestamp_millis();
                    return Some((Item::Live(token_event(task, context, &chunk, at)), f));
                }
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
