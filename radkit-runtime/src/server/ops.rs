//! The operations every binding calls: send (start or continue a task, and wait if asked), get,
//! cancel and list tasks, on radkit's model, answering with radkit's `Task` or an [`OpError`]. Bindings
//! decode their request into these inputs and render what comes back; nothing here knows a wire
//! format.

use std::time::Duration;

use serde_json::Value;

use super::errors::{engine_error, Kind, OpError};
use super::AppState;
use crate::engine::{Caller, EngineError, Request, Sent};
use crate::flow::PermissionMode;
use crate::model::{Message, Task, TaskId, TaskState};

/// How long a blocking `message/send` waits before returning the task as it is.
pub(crate) const BLOCKING_WAIT: Duration = Duration::from_secs(60);

/// A history length asked for: not negative; `None` when none was.
pub(crate) fn history(len: Option<i64>) -> Result<Option<usize>, OpError> {
    match len {
        Some(n) if n < 0 => Err(OpError::new(
            Kind::InvalidInput,
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
}

/// Validate and start (or continue) a task; returns the task id.
pub(crate) async fn start(
    state: &AppState,
    caller: &Caller,
    send: &Send,
) -> Result<TaskId, OpError> {
    start_with(state, caller, send, false)
        .await
        .map(|sent| sent.task_id)
}

/// [`start`]; with `follow`, for a caller that waits for the task to settle
/// ([`crate::engine::Engine::settled_after`]).
async fn start_with(
    state: &AppState,
    caller: &Caller,
    send: &Send,
    follow: bool,
) -> Result<Sent, OpError> {
    history(send.history_length)?;
    if send.message.parts.is_empty() {
        return Err(OpError::new(
            Kind::InvalidInput,
            "`message.parts` must not be empty",
        ));
    }
    check_context(state, caller, &send.message).await?;
    let request = engine_request(caller.clone(), send.message.clone(), send.metadata.as_ref())?;
    let existing = send.message.task_id.clone().map(TaskId::from);
    let webhook =
        super::push::before_send(state, caller, send.push.as_ref(), existing.as_ref()).await?;
    let sent = if follow {
        state.engine.send_following(request).await
    } else {
        state.engine.send(request).await.map(Sent::from)
    }
    .map_err(|e| engine_error(e, false));
    super::push::after_send(
        state,
        caller,
        webhook,
        sent.as_ref().ok().map(|s| &s.task_id),
    )
    .await?;
    sent
}

/// A message to an existing task that names a context must name that task's context: the engine
/// keeps the task's own, so a different one would be dropped without a word. A task the caller
/// cannot see is left to the engine, which answers -32001.
async fn check_context(
    state: &AppState,
    caller: &Caller,
    message: &Message,
) -> Result<(), OpError> {
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
    Err(OpError::new(
        Kind::InvalidInput,
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
) -> Result<Request, OpError> {
    let skill = requested_skill(&message, params_metadata)?;
    let mode = match metadata_value(&message, params_metadata, &["permissionMode"]) {
        None => None,
        Some(value) => Some(value.as_str().and_then(PermissionMode::parse).ok_or_else(|| {
            OpError::new(
                Kind::InvalidInput,
                format!("unknown permissionMode {value}; expected \"plan\", \"default\", \"acceptEdits\" or \"bypass\""),
            )
        })?),
    };
    let mut request = Request::new(caller, message);
    request.skill = skill;
    request.mode = mode;
    Ok(request)
}

/// What a send answers: the task, or the message that answers it directly (a task whose skill
/// answers with a message, once it completed).
pub(crate) enum Answer {
    Task(Task),
    Message(Message),
}

/// Whether the task `send` starts answers with a message (its skill says; a reply never does).
pub(crate) fn answers_with_message(state: &AppState, send: &Send) -> Result<bool, OpError> {
    let skill = requested_skill(&send.message, send.metadata.as_ref())?;
    Ok(state
        .engine
        .answers_with_message(skill.as_deref(), &send.message))
}

/// The message that answers `task` directly: its completion message, with its artifacts' parts
/// after the message's own, in the task's context and naming no task (the client has none to get
/// or follow). `None` when the task did not complete, or completed saying nothing.
pub(crate) fn direct_answer(task: &Task) -> Option<Message> {
    if task.status.state != TaskState::Completed {
        return None;
    }
    let said = task.status.message.as_ref();
    let parts: Vec<_> = said
        .map(|m| m.parts.clone())
        .unwrap_or_default()
        .into_iter()
        .chain(task.artifacts.iter().flat_map(|a| a.parts.iter().cloned()))
        .collect();
    if parts.is_empty() {
        return None;
    }
    let mut answer = Message::new(crate::model::Role::Agent, parts);
    // The journaled completion message's id: the same answer to a retried send.
    answer.message_id = said
        .map(|m| m.message_id.clone())
        .unwrap_or_else(|| format!("{}-answer", task.id));
    answer.context_id = Some(task.context_id.clone());
    answer.metadata = said.and_then(|m| m.metadata.clone());
    Some(answer)
}

/// The first of `keys` in the request's `metadata` or the message's (the request's wins).
fn metadata_value(
    message: &Message,
    params_metadata: Option<&serde_json::Map<String, Value>>,
    keys: &[&str],
) -> Option<Value> {
    [params_metadata, message.metadata.as_ref()]
        .into_iter()
        .flatten()
        .find_map(|m| keys.iter().find_map(|k| m.get(*k)))
        .cloned()
}

/// The skill a new task's request names (metadata `skillId` or `skill_id`), if any.
fn requested_skill(
    message: &Message,
    params_metadata: Option<&serde_json::Map<String, Value>>,
) -> Result<Option<String>, OpError> {
    match metadata_value(message, params_metadata, &["skillId", "skill_id"]) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(id)) => Ok(Some(id)),
        Some(other) => Err(OpError::new(
            Kind::InvalidInput,
            format!("metadata `skillId` must be a string, got {other}"),
        )),
    }
}

/// Start (or continue) a task and answer with it: at once, or when it settles for a blocking send
/// (within [`BLOCKING_WAIT`]; the task as it is then). A task whose skill answers with a message is
/// waited for whatever the send asked, and answered with [`direct_answer`] when it completed.
pub(crate) async fn send_task(
    state: &AppState,
    caller: &Caller,
    send: Send,
) -> Result<Answer, OpError> {
    let history_length = history(send.history_length)?.or(Some(state.config.max_history));
    let direct = answers_with_message(state, &send)?;
    let waits = send.blocking || direct;
    let sent = start_with(state, caller, &send, waits).await?;
    let task_id = sent.task_id.clone();
    let task = if waits {
        // The task keeps running if we stop waiting: the engine owns it, not this request.
        match tokio::time::timeout(
            BLOCKING_WAIT,
            state.engine.settled_after(caller, sent, history_length),
        )
        .await
        {
            Ok(settled) => settled.map_err(|e| engine_error(e, false))?,
            Err(_) => get_task(state, caller, &task_id, send.history_length).await?,
        }
    } else {
        get_task(state, caller, &task_id, send.history_length).await?
    };
    let task = accept_modes(task, &send.accepted_output_modes);
    Ok(match direct.then(|| direct_answer(&task)).flatten() {
        Some(message) => Answer::Message(message),
        None => Answer::Task(task),
    })
}

/// The task, with at most `history_length` history messages (the server's maximum when `None`).
pub(crate) async fn get_task(
    state: &AppState,
    caller: &Caller,
    task_id: &TaskId,
    history_length: Option<i64>,
) -> Result<Task, OpError> {
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
) -> Result<Task, OpError> {
    state
        .engine
        .cancel(caller, task_id)
        .await
        .map_err(|e| engine_error(e, true))
}

/// Which of the caller's tasks a list asks for, and how much of each.
pub(crate) struct TaskList {
    /// Only this context's.
    pub context_id: Option<String>,
    /// Only tasks in this state.
    pub state: Option<TaskState>,
    /// Only tasks whose status changed at or after this time (ms since the epoch).
    pub status_since_ms: Option<i64>,
    /// Where the page before ended (a [`TaskPage::next_page_token`]).
    pub page_token: Option<String>,
    /// At most this many tasks.
    pub page_size: usize,
    /// History messages per task (the server's maximum when `None`, and at most it).
    pub history: Option<usize>,
    /// Whether tasks carry their artifacts.
    pub include_artifacts: bool,
}

/// A page of tasks, newest status first.
pub(crate) struct TaskPage {
    /// The tasks.
    pub tasks: Vec<Task>,
    /// Where the next page starts (opaque to clients); `None` on the last page.
    pub next_page_token: Option<String>,
    /// How many tasks match, on every page.
    pub total: u64,
}

/// The caller's tasks that `list` asks for, a page at a time.
pub(crate) async fn list_tasks(
    state: &AppState,
    caller: &Caller,
    list: TaskList,
) -> Result<TaskPage, OpError> {
    let history = list
        .history
        .unwrap_or(state.config.max_history)
        .min(state.config.max_history);
    let after = list.page_token.as_deref().map(page_position).transpose()?;
    let query = crate::store::ViewQuery {
        principal: None,
        context_id: list.context_id,
        state: list.state,
        status_since_ms: list.status_since_ms,
        after,
        limit: list.page_size + 1,
        history: Some(history),
        ..Default::default()
    };
    let mut page = state
        .engine
        .list_views(caller, query)
        .await
        .map_err(|e| engine_error(e, false))?;
    let more = page.views.len() > list.page_size;
    page.views.truncate(list.page_size);
    let next_page_token = match (more, page.views.last()) {
        (true, Some(last)) => Some(page_token(last.status_at_ms, &last.record.id)),
        _ => None,
    };
    let tasks = page
        .views
        .into_iter()
        .map(|view| {
            let mut task = crate::engine::project_task(view);
            if !list.include_artifacts {
                task.artifacts.clear();
            }
            task
        })
        .collect();
    Ok(TaskPage {
        tasks,
        next_page_token,
        total: page.total,
    })
}

/// A page token: the position after the page's last task, `(status time, id)`, opaque to clients.
pub(crate) fn page_token(at_ms: i64, id: &str) -> String {
    super::page_token::encode(&format!("{at_ms}:{id}"))
}

pub(crate) fn page_position(token: &str) -> Result<(i64, String), OpError> {
    let text = super::page_token::decode(token)?;
    let bad = || super::page_token::not_ours(token);
    let (at, id) = text.split_once(':').ok_or_else(bad)?;
    Ok((at.parse().map_err(|_| bad())?, id.to_owned()))
}
