//! A2A 1.0 requests as the operations' inputs, shared by the three 1.0 bindings (JSON-RPC,
//! HTTP+JSON, gRPC): a `SendMessageRequest` as a [`Send`], and `ListTasks` (its filters, paging and
//! page of tasks).

use serde_json::Value;

use super::errors::{Kind, OpError};
use super::jsonrpc::decode_params;
use super::ops::Send;
use super::version::Version;
use super::AppState;
use crate::engine::Caller;
use crate::model::{v1, Message};

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
        push: config
            .task_push_notification_config
            .map(super::push::config_of_v1),
        version: Version::V1_0,
    })
}

/// Tasks per `ListTasks` page when the request names no `pageSize`, and the most it may name.
const DEFAULT_PAGE_SIZE: i32 = 50;
const MAX_PAGE_SIZE: i32 = 100;

fn invalid(message: String) -> OpError {
    OpError::new(Kind::InvalidInput, message)
}

/// A page token: the position after the page's last task, `(status time, id)`, opaque to clients.
fn page_token(at_ms: i64, id: &str) -> String {
    super::page_token::encode(&format!("{at_ms}:{id}"))
}

fn page_position(token: &str) -> Result<(i64, String), OpError> {
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
) -> Result<Value, OpError> {
    let response = list_tasks_page(state, caller, request).await?;
    serde_json::to_value(response).map_err(|e| OpError::new(Kind::Internal, e.to_string()))
}

/// [`list_tasks`]' page, before a binding writes it.
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
