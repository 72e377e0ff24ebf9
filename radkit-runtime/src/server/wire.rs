//! How radkit's model is written for a protocol version: as the types of `model::v0_3` for 0.3, as
//! the ProtoJSON types of `model::v1` for 1.0. Both renderings are total.

use serde_json::Value;

use super::errors::{Kind, OpError};
use super::ops::Answer;
use super::version::Version;
use crate::engine::StreamEvent;
use crate::model::{v0_3, v1, Message, Task};

/// An answer as JSON; a value that does not serialize is an internal error.
pub(crate) fn json(value: impl serde::Serialize) -> Result<Value, OpError> {
    serde_json::to_value(value).map_err(|e| OpError::new(Kind::Internal, e.to_string()))
}

/// An update event in its 1.0 form: a `StreamResponse` holding it.
pub(crate) fn v1_event(event: StreamEvent) -> v1::StreamResponse {
    match event {
        StreamEvent::Status(status) => v1::StreamResponse::StatusUpdate(status.into()),
        StreamEvent::Artifact(artifact) => v1::StreamResponse::ArtifactUpdate(artifact.into()),
    }
}

impl Version {
    /// The JSON-RPC error envelope of request `id` in this version: a 1.0 error carries its
    /// `google.rpc.ErrorInfo` as the one object of `data` (spec §9.5); a 0.3 error has its 0.3
    /// code and no `data`.
    pub(crate) fn rpc_error(self, id: &Value, error: OpError) -> Value {
        let spelling = error.kind.spelling();
        let mut rpc = super::jsonrpc::RpcError::from(error.clone());
        match self {
            Version::V0_3 => rpc.code = spelling.jsonrpc_0_3,
            Version::V1_0 => {
                rpc.data = Some(Value::Array(vec![error.kind.error_info()]));
            }
        }
        super::jsonrpc::error(id, rpc)
    }

    /// The task as this version writes it (1.0: a `Task`).
    pub(crate) fn task(self, task: Task) -> Result<Value, OpError> {
        match self {
            Version::V0_3 => json(v0_3::Task::from(task)),
            Version::V1_0 => json(v1::Task::from(task)),
        }
    }

    /// The answer to a send: the task, or the message that answers it directly (1.0: a
    /// `SendMessageResponse` holding either).
    pub(crate) fn send_response(self, answer: Answer) -> Result<Value, OpError> {
        match (self, answer) {
            (Version::V0_3, Answer::Task(task)) => json(v0_3::Task::from(task)),
            (Version::V0_3, Answer::Message(message)) => json(v0_3::Message::from(message)),
            (Version::V1_0, Answer::Task(task)) => json(v1::SendMessageResponse::Task(task.into())),
            (Version::V1_0, Answer::Message(message)) => {
                json(v1::SendMessageResponse::Message(message.into()))
            }
        }
    }

    /// A stream that is one message: the message that answers the send directly (1.0: a
    /// `StreamResponse` holding it).
    pub(crate) fn message_item(self, message: Message) -> Result<Value, OpError> {
        match self {
            Version::V0_3 => json(v0_3::Message::from(message)),
            Version::V1_0 => json(v1::StreamResponse::Message(message.into())),
        }
    }

    /// A stream's opening task (1.0: a `StreamResponse` holding it).
    pub(crate) fn task_item(self, task: Task) -> Result<Value, OpError> {
        match self {
            Version::V0_3 => json(v0_3::Task::from(task)),
            Version::V1_0 => json(v1::StreamResponse::Task(task.into())),
        }
    }

    /// A stream's update event (1.0: a `StreamResponse` holding it).
    pub(crate) fn event_item(self, event: StreamEvent) -> Result<Value, OpError> {
        match (self, event) {
            (Version::V0_3, StreamEvent::Status(status)) => {
                json(v0_3::TaskStatusUpdateEvent::from(status))
            }
            (Version::V0_3, StreamEvent::Artifact(artifact)) => {
                json(v0_3::TaskArtifactUpdateEvent::from(artifact))
            }
            (Version::V1_0, event) => json(v1_event(event)),
        }
    }
}
