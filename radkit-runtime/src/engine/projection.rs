//! Projections of the journal: the A2A `Task` (status, history, artifacts) and the stream of A2A
//! update events. Pure functions of journal records; the server renders them.

use crate::journal::{Entry, JournalRecord};
use crate::model::{
    Artifact, Message, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
};

/// An event for `message/stream` and `tasks/resubscribe`.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A status update; `final` ends the stream.
    Status(TaskStatusUpdateEvent),
    /// An artifact (chunk).
    Artifact(TaskArtifactUpdateEvent),
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
    StreamEvent::Status(TaskStatusUpdateEvent {
        task_id: task_id.to_owned(),
        context_id: context_id.to_owned(),
        kind: Default::default(),
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
        } => Some(StreamEvent::Artifact(TaskArtifactUpdateEvent {
            task_id: task_id.to_owned(),
            context_id: context_id.to_owned(),
            kind: Default::default(),
            artifact: artifact.clone(),
            append: Some(*append),
            last_chunk: Some(*last_chunk),
            metadata: None,
        })),
        _ => None,
    }
}

/// The task as A2A shows it, folded from its journal. `None` when the journal has no creation entry.
pub fn project(
    task_id: &str,
    records: &[JournalRecord],
    history_length: Option<usize>,
) -> Option<Task> {
    let mut context_id = None;
    let mut state = TaskState::Submitted;
    let mut status_message: Option<Message> = None;
    let mut at_ms = 0;
    let mut history: Vec<Message> = Vec::new();
    let mut artifacts: Vec<Artifact> = Vec::new();
    for record in records {
        match &record.entry {
            Entry::TaskCreated { context_id: c, .. } => {
                context_id = Some(c.clone());
                at_ms = record.at_ms;
            }
            Entry::MessageReceived { message } => history.push(message.clone()),
            Entry::MessageEmitted { message } => history.push(message.clone()),
            Entry::Progress { message } => {
                status_message = Some(message.clone());
                at_ms = record.at_ms;
            }
            Entry::StatusChanged { state: s } => {
                if *s != state {
                    status_message = None;
                }
                state = *s;
                at_ms = record.at_ms;
            }
            Entry::AwaitingInput { message, .. } => {
                history.push(message.clone());
                state = TaskState::InputRequired;
                status_message = Some(message.clone());
                at_ms = record.at_ms;
            }
            Entry::Terminal { state: s, message } => {
                state = *s;
                status_message = message.clone();
                if let Some(m) = message {
                    history.push(m.clone());
                }
                at_ms = record.at_ms;
            }
            Entry::ArtifactEmitted {
                artifact, append, ..
            } => match artifacts
                .iter_mut()
                .find(|a| a.artifact_id == artifact.artifact_id)
            {
                Some(existing) if *append => existing.parts.extend(artifact.parts.iter().cloned()),
                Some(existing) => *existing = artifact.clone(),
                None => artifacts.push(artifact.clone()),
            },
            _ => {}
        }
    }
    let context_id = context_id?;
    let mut history: Vec<Message> = history
        .iter()
        .map(|m| scoped(m, task_id, &context_id))
        .collect();
    if let Some(n) = history_length {
        let skip = history.len().saturating_sub(n);
        history.drain(..skip);
    }
    Some(Task {
        id: task_id.to_owned(),
        status: TaskStatus {
            state,
            message: status_message.map(|m| scoped(&m, task_id, &context_id)),
            timestamp: Some(timestamp(at_ms)),
        },
        context_id,
        history: Some(history),
        artifacts: if artifacts.is_empty() {
            None
        } else {
            Some(artifacts)
        },
        metadata: None,
        kind: Default::default(),
    })
}
