//! Push-notification config operations for every binding: the version-neutral ones take and
//! return the 1.0 types (`model::v1`, what JSON-RPC 1.0, REST and gRPC carry), the 0.3 ones take
//! and return 0.3's shapes (`tasks/pushNotificationConfig/*`); both call the engine's
//! caller-scoped API, so another principal's task is `TaskNotFoundError` on every binding.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::errors::engine_error;
use super::errors::{Kind, OpError};
use super::AppState;
use crate::engine::push::MAX_CONFIGS_PER_TASK;
use crate::engine::Caller;
use crate::model::{v1, TaskId};
use crate::store::{PushAuth, PushConfig, PushFormat};

/// Configs per `ListTaskPushNotificationConfigs` page when the request names no `pageSize`, and
/// the most a page holds.
const MAX_PAGE_SIZE: i32 = 100;

fn invalid(message: impl Into<String>) -> OpError {
    OpError::new(Kind::InvalidInput, message)
}

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
pub(crate) async fn create(
    state: &AppState,
    caller: &Caller,
    config: v1::TaskPushNotificationConfig,
) -> Result<v1::TaskPushNotificationConfig, OpError> {
    if config.task_id.is_empty() {
        return Err(invalid("`taskId` is required"));
    }
    if config.url.is_empty() {
        return Err(invalid("`url` is required"));
    }
    let task_id = TaskId::from(config.task_id.clone());
    let stored = state
        .engine
        .set_push_config(caller, &task_id, config_of_v1(config), None)
        .await
        .map_err(|e| engine_error(e, false))?;
    Ok(v1_of(&task_id, stored))
}

/// `GetTaskPushNotificationConfig`.
pub(crate) async fn get(
    state: &AppState,
    caller: &Caller,
    request: v1::GetTaskPushNotificationConfigRequest,
) -> Result<v1::TaskPushNotificationConfig, OpError> {
    let task_id = TaskId::from(request.task_id);
    let config = state
        .engine
        .push_config(caller, &task_id, &request.id)
        .await
        .map_err(|e| engine_error(e, false))?;
    Ok(v1_of(&task_id, config))
}

/// `ListTaskPushNotificationConfigs`: the task's configs in id order, a page at a time
/// (`pageSize` 1–100, all of a task's when unset; `nextPageToken` empty on the last page).
pub(crate) async fn list(
    state: &AppState,
    caller: &Caller,
    request: v1::ListTaskPushNotificationConfigsRequest,
) -> Result<v1::ListTaskPushNotificationConfigsResponse, OpError> {
    let size = match request.page_size {
        0 => MAX_CONFIGS_PER_TASK,
        n if (1..=MAX_PAGE_SIZE).contains(&n) => usize::try_from(n).unwrap_or(1),
        n => {
            return Err(invalid(format!(
                "`pageSize` must be between 1 and {MAX_PAGE_SIZE}, got {n}"
            )))
        }
    };
    let after = match request.page_token.as_str() {
        "" => None,
        token => Some(super::page_token::decode(token)?),
    };
    let task_id = TaskId::from(request.task_id);
    let mut configs = state
        .engine
        .push_configs(caller, &task_id, after.as_deref(), size + 1)
        .await
        .map_err(|e| engine_error(e, false))?;
    let more = configs.len() > size;
    configs.truncate(size);
    let next_page_token = match (more, configs.last()) {
        (true, Some(last)) => super::page_token::encode(&last.id),
        _ => String::new(),
    };
    Ok(v1::ListTaskPushNotificationConfigsResponse {
        configs: configs.into_iter().map(|c| v1_of(&task_id, c)).collect(),
        next_page_token,
    })
}

/// `DeleteTaskPushNotificationConfig` (idempotent: a config already gone is deleted).
pub(crate) async fn delete(
    state: &AppState,
    caller: &Caller,
    request: v1::DeleteTaskPushNotificationConfigRequest,
) -> Result<(), OpError> {
    state
        .engine
        .delete_push_config(caller, &TaskId::from(request.task_id), &request.id)
        .await
        .map_err(|e| engine_error(e, false))
}

/// A send's webhook between [`before_send`] and [`after_send`].
pub(crate) enum SendWebhook {
    /// The send has none.
    None,
    /// For the task the send creates: stored once it exists.
    New(PushConfig),
    /// Stored on the existing task before the message; `undo` says how to put things back if the
    /// message is refused.
    Set { undo: Undo },
}

/// How a refused send's webhook is taken back: a config it created is deleted, one it replaced is
/// restored as it was (what the client set before is never lost to a refused request).
pub(crate) enum Undo {
    /// Delete the config `.1` of task `.0`.
    Delete(TaskId, String),
    /// Put the config back on task `.0`.
    Restore(TaskId, PushConfig),
}

/// Before a send that carries a webhook (1.0 `taskPushNotificationConfig`, 0.3
/// `pushNotificationConfig`; an empty id becomes the task's): it is checked whole (URL, token,
/// authentication) before anything is written, and a task that exists gets it before the message, so it sees what the message
/// causes and nothing before.
pub(crate) async fn before_send(
    state: &AppState,
    caller: &Caller,
    config: Option<&PushConfig>,
    existing: Option<&TaskId>,
) -> Result<SendWebhook, OpError> {
    let Some(config) = config else {
        return Ok(SendWebhook::None);
    };
    let failed = |e| engine_error(e, false);
    state
        .engine
        .check_push_config(config)
        .await
        .map_err(failed)?;
    let Some(task_id) = existing else {
        return Ok(SendWebhook::New(config.clone()));
    };
    let mut config = config.clone();
    if config.id.is_empty() {
        config.id = task_id.to_string();
    }
    let undo = match state.engine.push_config(caller, task_id, &config.id).await {
        Ok(before) => Undo::Restore(task_id.clone(), before),
        Err(_) => Undo::Delete(task_id.clone(), config.id.clone()),
    };
    state
        .engine
        .set_push_config(caller, task_id, config, None)
        .await
        .map_err(failed)?;
    Ok(SendWebhook::Set { undo })
}

/// After the send: a new task gets its webhook with every update from its creation on; a config
/// set before a message that was refused is deleted again, or the one it replaced restored (`sent`
/// is `None`).
pub(crate) async fn after_send(
    state: &AppState,
    caller: &Caller,
    webhook: SendWebhook,
    sent: Option<&TaskId>,
) -> Result<(), OpError> {
    match (webhook, sent) {
        (SendWebhook::New(mut config), Some(task_id)) => {
            if config.id.is_empty() {
                config.id = task_id.to_string();
            }
            state
                .engine
                .set_push_config(caller, task_id, config, Some(0))
                .await
                .map_err(|e| engine_error(e, false))?;
        }
        (SendWebhook::Set { undo }, None) => match undo {
            Undo::Delete(task_id, id) => {
                if let Err(e) = state.engine.delete_push_config(caller, &task_id, &id).await {
                    tracing::warn!(task = %task_id, error = %e, "a refused send's webhook was not deleted");
                }
            }
            Undo::Restore(task_id, before) => {
                if let Err(e) = state
                    .engine
                    .set_push_config(caller, &task_id, before, None)
                    .await
                {
                    tracing::warn!(task = %task_id, error = %e, "a refused send's replaced webhook was not restored");
                }
            }
        },
        _ => {}
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// A2A 0.3
// ---------------------------------------------------------------------------------------------

/// 0.3 `PushNotificationAuthenticationInfo`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct AuthV03 {
    schemes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    credentials: Option<String>,
}

/// 0.3 `PushNotificationConfig`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ConfigV03 {
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
    pub(crate) fn into_config(self, default_id: &str) -> Result<PushConfig, OpError> {
        if self.url.is_empty() {
            return Err(invalid("`pushNotificationConfig.url` is required"));
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
    pub(crate) fn decode(value: Value) -> Result<ConfigV03, OpError> {
        serde_json::from_value(value)
            .map_err(|e| invalid(format!("invalid `pushNotificationConfig`: {e}")))
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

fn json(value: impl Serialize) -> Result<Value, OpError> {
    serde_json::to_value(value).map_err(|e| OpError::new(Kind::Internal, e.to_string()))
}

/// Answer a 0.3 `tasks/pushNotificationConfig/{set,get,list,delete}` request (`verb`).
pub(crate) async fn dispatch_v03(
    state: &AppState,
    caller: &Caller,
    verb: &str,
    params: Value,
) -> Result<Value, OpError> {
    let engine = &state.engine;
    let failed = |e| engine_error(e, false);
    match verb {
        "set" => {
            let request: TaskConfigV03 = super::jsonrpc::decode_params(params)?;
            let task_id = TaskId::from(request.task_id);
            let config = request
                .push_notification_config
                .into_config(task_id.as_ref())?;
            let stored = engine
                .set_push_config(caller, &task_id, config, None)
                .await
                .map_err(failed)?;
            json(v03_of(&task_id, stored))
        }
        "get" => {
            let request: ConfigIdParams = super::jsonrpc::decode_params(params)?;
            let task_id = TaskId::from(request.id);
            let config = match request.push_notification_config_id {
                Some(id) => engine.push_config(caller, &task_id, &id).await,
                // No id: the task's default config (id = task id), else its first.
                None => match engine.push_config(caller, &task_id, task_id.as_ref()).await {
                    Err(crate::engine::EngineError::PushConfigNotFound { .. }) => engine
                        .push_configs(caller, &task_id, None, 1)
                        .await
                        .and_then(|configs| {
                            configs.into_iter().next().ok_or_else(|| {
                                crate::engine::EngineError::PushConfigNotFound {
                                    task_id: task_id.to_string(),
                                    config_id: task_id.to_string(),
                                }
                            })
                        }),
                    other => other,
                },
            }
            .map_err(failed)?;
            json(v03_of(&task_id, config))
        }
        "list" => {
            let request: ConfigIdParams = super::jsonrpc::decode_params(params)?;
            let task_id = TaskId::from(request.id);
            let configs = engine
                .push_configs(caller, &task_id, None, MAX_CONFIGS_PER_TASK)
                .await
                .map_err(failed)?;
            json(
                configs
                    .into_iter()
                    .map(|c| v03_of(&task_id, c))
                    .collect::<Vec<_>>(),
            )
        }
        "delete" => {
            let request: ConfigIdParams = super::jsonrpc::decode_params(params)?;
            let id = request
                .push_notification_config_id
                .ok_or_else(|| invalid("`pushNotificationConfigId` is required"))?;
            engine
                .delete_push_config(caller, &TaskId::from(request.id), &id)
                .await
                .map_err(failed)?;
            Ok(Value::Null)
        }
        other => Err(OpError::new(
            Kind::NoSuchMethod,
            format!("method `tasks/pushNotificationConfig/{other}` not found"),
        )),
    }
}
