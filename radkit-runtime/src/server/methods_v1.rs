//! The A2A 1.0 JSON-RPC methods (PascalCase, ProtoJSON payloads): 1.0 params are decoded into the
//! engine's model, the same operations as 0.3 run (`methods`), and results are written in 1.0 form
//! (`wire`). A task created over either version is read, streamed and canceled over the other.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;

use super::jsonrpc::{self, codes, RpcError};
use super::methods::{self, decode_params, Send};
use super::stream::Envelope;
use super::wire::Wire;
use super::{stream, AppState};
use crate::engine::Caller;
use crate::model::{v1, Message, TaskId};

/// 0.3 method names and their 1.0 counterparts, for the error a 0.3 call with `A2A-Version: 1.0`
/// gets.
const RENAMED: [(&str, &str); 10] = [
    ("message/send", "SendMessage"),
    ("message/stream", "SendStreamingMessage"),
    ("tasks/get", "GetTask"),
    ("tasks/cancel", "CancelTask"),
    ("tasks/resubscribe", "SubscribeToTask"),
    ("agent/getAuthenticatedExtendedCard", "GetExtendedAgentCard"),
    (
        "tasks/pushNotificationConfig/set",
        "CreateTaskPushNotificationConfig",
    ),
    (
        "tasks/pushNotificationConfig/get",
        "GetTaskPushNotificationConfig",
    ),
    (
        "tasks/pushNotificationConfig/list",
        "ListTaskPushNotificationConfigs",
    ),
    (
        "tasks/pushNotificationConfig/delete",
        "DeleteTaskPushNotificationConfig",
    ),
];

/// A 1.0 `SendMessageRequest` as the operations take it: `returnImmediately` unset waits for the
/// task to settle (1.0 has no `blocking`).
pub(crate) fn send_of(params: Value) -> Result<Send, RpcError> {
    send_of_request(decode_params(params)?)
}

/// [`send_of`] for a request already decoded (gRPC's, converted from protobuf).
pub(crate) fn send_of_request(request: v1::SendMessageRequest) -> Result<Send, RpcError> {
    let message = Message::try_from(request.message)
        .map_err(|e| RpcError::new(codes::INVALID_PARAMS, format!("invalid `message`: {e}")))?;
    let config = request.configuration.unwrap_or_default();
    Ok(Send {
        message,
        metadata: request.metadata,
        blocking: !config.return_immediately,
        history_length: config.history_length.map(i64::from),
        accepted_output_modes: Some(config.accepted_output_modes).filter(|m| !m.is_empty()),
        push: config
            .task_push_notification_config
            .map(super::push::config_of_v1),
        wire: Wire::V1_0,
    })
}

/// Answer a 1.0 JSON-RPC request.
pub(crate) async fn dispatch(
    state: Arc<AppState>,
    caller: Caller,
    request: jsonrpc::Request,
    headers: &axum::http::HeaderMap,
) -> Response {
    let id = request.id.clone();
    let params = request.params;
    match request.method.as_str() {
        "SendStreamingMessage" | "SubscribeToTask" => {
            let resume = match stream::last_event_id(headers) {
                Ok(resume) => resume,
                Err(e) => return stream::error(&id, Wire::V1_0, e),
            };
            let envelope = Envelope::JsonRpc(id.clone());
            let answer = match request.method.as_str() {
                "SendStreamingMessage" => {
                    let send = send_of(params);
                    methods::stream_send(state, caller, envelope, send, resume, Wire::V1_0).await
                }
                _ => {
                    let task_id = decode_params(params)
                        .map(|r: v1::SubscribeToTaskRequest| TaskId::from(r.id));
                    let wire = Wire::V1_0;
                    methods::subscribe(state, caller, envelope, task_id, resume, wire, true).await
                }
            };
            return answer.unwrap_or_else(|e| stream::error(&id, Wire::V1_0, e));
        }
        _ => {}
    }
    let result = match request.method.as_str() {
        "SendMessage" => match send_of(params) {
            Ok(send) => methods::send_task(&state, &caller, send)
                .await
                .and_then(|task| Wire::V1_0.send_response(task)),
            Err(e) => Err(e),
        },
        "GetTask" => match decode_params::<v1::GetTaskRequest>(params) {
            Ok(r) => methods::get_task(
                &state,
                &caller,
                &TaskId::from(r.id),
                r.history_length.map(i64::from),
            )
            .await
            .and_then(|task| Wire::V1_0.task(task)),
            Err(e) => Err(e),
        },
        "CancelTask" => match decode_params::<v1::CancelTaskRequest>(params) {
            Ok(r) => methods::cancel_task(&state, &caller, &TaskId::from(r.id))
                .await
                .and_then(|task| Wire::V1_0.task(task)),
            Err(e) => Err(e),
        },
        "ListTasks" => match decode_params::<v1::ListTasksRequest>(params) {
            Ok(r) => list_tasks(&state, &caller, r).await,
            Err(e) => Err(e),
        },
        "CreateTaskPushNotificationConfig" => {
            match decode_params::<v1::TaskPushNotificationConfig>(params) {
                Ok(r) => super::push::create(&state, &caller, r).await.and_then(json),
                Err(e) => Err(e),
            }
        }
        "GetTaskPushNotificationConfig" => {
            match decode_params::<v1::GetTaskPushNotificationConfigRequest>(params) {
                Ok(r) => super::push::get(&state, &caller, r).await.and_then(json),
                Err(e) => Err(e),
            }
        }
        "ListTaskPushNotificationConfigs" => {
            match decode_params::<v1::ListTaskPushNotificationConfigsRequest>(params) {
                Ok(r) => super::push::list(&state, &caller, r).await.and_then(json),
                Err(e) => Err(e),
            }
        }
        "DeleteTaskPushNotificationConfig" => {
            match decode_params::<v1::DeleteTaskPushNotificationConfigRequest>(params) {
                Ok(r) => super::push::delete(&state, &caller, r)
                    .await
                    .map(|()| serde_json::json!({})),
                Err(e) => Err(e),
            }
        }
        "GetExtendedAgentCard" => match decode_params::<v1::GetExtendedAgentCardRequest>(params) {
            Ok(_) => super::card::extended_card_v1(&state, &caller).and_then(super::card::to_json),
            Err(e) => Err(e),
        },
        other => Err(RpcError::new(
            codes::METHOD_NOT_FOUND,
            match RENAMED.iter().find(|(old, _)| *old == other) {
                Some((_, new)) => format!(
                    "method `{other}` is A2A 0.3; with `A2A-Version: 1.0` call `{new}` (or send no A2A-Version to speak 0.3)"
                ),
                None => format!("method `{other}` not found"),
            },
        )),
    };
    match result {
        Ok(body) => Json(jsonrpc::ok(&id, body)).into_response(),
        Err(error) => Json(Wire::V1_0.rpc_error(&id, error)).into_response(),
    }
}

fn json(value: impl serde::Serialize) -> Result<Value, RpcError> {
    serde_json::to_value(value).map_err(|e| RpcError::new(codes::INTERNAL_ERROR, e.to_string()))
}

/// The error a 0.3 request gets for a 1.0 method name (it sent no `A2A-Version: 1.0`).
pub(crate) fn needs_version(method: &str) -> Option<RpcError> {
    RENAMED
        .iter()
        .chain(&[("", "ListTasks")])
        .any(|(_, new)| *new == method)
        .then(|| {
            RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!(
                    "method `{method}` is A2A 1.0: send the header `A2A-Version: 1.0` (a request without it speaks 0.3)"
                ),
            )
        })
}

/// Tasks per `ListTasks` page when the request names no `pageSize`, and the most it may name.
const DEFAULT_PAGE_SIZE: i32 = 50;
const MAX_PAGE_SIZE: i32 = 100;

fn invalid(message: String) -> RpcError {
    RpcError::new(codes::INVALID_PARAMS, message)
}

/// A page token: the position after the page's last task, `(status time, id)`, opaque to clients.
fn page_token(at_ms: i64, id: &str) -> String {
    super::page_token::encode(&format!("{at_ms}:{id}"))
}

fn page_position(token: &str) -> Result<(i64, String), RpcError> {
    let text = super::page_token::decode(token)?;
    let bad = || super::page_token::not_ours(token);
    let (at, id) = text.split_once(':').ok_or_else(bad)?;
    Ok((at.parse().map_err(|_| bad())?, id.to_owned()))
}

/// `ListTasks` (JSON-RPC and REST): the caller's tasks matching the request's filters, newest status
/// first, a page at a time (spec 3.1.4: artifacts only with `includeArtifacts`, `nextPageToken`
/// always present and empty on the last page).
pub(crate) async fn list_tasks(
    state: &AppState,
    caller: &Caller,
    request: v1::ListTasksRequest,
) -> Result<Value, RpcError> {
    let response = list_tasks_page(state, caller, request).await?;
    serde_json::to_value(response).map_err(|e| RpcError::new(codes::INTERNAL_ERROR, e.to_string()))
}

/// [`list_tasks`]' page, before a binding writes it.
pub(crate) async fn list_tasks_page(
    state: &AppState,
    caller: &Caller,
    request: v1::ListTasksRequest,
) -> Result<v1::ListTasksResponse, RpcError> {
    let page_size = match request.page_size {
        None => DEFAULT_PAGE_SIZE,
        Some(n) if (1..=MAX_PAGE_SIZE).contains(&n) => n,
        Some(n) => {
            return Err(invalid(format!(
                "`pageSize` must be between 1 and {MAX_PAGE_SIZE}, got {n}"
            )))
        }
    };
    let history = match request.history_length {
        Some(n) if n < 0 => {
            return Err(invalid(format!(
                "`historyLength` must not be negative, got {n}"
            )))
        }
        Some(n) => usize::try_from(n)
            .unwrap_or(0)
            .min(state.config.max_history),
        None => state.config.max_history,
    };
    let state_filter = match request.status {
        v1::TaskState::Unspecified => None,
        other => Some(
            crate::model::TaskState::try_from(other)
                .map_err(|e| invalid(format!("`status`: {e}")))?,
        ),
    };
    let status_since_ms = request
        .status_timestamp_after
        .as_deref()
        .map(|t| {
            chrono::DateTime::parse_from_rfc3339(t)
                .map(|d| d.timestamp_millis())
                .map_err(|e| {
                    invalid(format!(
                        "`statusTimestampAfter` `{t}` is not an RFC 3339 time: {e}"
                    ))
                })
        })
        .transpose()?;
    let after = match request.page_token.as_str() {
        "" => None,
        token => Some(page_position(token)?),
    };
    let limit = usize::try_from(page_size).unwrap_or(1);
    let query = crate::store::ViewQuery {
        principal: None,
        context_id: Some(request.context_id).filter(|c| !c.is_empty()),
        state: state_filter,
        status_since_ms,
        after,
        limit: limit + 1,
        history: Some(history),
    };
    let mut page = state
        .engine
        .list_views(caller, query)
        .await
        .map_err(|e| super::errors::engine_error(e, false))?;
    let more = page.views.len() > limit;
    page.views.truncate(limit);
    let next_page_token = match (more, page.views.last()) {
        (true, Some(last)) => page_token(last.status_at_ms, &last.record.id),
        _ => String::new(),
    };
    let include_artifacts = request.include_artifacts.unwrap_or(false);
    let mut tasks = Vec::with_capacity(page.views.len());
    for view in page.views {
        let mut task = crate::engine::project_task(view);
        if !include_artifacts {
            task.artifacts.clear();
        }
        tasks.push(v1::Task::from(task));
    }
    Ok(v1::ListTasksResponse {
        tasks,
        next_page_token,
        page_size,
        total_size: i32::try_from(page.total).unwrap_or(i32::MAX),
    })
}
