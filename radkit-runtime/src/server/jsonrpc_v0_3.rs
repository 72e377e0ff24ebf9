//! The A2A 0.3 JSON-RPC binding: slash-named methods whose params are decoded from 0.3 JSON
//! (`model::v0_3`) into the operations' inputs (`ops`, `open`, `push`), and whose results and
//! errors are written back in 0.3 form (`wire`, and 0.3's push-notification config shapes here).

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::errors::{Kind, OpError};
use super::jsonrpc::{self, decode_params};
use super::ops::{self, Send};
use super::stream::Envelope;
use super::version::Version;
use super::wire::json;
use super::{open, push, stream, AppState};
use crate::engine::push::MAX_CONFIGS_PER_TASK;
use crate::engine::Caller;
use crate::model::base64_text;
use crate::model::{v0_3, Message, Task, TaskId};
use crate::store::{PushAuth, PushConfig, PushFormat};

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
            Err(e) => return stream::error(&id, Version::V0_3, e),
        };
        let envelope = Envelope::JsonRpc(id.clone());
        let answer = match request.method.as_str() {
            "message/stream" => send_of(request.params).map(open::Target::send),
            _ => decode_params(request.params).map(|p: IdParams| open::Target::Task {
                id: p.id,
                until_end: false,
            }),
        };
        let answer = open::open(&state, &caller, answer, resume)
            .await
            .map(|opened| stream::sse(opened, envelope, Version::V0_3).into_response());
        return answer.unwrap_or_else(|e| stream::error(&id, Version::V0_3, e));
    }
    let result = match request.method.as_str() {
        "message/send" => send(&state, caller, request.params)
            .await
            .and_then(|answer| Version::V0_3.send_response(answer))
            .map(|result| jsonrpc::ok(&id, result)),
        "tasks/get" => get(&state, caller, request.params)
            .await
            .map(|task| jsonrpc::ok(&id, v0_3::Task::from(task))),
        "tasks/cancel" => cancel(&state, caller, request.params)
            .await
            .map(|task| jsonrpc::ok(&id, v0_3::Task::from(task))),
        m if m.starts_with("tasks/pushNotificationConfig/") => {
            let verb = &m["tasks/pushNotificationConfig/".len()..];
            push_config(&state, &caller, verb, request.params)
                .await
                .map(|result| jsonrpc::ok(&id, result))
        }
        "agent/getAuthenticatedExtendedCard" => {
            super::card::extended_card_v0_3(&state, &caller).map(|card| jsonrpc::ok(&id, card))
        }
        other => Err(super::version::needs_version(other).unwrap_or_else(|| {
            OpError::new(Kind::NoSuchMethod, format!("method `{other}` not found"))
        })),
    };
    match result {
        Ok(body) => Json(body).into_response(),
        Err(error) => Json(Version::V0_3.rpc_error(&id, error)).into_response(),
    }
}

/// A 0.3 `message/send` / `message/stream`'s params as the operations' [`Send`].
fn send_of(params: Value) -> Result<Send, OpError> {
    let SendParams {
        message,
        configuration,
        metadata,
    } = decode_params(params)?;
    check_file_bytes(&message.parts)?;
    let message = Message::try_from(message)
        .map_err(|e| OpError::new(Kind::InvalidInput, format!("invalid params: {e}")))?;
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
            .map(|c| ConfigV03::decode(c)?.into_config(""))
            .transpose()?,
    })
}

/// Inline 0.3 file content must be base64 (the standard alphabet; padding optional), as the A2A
/// schema says: a client that sends anything else learns which part, here.
fn check_file_bytes(parts: &[v0_3::Part]) -> Result<(), OpError> {
    use base64::Engine as _;
    for (i, part) in parts.iter().enumerate() {
        if let v0_3::Part::File {
            file: v0_3::FileContent::Bytes { bytes, .. },
            ..
        } = part
        {
            base64_text::STANDARD.decode(bytes).map_err(|e| {
                OpError::new(
                    Kind::InvalidInput,
                    format!("`message.parts[{i}].file.bytes` is not valid base64: {e}"),
                )
            })?;
        }
    }
    Ok(())
}

async fn send(state: &AppState, caller: Caller, params: Value) -> Result<ops::Answer, OpError> {
    ops::send_task(state, &caller, send_of(params)?).await
}

async fn get(state: &AppState, caller: Caller, params: Value) -> Result<Task, OpError> {
    let QueryParams { id, history_length } = decode_params(params)?;
    ops::get_task(state, &caller, &id, history_length).await
}

async fn cancel(state: &AppState, caller: Caller, params: Value) -> Result<Task, OpError> {
    let IdParams { id } = decode_params(params)?;
    ops::cancel_task(state, &caller, &id).await
}

// ---------------------------------------------------------------------------------------------
// Push-notification configs (`tasks/pushNotificationConfig/*`, a send's `pushNotificationConfig`)
// ---------------------------------------------------------------------------------------------

/// 0.3 `PushNotificationAuthenticationInfo`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct AuthV03 {
    schemes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    credentials: Option<String>,
}

/// 0.3 `PushNotificationConfig`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ConfigV03 {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    authentication: Option<AuthV03>,
}

/// 0.3 `TaskPushNotificationConfig`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskConfigV03 {
    task_id: String,
    push_notification_config: ConfigV03,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigIdParams {
    id: String,
    #[serde(default)]
    push_notification_config_id: Option<String>,
}

impl ConfigV03 {
    /// The config in the engine's terms; without an id it takes `default_id`, the task's (as the
    /// 0.3 SDK does, so setting it again replaces it and `get` without an id finds it; empty in a
    /// send, whose task id is known once it is created).
    fn into_config(self, default_id: &str) -> Result<PushConfig, OpError> {
        if self.url.is_empty() {
            return Err(OpError::new(
                Kind::InvalidInput,
                "`pushNotificationConfig.url` is required",
            ));
        }
        Ok(PushConfig {
            id: self
                .id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| default_id.to_owned()),
            url: self.url,
            token: self.token.filter(|t| !t.is_empty()),
            authentication: self.authentication.map(|a| PushAuth {
                schemes: a.schemes,
                credentials: a.credentials,
            }),
            format: PushFormat::V0_3,
        })
    }

    /// A `configuration.pushNotificationConfig` of a 0.3 send.
    fn decode(value: Value) -> Result<ConfigV03, OpError> {
        serde_json::from_value(value).map_err(|e| {
            OpError::new(
                Kind::InvalidInput,
                format!("invalid `pushNotificationConfig`: {e}"),
            )
        })
    }
}

fn v03_of(task_id: &TaskId, config: PushConfig) -> TaskConfigV03 {
    TaskConfigV03 {
        task_id: task_id.to_string(),
        push_notification_config: ConfigV03 {
            id: Some(config.id),
            url: config.url,
            token: config.token,
            authentication: config.authentication.map(|a| AuthV03 {
                schemes: a.schemes,
                credentials: a.credentials,
            }),
        },
    }
}

/// Answer a 0.3 `tasks/pushNotificationConfig/{set,get,list,delete}` request (`verb`).
async fn push_config(
    state: &AppState,
    caller: &Caller,
    verb: &str,
    params: Value,
) -> Result<Value, OpError> {
    match verb {
        "set" => {
            let request: TaskConfigV03 = decode_params(params)?;
            let task_id = TaskId::from(request.task_id);
            let config = request
                .push_notification_config
                .into_config(task_id.as_ref())?;
            let stored = push::set(state, caller, &task_id, config).await?;
            json(v03_of(&task_id, stored))
        }
        "get" => {
            let request: ConfigIdParams = decode_params(params)?;
            let task_id = TaskId::from(request.id);
            let id = request.push_notification_config_id.as_deref();
            let config = push::get(state, caller, &task_id, id).await?;
            json(v03_of(&task_id, config))
        }
        "list" => {
            let request: ConfigIdParams = decode_params(params)?;
            let task_id = TaskId::from(request.id);
            let (configs, _) =
                push::list(state, caller, &task_id, None, MAX_CONFIGS_PER_TASK).await?;
            json(
                configs
                    .into_iter()
                    .map(|c| v03_of(&task_id, c))
                    .collect::<Vec<_>>(),
            )
        }
        "delete" => {
            let request: ConfigIdParams = decode_params(params)?;
            let id = request.push_notification_config_id.ok_or_else(|| {
                OpError::new(Kind::InvalidInput, "`pushNotificationConfigId` is required")
            })?;
            push::delete(state, caller, &TaskId::from(request.id), &id).await?;
            Ok(Value::Null)
        }
        other => Err(OpError::new(
            Kind::NoSuchMethod,
            format!("method `tasks/pushNotificationConfig/{other}` not found"),
        )),
    }
}
