//! The client's directions between the protobuf messages and `v1`: a request goes out with `From`
//! (every `v1` request has a protobuf form), an answer comes in with `TryFrom` (a number that names
//! no enum value, a `NaN` in a `google.protobuf.Value`, or a required message left out is a
//! [`FieldError`]; what the model cannot hold, an `UNSPECIFIED` state, is the model's to refuse). The server's directions are `convert`'s.

use super::convert::{bad, message_in, metadata_in, metadata_out, part_in, task_state_in};
use super::proto;
use super::FieldError;
use crate::model::v1;

// ---------------------------------------------------------------------------------------------
// Requests out
// ---------------------------------------------------------------------------------------------

impl From<v1::SendMessageRequest> for proto::SendMessageRequest {
    fn from(r: v1::SendMessageRequest) -> Self {
        proto::SendMessageRequest {
            tenant: r.tenant,
            message: Some(r.message.into()),
            configuration: r.configuration.map(|c| proto::SendMessageConfiguration {
                accepted_output_modes: c.accepted_output_modes,
                task_push_notification_config: c.task_push_notification_config.map(Into::into),
                history_length: c.history_length,
                return_immediately: c.return_immediately,
            }),
            metadata: metadata_out(r.metadata),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Answers in
// ---------------------------------------------------------------------------------------------

/// A required message field, or the error naming it.
fn required<T>(value: Option<T>, field: &str) -> Result<T, FieldError> {
    value.ok_or_else(|| bad(field, "is required"))
}

fn status_in(status: proto::TaskStatus, field: &str) -> Result<v1::TaskStatus, FieldError> {
    Ok(v1::TaskStatus {
        state: task_state_in(status.state, &format!("{field}.state"))?,
        message: status
            .message
            .map(|m| message_in(m, &format!("{field}.message")))
            .transpose()?,
        // RFC 3339, as ProtoJSON writes a Timestamp.
        timestamp: status.timestamp.map(|t| t.to_string()),
    })
}

fn artifact_in(artifact: proto::Artifact, field: &str) -> Result<v1::Artifact, FieldError> {
    Ok(v1::Artifact {
        artifact_id: artifact.artifact_id,
        name: artifact.name,
        description: artifact.description,
        parts: artifact
            .parts
            .into_iter()
            .enumerate()
            .map(|(i, p)| part_in(p, &format!("{field}.parts[{i}]")))
            .collect::<Result<_, _>>()?,
        metadata: metadata_in(artifact.metadata, &format!("{field}.metadata"))?,
        extensions: artifact.extensions,
    })
}

fn task_in(task: proto::Task, field: &str) -> Result<v1::Task, FieldError> {
    let status = required(task.status, &format!("{field}.status"))?;
    Ok(v1::Task {
        id: task.id,
        context_id: task.context_id,
        status: status_in(status, &format!("{field}.status"))?,
        artifacts: task
            .artifacts
            .into_iter()
            .enumerate()
            .map(|(i, a)| artifact_in(a, &format!("{field}.artifacts[{i}]")))
            .collect::<Result<_, _>>()?,
        history: task
            .history
            .into_iter()
            .enumerate()
            .map(|(i, m)| message_in(m, &format!("{field}.history[{i}]")))
            .collect::<Result<_, _>>()?,
        metadata: metadata_in(task.metadata, &format!("{field}.metadata"))?,
    })
}

impl TryFrom<proto::Task> for v1::Task {
    type Error = FieldError;

    fn try_from(task: proto::Task) -> Result<Self, FieldError> {
        task_in(task, "task")
    }
}

impl TryFrom<proto::SendMessageResponse> for v1::SendMessageResponse {
    type Error = FieldError;

    fn try_from(r: proto::SendMessageResponse) -> Result<Self, FieldError> {
        use proto::send_message_response::Payload;
        Ok(match required(r.payload, "payload")? {
            Payload::Task(t) => v1::SendMessageResponse::Task(task_in(t, "task")?),
            Payload::Message(m) => v1::SendMessageResponse::Message(message_in(m, "message")?),
        })
    }
}

impl TryFrom<proto::StreamResponse> for v1::StreamResponse {
    type Error = FieldError;

    fn try_from(r: proto::StreamResponse) -> Result<Self, FieldError> {
        use proto::stream_response::Payload;
        Ok(match required(r.payload, "payload")? {
            Payload::Task(t) => v1::StreamResponse::Task(task_in(t, "task")?),
            Payload::Message(m) => v1::StreamResponse::Message(message_in(m, "message")?),
            Payload::StatusUpdate(e) => {
                let status = required(e.status, "statusUpdate.status")?;
                v1::StreamResponse::StatusUpdate(v1::TaskStatusUpdateEvent {
                    task_id: e.task_id,
                    context_id: e.context_id,
                    status: status_in(status, "statusUpdate.status")?,
                    metadata: metadata_in(e.metadata, "statusUpdate.metadata")?,
                })
            }
            Payload::ArtifactUpdate(e) => {
                let artifact = required(e.artifact, "artifactUpdate.artifact")?;
                v1::StreamResponse::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
                    task_id: e.task_id,
                    context_id: e.context_id,
                    artifact: artifact_in(artifact, "artifactUpdate.artifact")?,
                    append: e.append,
                    last_chunk: e.last_chunk,
                    metadata: metadata_in(e.metadata, "artifactUpdate.metadata")?,
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every answer the server writes reads back as the same `v1` value: the two directions are
    /// each other's inverse on what both can carry.
    #[test]
    fn answers_read_back_as_the_v1_values_they_were_written_from() {
        let task: v1::Task = serde_json::from_value(json!({
            "id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_WORKING", "timestamp": "2026-01-02T03:04:05.678Z",
                "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}},
            "artifacts": [{"artifactId": "a", "name": "n", "parts": [{"data": {"k": [1.5, "x"]}}]}],
            "history": [{"messageId": "h", "role": "ROLE_USER", "parts": [{"text": "q"}]}],
            "metadata": {"x": true}
        }))
        .unwrap();
        let back = v1::Task::try_from(proto::Task::from(task.clone())).unwrap();
        assert_eq!(back, task);
        for response in [
            v1::StreamResponse::Task(task.clone()),
            v1::StreamResponse::StatusUpdate(v1::TaskStatusUpdateEvent {
                task_id: "t".into(),
                context_id: "c".into(),
                status: task.status.clone(),
                metadata: None,
            }),
            v1::StreamResponse::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
                task_id: "t".into(),
                context_id: "c".into(),
                artifact: task.artifacts[0].clone(),
                append: true,
                last_chunk: false,
                metadata: None,
            }),
        ] {
            let back = v1::StreamResponse::try_from(proto::StreamResponse::from(response.clone()));
            assert_eq!(back.unwrap(), response);
        }
        let sent = v1::SendMessageResponse::Task(task);
        let back =
            v1::SendMessageResponse::try_from(proto::SendMessageResponse::from(sent.clone()));
        assert_eq!(back.unwrap(), sent);
    }

    #[test]
    fn an_answer_without_its_required_parts_or_with_unknown_numbers_is_a_field_error() {
        let e = v1::SendMessageResponse::try_from(proto::SendMessageResponse { payload: None });
        assert_eq!(e.unwrap_err().field, "payload");
        let e = v1::Task::try_from(proto::Task {
            id: "t".into(),
            ..Default::default()
        });
        assert_eq!(e.unwrap_err().field, "task.status");
        let e = v1::Task::try_from(proto::Task {
            id: "t".into(),
            status: Some(proto::TaskStatus {
                state: 99,
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(e.unwrap_err().field, "task.status.state");
    }

    #[test]
    fn a_send_request_goes_out_with_its_configuration() {
        let request: v1::SendMessageRequest = serde_json::from_value(json!({
            "tenant": "acme",
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "configuration": {"returnImmediately": true,
                "taskPushNotificationConfig": {"url": "http://h/hook", "token": "t"}}
        }))
        .unwrap();
        let out = proto::SendMessageRequest::from(request.clone());
        assert_eq!(out.tenant, "acme");
        let back = v1::SendMessageRequest::try_from(out).unwrap();
        assert_eq!(back, request);
    }
}
