//! The A2A methods: parameters in, engine calls, results or A2A errors out.

use std::sync::Arc;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::Value;

use super::errors::engine_error;
use super::jsonrpc::{self, codes, RpcError};
use super::stream::Envelope;
use super::wire::Wire;
use super::{stream, AppState};
use crate::engine::{Caller, EngineError, Request};
use crate::flow::PermissionMode;
use crate::model::{v0_3, Message, Task, TaskId};

/// How long a blocking `message/send` waits before returning the task as it is.
const BLOCKING_WAIT: Duration = Duration::from_secs(60);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SendConfiguration {
    #[serde(default)]
    blocking: Option<bool>,
    #[serde(default)]
    history_length: Option<i64>,
    #[serde(default)]
    accepted_output_modes: Option<Vec<String>>,
    #[serde(default)]
    push_notification_config: Option<Value>,
}

#[derive(Deserialize)]
struct SendParams {
    message: v0_3::Message,
    #[serde(default)]
    configuration: Option<SendConfiguration>,
    #[serde(default)]
    metadata: Option<serde_json::Map<String, Value>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueryParams {
    id: TaskId,
    #[serde(default)]
    history_length: Option<i64>,
}

#[derive(Deserialize)]
struct IdParams {
    id: TaskId,
}

pub(crate) fn decode_params<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, RpcError> {
    serde_json::from_value(value)
        .map_err(|e| RpcError::new(codes::INVALID_PARAMS, format!("invalid params: {e}")))
}

fn history(len: Option<i64>) -> Result<Option<usize>, RpcError> {
    match len {
        Some(n) if n < 0 => Err(RpcError::new(
            codes::INVALID_PARAMS,
            "`historyLength` must not be negative",
        )),
        Some(n) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
        None => Ok(None),
    }
}

/// Keep only artifact parts of a mode the client accepts.
fn accept_modes(mut task: Task, accepted: &Option<Vec<String>>) -> Task {
    let Some(accepted) = accepted
        .as_ref()
        .filter(|a| !a.is_empty() && !a.iter().any(|m| m == "*/*"))
    else {
        return task;
    };
    for artifact in task.artifacts.iter_mut() {
        artifact
            .parts
            .retain(|p| accepted.iter().any(|m| m == p.media_type()));
    }
    task.artifacts.retain(|a| !a.parts.is_empty());
    task
}

/// Answer a 0.3 JSON-RPC request.
pub(crate) async fn dispatch(
    state: Arc<AppState>,
    caller: Caller,
    request: jsonrpc::Request,
    headers: &axum::http::HeaderMap,
) -> Response {
    let id = request.id.clone();
    if matches!(
        request.method.as_str(),
        "message/stream" | "tasks/resubscribe"
    ) {
        let resume = match stream::last_event_id(headers) {
            Ok(resume) => resume,
            Err(e) => return stream::error(&id, Wire::V0_3, e),
        };
        let envelope = Envelope::JsonRpc(id.clone());
        let answer = match request.method.as_str() {
            "message/stream" => {
                let send = Send::from_v0_3(request.params);
                stream_send(state, caller, envelope, send, resume, Wire::V0_3).await
            }
            _ => {
                let task_id = decode_params(request.params).map(|p: IdParams| p.id);
                subscribe(state, caller, envelope, task_id, resume, Wire::V0_3, false).await
            }
        };
        return answer.unwrap_or_else(|e| stream::error(&id, Wire::V0_3, e));
    }
    let result = match request.method.as_str() {
        "message/send" => send(&state, caller, request.params)
            .await
            .map(|task| jsonrpc::ok(&id, v0_3::Task::from(task))),
        "tasks/get" => get(&state, caller, request.params)
            .await
            .map(|task| jsonrpc::ok(&id, v0_3::Task::from(task))),
        "tasks/cancel" => cancel(&state, caller, request.params)
            .await
            .map(|task| jsonrpc::ok(&id, v0_3::Task::from(task))),
        m if m.starts_with("tasks/pushNotificationConfig/") => {
            let verb = &m["tasks/pushNotificationConfig/".len()..];
            super::push::dispatch_v03(&state, &caller, verb, request.params)
                .await
                .map(|result| jsonrpc::ok(&id, result))
        }
        "agent/getAuthenticatedExtendedCard" => {
            super::card::extended_card_v0_3(&state, &caller).map(|card| jsonrpc::ok(&id, card))
        }
        other => Err(super::methods_v1::needs_version(other).unwrap_or_else(|| {
            RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("method `{other}` not found"),
            )
        })),
    };
    match result {
        Ok(body) => Json(body).into_response(),
        Err(error) => Json(jsonrpc::error(&id, error)).into_response(),
    }
}

/// A send, whichever version and binding it came in: the message in the engine's model and how to
/// answer.
pub(crate) struct Send {
    pub message: Message,
    pub metadata: Option<serde_json::Map<String, Value>>,
    /// Wait until the task settles (0.3 `blocking`; 1.0 unless `returnImmediately`).
    pub blocking: bool,
    pub history_length: Option<i64>,
    pub accepted_output_modes: Option<Vec<String>>,
    /// A webhook for the task's updates (1.0 `taskPushNotificationConfig`, 0.3
    /// `pushNotificationConfig`); an empty id becomes the task's.
    pub push: Option<crate::store::PushConfig>,
    /// The version it came in: 1.0 answers a message to a finished task with
    /// `UnsupportedOperationError`, 0.3 with invalid params.
    pub wire: Wire,
}

impl Send {
    /// A 0.3 `message/send` / `message/stream`'s params.
    fn from_v0_3(params: Value) -> Result<Send, RpcError> {
        let SendParams {
            message,
            configuration,
            metadata,
        } = decode_params(params)?;
        check_file_bytes(&message.parts)?;
        let message = Message::try_from(message)
            .map_err(|e| RpcError::new(codes::INVALID_PARAMS, format!("invalid params: {e}")))?;
        let configuration = configuration.unwrap_or(SendConfiguration {
            blocking: None,
            history_length: None,
            accepted_output_modes: None,
            push_notification_config: None,
        });
        Ok(Send {
            message,
            metadata,
            blocking: configuration.blocking.unwrap_or(false),
            history_length: configuration.history_length,
            accepted_output_modes: configuration.accepted_output_modes,
            push: configuration
                .push_notification_config
                .map(|c| super::push::ConfigV03::decode(c)?.into_config(""))
                .transpose()?,
            wire: Wire::V0_3,
        })
    }
}

/// Validate and start (or continue) a task; returns the task id.
pub(crate) async fn start(
    state: &AppState,
    caller: &Caller,
    send: &Send,
) -> Result<TaskId, RpcError> {
    history(send.history_length)?;
    if send.message.parts.is_empty() {
        return Err(RpcError::new(
            codes::INVALID_PARAMS,
            "`message.parts` must not be empty",
        ));
    }
    check_context(state, caller, &send.message).await?;
    let request = engine_request(caller.clone(), send.message.clone(), send.metadata.as_ref())?;
    let existing = send.message.task_id.clone().map(TaskId::from);
    let webhook =
        super::push::before_send(state, caller, send.push.as_ref(), existing.as_ref()).await?;
    let sent = state
        .engine
        .send(request)
        .await
        .map_err(|e| match (e, send.wire) {
            (e @ EngineError::TaskFinished { .. }, Wire::V1_0) => {
                RpcError::new(codes::UNSUPPORTED_OPERATION, e.to_string())
            }
            (e, _) => engine_error(e, false),
        });
    super::push::after_send(state, caller, webhook, sent.as_ref().ok()).await?;
    sent
}

/// Inline 0.3 file content must be base64 (the standard alphabet; padding optional), as the A2A
/// schema says: a client that sends anything else learns which part, here.
fn check_file_bytes(parts: &[v0_3::Part]) -> Result<(), RpcError> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::Engine as _;
    const BASE64: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    for (i, part) in parts.iter().enumerate() {
        if let v0_3::Part::File {
            file: v0_3::FileContent::Bytes { bytes, .. },
            ..
        } = part
        {
            BASE64.decode(bytes).map_err(|e| {
                RpcError::new(
                    codes::INVALID_PARAMS,
                    format!("`message.parts[{i}].file.bytes` is not valid base64: {e}"),
                )
            })?;
        }
    }
    Ok(())
}

/// A message to an existing task that names a context must name that task's context: the engine
/// keeps the task's own, so a different one would be dropped without a word. A task the caller
/// cannot see is left to the engine, which answers -32001.
async fn check_context(
    state: &AppState,
    caller: &Caller,
    message: &Message,
) -> Result<(), RpcError> {
    let (Some(task_id), Some(context_id)) = (&message.task_id, &message.context_id) else {
        return Ok(());
    };
    let task = match state
        .engine
        .task(caller, &TaskId::from(task_id), Some(0))
        .await
    {
        Ok(task) => task,
        Err(EngineError::TaskNotFound(_)) => return Ok(()),
        Err(e) => return Err(engine_error(e, false)),
    };
    if task.context_id == *context_id {
        return Ok(());
    }
    Err(RpcError::new(
        codes::INVALID_PARAMS,
        format!(
            "`message.contextId` `{context_id}` is not the context of task `{task_id}`, which is `{}`; send that `contextId` or none",
            task.context_id
        ),
    ))
}

/// The engine request for a message: the A2A metadata keys are read here, once. `skillId` (or
/// `skill_id`) names the skill of a new task and `permissionMode` its permission mode, in the request's
/// `metadata` or the message's (the request's wins).
fn engine_request(
    caller: Caller,
    message: Message,
    params_metadata: Option<&serde_json::Map<String, Value>>,
) -> Result<Request, RpcError> {
    let lookup = |keys: &[&str]| {
        [params_metadata, message.metadata.as_ref()]
            .into_iter()
            .flatten()
            .find_map(|m| keys.iter().find_map(|k| m.get(*k)))
            .cloned()
    };
    let skill = match lookup(&["skillId", "skill_id"]) {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id),
        Some(other) => {
            return Err(RpcError::new(
                codes::INVALID_PARAMS,
                format!("metadata `skillId` must be a string, got {other}"),
            ))
        }
    };
    let mode = match lookup(&["permissionMode"]) {
        None => None,
        Some(value) => Some(value.as_str().and_then(PermissionMode::parse).ok_or_else(|| {
            RpcError::new(
                codes::INVALID_PARAMS,
                format!("unknown permissionMode {value}; expected \"plan\", \"default\", \"acceptEdits\" or \"bypass\""),
            )
        })?),
    };
    let mut request = Request::new(caller, message);
    request.skill = skill;
    request.mode = mode;
    Ok(request)
}

/// Start (or continue) a task and answer with it: at once, or when it settles for a blocking send
/// (within [`BLOCKING_WAIT`]; the task as it is then).
pub(crate) async fn send_task(
    state: &AppState,
    caller: &Caller,
    send: Send,
) -> Result<Task, RpcError> {
    let task_id = start(state, caller, &send).await?;
    let history_length = history(send.history_length)?.or(Some(state.config.max_history));
    let task = if send.blocking {
        // The task keeps running if we stop waiting: the engine owns it, not this request.
        match tokio::time::timeout(
            BLOCKING_WAIT,
            state
                .engine
                .wait_settled_with(caller, &task_id, history_length),
        )
        .await
        {
            Ok(settled) => settled.map_err(|e| engine_error(e, false))?,
            Err(_) => get_task(state, caller, &task_id, send.history_length).await?,
        }
    } else {
        get_task(state, caller, &task_id, send.history_length).await?
    };
    Ok(accept_modes(task, &send.accepted_output_modes))
}

/// The task, with at most `history_length` history messages (the server's maximum when `None`).
pub(crate) async fn get_task(
    state: &AppState,
    caller: &Caller,
    task_id: &TaskId,
    history_length: Option<i64>,
) -> Result<Task, RpcError> {
    let history_length = history(history_length)?.or(Some(state.config.max_history));
    state
        .engine
        .task(caller, task_id, history_length)
        .await
        .map_err(|e| engine_error(e, false))
}

/// Cancel the task and answer with it.
pub(crate) async fn cancel_task(
    state: &AppState,
    caller: &Caller,
    task_id: &TaskId,
) -> Result<Task, RpcError> {
    state
        .engine
        .cancel(caller, task_id)
        .await
        .map_err(|e| engine_error(e, true))
}

async fn send(state: &AppState, caller: Caller, params: Value) -> Result<Task, RpcError> {
    send_task(state, &caller, Send::from_v0_3(params)?).await
}

async fn get(state: &AppState, caller: Caller, params: Value) -> Result<Task, RpcError> {
    let QueryParams { id, history_length } = decode_params(params)?;
    get_task(state, &caller, &id, history_length).await
}

async fn cancel(state: &AppState, caller: Caller, params: Value) -> Result<Task, RpcError> {
    let IdParams { id } = decode_params(params)?;
    cancel_task(state, &caller, &id).await
}

/// `message/stream` (and 1.0 `SendStreamingMessage`, REST `POST /message:stream`): the task as it
/// is now, then every journal record after it, framed by `envelope` and written for `wire`. With
/// `resume` (a reconnect's `Last-Event-ID`; a retried send with the same `messageId` names the same
/// task) the events after that seq instead. An error before the stream starts is the caller's to
/// frame (a JSON-RPC error event, an HTTP status).
pub(crate) async fn stream_send(
    state: Arc<AppState>,
    caller: Caller,
    envelope: Envelope,
    send: Result<Send, RpcError>,
    resume: Option<u64>,
    wire: Wire,
) -> Result<Response, RpcError> {
    let opened = open_send(&state, &caller, send, resume).await?;
    Ok(stream::sse(opened, envelope, wire).into_response())
}

/// A stream opened for a client, whatever binding frames it: the subscription, the task to send
/// first (with the seq it reflects), whether the stream ends right after it, whether it follows the
/// task to its end or only until it settles, and the caller's stream slot, held while the stream
/// lives.
pub(crate) struct Opened {
    pub sub: crate::engine::Subscription,
    pub first: Option<(Task, u64)>,
    pub done: bool,
    /// Follow the task through `input-required` until it ends (1.0 `SubscribeToTask`, spec
    /// §3.1.6: "the stream MUST terminate when the task reaches a terminal state"); otherwise the
    /// stream ends where the task settles, an interrupted state included (sends, 0.3 resubscribe).
    pub until_end: bool,
    pub slot: stream::Slot,
}

/// [`stream_send`]'s work before any event is framed: the stream of a send, or why it cannot start.
pub(crate) async fn open_send(
    state: &AppState,
    caller: &Caller,
    send: Result<Send, RpcError>,
    resume: Option<u64>,
) -> Result<Opened, RpcError> {
    // The slot first: a stream refused must not have started a task the client cannot follow.
    let slot = state
        .streams
        .take(caller)
        .ok_or_else(|| jsonrpc::too_many_streams(state.streams.limit()))?;
    let send = send?;
    // A resumed stream sends nothing again (a reply would answer the task twice): it follows the
    // task the first send named.
    let task_id = match resume {
        Some(_) => state
            .engine
            .task_of_message(caller, &send.message)
            .ok_or_else(|| {
                RpcError::new(
                    codes::INVALID_PARAMS,
                    "a stream resumed with `Last-Event-ID` must repeat the message it was opened with (its `messageId` or `taskId`)",
                )
            })?,
        None => start(state, caller, &send).await?,
    };
    // The stream of a send that creates a task starts at the task's first record, whatever the
    // task did meanwhile: every client sees `submitted`, then each update in order. A reply's
    // stream starts where the task stands.
    let snapshot = match (resume, &send.message.task_id) {
        (None, None) => {
            state
                .engine
                .snapshot_at_start(caller, &task_id, Some(state.config.max_history))
                .await
        }
        _ => {
            state
                .engine
                .snapshot(caller, &task_id, Some(state.config.max_history))
                .await
        }
    }
    .map_err(|e| engine_error(e, false))?;
    let (first, after, done) = match resume {
        Some(seq) => {
            let done = resumed(state, caller, &task_id, snapshot.last_seq, seq).await?;
            (None, seq, done)
        }
        None => {
            let (seq, done) = (snapshot.last_seq, snapshot.is_final);
            (Some((snapshot.task, seq)), seq, done)
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
        done,
        until_end: false,
        slot,
    })
}

/// `Last-Event-ID` `seq` must be an event of the task's journal (which ends at `last_seq`).
fn past_journal(last_seq: u64, seq: u64) -> Result<(), RpcError> {
    if seq > last_seq {
        return Err(RpcError::new(
            codes::INVALID_PARAMS,
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
) -> Result<bool, RpcError> {
    past_journal(last_seq, seq)?;
    state
        .engine
        .settled_by(caller, task_id, seq)
        .await
        .map_err(|e| engine_error(e, false))
}

/// `tasks/resubscribe` (and 1.0 `SubscribeToTask`, REST `GET /tasks/{id}:subscribe`): the task's
/// journal from its start (or after `resume`, a reconnect's `Last-Event-ID`) as events framed by
/// `envelope` and written for `wire`, then live ones. With `open_only` (1.0) a task that has ended
/// is refused with `UnsupportedOperationError` (unless the request resumes a stream that has not
/// seen its end), and the stream opens with the task as it is now instead of its journal's start.
pub(crate) async fn subscribe(
    state: Arc<AppState>,
    caller: Caller,
    envelope: Envelope,
    task_id: Result<TaskId, RpcError>,
    resume: Option<u64>,
    wire: Wire,
    open_only: bool,
) -> Result<Response, RpcError> {
    let opened = open_subscribe(&state, &caller, task_id, resume, open_only).await?;
    Ok(stream::sse(opened, envelope, wire).into_response())
}

/// [`subscribe`]'s work before any event is framed: the stream of a subscription, or why it cannot
/// start.
pub(crate) async fn open_subscribe(
    state: &AppState,
    caller: &Caller,
    task_id: Result<TaskId, RpcError>,
    resume: Option<u64>,
    open_only: bool,
) -> Result<Opened, RpcError> {
    let task_id = task_id?;
    let slot = state
        .streams
        .take(caller)
        .ok_or_else(|| jsonrpc::too_many_streams(state.streams.limit()))?;
    let (mut first, mut after, mut done) = (None, resume.unwrap_or(0), false);
    if resume.is_some() || open_only {
        let snapshot = state
            .engine
            .snapshot(caller, &task_id, Some(state.config.max_history))
            .await
            .map_err(|e| engine_error(e, false))?;
        match resume {
            // A 1.0 subscription follows the task to its end: a reconnect that saw the last event
            // of an ended task has nothing more to get.
            Some(seq) if open_only => {
                past_journal(snapshot.last_seq, seq)?;
                done = snapshot.task.status.state.is_terminal() && seq >= snapshot.last_seq;
            }
            // A reconnect continues after what it saw, the end included if it has not seen it.
            Some(seq) => done = resumed(state, caller, &task_id, snapshot.last_seq, seq).await?,
            None if snapshot.task.status.state.is_terminal() => {
                return Err(RpcError::new(
                    codes::UNSUPPORTED_OPERATION,
                    format!(
                        "task {task_id} has ended ({}); there is nothing to subscribe to",
                        snapshot.task.status.state.as_str()
                    ),
                ))
            }
            // 1.0: the stream opens with the task as it is now, then what follows until it ends.
            None => {
                after = snapshot.last_seq;
                first = Some((snapshot.task, snapshot.last_seq));
            }
        }
    }
    let sub = state
        .engine
        .subscribe_from(caller, &task_id, after)
        .await
        .map_err(|e| engine_error(e, false))?;
    Ok(Opened {
        sub,
        first,
        done,
        until_end: open_only,
        slot,
    })
}
