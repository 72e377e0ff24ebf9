//! The A2A 1.0 JSON-RPC binding (PascalCase methods, ProtoJSON payloads): params are decoded into
//! the operations' inputs (`v1_requests`), the same operations as 0.3 run (`ops`, `open`), and
//! results and errors are written in 1.0 form (`wire`). A task created over either version is read,
//! streamed and canceled over the other.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use axum::Json;

use super::errors::{Kind, OpError};
use super::jsonrpc::{self, decode_params};
use super::stream::Envelope;
use super::v1_requests::{list_tasks, send_of};
use super::version::{Version, RENAMED};
use super::wire::json;
use super::{open, ops, stream, AppState};
use crate::engine::Caller;
use crate::model::{v1, TaskId};

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
                Err(e) => return stream::error(&id, Version::V1_0, e),
            };
            let envelope = Envelope::JsonRpc(id.clone());
            let target = match request.method.as_str() {
                "SendStreamingMessage" => send_of(params).map(open::Target::send),
                _ => {
                    decode_params(params).map(|r: v1::SubscribeToTaskRequest| open::Target::Task {
                        id: TaskId::from(r.id),
                        until_end: true,
                    })
                }
            };
            let answer = open::open(&state, &caller, target, resume)
                .await
                .map(|opened| stream::sse(opened, envelope, Version::V1_0).into_response());
            return answer.unwrap_or_else(|e| stream::error(&id, Version::V1_0, e));
        }
        _ => {}
    }
    let result = match request.method.as_str() {
        "SendMessage" => match send_of(params) {
            Ok(send) => ops::send_task(&state, &caller, send)
                .await
                .and_then(|answer| Version::V1_0.send_response(answer)),
            Err(e) => Err(e),
        },
        "GetTask" => match decode_params::<v1::GetTaskRequest>(params) {
            Ok(r) => ops::get_task(
                &state,
                &caller,
                &TaskId::from(r.id),
                r.history_length.map(i64::from),
            )
            .await
            .and_then(|task| Version::V1_0.task(task)),
            Err(e) => Err(e),
        },
        "CancelTask" => match decode_params::<v1::CancelTaskRequest>(params) {
            Ok(r) => ops::cancel_task(&state, &caller, &TaskId::from(r.id))
                .await
                .and_then(|task| Version::V1_0.task(task)),
            Err(e) => Err(e),
        },
        "ListTasks" => match decode_params::<v1::ListTasksRequest>(params) {
            Ok(r) => list_tasks(&state, &caller, r).await,
            Err(e) => Err(e),
        },
        "CreateTaskPushNotificationConfig" => {
            match decode_params::<v1::TaskPushNotificationConfig>(params) {
                Ok(r) => super::v1_requests::create_push(&state, &caller, r).await.and_then(json),
                Err(e) => Err(e),
            }
        }
        "GetTaskPushNotificationConfig" => {
            match decode_params::<v1::GetTaskPushNotificationConfigRequest>(params) {
                Ok(r) => super::v1_requests::get_push(&state, &caller, r).await.and_then(json),
                Err(e) => Err(e),
            }
        }
        "ListTaskPushNotificationConfigs" => {
            match decode_params::<v1::ListTaskPushNotificationConfigsRequest>(params) {
                Ok(r) => super::v1_requests::list_push(&state, &caller, r).await.and_then(json),
                Err(e) => Err(e),
            }
        }
        "DeleteTaskPushNotificationConfig" => {
            match decode_params::<v1::DeleteTaskPushNotificationConfigRequest>(params) {
                Ok(r) => super::v1_requests::delete_push(&state, &caller, r)
                    .await
                    .map(|()| serde_json::json!({})),
                Err(e) => Err(e),
            }
        }
        "GetExtendedAgentCard" => match decode_params::<v1::GetExtendedAgentCardRequest>(params) {
            Ok(_) => super::card::extended_card_v1(&state, &caller).and_then(super::card::to_json),
            Err(e) => Err(e),
        },
        other => Err(OpError::new(
            Kind::NoSuchMethod,
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
        Err(error) => Json(Version::V1_0.rpc_error(&id, error)).into_response(),
    }
}
