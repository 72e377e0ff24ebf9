//! Push-notification config operations for every binding, on the store's `PushConfig`: set, get,
//! list and delete a task's configs, and the webhook a send carries (checked whole and stored
//! around the send). They call the engine's caller-scoped API, so another principal's task is
//! `TaskNotFoundError` on every binding. The bindings read and write configs in their version's
//! shape (`v1_requests` for 1.0, `jsonrpc_v0_3` for 0.3).

use super::errors::engine_error;
use super::errors::OpError;
use super::AppState;
use crate::engine::{Caller, EngineError};
use crate::model::TaskId;
use crate::store::PushConfig;

/// Store `config` on the task (replacing one with its id); the stored config, id assigned.
pub(crate) async fn set(
    state: &AppState,
    caller: &Caller,
    task_id: &TaskId,
    config: PushConfig,
) -> Result<PushConfig, OpError> {
    state
        .engine
        .set_push_config(caller, task_id, config, None)
        .await
        .map_err(|e| engine_error(e, false))
}

/// The task's config `id`; without one, its default config (the one whose id is the task's, as
/// the 0.3 SDK names it), else its first.
pub(crate) async fn get(
    state: &AppState,
    caller: &Caller,
    task_id: &TaskId,
    id: Option<&str>,
) -> Result<PushConfig, OpError> {
    let engine = &state.engine;
    match id {
        Some(id) => engine.push_config(caller, task_id, id).await,
        None => match engine.push_config(caller, task_id, task_id.as_ref()).await {
            Err(EngineError::PushConfigNotFound { .. }) => engine
                .push_configs(caller, task_id, None, 1)
                .await
                .and_then(|configs| {
                    configs
                        .into_iter()
                        .next()
                        .ok_or_else(|| EngineError::PushConfigNotFound {
                            task_id: task_id.to_string(),
                            config_id: task_id.to_string(),
                        })
                }),
            other => other,
        },
    }
    .map_err(|e| engine_error(e, false))
}

/// A page of the task's configs in id order: at most `size` after the page token `after`, and the
/// token of the next page (`None` on the last).
pub(crate) async fn list(
    state: &AppState,
    caller: &Caller,
    task_id: &TaskId,
    after: Option<&str>,
    size: usize,
) -> Result<(Vec<PushConfig>, Option<String>), OpError> {
    let after = after.map(super::page_token::decode).transpose()?;
    let mut configs = state
        .engine
        .push_configs(caller, task_id, after.as_deref(), size + 1)
        .await
        .map_err(|e| engine_error(e, false))?;
    let more = configs.len() > size;
    configs.truncate(size);
    let next = match (more, configs.last()) {
        (true, Some(last)) => Some(super::page_token::encode(&last.id)),
        _ => None,
    };
    Ok((configs, next))
}

/// Delete the task's config `id` (idempotent: a config already gone is deleted).
pub(crate) async fn delete(
    state: &AppState,
    caller: &Caller,
    task_id: &TaskId,
    id: &str,
) -> Result<(), OpError> {
    state
        .engine
        .delete_push_config(caller, task_id, id)
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
