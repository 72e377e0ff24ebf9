//! How radkit's model is written for a protocol version: as the types of `model::v0_3` for 0.3, as
//! the ProtoJSON types of `model::v1` for 1.0. Both renderings are total.

use serde_json::Value;

use super::jsonrpc::{codes, RpcError};
use crate::engine::StreamEvent;
use crate::model::{v0_3, v1, Task};

/// The wire format of one answer or stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    /// A2A 0.3 JSON: `kind` discriminators, the 0.3 shapes.
    V0_3,
    /// A2A 1.0 ProtoJSON: stream items are `StreamResponse`s, sends answer `SendMessageResponse`s.
    V1_0,
}

fn json(value: impl serde::Serialize) -> Result<Value, RpcError> {
    serde_json::to_value(value).map_err(|e| RpcError::new(codes::INTERNAL_ERROR, e.to_string()))
}

/// An update event in its 1.0 form: a `StreamResponse` holding it.
pub(crate) fn v1_event(event: StreamEvent) -> v1::StreamResponse {
    match event {
        StreamEvent::Status(status) => v1::StreamResponse::StatusUpdate(status.into()),
        StreamEvent::Artifact(artifact) => v1::StreamResponse::ArtifactUpdate(artifact.into()),
    }
}

impl Wire {
    /// The JSON-RPC error envelope of request `id` in this version: a 1.0 error carries its
    /// `google.rpc.ErrorInfo` as the one object of `data` (spec §9.5); a 0.3 error is as it is.
    pub(crate) fn rpc_error(self, id: &Value, mut error: RpcError) -> Value {
        if self == Wire::V1_0 && error.data.is_none() {
            error.data = super::errors::error_info(error.code).map(|info| Value::Array(vec![info]));
        }
        super::jsonrpc::error(id, error)
    }

    /// The task as this version writes it (1.0: a `Task`).
    pub(crate) fn task(self, task: Task) -> Result<Value, RpcError> {
        match self {
            Wire::V0_3 => json(v0_3::Task::from(task)),
            Wire::V1_0 => json(v1::Task::from(task)),
        }
    }

    /// The answer to a send (1.0: a `SendMessageResponse` holding the task).
    pub(crate) fn send_response(self, task: Task) -> Result<Value, RpcError> {
        match self {
            Wire::V0_3 => json(v0_3::Task::from(task)),
            Wire::V1_0 => json(v1::SendMessageResponse::Task(task.into())),
        }
    }

    /// A stream's opening task (1.0: a `StreamResponse` holding it).
    pub(crate) fn task_item(self, task: Task) -> Result<Value, RpcError> {
        match self {
            Wire::V0_3 => json(v0_3::Task::from(task)),
            Wire::V1_0 => json(v1::StreamResponse::Task(task.into())),
        }
    }

    /// A stream's update event (1.0: a `StreamResponse` holding it).
    pub(crate) fn event_item(self, event: StreamEvent) -> Result<Value, RpcError> {
        match (self, event) {
            (Wire::V0_3, StreamEvent::Status(status)) => {
                json(v0_3::TaskStatusUpdateEvent::from(status))
            }
            (Wire::V0_3, StreamEvent::Artifact(artifact)) => {
                json(v0_3::TaskArtifactUpdateEvent::from(artifact))
            }
            (Wire::V1_0, event) => json(v1_event(event)),
        }
    }
}
