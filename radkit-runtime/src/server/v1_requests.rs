//! A2A 1.0 requests as the operations' inputs, shared by the three 1.0 bindings (JSON-RPC,
//! HTTP+JSON, gRPC): a `SendMessageRequest` as a [`Send`], `ListTasks` (its filters and paging in,
//! its page out), and the push-notification config methods (1.0 configs in and out).

use serde_json::Value;

use super::errors::{Kind, OpError};
use super::jsonrpc::decode_params;
use super::ops::{self, Send};
use super::{push, AppState};
use crate::engine::push::MAX_CONFIGS_PER_TASK;
use crate::engine::Caller;
use crate::model::{v1, Message, TaskId};
use crate::store::{PushAuth, PushConfig, PushFormat};

/// A 1.0 `SendMessageRequest` as the operations take it: `returnImmediately` unset waits for the
/// task to settle (1.0 has no `blocking`).
pub(crate) fn send_of(params: Value) -> Result<Send, OpError> {
    send_of_request(decode_params(params)?)
}

/// [`send_of`] for a request already decoded (gRPC's, converted from protobuf).
pub(crate) fn send_of_request(request: v1::SendMessageRequest) -> Result<Send, OpError> {
    let message = Message::try_from(request.message)
        .map_err(|e| OpError::new(Kind::InvalidInput, format!("invalid `message`: {e}")))?;
    let config = request.configuration.unwrap_or_default();
    Ok(Send {
        message,
        metadata: request.metadata,
        blocking: !config.return_immediately,
        history_length: config.history_length.map(i64::from),
        accepted_output_modes: Some(config.accepted_output_modes).filter(|m| !m.is_empty()),
        push: config.task_push_notification_config.map(config_of_v1),
    })
}

/// Tasks per `ListTasks` page when the request names no `pageSize`, and the most it may name.
const DEFAULT_PAGE_SIZE: i32 = 50;
const MAX_PAGE_SIZE: i32 = 100;

fn invalid(message: String) -> OpError {
    OpError::new(Kind::InvalidInput, message)
}

/// `ListTasks` (JSON-RPC and REST): [`list_tasks_page`] as JSON.
pub(crate) async fn list_tasks(
    state: &AppState,
    caller: &Caller,
    request: v1::ListTasksRequest,
) -> Result<Value, OpError> {
    super::wire::json(list_tasks_page(state, caller, request).await?)
}

/// `ListTasks`: the request's filters as an [`ops::TaskList`] (`pageSize` 1–100, 50 when unset;
/// spec 3.1.4: artifacts only with `includeArtifacts`, `nextPageToken` always present and empty on
/// the last page), the page written as a `ListTasksResponse`.
pub(crate) async fn list_tasks_page(
    state: &AppState,
    caller: &Caller,
    request: v1::ListTasksRequest,
) -> Result<v1::ListTasksResponse, OpError> {
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
        Some(n) => Some(usize::try_from(n).unwrap_or(0)),
        None => None,
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
    let list = ops::TaskList {
        context_id: Some(request.context_id).filter(|c| !c.is_empty()),
        state: state_filter,
        status_since_ms,
        page_token: Some(request.page_token).filter(|t| !t.is_empty()),
        page_size: usize::try_from(page_size).unwrap_or(1),
        history,
        include_artifacts: request.include_artifacts.unwrap_or(false),
    };
    let page = ops::list_tasks(state, caller, list).await?;
    Ok(v1::ListTasksResponse {
        tasks: page.tasks.into_iter().map(v1::Task::from).collect(),
        next_page_token: page.next_page_token.unwrap_or_default(),
        page_size,
        total_size: i32::try_from(page.total).unwrap_or(i32::MAX),
    })
}

// ---------------------------------------------------------------------------------------------
// Push-notification configs
// ---------------------------------------------------------------------------------------------

/// Configs per `ListTaskPushNotificationConfigs` page: the most a request may name.
const MAX_PUSH_PAGE_SIZE: i32 = 100;

fn non_empty(s: String) -> Option<String> {
    Some(s).filter(|s| !s.is_empty())
}

/// A 1.0 config in the engine's terms (its task id aside).
pub(crate) fn config_of_v1(config: v1::TaskPushNotificationConfig) -> PushConfig {
    PushConfig {
        id: config.id,
        url: config.url,
        token: non_empty(config.token),
        authentication: config.authentication.map(|a| PushAuth {
            schemes: vec![a.scheme],
            credentials: non_empty(a.credentials),
        }),
        format: PushFormat::V1_0,
    }
}

/// A config in its 1.0 form.
pub(crate) fn v1_of(task_id: &TaskId, config: PushConfig) -> v1::TaskPushNotificationConfig {
    v1::TaskPushNotificationConfig {
        tenant: String::new(),
        id: config.id,
        task_id: task_id.to_string(),
        url: config.url,
        token: config.token.unwrap_or_default(),
        authentication: config.authentication.map(|a| v1::AuthenticationInfo {
            scheme: a.schemes.into_iter().next().unwrap_or_default(),
            credentials: a.credentials.unwrap_or_default(),
        }),
    }
}

/// `CreateTaskPushNotificationConfig`: the config, its id assigned when the request has none.
pub(crate) async fn create_push(
    state: &AppState,
    caller: &Caller,
    config: v1::TaskPushNotificationConfig,
) -> Result<v1::TaskPushNotificationConfig, OpError> {
    if config.task_id.is_empty() {
        return Err(invalid("`taskId` is required".into()));
    }
    if config.url.is_empty() {
        return Err(invalid("`url` is required".into()));
    }
    let task_id = TaskId::from(config.task_id.clone());
    let stored = push::set(state, caller, &task_id, config_of_v1(config)).await?;
    Ok(v1_of(&task_id, stored))
}

/// `GetTaskPushNotificationConfig`.
pub(crate) async fn get_push(
    state: &AppState,
    caller: &Caller,
    request: v1::GetTaskPushNotificationConfigRequest,
) -> Result<v1::TaskPushNotificationConfig, OpError> {
    let task_id = TaskId::from(request.task_id);
    let config = push::get(state, caller, &task_id, Some(&request.id)).await?;
    Ok(v1_of(&task_id, config))
}

/// `ListTaskPushNotificationConfigs`: the task's configs in id order, a page at a time
/// (`pageSize` 1–100, all of a task's when unset; `nextPageToken` empty on the last page).
pub(crate) async fn list_push(
    state: &AppState,
    caller: &Caller,
    request: v1::ListTaskPushNotificationConfigsRequest,
) -> Result<v1::ListTaskPushNotificationConfigsResponse, OpError> {
    let size = match request.page_size {
        0 => MAX_CONFIGS_PER_TASK,
        n if (1..=MAX_PUSH_PAGE_SIZE).contains(&n) => usize::try_from(n).unwrap_or(1),
        n => {
            return Err(invalid(format!(
                "`pageSize` must be between 1 and {MAX_PUSH_PAGE_SIZE}, got {n}"
            )))
        }
    };
    let task_id = TaskId::from(request.task_id);
    let after = Some(request.page_token.as_str()).filter(|t| !t.is_empty());
    let (configs, next) = push::list(state, caller, &task_id, after, size).await?;
    Ok(v1::ListTaskPushNotificationConfigsResponse {
        configs: configs.into_iter().map(|c| v1_of(&task_id, c)).collect(),
        next_page_token: next.unwrap_or_default(),
    })
}

/// `DeleteTaskPushNotificationConfig`.
pub(crate) async fn delete_push(
    state: &AppState,
    caller: &Caller,
    request: v1::DeleteTaskPushNotificationConfigRequest,
) -> Result<(), OpError> {
    push::delete(state, caller, &TaskId::from(request.task_id), &request.id).await
}
