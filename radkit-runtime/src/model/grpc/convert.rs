//! Between the generated protobuf messages (`proto`) and the hand-written ProtoJSON types of
//! `model::v1`, which the operations take and give (and which convert to the engine's model). The
//! two mirror the same `a2a.proto`, field for field; only the representations differ: enums are
//! `i32`s in prost, `google.protobuf.Struct`/`Value` are JSON in `v1`, timestamps RFC 3339 text.
//!
//! Requests come in with `TryFrom` (a number that names no enum value, a `NaN` in a `Value` or a
//! missing required message is a [`FieldError`], answered `INVALID_ARGUMENT`); answers go out with
//! `From`, which cannot fail: every `v1` value has a protobuf form.

use prost_types::value::Kind;
use serde_json::{Map, Number, Value};

use super::proto;
use crate::model::v1;

/// A protobuf request field that has no `v1` form (an enum number that names no value, a `NaN` in
/// a `google.protobuf.Value`, a required message left out), with the path of the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{field}`: {problem}")]
pub struct FieldError {
    /// The field, in the proto's JSON names (`message.parts[0].data`).
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

pub(super) fn bad(field: impl Into<String>, problem: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        problem: problem.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// Well-known types
// ---------------------------------------------------------------------------------------------

/// A `google.protobuf.Value` as JSON. A number that is not finite has no JSON form.
pub(super) fn value_in(value: prost_types::Value, field: &str) -> Result<Value, FieldError> {
    Ok(match value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(b),
        Some(Kind::NumberValue(n)) => Value::Number(
            Number::from_f64(n).ok_or_else(|| bad(field, format!("{n} is not a JSON number")))?,
        ),
        Some(Kind::StringValue(s)) => Value::String(s),
        Some(Kind::ListValue(list)) => Value::Array(
            list.values
                .into_iter()
                .enumerate()
                .map(|(i, v)| value_in(v, &format!("{field}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Some(Kind::StructValue(s)) => Value::Object(struct_in(s, field)?),
    })
}

/// A `google.protobuf.Struct` as a JSON object.
pub(super) fn struct_in(
    value: prost_types::Struct,
    field: &str,
) -> Result<Map<String, Value>, FieldError> {
    value
        .fields
        .into_iter()
        .map(|(k, v)| {
            let inner = value_in(v, &format!("{field}.{k}"))?;
            Ok((k, inner))
        })
        .collect()
}

pub(super) fn metadata_in(
    value: Option<prost_types::Struct>,
    field: &str,
) -> Result<Option<crate::model::Metadata>, FieldError> {
    value.map(|s| struct_in(s, field)).transpose()
}

/// JSON as a `google.protobuf.Value` (numbers as doubles, as `Value` holds them).
pub(super) fn value_out(value: Value) -> prost_types::Value {
    let kind = match value {
        Value::Null => Kind::NullValue(prost_types::NullValue::NullValue.into()),
        Value::Bool(b) => Kind::BoolValue(b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => Kind::StringValue(s),
        Value::Array(items) => Kind::ListValue(prost_types::ListValue {
            values: items.into_iter().map(value_out).collect(),
        }),
        Value::Object(map) => Kind::StructValue(struct_out(map)),
    };
    prost_types::Value { kind: Some(kind) }
}

pub(super) fn struct_out(map: Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: map.into_iter().map(|(k, v)| (k, value_out(v))).collect(),
    }
}

pub(super) fn metadata_out(value: Option<crate::model::Metadata>) -> Option<prost_types::Struct> {
    value.map(struct_out)
}

/// A `v1` timestamp (RFC 3339 text) as a `google.protobuf.Timestamp`; text that is not one (the
/// engine writes only valid ones) is left out rather than sent wrong.
fn timestamp_out(text: Option<String>) -> Option<prost_types::Timestamp> {
    text.and_then(|t| t.parse().ok())
}

pub(super) fn task_state_in(n: i32, field: &str) -> Result<v1::TaskState, FieldError> {
    v1::TaskState::ALL
        .into_iter()
        .find(|s| *s as i32 == n)
        .ok_or_else(|| bad(field, format!("{n} is not a TaskState")))
}

pub(super) fn role_in(n: i32, field: &str) -> Result<v1::Role, FieldError> {
    v1::Role::ALL
        .into_iter()
        .find(|r| *r as i32 == n)
        .ok_or_else(|| bad(field, format!("{n} is not a Role")))
}

// ---------------------------------------------------------------------------------------------
// Requests in
// ---------------------------------------------------------------------------------------------

pub(super) fn part_in(part: proto::Part, field: &str) -> Result<v1::Part, FieldError> {
    use proto::part::Content;
    let content = match part.content {
        None => None,
        Some(Content::Text(t)) => Some(v1::PartContent::Text(t)),
        Some(Content::Raw(b)) => Some(v1::PartContent::Raw(b)),
        Some(Content::Url(u)) => Some(v1::PartContent::Url(u)),
        Some(Content::Data(d)) => Some(v1::PartContent::Data(value_in(
            d,
            &format!("{field}.data"),
        )?)),
    };
    Ok(v1::Part {
        content,
        metadata: metadata_in(part.metadata, &format!("{field}.metadata"))?,
        filename: part.filename,
        media_type: part.media_type,
    })
}

pub(super) fn message_in(message: proto::Message, field: &str) -> Result<v1::Message, FieldError> {
    Ok(v1::Message {
        message_id: message.message_id,
        context_id: message.context_id,
        task_id: message.task_id,
        role: role_in(message.role, &format!("{field}.role"))?,
        parts: message
            .parts
            .into_iter()
            .enumerate()
            .map(|(i, p)| part_in(p, &format!("{field}.parts[{i}]")))
            .collect::<Result<_, _>>()?,
        metadata: metadata_in(message.metadata, &format!("{field}.metadata"))?,
        extensions: message.extensions,
        reference_task_ids: message.reference_task_ids,
    })
}

impl From<proto::TaskPushNotificationConfig> for v1::TaskPushNotificationConfig {
    fn from(c: proto::TaskPushNotificationConfig) -> Self {
        v1::TaskPushNotificationConfig {
            tenant: c.tenant,
            id: c.id,
            task_id: c.task_id,
            url: c.url,
            token: c.token,
            authentication: c.authentication.map(|a| v1::AuthenticationInfo {
                scheme: a.scheme,
                credentials: a.credentials,
            }),
        }
    }
}

impl From<proto::GetTaskPushNotificationConfigRequest>
    for v1::GetTaskPushNotificationConfigRequest
{
    fn from(r: proto::GetTaskPushNotificationConfigRequest) -> Self {
        v1::GetTaskPushNotificationConfigRequest {
            tenant: r.tenant,
            task_id: r.task_id,
            id: r.id,
        }
    }
}

impl From<proto::DeleteTaskPushNotificationConfigRequest>
    for v1::DeleteTaskPushNotificationConfigRequest
{
    fn from(r: proto::DeleteTaskPushNotificationConfigRequest) -> Self {
        v1::DeleteTaskPushNotificationConfigRequest {
            tenant: r.tenant,
            task_id: r.task_id,
            id: r.id,
        }
    }
}

impl From<proto::ListTaskPushNotificationConfigsRequest>
    for v1::ListTaskPushNotificationConfigsRequest
{
    fn from(r: proto::ListTaskPushNotificationConfigsRequest) -> Self {
        v1::ListTaskPushNotificationConfigsRequest {
            tenant: r.tenant,
            task_id: r.task_id,
            page_size: r.page_size,
            page_token: r.page_token,
        }
    }
}

impl TryFrom<proto::SendMessageRequest> for v1::SendMessageRequest {
    type Error = FieldError;

    fn try_from(r: proto::SendMessageRequest) -> Result<Self, FieldError> {
        let message = r
            .message
            .ok_or_else(|| bad("message", "is required"))
            .and_then(|m| message_in(m, "message"))?;
        let configuration = r.configuration.map(|c| v1::SendMessageConfiguration {
            accepted_output_modes: c.accepted_output_modes,
            task_push_notification_config: c.task_push_notification_config.map(Into::into),
            history_length: c.history_length,
            return_immediately: c.return_immediately,
        });
        Ok(v1::SendMessageRequest {
            tenant: r.tenant,
            message,
            configuration,
            metadata: metadata_in(r.metadata, "metadata")?,
        })
    }
}

impl TryFrom<proto::ListTasksRequest> for v1::ListTasksRequest {
    type Error = FieldError;

    fn try_from(r: proto::ListTasksRequest) -> Result<Self, FieldError> {
        Ok(v1::ListTasksRequest {
            tenant: r.tenant,
            context_id: r.context_id,
            status: task_state_in(r.status, "status")?,
            page_size: r.page_size,
            page_token: r.page_token,
            history_length: r.history_length,
            // RFC 3339, as ProtoJSON writes a Timestamp; the operation parses it.
            status_timestamp_after: r.status_timestamp_after.map(|t| t.to_string()),
            include_artifacts: r.include_artifacts,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Answers out
// ---------------------------------------------------------------------------------------------

impl From<v1::Part> for proto::Part {
    fn from(part: v1::Part) -> Self {
        use proto::part::Content;
        proto::Part {
            metadata: metadata_out(part.metadata),
            filename: part.filename,
            media_type: part.media_type,
            content: part.content.map(|c| match c {
                v1::PartContent::Text(t) => Content::Text(t),
                v1::PartContent::Raw(b) => Content::Raw(b),
                v1::PartContent::Url(u) => Content::Url(u),
                v1::PartContent::Data(d) => Content::Data(value_out(d)),
            }),
        }
    }
}

impl From<v1::Message> for proto::Message {
    fn from(m: v1::Message) -> Self {
        proto::Message {
            message_id: m.message_id,
            context_id: m.context_id,
            task_id: m.task_id,
            role: m.role as i32,
            parts: m.parts.into_iter().map(Into::into).collect(),
            metadata: metadata_out(m.metadata),
            extensions: m.extensions,
            reference_task_ids: m.reference_task_ids,
        }
    }
}

impl From<v1::TaskStatus> for proto::TaskStatus {
    fn from(s: v1::TaskStatus) -> Self {
        proto::TaskStatus {
            state: s.state as i32,
            message: s.message.map(Into::into),
            timestamp: timestamp_out(s.timestamp),
        }
    }
}

impl From<v1::Artifact> for proto::Artifact {
    fn from(a: v1::Artifact) -> Self {
        proto::Artifact {
            artifact_id: a.artifact_id,
            name: a.name,
            description: a.description,
            parts: a.parts.into_iter().map(Into::into).collect(),
            metadata: metadata_out(a.metadata),
            extensions: a.extensions,
        }
    }
}

impl From<v1::Task> for proto::Task {
    fn from(t: v1::Task) -> Self {
        proto::Task {
            id: t.id,
            context_id: t.context_id,
            status: Some(t.status.into()),
            artifacts: t.artifacts.into_iter().map(Into::into).collect(),
            history: t.history.into_iter().map(Into::into).collect(),
            metadata: metadata_out(t.metadata),
        }
    }
}

impl From<v1::TaskStatusUpdateEvent> for proto::TaskStatusUpdateEvent {
    fn from(e: v1::TaskStatusUpdateEvent) -> Self {
        proto::TaskStatusUpdateEvent {
            task_id: e.task_id,
            context_id: e.context_id,
            status: Some(e.status.into()),
            metadata: metadata_out(e.metadata),
        }
    }
}

impl From<v1::TaskArtifactUpdateEvent> for proto::TaskArtifactUpdateEvent {
    fn from(e: v1::TaskArtifactUpdateEvent) -> Self {
        proto::TaskArtifactUpdateEvent {
            task_id: e.task_id,
            context_id: e.context_id,
            artifact: Some(e.artifact.into()),
            append: e.append,
            last_chunk: e.last_chunk,
            metadata: metadata_out(e.metadata),
        }
    }
}

impl From<v1::StreamResponse> for proto::StreamResponse {
    fn from(r: v1::StreamResponse) -> Self {
        use proto::stream_response::Payload;
        let payload = match r {
            v1::StreamResponse::Task(t) => Payload::Task(t.into()),
            v1::StreamResponse::Message(m) => Payload::Message(m.into()),
            v1::StreamResponse::StatusUpdate(e) => Payload::StatusUpdate(e.into()),
            v1::StreamResponse::ArtifactUpdate(e) => Payload::ArtifactUpdate(e.into()),
        };
        proto::StreamResponse {
            payload: Some(payload),
        }
    }
}

impl From<v1::SendMessageResponse> for proto::SendMessageResponse {
    fn from(r: v1::SendMessageResponse) -> Self {
        use proto::send_message_response::Payload;
        let payload = match r {
            v1::SendMessageResponse::Task(t) => Payload::Task(t.into()),
            v1::SendMessageResponse::Message(m) => Payload::Message(m.into()),
        };
        proto::SendMessageResponse {
            payload: Some(payload),
        }
    }
}

impl From<v1::ListTasksResponse> for proto::ListTasksResponse {
    fn from(r: v1::ListTasksResponse) -> Self {
        proto::ListTasksResponse {
            tasks: r.tasks.into_iter().map(Into::into).collect(),
            next_page_token: r.next_page_token,
            page_size: r.page_size,
            total_size: r.total_size,
        }
    }
}

impl From<v1::TaskPushNotificationConfig> for proto::TaskPushNotificationConfig {
    fn from(c: v1::TaskPushNotificationConfig) -> Self {
        proto::TaskPushNotificationConfig {
            tenant: c.tenant,
            id: c.id,
            task_id: c.task_id,
            url: c.url,
            token: c.token,
            authentication: c.authentication.map(|a| proto::AuthenticationInfo {
                scheme: a.scheme,
                credentials: a.credentials,
            }),
        }
    }
}

impl From<v1::ListTaskPushNotificationConfigsResponse>
    for proto::ListTaskPushNotificationConfigsResponse
{
    fn from(r: v1::ListTaskPushNotificationConfigsResponse) -> Self {
        proto::ListTaskPushNotificationConfigsResponse {
            configs: r.configs.into_iter().map(Into::into).collect(),
            next_page_token: r.next_page_token,
        }
    }
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
