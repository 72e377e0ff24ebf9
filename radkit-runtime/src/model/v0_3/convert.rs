//! radkit's model written as A2A 0.3 (`From`, never fails) and 0.3 read into it (`TryFrom` with
//! [`WireError`]: the `unknown` state and file bytes that are not base64 have no value in the
//! model). Empty lists are written as absent, as 0.3 writers do; absent lists read as empty.

use super::{
    Artifact, ArtifactUpdateKind, FileContent, Message, MessageKind, Part, Role, StatusUpdateKind,
    Task, TaskArtifactUpdateEvent, TaskKind, TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use crate::model::message::base64_text;
use crate::model::{self as own, WireError};

impl From<own::Role> for Role {
    fn from(role: own::Role) -> Self {
        match role {
            own::Role::User => Role::User,
            own::Role::Agent => Role::Agent,
        }
    }
}

impl From<Role> for own::Role {
    fn from(role: Role) -> Self {
        match role {
            Role::User => own::Role::User,
            Role::Agent => own::Role::Agent,
        }
    }
}

impl From<own::TaskState> for TaskState {
    fn from(state: own::TaskState) -> Self {
        use own::TaskState as Own;
        match state {
            Own::Submitted => TaskState::Submitted,
            Own::Working => TaskState::Working,
            Own::InputRequired => TaskState::InputRequired,
            Own::Completed => TaskState::Completed,
            Own::Canceled => TaskState::Canceled,
            Own::Failed => TaskState::Failed,
            Own::Rejected => TaskState::Rejected,
            Own::AuthRequired => TaskState::AuthRequired,
        }
    }
}

impl TryFrom<TaskState> for own::TaskState {
    type Error = WireError;

    /// Fails on `unknown`.
    fn try_from(state: TaskState) -> Result<Self, WireError> {
        use own::TaskState as Own;
        Ok(match state {
            TaskState::Submitted => Own::Submitted,
            TaskState::Working => Own::Working,
            TaskState::InputRequired => Own::InputRequired,
            TaskState::Completed => Own::Completed,
            TaskState::Canceled => Own::Canceled,
            TaskState::Failed => Own::Failed,
            TaskState::Rejected => Own::Rejected,
            TaskState::AuthRequired => Own::AuthRequired,
            TaskState::Unknown => {
                return Err(WireError::UnknownState {
                    field: "status.state",
                })
            }
        })
    }
}

impl From<own::Part> for Part {
    fn from(part: own::Part) -> Self {
        match part {
            own::Part::Text { text, metadata } => Part::Text { text, metadata },
            own::Part::Data { data, metadata } => Part::Data { data, metadata },
            own::Part::File { file, metadata } => {
                let own::File {
                    content,
                    media_type: mime_type,
                    name,
                } = file;
                let file = match content {
                    own::FileContent::Bytes(bytes) => FileContent::Bytes {
                        bytes: base64_text::encode(&bytes),
                        mime_type,
                        name,
                    },
                    own::FileContent::Uri(uri) => FileContent::Uri {
                        uri,
                        mime_type,
                        name,
                    },
                };
                Part::File { file, metadata }
            }
        }
    }
}

impl TryFrom<Part> for own::Part {
    type Error = WireError;

    /// Fails on inline bytes that are not base64.
    fn try_from(part: Part) -> Result<Self, WireError> {
        Ok(match part {
            Part::Text { text, metadata } => own::Part::Text { text, metadata },
            Part::Data { data, metadata } => own::Part::Data { data, metadata },
            Part::File { file, metadata } => {
                let file = match file {
                    FileContent::Bytes {
                        bytes,
                        mime_type,
                        name,
                    } => own::File {
                        content: own::FileContent::Bytes(base64_text::decode(&bytes).map_err(
                            |source| WireError::InvalidBase64 {
                                field: "file.bytes",
                                source,
                            },
                        )?),
                        media_type: mime_type,
                        name,
                    },
                    FileContent::Uri {
                        uri,
                        mime_type,
                        name,
                    } => own::File {
                        content: own::FileContent::Uri(uri),
                        media_type: mime_type,
                        name,
                    },
                };
                own::Part::File { file, metadata }
            }
        })
    }
}

impl From<own::Message> for Message {
    fn from(message: own::Message) -> Self {
        Message {
            role: message.role.into(),
            parts: message.parts.into_iter().map(Part::from).collect(),
            message_id: message.message_id,
            task_id: message.task_id,
            context_id: message.context_id,
            reference_task_ids: non_empty(message.reference_task_ids),
            extensions: non_empty(message.extensions),
            metadata: message.metadata,
            kind: MessageKind::Message,
        }
    }
}

impl TryFrom<Message> for own::Message {
    type Error = WireError;

    /// Fails on a part the model cannot hold.
    fn try_from(message: Message) -> Result<Self, WireError> {
        Ok(own::Message {
            role: message.role.into(),
            parts: convert_all(message.parts)?,
            message_id: message.message_id,
            task_id: message.task_id,
            context_id: message.context_id,
            reference_task_ids: message.reference_task_ids.unwrap_or_default(),
            extensions: message.extensions.unwrap_or_default(),
            metadata: message.metadata,
        })
    }
}

impl From<own::TaskStatus> for TaskStatus {
    fn from(status: own::TaskStatus) -> Self {
        TaskStatus {
            state: status.state.into(),
            message: status.message.map(Message::from),
            timestamp: status.timestamp,
        }
    }
}

impl TryFrom<TaskStatus> for own::TaskStatus {
    type Error = WireError;

    fn try_from(status: TaskStatus) -> Result<Self, WireError> {
        Ok(own::TaskStatus {
            state: status.state.try_into()?,
            message: status.message.map(TryInto::try_into).transpose()?,
            timestamp: status.timestamp,
        })
    }
}

impl From<own::Artifact> for Artifact {
    fn from(artifact: own::Artifact) -> Self {
        Artifact {
            artifact_id: artifact.artifact_id,
            name: artifact.name,
            description: artifact.description,
            parts: artifact.parts.into_iter().map(Part::from).collect(),
            metadata: artifact.metadata,
            extensions: non_empty(artifact.extensions),
        }
    }
}

impl TryFrom<Artifact> for own::Artifact {
    type Error = WireError;

    fn try_from(artifact: Artifact) -> Result<Self, WireError> {
        Ok(own::Artifact {
            artifact_id: artifact.artifact_id,
            name: artifact.name,
            description: artifact.description,
            parts: convert_all(artifact.parts)?,
            metadata: artifact.metadata,
            extensions: artifact.extensions.unwrap_or_default(),
        })
    }
}

/// A task's `history` is written whenever the task was asked with one (it may be empty: the client
/// asked for none); `artifacts` only when there are some.
impl From<own::Task> for Task {
    fn from(task: own::Task) -> Self {
        Task {
            id: task.id,
            context_id: task.context_id,
            status: task.status.into(),
            history: Some(task.history.into_iter().map(Message::from).collect()),
            artifacts: non_empty(task.artifacts.into_iter().map(Artifact::from).collect()),
            metadata: task.metadata,
            kind: TaskKind::Task,
        }
    }
}

impl TryFrom<Task> for own::Task {
    type Error = WireError;

    fn try_from(task: Task) -> Result<Self, WireError> {
        Ok(own::Task {
            id: task.id,
            context_id: task.context_id,
            status: task.status.try_into()?,
            history: convert_all(task.history.unwrap_or_default())?,
            artifacts: convert_all(task.artifacts.unwrap_or_default())?,
            metadata: task.metadata,
        })
    }
}

impl From<own::StatusUpdate> for TaskStatusUpdateEvent {
    fn from(update: own::StatusUpdate) -> Self {
        TaskStatusUpdateEvent {
            task_id: update.task_id,
            context_id: update.context_id,
            kind: StatusUpdateKind::StatusUpdate,
            status: update.status.into(),
            is_final: update.is_final,
            metadata: update.metadata,
        }
    }
}

impl TryFrom<TaskStatusUpdateEvent> for own::StatusUpdate {
    type Error = WireError;

    fn try_from(event: TaskStatusUpdateEvent) -> Result<Self, WireError> {
        Ok(own::StatusUpdate {
            task_id: event.task_id,
            context_id: event.context_id,
            status: event.status.try_into()?,
            is_final: event.is_final,
            metadata: event.metadata,
        })
    }
}

/// `append` and `lastChunk` are always written.
impl From<own::ArtifactUpdate> for TaskArtifactUpdateEvent {
    fn from(update: own::ArtifactUpdate) -> Self {
        TaskArtifactUpdateEvent {
            task_id: update.task_id,
            context_id: update.context_id,
            kind: ArtifactUpdateKind::ArtifactUpdate,
            artifact: update.artifact.into(),
            append: Some(update.append),
            last_chunk: Some(update.last_chunk),
            metadata: update.metadata,
        }
    }
}

/// An absent `append` or `lastChunk` is `false`.
impl TryFrom<TaskArtifactUpdateEvent> for own::ArtifactUpdate {
    type Error = WireError;

    fn try_from(event: TaskArtifactUpdateEvent) -> Result<Self, WireError> {
        Ok(own::ArtifactUpdate {
            task_id: event.task_id,
            context_id: event.context_id,
            artifact: event.artifact.try_into()?,
            append: event.append.unwrap_or(false),
            last_chunk: event.last_chunk.unwrap_or(false),
            metadata: event.metadata,
        })
    }
}

fn convert_all<A, B: TryFrom<A, Error = WireError>>(items: Vec<A>) -> Result<Vec<B>, WireError> {
    items.into_iter().map(B::try_from).collect()
}

fn non_empty<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn round_trip(wire: serde_json::Value) {
        let message: Message = serde_json::from_value(wire.clone()).unwrap();
        let own = own::Message::try_from(message).unwrap();
        assert_eq!(serde_json::to_value(Message::from(own)).unwrap(), wire);
    }

    #[test]
    fn a_0_3_message_with_every_part_kind_survives_the_model_and_back() {
        round_trip(json!({
            "role": "user",
            "parts": [
                { "kind": "text", "text": "hi", "metadata": { "a": 1 } },
                { "kind": "file", "file": { "bytes": "aGk=", "mimeType": "text/plain", "name": "hi.txt" } },
                { "kind": "file", "file": { "uri": "https://example.com/a.pdf" } },
                { "kind": "data", "data": { "n": 1 } }
            ],
            "messageId": "m-1",
            "taskId": "t-1",
            "contextId": "c-1",
            "referenceTaskIds": ["t-0"],
            "extensions": ["https://example.com/ext"],
            "metadata": { "k": "v" },
            "kind": "message"
        }));
    }

    #[test]
    fn every_state_is_written_in_0_3_by_its_stored_name_and_read_back() {
        for state in own::TaskState::ALL {
            let wire = TaskState::from(state);
            assert_eq!(serde_json::to_value(wire).unwrap(), json!(state.as_str()));
            assert_eq!(own::TaskState::try_from(wire), Ok(state));
        }
    }

    #[test]
    fn values_the_model_has_no_place_for_are_typed_errors_naming_the_field() {
        let state = own::TaskState::try_from(TaskState::Unknown).unwrap_err();
        assert!(matches!(
            state,
            WireError::UnknownState {
                field: "status.state"
            }
        ));
        let part: Part =
            serde_json::from_value(json!({ "kind": "file", "file": { "bytes": "not base64!" } }))
                .unwrap();
        let error = own::Part::try_from(part).unwrap_err();
        assert!(matches!(
            error,
            WireError::InvalidBase64 {
                field: "file.bytes",
                ..
            }
        ));
        assert_eq!(error.to_string(), "`file.bytes` is not valid base64");
    }

    #[test]
    fn a_task_writes_its_history_when_asked_and_its_artifacts_when_it_has_some() {
        let task = own::Task {
            id: "t".into(),
            context_id: "c".into(),
            status: own::TaskStatus {
                state: own::TaskState::Completed,
                message: None,
                timestamp: None,
            },
            history: Vec::new(),
            artifacts: Vec::new(),
            metadata: None,
        };
        assert_eq!(
            serde_json::to_value(Task::from(task)).unwrap(),
            json!({
                "id": "t", "contextId": "c", "status": { "state": "completed" },
                "history": [], "kind": "task"
            })
        );
    }
}
