//! radkit's model written as A2A 1.0 (`From`, never fails) and 1.0 read into it (`TryFrom` with
//! [`WireError`]). Empty strings and lists are 1.0's "unset"; the model's `None`s and empty lists
//! write as them.

use serde_json::Value;

use super::{
    Artifact, Message, Part, PartContent, Role, Task, TaskArtifactUpdateEvent, TaskState,
    TaskStatus, TaskStatusUpdateEvent,
};
use crate::model::{self as own, WireError};

impl From<own::Role> for Role {
    fn from(role: own::Role) -> Self {
        match role {
            own::Role::User => Role::User,
            own::Role::Agent => Role::Agent,
        }
    }
}

impl TryFrom<Role> for own::Role {
    type Error = WireError;

    /// Fails on `ROLE_UNSPECIFIED`.
    fn try_from(role: Role) -> Result<Self, WireError> {
        match role {
            Role::User => Ok(own::Role::User),
            Role::Agent => Ok(own::Role::Agent),
            Role::Unspecified => Err(WireError::Unspecified {
                field: "Message.role",
            }),
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

    /// Fails on `TASK_STATE_UNSPECIFIED`.
    fn try_from(state: TaskState) -> Result<Self, WireError> {
        use own::TaskState as Own;
        Ok(match state {
            TaskState::Submitted => Own::Submitted,
            TaskState::Working => Own::Working,
            TaskState::Completed => Own::Completed,
            TaskState::Failed => Own::Failed,
            TaskState::Canceled => Own::Canceled,
            TaskState::InputRequired => Own::InputRequired,
            TaskState::Rejected => Own::Rejected,
            TaskState::AuthRequired => Own::AuthRequired,
            TaskState::Unspecified => {
                return Err(WireError::Unspecified {
                    field: "TaskStatus.state",
                })
            }
        })
    }
}

/// Text to `text`, data to `data`, a file to `raw` or `url` with its media type and name as
/// `mediaType` and `filename`.
impl From<own::Part> for Part {
    fn from(part: own::Part) -> Self {
        match part {
            own::Part::Text { text, metadata } => Part {
                metadata,
                ..PartContent::Text(text).into()
            },
            own::Part::Data { data, metadata } => Part {
                metadata,
                ..PartContent::Data(Value::Object(data)).into()
            },
            own::Part::File { file, metadata } => {
                let content = match file.content {
                    own::FileContent::Bytes(bytes) => PartContent::Raw(bytes),
                    own::FileContent::Uri(uri) => PartContent::Url(uri),
                };
                Part {
                    content: Some(content),
                    metadata,
                    filename: file.name.unwrap_or_default(),
                    media_type: file.media_type.unwrap_or_default(),
                }
            }
        }
    }
}

impl TryFrom<Part> for own::Part {
    type Error = WireError;

    /// `raw` and `url` to a file with `mediaType` and `filename` as its media type and name. The
    /// model's text and data parts have neither (A2A 0.3's cannot carry them), so those of a `text`
    /// or `data` part are dropped. Fails on a part without content and on `data` that is not a JSON
    /// object.
    fn try_from(part: Part) -> Result<Self, WireError> {
        let Part {
            content,
            metadata,
            filename,
            media_type,
        } = part;
        let content = content.ok_or(WireError::NoContent {
            field: "Part.content",
        })?;
        let file = |content| own::File {
            content,
            media_type: non_empty(media_type),
            name: non_empty(filename),
        };
        Ok(match content {
            PartContent::Text(text) => own::Part::Text { text, metadata },
            PartContent::Data(Value::Object(data)) => own::Part::Data { data, metadata },
            PartContent::Data(_) => return Err(WireError::DataNotObject { field: "Part.data" }),
            PartContent::Raw(raw) => own::Part::File {
                file: file(own::FileContent::Bytes(raw)),
                metadata,
            },
            PartContent::Url(url) => own::Part::File {
                file: file(own::FileContent::Uri(url)),
                metadata,
            },
        })
    }
}

impl From<own::Message> for Message {
    fn from(message: own::Message) -> Self {
        Message {
            message_id: message.message_id,
            context_id: message.context_id.unwrap_or_default(),
            task_id: message.task_id.unwrap_or_default(),
            role: message.role.into(),
            parts: message.parts.into_iter().map(Part::from).collect(),
            metadata: message.metadata,
            extensions: message.extensions,
            reference_task_ids: message.reference_task_ids,
        }
    }
}

impl TryFrom<Message> for own::Message {
    type Error = WireError;

    /// Empty ids become `None`. Fails on `ROLE_UNSPECIFIED` or a part the model cannot hold.
    fn try_from(message: Message) -> Result<Self, WireError> {
        Ok(own::Message {
            role: message.role.try_into()?,
            parts: convert_all(message.parts)?,
            message_id: message.message_id,
            task_id: non_empty(message.task_id),
            context_id: non_empty(message.context_id),
            reference_task_ids: message.reference_task_ids,
            extensions: message.extensions,
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

    /// Fails on `TASK_STATE_UNSPECIFIED` or a message the model cannot hold.
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
            name: artifact.name.unwrap_or_default(),
            description: artifact.description.unwrap_or_default(),
            parts: artifact.parts.into_iter().map(Part::from).collect(),
            metadata: artifact.metadata,
            extensions: artifact.extensions,
        }
    }
}

impl TryFrom<Artifact> for own::Artifact {
    type Error = WireError;

    /// Empty strings become `None`. Fails on a part the model cannot hold.
    fn try_from(artifact: Artifact) -> Result<Self, WireError> {
        Ok(own::Artifact {
            artifact_id: artifact.artifact_id,
            name: non_empty(artifact.name),
            description: non_empty(artifact.description),
            parts: convert_all(artifact.parts)?,
            metadata: artifact.metadata,
            extensions: artifact.extensions,
        })
    }
}

impl From<own::Task> for Task {
    fn from(task: own::Task) -> Self {
        Task {
            id: task.id,
            context_id: task.context_id,
            status: task.status.into(),
            artifacts: task.artifacts.into_iter().map(Artifact::from).collect(),
            history: task.history.into_iter().map(Message::from).collect(),
            metadata: task.metadata,
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
            history: convert_all(task.history)?,
            artifacts: convert_all(task.artifacts)?,
            metadata: task.metadata,
        })
    }
}

/// 1.0 has no `final`: its streams close instead.
impl From<own::StatusUpdate> for TaskStatusUpdateEvent {
    fn from(update: own::StatusUpdate) -> Self {
        TaskStatusUpdateEvent {
            task_id: update.task_id,
            context_id: update.context_id,
            status: update.status.into(),
            metadata: update.metadata,
        }
    }
}

/// `final` is true for the states at which a 1.0 stream closes: terminal and interrupted
/// (`INPUT_REQUIRED`, `AUTH_REQUIRED`).
impl TryFrom<TaskStatusUpdateEvent> for own::StatusUpdate {
    type Error = WireError;

    fn try_from(event: TaskStatusUpdateEvent) -> Result<Self, WireError> {
        let status: own::TaskStatus = event.status.try_into()?;
        Ok(own::StatusUpdate {
            task_id: event.task_id,
            context_id: event.context_id,
            is_final: status.state.is_terminal() || status.state.is_interrupted(),
            status,
            metadata: event.metadata,
        })
    }
}

impl From<own::ArtifactUpdate> for TaskArtifactUpdateEvent {
    fn from(update: own::ArtifactUpdate) -> Self {
        TaskArtifactUpdateEvent {
            task_id: update.task_id,
            context_id: update.context_id,
            artifact: update.artifact.into(),
            append: update.append,
            last_chunk: update.last_chunk,
            metadata: update.metadata,
        }
    }
}

impl TryFrom<TaskArtifactUpdateEvent> for own::ArtifactUpdate {
    type Error = WireError;

    fn try_from(event: TaskArtifactUpdateEvent) -> Result<Self, WireError> {
        Ok(own::ArtifactUpdate {
            task_id: event.task_id,
            context_id: event.context_id,
            artifact: event.artifact.try_into()?,
            append: event.append,
            last_chunk: event.last_chunk,
            metadata: event.metadata,
        })
    }
}

fn convert_all<A, B: TryFrom<A, Error = WireError>>(items: Vec<A>) -> Result<Vec<B>, WireError> {
    items.into_iter().map(B::try_from).collect()
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}
