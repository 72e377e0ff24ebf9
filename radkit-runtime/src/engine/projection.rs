//! Projections of the journal: the [`Task`] (status, history, artifacts) and the stream of its
//! updates. Pure functions of journal records and of the stores' task views; the server renders
//! them.
//!
//! [`project_task`] renders the view a store keeps current with each append (`store::view`).

use crate::journal::Entry;
use crate::model::{ArtifactUpdate, Message, StatusUpdate, Task, TaskState, TaskStatus};
use crate::store::TaskView;

/// An event for `message/stream` and `tasks/resubscribe`.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A status update; `final` ends the stream.
    Status(StatusUpdate),
    /// An artifact (chunk).
    Artifact(ArtifactUpdate),
}

impl StreamEvent {
    /// True for the last event of a stream (input-required or terminal).
    pub fn is_final(&self) -> bool {
        matches!(self, StreamEvent::Status(s) if s.is_final)
    }
}

fn timestamp(at_ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(at_ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn scoped(message: &Message, task_id: &str, context_id: &str) -> Message {
    let mut m = message.clone();
    m.task_id = Some(task_id.to_owned());
    m.context_id = Some(context_id.to_owned());
    m
}

fn status(
    task_id: &str,
    context_id: &str,
    state: TaskState,
    message: Option<&Message>,
    at_ms: i64,
    is_final: bool,
) -> StreamEvent {
    StreamEvent::Status(StatusUpdate {
        task_id: task_id.to_owned(),
        context_id: context_id.to_owned(),
        status: TaskStatus {
            state,
            message: message.map(|m| scoped(m, task_id, context_id)),
            timestamp: Some(timestamp(at_ms)),
        },
        is_final,
        metadata: None,
    })
}

/// The stream event a subscription's update produces, if any; a status event is final when the update
/// is (see [`Update::is_final`](super::Update::is_final)).
pub fn stream_event(
    task_id: &str,
    context_id: &str,
    update: &super::Update,
) -> Option<StreamEvent> {
    let record = &update.record;
    let at = record.at_ms;
    match &record.entry {
        Entry::TaskCreated { .. } => Some(status(
            task_id,
            context_id,
            TaskState::Submitted,
            None,
            at,
            false,
        )),
        Entry::StatusChanged {
            state: TaskState::Working,
        } => Some(status(
            task_id,
            context_id,
            TaskState::Working,
            None,
            at,
            false,
        )),
        Entry::Progress { message } | Entry::MessageEmitted { message } => Some(status(
            task_id,
            context_id,
            TaskState::Working,
            Some(message),
            at,
            false,
        )),
        Entry::AwaitingInput { message, .. } => Some(status(
            task_id,
            context_id,
            TaskState::InputRequired,
            Some(message),
            at,
            update.is_final,
        )),
        Entry::Terminal { state, message } => Some(status(
            task_id,
            context_id,
            *state,
            message.as_ref(),
            at,
            update.is_final,
        )),
        Entry::ArtifactEmitted {
            artifact,
            append,
            last_chunk,
        } => Some(StreamEvent::Artifact(ArtifactUpdate {
            task_id: task_id.to_owned(),
            context_id: context_id.to_owned(),
            artifact: artifact.clone(),
            append: *append,
            last_chunk: *last_chunk,
            metadata: None,
        })),
        _ => None,
    }
}

/// The stream event of a piece of a streamed model call's text: a `working` status update whose
/// agent message carries it, or a chunk of the artifact it is streamed into (the attempt's first
/// replaces what an earlier attempt sent). Either carries `radkit/tokens` metadata: the call's
/// `invocationId`, the `attempt` and the piece's `index` in it.
pub fn token_event(
    task_id: &str,
    context_id: &str,
    chunk: &super::TokenChunk,
    at_ms: i64,
) -> StreamEvent {
    let tokens: crate::model::Metadata = [(
        "radkit/tokens".to_owned(),
        serde_json::json!({
            "invocationId": chunk.invocation_id.as_str(),
            "attempt": chunk.attempt,
            "index": chunk.index,
        }),
    )]
    .into_iter()
    .collect();
    match &chunk.to {
        crate::flow::StreamTo::Status => {
            let mut message = Message::agent_text(chunk.text.clone());
            message.message_id = format!(
                "{}.a{}.t{}",
                chunk.invocation_id.as_str(),
                chunk.attempt,
                chunk.index
            );
            message.metadata = Some(tokens);
            status(
                task_id,
                context_id,
                TaskState::Working,
                Some(&message),
                at_ms,
                false,
            )
        }
        crate::flow::StreamTo::Artifact { artifact_id, name } => {
            StreamEvent::Artifact(ArtifactUpdate {
                task_id: task_id.to_owned(),
                context_id: context_id.to_owned(),
                artifact: crate::model::Artifact {
                    artifact_id: artifact_id.clone(),
                    name: Some(name.clone()),
                    description: None,
                    parts: vec![crate::model::Part::text(chunk.text.clone())],
                    metadata: None,
                    extensions: Vec::new(),
                },
                append: chunk.index > 0,
                last_chunk: false,
                metadata: Some(tokens),
            })
        }
    }
}

/// The task, from its stored view (its history is the view's: ask the store for the
/// window wanted).
pub fn project_task(view: TaskView) -> Task {
    let TaskView {
        record,
        status_message,
        status_at_ms,
        history,
        artifacts,
        settled: _,
    } = view;
    let (task_id, context_id) = (record.id, record.context_id);
    Task {
        status: TaskStatus {
            state: record.state,
            message: status_message.map(|m| scoped(&m, &task_id, &context_id)),
            timestamp: Some(timestamp(status_at_ms)),
        },
        history: history
            .iter()
            .map(|m| scoped(m, &task_id, &context_id))
            .collect(),
        artifacts,
        metadata: None,
        id: task_id,
        context_id,
    }
}
