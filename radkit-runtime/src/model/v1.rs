//! A2A 1.0.1 wire types in their JSON (ProtoJSON) form, and conversions to and from the crate's
//! A2A 0.3 model.
//!
//! The normative source is `a2a.proto` (package `lf.a2a.v1`); JSON follows ProtoJSON as ADR-001
//! adopts it: field names in lowerCamelCase, enums as their proto names (`TASK_STATE_WORKING`),
//! `oneof`s as the name of the member that is set (no `kind` discriminators), `bytes` as base64.
//! None of these messages has an `int64` field, so every number is a JSON number.
//!
//! How proto fields map to Rust, the same way throughout:
//!
//! * A field marked `REQUIRED` (`google.api.field_behavior`) is always written. On input it must be
//!   present, except repeated fields, maps and `ListTasksResponse`'s paging fields, whose empty or
//!   zero value is meaningful and which ProtoJSON writers omit; those default like any proto3 field.
//! * Other scalars (implicit presence) are plain values that default when absent and are omitted when
//!   they hold the zero value (`""`, `0`, `false`, `*_UNSPECIFIED`); repeated fields and maps are
//!   omitted when empty.
//! * `optional` scalars and message-typed fields are [`Option`]s, omitted when `None`.
//!
//! Like ProtoJSON parsers, readers also accept enums by number and `raw` bytes in URL-safe or
//! unpadded base64, and ignore unknown fields. Unlike them, they do not accept fields by their proto
//! (snake_case) names, `null` for a field that is not an `Option`, or numbers as strings.
//!
//! Conversions are `TryFrom` both ways with [`V1Error`]: each version has values the other lacks
//! (`*_UNSPECIFIED` and content-less parts in 1.0, the `unknown` task state in 0.3, and 0.3 inline
//! file bytes that are not base64). Where one side has a field the other does not, the conversion
//! drops it, as each impl documents.

use std::collections::BTreeMap;

use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::message::MessageKind;
use super::task::{ArtifactUpdateKind, StatusUpdateKind, TaskKind};
use super::{FileContent, Metadata};

/// The A2A protocol version these types speak (`AgentInterface.protocolVersion`).
pub const PROTOCOL_VERSION: &str = "1.0";

// ---------------------------------------------------------------------------------------------
// Enums
// ---------------------------------------------------------------------------------------------

/// Lifecycle state of a task (`lf.a2a.v1.TaskState`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum TaskState {
    /// `TASK_STATE_UNSPECIFIED`: the proto's zero value, "unknown or indeterminate".
    #[default]
    Unspecified = 0,
    /// `TASK_STATE_SUBMITTED`: submitted and acknowledged.
    Submitted = 1,
    /// `TASK_STATE_WORKING`: being processed.
    Working = 2,
    /// `TASK_STATE_COMPLETED`: finished successfully (terminal).
    Completed = 3,
    /// `TASK_STATE_FAILED`: finished with an error (terminal).
    Failed = 4,
    /// `TASK_STATE_CANCELED`: canceled before completion (terminal).
    Canceled = 5,
    /// `TASK_STATE_INPUT_REQUIRED`: waiting for the client (interrupted).
    InputRequired = 6,
    /// `TASK_STATE_REJECTED`: the agent declined (terminal).
    Rejected = 7,
    /// `TASK_STATE_AUTH_REQUIRED`: waiting for authentication (interrupted).
    AuthRequired = 8,
}

impl TaskState {
    /// Every state, in proto number order.
    pub const ALL: [TaskState; 9] = [
        TaskState::Unspecified,
        TaskState::Submitted,
        TaskState::Working,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::InputRequired,
        TaskState::Rejected,
        TaskState::AuthRequired,
    ];

    /// The proto name, which is the JSON form (`TASK_STATE_INPUT_REQUIRED`).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Unspecified => "TASK_STATE_UNSPECIFIED",
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
            TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        }
    }

    fn is_unspecified(&self) -> bool {
        *self == TaskState::Unspecified
    }
}

/// Who sent a message (`lf.a2a.v1.Role`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Role {
    /// `ROLE_UNSPECIFIED`: the proto's zero value.
    #[default]
    Unspecified = 0,
    /// `ROLE_USER`: from the client to the server.
    User = 1,
    /// `ROLE_AGENT`: from the server to the client.
    Agent = 2,
}

impl Role {
    /// Every role, in proto number order.
    pub const ALL: [Role; 3] = [Role::Unspecified, Role::User, Role::Agent];

    /// The proto name, which is the JSON form (`ROLE_USER`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Unspecified => "ROLE_UNSPECIFIED",
            Role::User => "ROLE_USER",
            Role::Agent => "ROLE_AGENT",
        }
    }
}

impl Serialize for TaskState {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for TaskState {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        proto_enum(
            deserializer,
            "TaskState",
            &Self::ALL,
            |s| s.as_str(),
            |s| s as i32,
        )
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        proto_enum(
            deserializer,
            "Role",
            &Self::ALL,
            |r| r.as_str(),
            |r| r as i32,
        )
    }
}

/// Reads an enum as ProtoJSON parsers do: by proto name or by number.
fn proto_enum<'de, D: Deserializer<'de>, T: Copy>(
    deserializer: D,
    what: &str,
    all: &[T],
    name: fn(T) -> &'static str,
    number: fn(T) -> i32,
) -> Result<T, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NameOrNumber {
        Name(String),
        Number(i64),
    }
    let found = match NameOrNumber::deserialize(deserializer)? {
        NameOrNumber::Name(n) => all.iter().find(|v| name(**v) == n).ok_or(n),
        NameOrNumber::Number(n) => all
            .iter()
            .find(|v| i64::from(number(**v)) == n)
            .ok_or(n.to_string()),
    };
    found
        .copied()
        .map_err(|value| D::Error::custom(format!("unknown {what} value `{value}`")))
}

// ---------------------------------------------------------------------------------------------
// Core objects
// ---------------------------------------------------------------------------------------------

/// One piece of content (`lf.a2a.v1.Part`): the `content` oneof plus fields common to all kinds.
///
/// In JSON the oneof member's name is the discriminator: `{"text": ..}`, `{"raw": ..}`,
/// `{"url": ..}` or `{"data": ..}`. Reading refuses a part that sets more than one; a part that sets
/// none reads (ProtoJSON allows it) with `content: None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "PartFields")]
pub struct Part {
    /// The content, if set.
    #[serde(flatten)]
    pub content: Option<PartContent>,
    /// Part metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// File name (e.g. `document.pdf`); `""` when unset.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub filename: String,
    /// Media (MIME) type of the content, for any kind; `""` when unset.
    #[serde(skip_serializing_if = "String::is_empty")]
    #[serde(alias = "media_type")]
    pub media_type: String,
}

/// The `content` oneof of a [`Part`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PartContent {
    /// `text`: a string.
    Text(String),
    /// `raw`: file bytes (standard base64 with padding in JSON).
    #[serde(serialize_with = "serialize_base64")]
    Raw(Vec<u8>),
    /// `url`: where the file's content lives.
    Url(String),
    /// `data`: any JSON value (a `google.protobuf.Value`), `null` included.
    Data(Value),
}

impl From<PartContent> for Part {
    fn from(content: PartContent) -> Self {
        Part {
            content: Some(content),
            ..Part::default()
        }
    }
}

/// A [`Part`] as read: every oneof member optional, so that more than one can be refused.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartFields {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    raw: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default, deserialize_with = "present")]
    data: Option<Value>,
    #[serde(default)]
    metadata: Option<Metadata>,
    #[serde(default)]
    filename: String,
    #[serde(default)]
    #[serde(alias = "media_type")]
    media_type: String,
}

impl TryFrom<PartFields> for Part {
    type Error = String;

    fn try_from(fields: PartFields) -> Result<Self, String> {
        let raw = match fields.raw {
            Some(text) => Some(PartContent::Raw(
                decode_base64(&text).map_err(|e| format!("`raw` is not valid base64: {e}"))?,
            )),
            None => None,
        };
        let mut set = [
            fields.text.map(PartContent::Text),
            raw,
            fields.url.map(PartContent::Url),
            fields.data.map(PartContent::Data),
        ]
        .into_iter()
        .flatten();
        let content = set.next();
        if set.next().is_some() {
            return Err(
                "a part sets more than one of `text`, `raw`, `url` and `data`; it holds one".into(),
            );
        }
        Ok(Part {
            content,
            metadata: fields.metadata,
            filename: fields.filename,
            media_type: fields.media_type,
        })
    }
}

/// One unit of communication between client and server (`lf.a2a.v1.Message`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// Unique id, chosen by the sender.
    #[serde(alias = "message_id")]
    pub message_id: String,
    /// Context id; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "context_id")]
    pub context_id: String,
    /// Task id; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "task_id")]
    pub task_id: String,
    /// Sender.
    pub role: Role,
    /// Content.
    #[serde(default)]
    pub parts: Vec<Part>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// URIs of extensions present in or contributing to this message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// Tasks this message refers to for context.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[serde(alias = "reference_task_ids")]
    pub reference_task_ids: Vec<String>,
}

/// Status of a task at a point in time (`lf.a2a.v1.TaskStatus`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatus {
    /// State.
    pub state: TaskState,
    /// A message about the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// When the status was recorded (a `google.protobuf.Timestamp`: RFC 3339, UTC, `Z`), kept as
    /// the text read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// The core unit of action (`lf.a2a.v1.Task`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// Task id.
    pub id: String,
    /// Context id; `""` when unset (the proto does not require it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "context_id")]
    pub context_id: String,
    /// Current status.
    pub status: TaskStatus,
    /// Outputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    /// Messages exchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// An output of a task (`lf.a2a.v1.Artifact`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Unique within the task.
    #[serde(alias = "artifact_id")]
    pub artifact_id: String,
    /// Human-readable name; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Description; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Content.
    #[serde(default)]
    pub parts: Vec<Part>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// URIs of extensions present in or contributing to this artifact.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// A change in a task's status (`lf.a2a.v1.TaskStatusUpdateEvent`). 1.0 has no `final` flag: the
/// binding's stream closes instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    /// Task id.
    #[serde(alias = "task_id")]
    pub task_id: String,
    /// Context id.
    #[serde(alias = "context_id")]
    pub context_id: String,
    /// New status.
    pub status: TaskStatus,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// An artifact, or a chunk of one, generated (`lf.a2a.v1.TaskArtifactUpdateEvent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    /// Task id.
    #[serde(alias = "task_id")]
    pub task_id: String,
    /// Context id.
    #[serde(alias = "context_id")]
    pub context_id: String,
    /// The artifact or chunk.
    pub artifact: Artifact,
    /// Append to the artifact sent before with the same id.
    #[serde(default, skip_serializing_if = "is_false")]
    pub append: bool,
    /// This is the artifact's last chunk.
    #[serde(default, skip_serializing_if = "is_false")]
    #[serde(alias = "last_chunk")]
    pub last_chunk: bool,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

// ---------------------------------------------------------------------------------------------
// Push notifications
// ---------------------------------------------------------------------------------------------

/// Authentication for push notifications (`lf.a2a.v1.AuthenticationInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthenticationInfo {
    /// HTTP authentication scheme (`Bearer`, `Basic`, ...; case-insensitive).
    pub scheme: String,
    /// Credentials in the scheme's format; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub credentials: String,
}

/// A push notification configuration for a task (`lf.a2a.v1.TaskPushNotificationConfig`; 1.0 has
/// no separate `PushNotificationConfig`). Also the request of `CreateTaskPushNotificationConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    /// Routing identifier from the selected `AgentInterface`; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// Configuration id; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The task; `""` when unset (as inside a `SendMessage` request).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "task_id")]
    pub task_id: String,
    /// Where notifications are posted.
    pub url: String,
    /// Token unique to this task or session; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
    /// Authentication the agent uses when posting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo>,
}

/// The request of `CreateTaskPushNotificationConfig`, which the proto declares as the config itself.
pub type CreateTaskPushNotificationConfigRequest = TaskPushNotificationConfig;

/// Request of `GetTaskPushNotificationConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskPushNotificationConfigRequest {
    /// Routing identifier; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// The task.
    #[serde(alias = "task_id")]
    pub task_id: String,
    /// The configuration.
    pub id: String,
}

/// Request of `DeleteTaskPushNotificationConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteTaskPushNotificationConfigRequest {
    /// Routing identifier; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// The task.
    #[serde(alias = "task_id")]
    pub task_id: String,
    /// The configuration.
    pub id: String,
}

/// Request of `ListTaskPushNotificationConfigs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTaskPushNotificationConfigsRequest {
    /// Routing identifier; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// The task.
    #[serde(alias = "task_id")]
    pub task_id: String,
    /// Most configurations to return; `0` when unset.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[serde(alias = "page_size")]
    pub page_size: i32,
    /// Token from a previous response; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "page_token")]
    pub page_token: String,
}

/// Response of `ListTaskPushNotificationConfigs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTaskPushNotificationConfigsResponse {
    /// The configurations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<TaskPushNotificationConfig>,
    /// Token for the next page; `""` on the last.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "next_page_token")]
    pub next_page_token: String,
}

// ---------------------------------------------------------------------------------------------
// Requests and responses
// ---------------------------------------------------------------------------------------------

/// Configuration of a send (`lf.a2a.v1.SendMessageConfiguration`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    /// Media types the client accepts in response parts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[serde(alias = "accepted_output_modes")]
    pub accepted_output_modes: Vec<String>,
    /// Push notifications for the task this send creates (its `taskId` empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "task_push_notification_config")]
    pub task_push_notification_config: Option<TaskPushNotificationConfig>,
    /// Most recent history messages to return; `None` is no limit, `0` none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "history_length")]
    pub history_length: Option<i32>,
    /// Return once the task exists instead of waiting for a terminal or interrupted state (the
    /// default, `false`, waits). 1.0 has no `blocking` field.
    #[serde(default, skip_serializing_if = "is_false")]
    #[serde(alias = "return_immediately")]
    pub return_immediately: bool,
}

/// Request of `SendMessage` and `SendStreamingMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    /// Routing identifier; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// The message.
    pub message: Message,
    /// Configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// Response of `SendMessage`: the `payload` oneof.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    /// `task`: the task created or updated.
    Task(Task),
    /// `message`: a direct reply.
    Message(Message),
}

/// One item of `SendStreamingMessage` and `SubscribeToTask` streams and of push notifications: the
/// `payload` oneof.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    /// `task`: the task's current state.
    Task(Task),
    /// `message`: a message from the agent.
    Message(Message),
    /// `statusUpdate`: a status change.
    #[serde(alias = "status_update")]
    StatusUpdate(TaskStatusUpdateEvent),
    /// `artifactUpdate`: an artifact or chunk.
    #[serde(alias = "artifact_update")]
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// Request of `GetTask`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequest {
    /// Routing identifier; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// The task.
    pub id: String,
    /// Most recent history messages to return; `None` is no limit, `0` none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "history_length")]
    pub history_length: Option<i32>,
}

/// Request of `ListTasks`: filters and paging, all optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    /// Routing identifier; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// Only tasks of this context; `""` for any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "context_id")]
    pub context_id: String,
    /// Only tasks in this state; `Unspecified` for any.
    #[serde(default, skip_serializing_if = "TaskState::is_unspecified")]
    pub status: TaskState,
    /// Most tasks to return (1 to 100; 50 when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "page_size")]
    pub page_size: Option<i32>,
    /// Token from a previous response; `""` for the first page.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "page_token")]
    pub page_token: String,
    /// Most history messages per task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "history_length")]
    pub history_length: Option<i32>,
    /// Only tasks whose status timestamp is at or after this one (a `google.protobuf.Timestamp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "status_timestamp_after")]
    pub status_timestamp_after: Option<String>,
    /// Include artifacts (default `false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "include_artifacts")]
    pub include_artifacts: Option<bool>,
}

/// Response of `ListTasks`. Every field is always written (`nextPageToken` is `""` on the last page).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse {
    /// The tasks of this page.
    #[serde(default)]
    pub tasks: Vec<Task>,
    /// Token for the next page; `""` on the last.
    #[serde(default)]
    #[serde(alias = "next_page_token")]
    pub next_page_token: String,
    /// The page size used.
    #[serde(default)]
    #[serde(alias = "page_size")]
    pub page_size: i32,
    /// Tasks matching before paging.
    #[serde(default)]
    #[serde(alias = "total_size")]
    pub total_size: i32,
}

/// Request of `CancelTask`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelTaskRequest {
    /// Routing identifier; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// The task.
    pub id: String,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// Request of `SubscribeToTask`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeToTaskRequest {
    /// Routing identifier; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// The task.
    pub id: String,
}

/// Request of `GetExtendedAgentCard`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetExtendedAgentCardRequest {
    /// Routing identifier; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
}

// ---------------------------------------------------------------------------------------------
// Agent card
// ---------------------------------------------------------------------------------------------

/// A URL, protocol binding and protocol version at which the agent is reachable
/// (`lf.a2a.v1.AgentInterface`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInterface {
    /// Absolute URL of the interface.
    pub url: String,
    /// `JSONRPC`, `GRPC`, `HTTP+JSON`, or a custom binding's URI.
    #[serde(alias = "protocol_binding")]
    pub protocol_binding: String,
    /// Routing identifier clients must send in requests' `tenant`; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// A2A version exposed here (`"1.0"`, `"0.3"`).
    #[serde(alias = "protocol_version")]
    pub protocol_version: String,
}

/// Self-describing manifest of an agent (`lf.a2a.v1.AgentCard`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    /// Agent name.
    pub name: String,
    /// What the agent does.
    pub description: String,
    /// Interfaces, the preferred one first.
    #[serde(default)]
    #[serde(alias = "supported_interfaces")]
    pub supported_interfaces: Vec<AgentInterface>,
    /// The service provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AgentProvider>,
    /// Agent version.
    pub version: String,
    /// Documentation URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "documentation_url")]
    pub documentation_url: Option<String>,
    /// Optional capabilities.
    pub capabilities: AgentCapabilities,
    /// Security schemes by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[serde(alias = "security_schemes")]
    pub security_schemes: BTreeMap<String, SecurityScheme>,
    /// Security requirements (any one of them suffices).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[serde(alias = "security_requirements")]
    pub security_requirements: Vec<SecurityRequirement>,
    /// Default accepted input media types.
    #[serde(default)]
    #[serde(alias = "default_input_modes")]
    pub default_input_modes: Vec<String>,
    /// Default produced output media types.
    #[serde(default)]
    #[serde(alias = "default_output_modes")]
    pub default_output_modes: Vec<String>,
    /// Skills.
    #[serde(default)]
    pub skills: Vec<AgentSkill>,
    /// JWS signatures of the card.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<AgentCardSignature>,
    /// Icon URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "icon_url")]
    pub icon_url: Option<String>,
}

/// The agent's service provider (`lf.a2a.v1.AgentProvider`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentProvider {
    /// Provider website or documentation.
    pub url: String,
    /// Organization name.
    pub organization: String,
}

/// Optional capabilities of an agent (`lf.a2a.v1.AgentCapabilities`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// Supports streaming responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    /// Supports push notifications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "push_notifications")]
    pub push_notifications: Option<bool>,
    /// Protocol extensions supported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<AgentExtension>,
    /// Serves an extended card to authenticated clients (`GetExtendedAgentCard`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "extended_agent_card")]
    pub extended_agent_card: Option<bool>,
}

/// A protocol extension the agent supports (`lf.a2a.v1.AgentExtension`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentExtension {
    /// URI identifying the extension; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uri: String,
    /// How the agent uses it; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Clients must understand and comply with it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
    /// Extension-specific parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Metadata>,
}

/// One skill the agent offers (`lf.a2a.v1.AgentSkill`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    /// Unique id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Keywords.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Example prompts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// Accepted input media types, overriding the card's defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[serde(alias = "input_modes")]
    pub input_modes: Vec<String>,
    /// Produced output media types, overriding the card's defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[serde(alias = "output_modes")]
    pub output_modes: Vec<String>,
    /// Security requirements of this skill.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[serde(alias = "security_requirements")]
    pub security_requirements: Vec<SecurityRequirement>,
}

/// A JWS (RFC 7515, JSON form) signature of an agent card (`lf.a2a.v1.AgentCardSignature`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentCardSignature {
    /// Protected header, base64url-encoded JSON.
    pub protected: String,
    /// Signature, base64url-encoded.
    pub signature: String,
    /// Unprotected header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<Metadata>,
}

// ---------------------------------------------------------------------------------------------
// Security
// ---------------------------------------------------------------------------------------------

/// Required schemes and their scopes, all of them at once (`lf.a2a.v1.SecurityRequirement`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityRequirement {
    /// Scheme name (a key of `AgentCard.securitySchemes`) to required scopes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub schemes: BTreeMap<String, StringList>,
}

/// A list of strings (`lf.a2a.v1.StringList`), in JSON `{"list": [..]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StringList {
    /// The strings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub list: Vec<String>,
}

/// A security scheme (`lf.a2a.v1.SecurityScheme`): the `scheme` oneof, after OpenAPI 3.2.
///
/// Read from an object with exactly one of the oneof's members; other members are ignored, as
/// ProtoJSON readers ignore unknown fields: cards served for both versions (the official SDKs',
/// radkit's) put the 0.3 `type` and fields beside the 1.0 member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum SecurityScheme {
    /// `apiKeySecurityScheme`.
    #[serde(rename = "apiKeySecurityScheme")]
    ApiKey(ApiKeySecurityScheme),
    /// `httpAuthSecurityScheme`.
    #[serde(rename = "httpAuthSecurityScheme")]
    HttpAuth(HttpAuthSecurityScheme),
    /// `oauth2SecurityScheme`.
    #[serde(rename = "oauth2SecurityScheme")]
    OAuth2(OAuth2SecurityScheme),
    /// `openIdConnectSecurityScheme`.
    #[serde(rename = "openIdConnectSecurityScheme")]
    OpenIdConnect(OpenIdConnectSecurityScheme),
    /// `mtlsSecurityScheme`.
    #[serde(rename = "mtlsSecurityScheme")]
    MutualTls(MutualTlsSecurityScheme),
}

impl<'de> Deserialize<'de> for SecurityScheme {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        const MEMBERS: [&str; 5] = [
            "apiKeySecurityScheme",
            "httpAuthSecurityScheme",
            "oauth2SecurityScheme",
            "openIdConnectSecurityScheme",
            "mtlsSecurityScheme",
        ];
        let mut object = serde_json::Map::<String, Value>::deserialize(deserializer)?;
        let mut set = MEMBERS.iter().filter(|m| object.contains_key(**m));
        let (Some(member), None) = (set.next(), set.next()) else {
            return Err(D::Error::custom(format!(
                "a SecurityScheme sets exactly one of {}",
                MEMBERS.join(", ")
            )));
        };
        let value = object.remove(*member).unwrap_or(Value::Null);
        let e = |e: serde_json::Error| D::Error::custom(format!("`{member}`: {e}"));
        Ok(match *member {
            "apiKeySecurityScheme" => {
                SecurityScheme::ApiKey(serde_json::from_value(value).map_err(e)?)
            }
            "httpAuthSecurityScheme" => {
                SecurityScheme::HttpAuth(serde_json::from_value(value).map_err(e)?)
            }
            "oauth2SecurityScheme" => {
                SecurityScheme::OAuth2(serde_json::from_value(value).map_err(e)?)
            }
            "openIdConnectSecurityScheme" => {
                SecurityScheme::OpenIdConnect(serde_json::from_value(value).map_err(e)?)
            }
            _ => SecurityScheme::MutualTls(serde_json::from_value(value).map_err(e)?),
        })
    }
}

/// API key authentication (`lf.a2a.v1.APIKeySecurityScheme`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeySecurityScheme {
    /// Description; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Where the key goes: `query`, `header` or `cookie`.
    pub location: String,
    /// Name of the header, query parameter or cookie.
    pub name: String,
}

/// HTTP authentication (`lf.a2a.v1.HTTPAuthSecurityScheme`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpAuthSecurityScheme {
    /// Description; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Authorization header scheme (RFC 7235), e.g. `Bearer`.
    pub scheme: String,
    /// Bearer token format hint, e.g. `JWT`; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "bearer_format")]
    pub bearer_format: String,
}

/// OAuth 2.0 authentication (`lf.a2a.v1.OAuth2SecurityScheme`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuth2SecurityScheme {
    /// Description; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The supported flow.
    pub flows: OAuthFlows,
    /// Authorization server metadata URL (RFC 8414); `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "oauth2_metadata_url")]
    pub oauth2_metadata_url: String,
}

/// OpenID Connect authentication (`lf.a2a.v1.OpenIdConnectSecurityScheme`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenIdConnectSecurityScheme {
    /// Description; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// OpenID Connect discovery URL.
    #[serde(alias = "open_id_connect_url")]
    pub open_id_connect_url: String,
}

/// Mutual TLS authentication (`lf.a2a.v1.MutualTlsSecurityScheme`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutualTlsSecurityScheme {
    /// Description; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// The OAuth 2.0 flow (`lf.a2a.v1.OAuthFlows`): the `flow` oneof.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OAuthFlows {
    /// `authorizationCode`.
    #[serde(alias = "authorization_code")]
    AuthorizationCode(AuthorizationCodeOAuthFlow),
    /// `clientCredentials`.
    #[serde(alias = "client_credentials")]
    ClientCredentials(ClientCredentialsOAuthFlow),
    /// `implicit` (deprecated in the proto: use authorization code with PKCE).
    Implicit(ImplicitOAuthFlow),
    /// `password` (deprecated in the proto: use authorization code with PKCE, or device code).
    Password(PasswordOAuthFlow),
    /// `deviceCode` (RFC 8628).
    #[serde(alias = "device_code")]
    DeviceCode(DeviceCodeOAuthFlow),
}

/// The authorization code flow (`lf.a2a.v1.AuthorizationCodeOAuthFlow`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizationCodeOAuthFlow {
    /// Authorization URL.
    #[serde(alias = "authorization_url")]
    pub authorization_url: String,
    /// Token URL.
    #[serde(alias = "token_url")]
    pub token_url: String,
    /// Refresh URL; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "refresh_url")]
    pub refresh_url: String,
    /// Scope name to description.
    #[serde(default)]
    pub scopes: BTreeMap<String, String>,
    /// PKCE (RFC 7636) is required.
    #[serde(default, skip_serializing_if = "is_false")]
    #[serde(alias = "pkce_required")]
    pub pkce_required: bool,
}

/// The client credentials flow (`lf.a2a.v1.ClientCredentialsOAuthFlow`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientCredentialsOAuthFlow {
    /// Token URL.
    #[serde(alias = "token_url")]
    pub token_url: String,
    /// Refresh URL; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "refresh_url")]
    pub refresh_url: String,
    /// Scope name to description.
    #[serde(default)]
    pub scopes: BTreeMap<String, String>,
}

/// The implicit flow (`lf.a2a.v1.ImplicitOAuthFlow`, deprecated).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImplicitOAuthFlow {
    /// Authorization URL; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "authorization_url")]
    pub authorization_url: String,
    /// Refresh URL; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "refresh_url")]
    pub refresh_url: String,
    /// Scope name to description.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scopes: BTreeMap<String, String>,
}

/// The resource owner password flow (`lf.a2a.v1.PasswordOAuthFlow`, deprecated).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PasswordOAuthFlow {
    /// Token URL; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "token_url")]
    pub token_url: String,
    /// Refresh URL; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "refresh_url")]
    pub refresh_url: String,
    /// Scope name to description.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scopes: BTreeMap<String, String>,
}

/// The device code flow, RFC 8628 (`lf.a2a.v1.DeviceCodeOAuthFlow`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceCodeOAuthFlow {
    /// Device authorization endpoint.
    #[serde(alias = "device_authorization_url")]
    pub device_authorization_url: String,
    /// Token URL.
    #[serde(alias = "token_url")]
    pub token_url: String,
    /// Refresh URL; `""` when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "refresh_url")]
    pub refresh_url: String,
    /// Scope name to description.
    #[serde(default)]
    pub scopes: BTreeMap<String, String>,
}

// ---------------------------------------------------------------------------------------------
// Conversions to and from the 0.3 model
// ---------------------------------------------------------------------------------------------

/// A value one protocol version has and the other cannot express.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum V1Error {
    /// A 1.0 enum holds its `*_UNSPECIFIED` zero value, which 0.3 has no value for.
    #[error("`{field}` is unspecified, and A2A 0.3 has no such value")]
    Unspecified {
        /// The field (`Message.role`, `TaskStatus.state`).
        field: &'static str,
    },
    /// A 0.3 task state is `unknown`, which 1.0 dropped.
    #[error("`{field}` is `unknown`, which A2A 1.0 has no state for")]
    UnknownState {
        /// The field (`TaskStatus.state`).
        field: &'static str,
    },
    /// A 1.0 part sets none of `text`, `raw`, `url` and `data`.
    #[error("`{field}` is not set: the part has none of `text`, `raw`, `url` and `data`")]
    NoContent {
        /// The field (`Part.content`).
        field: &'static str,
    },
    /// A 1.0 data part holds a JSON value other than an object; 0.3 data parts hold objects only.
    #[error("`{field}` is not a JSON object, and A2A 0.3 data parts hold objects only")]
    DataNotObject {
        /// The field (`Part.data`).
        field: &'static str,
    },
    /// 0.3 inline file content is not base64, so it has no 1.0 `raw` bytes.
    #[error("`{field}` is not valid base64")]
    InvalidBase64 {
        /// The field (`file.bytes`).
        field: &'static str,
        /// Why decoding failed.
        source: base64::DecodeError,
    },
}

impl From<super::Role> for Role {
    fn from(role: super::Role) -> Self {
        match role {
            super::Role::User => Role::User,
            super::Role::Agent => Role::Agent,
        }
    }
}

impl TryFrom<Role> for super::Role {
    type Error = V1Error;

    /// Fails on `ROLE_UNSPECIFIED`.
    fn try_from(role: Role) -> Result<Self, V1Error> {
        match role {
            Role::User => Ok(super::Role::User),
            Role::Agent => Ok(super::Role::Agent),
            Role::Unspecified => Err(V1Error::Unspecified {
                field: "Message.role",
            }),
        }
    }
}

impl TryFrom<super::TaskState> for TaskState {
    type Error = V1Error;

    /// Fails on `unknown`, which 1.0 dropped.
    fn try_from(state: super::TaskState) -> Result<Self, V1Error> {
        use super::TaskState as Old;
        Ok(match state {
            Old::Submitted => TaskState::Submitted,
            Old::Working => TaskState::Working,
            Old::InputRequired => TaskState::InputRequired,
            Old::Completed => TaskState::Completed,
            Old::Canceled => TaskState::Canceled,
            Old::Failed => TaskState::Failed,
            Old::Rejected => TaskState::Rejected,
            Old::AuthRequired => TaskState::AuthRequired,
            Old::Unknown => {
                return Err(V1Error::UnknownState {
                    field: "TaskStatus.state",
                })
            }
        })
    }
}

impl TryFrom<TaskState> for super::TaskState {
    type Error = V1Error;

    /// Fails on `TASK_STATE_UNSPECIFIED`.
    fn try_from(state: TaskState) -> Result<Self, V1Error> {
        use super::TaskState as Old;
        Ok(match state {
            TaskState::Submitted => Old::Submitted,
            TaskState::Working => Old::Working,
            TaskState::Completed => Old::Completed,
            TaskState::Failed => Old::Failed,
            TaskState::Canceled => Old::Canceled,
            TaskState::InputRequired => Old::InputRequired,
            TaskState::Rejected => Old::Rejected,
            TaskState::AuthRequired => Old::AuthRequired,
            TaskState::Unspecified => {
                return Err(V1Error::Unspecified {
                    field: "TaskStatus.state",
                })
            }
        })
    }
}

impl TryFrom<super::Part> for Part {
    type Error = V1Error;

    /// Text to `text`, data to `data`, a file to `raw` (its base64 decoded) or `url`, with its MIME
    /// type and name as `mediaType` and `filename`.
    fn try_from(part: super::Part) -> Result<Self, V1Error> {
        Ok(match part {
            super::Part::Text { text, metadata } => Part {
                metadata,
                ..PartContent::Text(text).into()
            },
            super::Part::Data { data, metadata } => Part {
                metadata,
                ..PartContent::Data(Value::Object(data)).into()
            },
            super::Part::File { file, metadata } => {
                let (content, mime_type, name) = match file {
                    FileContent::Bytes {
                        bytes,
                        mime_type,
                        name,
                    } => {
                        let raw =
                            decode_base64(&bytes).map_err(|source| V1Error::InvalidBase64 {
                                field: "file.bytes",
                                source,
                            })?;
                        (PartContent::Raw(raw), mime_type, name)
                    }
                    FileContent::Uri {
                        uri,
                        mime_type,
                        name,
                    } => (PartContent::Url(uri), mime_type, name),
                };
                Part {
                    content: Some(content),
                    metadata,
                    filename: name.unwrap_or_default(),
                    media_type: mime_type.unwrap_or_default(),
                }
            }
        })
    }
}

impl TryFrom<Part> for super::Part {
    type Error = V1Error;

    /// `raw` and `url` to a file part (bytes re-encoded as standard base64) with `mediaType` and
    /// `filename` as its MIME type and name. 0.3 text and data parts have neither, so those of a
    /// `text` or `data` part are dropped. Fails on a part without content and on `data` that is not
    /// a JSON object.
    fn try_from(part: Part) -> Result<Self, V1Error> {
        let Part {
            content,
            metadata,
            filename,
            media_type,
        } = part;
        let content = content.ok_or(V1Error::NoContent {
            field: "Part.content",
        })?;
        let (mime_type, name) = (non_empty(media_type), non_empty(filename));
        Ok(match content {
            PartContent::Text(text) => super::Part::Text { text, metadata },
            PartContent::Data(Value::Object(data)) => super::Part::Data { data, metadata },
            PartContent::Data(_) => return Err(V1Error::DataNotObject { field: "Part.data" }),
            PartContent::Raw(raw) => super::Part::File {
                file: FileContent::Bytes {
                    bytes: BASE64.encode(raw),
                    mime_type,
                    name,
                },
                metadata,
            },
            PartContent::Url(uri) => super::Part::File {
                file: FileContent::Uri {
                    uri,
                    mime_type,
                    name,
                },
                metadata,
            },
        })
    }
}

impl TryFrom<super::Message> for Message {
    type Error = V1Error;

    /// Drops the 0.3 `kind`; an empty list of extensions or referenced tasks is the same as none.
    fn try_from(message: super::Message) -> Result<Self, V1Error> {
        Ok(Message {
            message_id: message.message_id,
            context_id: message.context_id.unwrap_or_default(),
            task_id: message.task_id.unwrap_or_default(),
            role: message.role.into(),
            parts: convert_all(message.parts)?,
            metadata: message.metadata,
            extensions: message.extensions.unwrap_or_default(),
            reference_task_ids: message.reference_task_ids.unwrap_or_default(),
        })
    }
}

impl TryFrom<Message> for super::Message {
    type Error = V1Error;

    /// Empty ids and lists become `None`. Fails on `ROLE_UNSPECIFIED` or a part 0.3 cannot hold.
    fn try_from(message: Message) -> Result<Self, V1Error> {
        Ok(super::Message {
            role: message.role.try_into()?,
            parts: convert_all(message.parts)?,
            message_id: message.message_id,
            task_id: non_empty(message.task_id),
            context_id: non_empty(message.context_id),
            reference_task_ids: non_empty_vec(message.reference_task_ids),
            extensions: non_empty_vec(message.extensions),
            metadata: message.metadata,
            kind: MessageKind::Message,
        })
    }
}

impl TryFrom<super::TaskStatus> for TaskStatus {
    type Error = V1Error;

    /// Fails on the `unknown` state or a message part 1.0 cannot hold.
    fn try_from(status: super::TaskStatus) -> Result<Self, V1Error> {
        Ok(TaskStatus {
            state: status.state.try_into()?,
            message: status.message.map(TryInto::try_into).transpose()?,
            timestamp: status.timestamp,
        })
    }
}

impl TryFrom<TaskStatus> for super::TaskStatus {
    type Error = V1Error;

    /// Fails on `TASK_STATE_UNSPECIFIED` or a message 0.3 cannot hold.
    fn try_from(status: TaskStatus) -> Result<Self, V1Error> {
        Ok(super::TaskStatus {
            state: status.state.try_into()?,
            message: status.message.map(TryInto::try_into).transpose()?,
            timestamp: status.timestamp,
        })
    }
}

impl TryFrom<super::Artifact> for Artifact {
    type Error = V1Error;

    /// Fails on a part 1.0 cannot hold.
    fn try_from(artifact: super::Artifact) -> Result<Self, V1Error> {
        Ok(Artifact {
            artifact_id: artifact.artifact_id,
            name: artifact.name.unwrap_or_default(),
            description: artifact.description.unwrap_or_default(),
            parts: convert_all(artifact.parts)?,
            metadata: artifact.metadata,
            extensions: artifact.extensions.unwrap_or_default(),
        })
    }
}

impl TryFrom<Artifact> for super::Artifact {
    type Error = V1Error;

    /// Empty strings and lists become `None`. Fails on a part 0.3 cannot hold.
    fn try_from(artifact: Artifact) -> Result<Self, V1Error> {
        Ok(super::Artifact {
            artifact_id: artifact.artifact_id,
            name: non_empty(artifact.name),
            description: non_empty(artifact.description),
            parts: convert_all(artifact.parts)?,
            metadata: artifact.metadata,
            extensions: non_empty_vec(artifact.extensions),
        })
    }
}

impl TryFrom<super::Task> for Task {
    type Error = V1Error;

    /// Drops the 0.3 `kind`; an empty history or artifact list is the same as none.
    fn try_from(task: super::Task) -> Result<Self, V1Error> {
        Ok(Task {
            id: task.id,
            context_id: task.context_id,
            status: task.status.try_into()?,
            artifacts: convert_all(task.artifacts.unwrap_or_default())?,
            history: convert_all(task.history.unwrap_or_default())?,
            metadata: task.metadata,
        })
    }
}

impl TryFrom<Task> for super::Task {
    type Error = V1Error;

    /// Empty history and artifact lists become `None`.
    fn try_from(task: Task) -> Result<Self, V1Error> {
        Ok(super::Task {
            id: task.id,
            context_id: task.context_id,
            status: task.status.try_into()?,
            history: non_empty_vec(convert_all(task.history)?),
            artifacts: non_empty_vec(convert_all(task.artifacts)?),
            metadata: task.metadata,
            kind: TaskKind::Task,
        })
    }
}

impl TryFrom<super::TaskStatusUpdateEvent> for TaskStatusUpdateEvent {
    type Error = V1Error;

    /// Drops `final` (1.0 closes the stream instead) and `kind`.
    fn try_from(event: super::TaskStatusUpdateEvent) -> Result<Self, V1Error> {
        Ok(TaskStatusUpdateEvent {
            task_id: event.task_id,
            context_id: event.context_id,
            status: event.status.try_into()?,
            metadata: event.metadata,
        })
    }
}

impl TryFrom<TaskStatusUpdateEvent> for super::TaskStatusUpdateEvent {
    type Error = V1Error;

    /// `final` is true for the states at which a 1.0 stream closes: terminal and interrupted
    /// (`INPUT_REQUIRED`, `AUTH_REQUIRED`).
    fn try_from(event: TaskStatusUpdateEvent) -> Result<Self, V1Error> {
        let status: super::TaskStatus = event.status.try_into()?;
        let is_final = status.state.is_terminal()
            || matches!(
                status.state,
                super::TaskState::InputRequired | super::TaskState::AuthRequired
            );
        Ok(super::TaskStatusUpdateEvent {
            task_id: event.task_id,
            context_id: event.context_id,
            kind: StatusUpdateKind::StatusUpdate,
            status,
            is_final,
            metadata: event.metadata,
        })
    }
}

impl TryFrom<super::TaskArtifactUpdateEvent> for TaskArtifactUpdateEvent {
    type Error = V1Error;

    /// Drops `kind`; an absent `append` or `lastChunk` is `false`.
    fn try_from(event: super::TaskArtifactUpdateEvent) -> Result<Self, V1Error> {
        Ok(TaskArtifactUpdateEvent {
            task_id: event.task_id,
            context_id: event.context_id,
            artifact: event.artifact.try_into()?,
            append: event.append.unwrap_or(false),
            last_chunk: event.last_chunk.unwrap_or(false),
            metadata: event.metadata,
        })
    }
}

impl TryFrom<TaskArtifactUpdateEvent> for super::TaskArtifactUpdateEvent {
    type Error = V1Error;

    /// `append` and `lastChunk` become `Some(true)` when true and `None` when false.
    fn try_from(event: TaskArtifactUpdateEvent) -> Result<Self, V1Error> {
        Ok(super::TaskArtifactUpdateEvent {
            task_id: event.task_id,
            context_id: event.context_id,
            kind: ArtifactUpdateKind::ArtifactUpdate,
            artifact: event.artifact.try_into()?,
            append: event.append.then_some(true),
            last_chunk: event.last_chunk.then_some(true),
            metadata: event.metadata,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn convert_all<A, B: TryFrom<A, Error = V1Error>>(items: Vec<A>) -> Result<Vec<B>, V1Error> {
    items.into_iter().map(B::try_from).collect()
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

fn non_empty_vec<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn is_zero(value: &i32) -> bool {
    *value == 0
}

/// A field that is present reads as `Some`, even when it is `null` (a `google.protobuf.Value`).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

const PADDING_OPTIONAL: GeneralPurposeConfig =
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
/// Standard base64; writes padding, reads with or without it.
const BASE64: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, PADDING_OPTIONAL);
const BASE64_URL: GeneralPurpose =
    GeneralPurpose::new(&base64::alphabet::URL_SAFE, PADDING_OPTIONAL);

/// Reads `bytes` as ProtoJSON parsers do: the standard or the URL-safe alphabet, padded or not.
fn decode_base64(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    BASE64
        .decode(text)
        .or_else(|e| BASE64_URL.decode(text).map_err(|_| e))
}

fn serialize_base64<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&BASE64.encode(bytes))
}

#[cfg(test)]
mod tests {
    use serde::de::DeserializeOwned;
    use serde_json::json;

    use super::*;
    use crate::model as old;

    /// Reads `json` as `T` and writes it back: the result must be the same JSON.
    fn golden<T: Serialize + DeserializeOwned>(json: Value) -> T {
        let typed: T = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&typed).unwrap(), json);
        typed
    }

    fn read<T: DeserializeOwned>(json: Value) -> Result<T, String> {
        serde_json::from_value(json).map_err(|e| e.to_string())
    }

    // ---- ProtoJSON: parsers accept the original proto field names too ----

    #[test]
    fn requests_with_proto_field_names_read_as_their_camel_case_form() {
        // ProtoJSON parsers accept `history_length` as well as `historyLength` (protobuf's own
        // json_format does, and clients built on it — the A2A TCK's among them — send it); what is
        // written is always camelCase. User data (metadata) keeps its keys as sent.
        let snake: SendMessageRequest = read(json!({
            "message": {
                "message_id": "m1", "context_id": "c1", "task_id": "t1", "role": "ROLE_USER",
                "reference_task_ids": ["t0"],
                "parts": [{"text": "hi", "media_type": "text/plain"}],
                "metadata": {"my_key": 1},
            },
            "configuration": {"history_length": 2, "return_immediately": true,
                              "accepted_output_modes": ["text/plain"]},
        }))
        .unwrap();
        let camel: SendMessageRequest = read(json!({
            "message": {
                "messageId": "m1", "contextId": "c1", "taskId": "t1", "role": "ROLE_USER",
                "referenceTaskIds": ["t0"],
                "parts": [{"text": "hi", "mediaType": "text/plain"}],
                "metadata": {"my_key": 1},
            },
            "configuration": {"historyLength": 2, "returnImmediately": true,
                              "acceptedOutputModes": ["text/plain"]},
        }))
        .unwrap();
        assert_eq!(snake, camel);
        assert_eq!(
            serde_json::to_value(&snake).unwrap()["message"]["metadata"],
            json!({"my_key": 1})
        );
        let get: GetTaskRequest = read(json!({"id": "t1", "history_length": 0})).unwrap();
        assert_eq!(get.history_length, Some(0));
        let list: ListTasksRequest = read(json!({
            "context_id": "c1", "page_size": 5, "page_token": "x", "include_artifacts": true,
            "status_timestamp_after": "2026-01-01T00:00:00Z",
        }))
        .unwrap();
        assert_eq!(
            (
                list.context_id.as_str(),
                list.page_size,
                list.page_token.as_str()
            ),
            ("c1", Some(5), "x")
        );
        let config: TaskPushNotificationConfig =
            read(json!({"task_id": "t1", "url": "https://example.com/hook"})).unwrap();
        assert_eq!(config.task_id, "t1");
    }

    // ---- Enums (§4.1.3 TaskState, §4.1.5 Role, §5.5 JSON Field Naming Convention) ----

    #[test]
    fn task_state_serializes_as_the_proto_enum_name() {
        let names = [
            "TASK_STATE_UNSPECIFIED",
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED",
            "TASK_STATE_FAILED",
            "TASK_STATE_CANCELED",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_REJECTED",
            "TASK_STATE_AUTH_REQUIRED",
        ];
        for (number, (state, name)) in TaskState::ALL.into_iter().zip(names).enumerate() {
            assert_eq!(state as usize, number);
            assert_eq!(golden::<TaskState>(json!(name)), state);
        }
    }

    #[test]
    fn role_serializes_as_the_proto_enum_name() {
        let names = ["ROLE_UNSPECIFIED", "ROLE_USER", "ROLE_AGENT"];
        for (number, (role, name)) in Role::ALL.into_iter().zip(names).enumerate() {
            assert_eq!(role as usize, number);
            assert_eq!(golden::<Role>(json!(name)), role);
        }
    }

    #[test]
    fn enums_are_also_read_by_proto_number() {
        assert_eq!(read::<TaskState>(json!(6)), Ok(TaskState::InputRequired));
        assert_eq!(read::<Role>(json!(2)), Ok(Role::Agent));
        assert_eq!(
            serde_json::to_value(read::<TaskState>(json!(3)).unwrap()).unwrap(),
            json!("TASK_STATE_COMPLETED")
        );
    }

    #[test]
    fn unknown_enum_values_and_0_3_names_are_refused() {
        // §6.5, "Validation Error Example": TASK_STATE_RUNNING is not a state.
        for bad in [json!("TASK_STATE_RUNNING"), json!("working"), json!(9)] {
            let e = read::<TaskState>(bad.clone()).unwrap_err();
            assert!(e.contains("unknown TaskState value"), "{bad}: {e}");
        }
        assert!(read::<Role>(json!("user")).is_err());
    }

    // ---- Part (§4.1.6; §A.2.1 "Kind Discriminator Removed"; whats-new-v1 "Part Object") ----

    #[test]
    fn a_part_is_discriminated_by_its_content_member() {
        // §A.2.1 "Current Pattern (v1.0)" and whats-new-v1 "v1.0 Structure (Unified Part)".
        let text = golden::<Part>(json!({"text": "Hello world", "mediaType": "text/plain"}));
        assert_eq!(text.content, Some(PartContent::Text("Hello world".into())));
        assert_eq!(text.media_type, "text/plain");

        let raw = golden::<Part>(
            json!({"raw": "iVBORw0KGgo=", "filename": "diagram.png", "mediaType": "image/png"}),
        );
        assert_eq!(
            raw.content,
            Some(PartContent::Raw(b"\x89PNG\r\n\x1a\n".to_vec()))
        );
        assert_eq!(raw.filename, "diagram.png");

        let url = golden::<Part>(json!({
            "url": "https://example.com/doc.pdf",
            "filename": "doc.pdf",
            "mediaType": "application/pdf"
        }));
        assert_eq!(
            url.content,
            Some(PartContent::Url("https://example.com/doc.pdf".into()))
        );

        let data =
            golden::<Part>(json!({"data": {"key": "value"}, "mediaType": "application/json"}));
        assert_eq!(
            data.content,
            Some(PartContent::Data(json!({"key": "value"})))
        );

        // §6.8: a text part with metadata.
        let with_metadata = golden::<Part>(json!({
            "text": "Show me a list of my open IT tickets",
            "metadata": {"mediaType": "application/json", "schema": {"type": "array"}}
        }));
        assert!(with_metadata.metadata.is_some());
    }

    #[test]
    fn part_data_holds_any_json_value_null_included() {
        // proto: `google.protobuf.Value data = 4` ("object, array, string, number, boolean, or null").
        for value in [
            json!([1, 2]),
            json!("s"),
            json!(1.5),
            json!(true),
            Value::Null,
        ] {
            let part = golden::<Part>(json!({ "data": value }));
            assert_eq!(part.content, Some(PartContent::Data(value)));
        }
    }

    #[test]
    fn a_part_with_two_content_members_is_refused() {
        let e = read::<Part>(json!({"text": "a", "url": "https://example.com"})).unwrap_err();
        assert!(
            e.contains("more than one of `text`, `raw`, `url` and `data`"),
            "{e}"
        );
    }

    #[test]
    fn raw_reads_url_safe_or_unpadded_base64_and_writes_standard_padded() {
        for text in ["+/8=", "+/8", "-_8=", "-_8"] {
            let part = read::<Part>(json!({ "raw": text })).unwrap();
            assert_eq!(
                part.content,
                Some(PartContent::Raw(vec![0xfb, 0xff])),
                "{text}"
            );
            assert_eq!(serde_json::to_value(&part).unwrap(), json!({"raw": "+/8="}));
        }
        let e = read::<Part>(json!({"raw": "not base64!"})).unwrap_err();
        assert!(e.contains("`raw` is not valid base64"), "{e}");
    }

    #[test]
    fn a_part_without_content_reads_but_has_no_0_3_form() {
        let part = golden::<Part>(json!({"mediaType": "text/plain"}));
        assert_eq!(part.content, None);
        assert_eq!(
            old::Part::try_from(part),
            Err(V1Error::NoContent {
                field: "Part.content"
            })
        );
    }

    // ---- Message, Task, Artifact, TaskStatus (§4.1; examples §6.1, §6.3, §6.5, §6.7) ----

    #[test]
    fn message_golden() {
        // §6.1 "Basic Task Execution", request message.
        let message = golden::<Message>(json!({
            "role": "ROLE_USER",
            "parts": [{"text": "What is the weather today?"}],
            "messageId": "msg-uuid"
        }));
        assert_eq!(message.role, Role::User);
        // §6.3 follow-up request, with a task id.
        golden::<Message>(json!({
            "taskId": "task-uuid",
            "role": "ROLE_USER",
            "parts": [{"text": "From San Francisco to New York"}],
            "messageId": "msg-2"
        }));
        // §6.7, a text part and a raw file part (the spec's base64 is elided; a real one here).
        golden::<Message>(json!({
            "role": "ROLE_USER",
            "parts": [
                {"text": "Analyze this image and highlight any faces."},
                {"raw": "iVBORw0KGgo=", "filename": "input_image.png", "mediaType": "image/png"}
            ],
            "messageId": "6dbc13b5-bd57-4c2b-b503-24e381b6c8d6"
        }));
        // Every field of the proto's Message.
        golden::<Message>(json!({
            "messageId": "m",
            "contextId": "c",
            "taskId": "t",
            "role": "ROLE_AGENT",
            "parts": [{"data": {"a": 1}}],
            "metadata": {"k": "v"},
            "extensions": ["https://example.com/ext/v1"],
            "referenceTaskIds": ["t0"]
        }));
    }

    #[test]
    fn task_golden() {
        // §6.1 response task, with an artifact (§4.1.7).
        let task = golden::<Task>(json!({
            "id": "task-uuid",
            "contextId": "context-uuid",
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{
                "artifactId": "artifact-uuid",
                "name": "Weather Report",
                "parts": [{"text": "Today will be sunny with a high of 75°F"}]
            }]
        }));
        assert_eq!(task.status.state, TaskState::Completed);
        // §6.5, a working task whose status (§4.1.2) carries a message and a timestamp.
        golden::<Task>(json!({
            "id": "789abc-def0-1234-5678-9abcdef01234",
            "contextId": "another-context-id",
            "status": {
                "state": "TASK_STATE_WORKING",
                "message": {
                    "role": "ROLE_AGENT",
                    "parts": [{"text": "Processing your document analysis..."}],
                    "messageId": "msg-status-update"
                },
                "timestamp": "2024-03-15T10:20:00Z"
            }
        }));
        // §6.7 response task: an artifact holding a file by URL.
        golden::<Task>(json!({
            "id": "43667960-d455-4453-b0cf-1bae4955270d",
            "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2024-03-15T12:05:00Z"},
            "artifacts": [{
                "artifactId": "9b6934dd-37e3-4eb1-8766-962efaab63a1",
                "name": "processed_image_with_faces.png",
                "parts": [{
                    "url": "https://storage.example.com/processed/task-bbb/output.png?token=xyz",
                    "filename": "output.png",
                    "mediaType": "image/png"
                }]
            }]
        }));
        // Every field of the proto's Task and Artifact.
        golden::<Task>(json!({
            "id": "t",
            "contextId": "c",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": "2025-10-28T10:30:00.000Z"},
            "artifacts": [{
                "artifactId": "a",
                "name": "n",
                "description": "d",
                "parts": [{"text": "x"}],
                "metadata": {},
                "extensions": ["https://example.com/ext/v1"]
            }],
            "history": [{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}],
            "metadata": {"k": [1]}
        }));
    }

    #[test]
    fn unset_fields_are_omitted_and_required_ones_always_written() {
        let message = Message {
            message_id: "m".into(),
            context_id: String::new(),
            task_id: String::new(),
            role: Role::Unspecified,
            parts: vec![],
            metadata: None,
            extensions: vec![],
            reference_task_ids: vec![],
        };
        assert_eq!(
            serde_json::to_value(&message).unwrap(),
            json!({"messageId": "m", "role": "ROLE_UNSPECIFIED", "parts": []})
        );
        // §3.1.4: `nextPageToken` MUST always be present, "" on the last page.
        assert_eq!(
            serde_json::to_value(ListTasksResponse::default()).unwrap(),
            json!({"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0})
        );
    }

    #[test]
    fn required_identifiers_must_be_present() {
        let e = read::<Message>(json!({"role": "ROLE_USER", "parts": []})).unwrap_err();
        assert!(e.contains("missing field `messageId`"), "{e}");
        let e = read::<Task>(json!({"id": "t"})).unwrap_err();
        assert!(e.contains("missing field `status`"), "{e}");
        // §6.2's stream example omits `contextId` from its events, which the proto requires.
        let e = read::<TaskStatusUpdateEvent>(
            json!({"taskId": "task-uuid", "status": {"state": "TASK_STATE_COMPLETED"}}),
        )
        .unwrap_err();
        assert!(e.contains("missing field `contextId`"), "{e}");
    }

    // ---- Streaming (§4.2, §3.2.3, §4.3.3; examples §6.2, §6.6) ----

    #[test]
    fn status_update_event_golden() {
        // §6.6, the notification the server posts to the webhook.
        let json = json!({"statusUpdate": {
            "taskId": "43667960-d455-4453-b0cf-1bae4955270d",
            "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2024-03-15T18:30:00Z"}
        }});
        let StreamResponse::StatusUpdate(event) = golden::<StreamResponse>(json.clone()) else {
            panic!("not a status update")
        };
        assert_eq!(serde_json::to_value(&event).unwrap(), json["statusUpdate"]);
    }

    #[test]
    fn artifact_update_event_golden() {
        // §6.2's artifactUpdate, with the `contextId` and `artifactId` the proto requires and the
        // chunking flags of §4.2.2.
        let json = json!({"artifactUpdate": {
            "taskId": "task-uuid",
            "contextId": "context-uuid",
            "artifact": {"artifactId": "report", "parts": [{"text": "# Climate Change Report\n\n"}]},
            "append": true,
            "lastChunk": true,
            "metadata": {"seq": 2}
        }});
        let StreamResponse::ArtifactUpdate(event) = golden::<StreamResponse>(json.clone()) else {
            panic!("not an artifact update")
        };
        assert!(event.append && event.last_chunk);
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            json["artifactUpdate"]
        );
    }

    #[test]
    fn stream_response_is_discriminated_by_its_member_name() {
        // §4.3.3 lists the four members; §6.2 opens a stream with a task.
        let task = golden::<StreamResponse>(
            json!({"task": {"id": "task-uuid", "status": {"state": "TASK_STATE_WORKING"}}}),
        );
        assert!(matches!(task, StreamResponse::Task(_)));
        let message = golden::<StreamResponse>(json!({"message": {
            "messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "done"}]
        }}));
        assert!(matches!(message, StreamResponse::Message(_)));
        assert!(read::<StreamResponse>(json!({"kind": "status-update"})).is_err());
    }

    // ---- Requests and responses (§3.2, §9.4, §11.4; examples §6.1, §6.5, §6.6) ----

    #[test]
    fn send_message_request_golden() {
        // §6.6, a send that asks for push notifications.
        let request = golden::<SendMessageRequest>(json!({
            "message": {
                "role": "ROLE_USER",
                "parts": [{"text": "Generate the Q1 sales report. This usually takes a while. Notify me when it's ready."}],
                "messageId": "6dbc13b5-bd57-4c2b-b503-24e381b6c8d6"
            },
            "configuration": {
                "taskPushNotificationConfig": {
                    "url": "https://client.example.com/webhook/a2a-notifications",
                    "authentication": {"scheme": "Bearer", "credentials": "secure-client-token-for-task-aaa"}
                }
            }
        }));
        let config = request.configuration.unwrap();
        assert_eq!(
            config.task_push_notification_config.unwrap().authentication,
            Some(AuthenticationInfo {
                scheme: "Bearer".into(),
                credentials: "secure-client-token-for-task-aaa".into()
            })
        );
        // §11.4, with accepted output modes; and every proto field.
        golden::<SendMessageRequest>(json!({
            "message": {"messageId": "uuid", "role": "ROLE_USER", "parts": [{"text": "Hello"}]},
            "configuration": {"acceptedOutputModes": ["text/plain"]}
        }));
        golden::<SendMessageRequest>(json!({
            "tenant": "acme",
            "message": {"messageId": "uuid", "role": "ROLE_USER", "parts": [{"text": "Hello"}]},
            "configuration": {
                "acceptedOutputModes": ["text/plain", "application/json"],
                "historyLength": 0,
                "returnImmediately": true
            },
            "metadata": {"trace": "x"}
        }));
    }

    #[test]
    fn send_configuration_has_return_immediately_and_no_blocking() {
        // proto SendMessageConfiguration: `bool return_immediately = 4` and
        // `task_push_notification_config = 2`; 0.3's `blocking` and §5.5's `pushNotificationConfig`
        // are unknown fields, ignored.
        let config = read::<SendMessageConfiguration>(json!({
            "blocking": false,
            "pushNotificationConfig": {"url": "https://example.com/hook"},
            "returnImmediately": true
        }))
        .unwrap();
        assert_eq!(
            config,
            SendMessageConfiguration {
                return_immediately: true,
                ..SendMessageConfiguration::default()
            }
        );
        assert_eq!(
            serde_json::to_value(&config).unwrap(),
            json!({"returnImmediately": true})
        );
    }

    #[test]
    fn send_message_response_golden() {
        // §6.1 and §11.4 responses; §9.4.1 "contains one of task, message".
        let response = golden::<SendMessageResponse>(json!({"task": {
            "id": "task-uuid", "contextId": "context-uuid", "status": {"state": "TASK_STATE_COMPLETED"}
        }}));
        assert!(matches!(response, SendMessageResponse::Task(_)));
        let response = golden::<SendMessageResponse>(json!({"message": {
            "messageId": "m", "contextId": "c", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]
        }}));
        assert!(matches!(response, SendMessageResponse::Message(_)));
    }

    #[test]
    fn task_operation_requests_golden() {
        // §9.4.3 GetTask params.
        let get = golden::<GetTaskRequest>(json!({"id": "task-uuid", "historyLength": 10}));
        assert_eq!(get.history_length, Some(10));
        golden::<GetTaskRequest>(json!({"tenant": "acme", "id": "task-uuid", "historyLength": 0}));
        // §9.4.4 ListTasks params, and the remaining proto fields.
        let list = golden::<ListTasksRequest>(json!({
            "contextId": "context-uuid",
            "status": "TASK_STATE_WORKING",
            "pageSize": 50,
            "pageToken": "cursor-token"
        }));
        assert_eq!(list.status, TaskState::Working);
        golden::<ListTasksRequest>(json!({
            "tenant": "acme",
            "historyLength": 3,
            "statusTimestampAfter": "2023-10-27T10:00:00Z",
            "includeArtifacts": false
        }));
        golden::<ListTasksRequest>(json!({}));
        // §9.4.5 CancelTask and §9.4.6 SubscribeToTask params.
        golden::<CancelTaskRequest>(json!({"id": "task-uuid"}));
        golden::<CancelTaskRequest>(
            json!({"tenant": "acme", "id": "task-uuid", "metadata": {"why": "x"}}),
        );
        golden::<SubscribeToTaskRequest>(json!({"id": "task-uuid"}));
        golden::<SubscribeToTaskRequest>(json!({"tenant": "acme", "id": "task-uuid"}));
        // §9.4.8 GetExtendedAgentCard has no params; the proto's only field is `tenant`.
        golden::<GetExtendedAgentCardRequest>(json!({}));
        golden::<GetExtendedAgentCardRequest>(json!({"tenant": "acme"}));
    }

    #[test]
    fn list_tasks_response_golden() {
        // §6.5, both responses.
        let page = golden::<ListTasksResponse>(json!({
            "tasks": [{
                "id": "3f36680c-7f37-4a5f-945e-d78981fafd36",
                "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
                "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2024-03-15T10:15:00Z"}
            }],
            "totalSize": 5,
            "pageSize": 10,
            "nextPageToken": ""
        }));
        assert_eq!((page.total_size, page.page_size), (5, 10));
        golden::<ListTasksResponse>(json!({
            "tasks": [],
            "totalSize": 15,
            "pageSize": 10,
            "nextPageToken": "base64-encoded-next-cursor-token"
        }));
    }

    #[test]
    fn push_notification_config_types_golden() {
        // §3.1.7-§3.1.10 (tables of the proto messages) and §6.6's config and authentication.
        golden::<TaskPushNotificationConfig>(json!({
            "url": "https://client.example.com/webhook/a2a-notifications",
            "authentication": {"scheme": "Bearer", "credentials": "secure-client-token-for-task-aaa"}
        }));
        let config = golden::<CreateTaskPushNotificationConfigRequest>(json!({
            "tenant": "acme",
            "id": "cfg-1",
            "taskId": "task-uuid",
            "url": "https://client.example.com/webhook",
            "token": "session-token",
            "authentication": {"scheme": "Basic"}
        }));
        assert_eq!(config.task_id, "task-uuid");
        golden::<AuthenticationInfo>(json!({"scheme": "Bearer", "credentials": "t"}));
        golden::<GetTaskPushNotificationConfigRequest>(
            json!({"taskId": "task-uuid", "id": "cfg-1"}),
        );
        golden::<DeleteTaskPushNotificationConfigRequest>(
            json!({"tenant": "acme", "taskId": "task-uuid", "id": "cfg-1"}),
        );
        golden::<ListTaskPushNotificationConfigsRequest>(json!({"taskId": "task-uuid"}));
        golden::<ListTaskPushNotificationConfigsRequest>(
            json!({"tenant": "acme", "taskId": "task-uuid", "pageSize": 10, "pageToken": "p"}),
        );
        golden::<ListTaskPushNotificationConfigsResponse>(json!({
            "configs": [{"id": "cfg-1", "taskId": "task-uuid", "url": "https://client.example.com/webhook"}],
            "nextPageToken": "p2"
        }));
        golden::<ListTaskPushNotificationConfigsResponse>(json!({}));
    }

    // ---- Agent card (§4.4, §4.5, §5.8, §8.5, §6.9) ----

    #[test]
    fn agent_card_golden() {
        // §8.5 "Sample Agent Card" (descriptions and the second skill shortened), except that its
        // `"security": [{"google": [..]}]` is written as the proto's `securityRequirements`
        // (repeated SecurityRequirement, each a map<string, StringList> named `schemes`).
        let card = golden::<AgentCard>(json!({
            "name": "GeoSpatial Route Planner Agent",
            "description": "Provides advanced route planning, traffic analysis, and custom map generation services.",
            "supportedInterfaces": [
                {"url": "https://georoute-agent.example.com/a2a/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "https://georoute-agent.example.com/a2a/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
                {"url": "https://georoute-agent.example.com/a2a/json", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
            ],
            "provider": {"organization": "Example Geo Services Inc.", "url": "https://www.examplegeoservices.com"},
            "iconUrl": "https://georoute-agent.example.com/icon.png",
            "version": "1.2.0",
            "documentationUrl": "https://docs.examplegeoservices.com/georoute-agent/api",
            "capabilities": {"streaming": true, "pushNotifications": true, "extendedAgentCard": true},
            "securitySchemes": {
                "google": {"openIdConnectSecurityScheme": {
                    "openIdConnectUrl": "https://accounts.google.com/.well-known/openid-configuration"
                }}
            },
            "securityRequirements": [{"schemes": {"google": {"list": ["openid", "profile", "email"]}}}],
            "defaultInputModes": ["application/json", "text/plain"],
            "defaultOutputModes": ["application/json", "image/png"],
            "skills": [{
                "id": "route-optimizer-traffic",
                "name": "Traffic-Aware Route Optimizer",
                "description": "Calculates the optimal driving route between two or more locations.",
                "tags": ["maps", "routing", "navigation", "directions", "traffic"],
                "examples": ["Plan a route from '1600 Amphitheatre Parkway, Mountain View, CA' to 'San Francisco International Airport' avoiding tolls."],
                "inputModes": ["application/json", "text/plain"],
                "outputModes": ["application/json", "application/vnd.geo+json", "text/html"]
            }],
            "signatures": [{
                "protected": "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpPU0UiLCJraWQiOiJrZXktMSIsImprdSI6Imh0dHBzOi8vZXhhbXBsZS5jb20vYWdlbnQvandrcy5qc29uIn0",
                "signature": "QFdkNLNszlGj3z3u0YQGt_T9LixY3qtdQpZmsTdDHDe3fXV9y9-B3m2-XgCpzuhiLt8E0tV6HXoZKHv4GtHgKQ"
            }]
        }));
        assert_eq!(card.supported_interfaces[1].protocol_binding, "GRPC");
        assert!(matches!(
            card.security_schemes["google"],
            SecurityScheme::OpenIdConnect(_)
        ));
    }

    #[test]
    fn agent_card_parts_golden() {
        // §5.8, a custom binding's interface; `tenant` from the proto.
        golden::<AgentInterface>(json!({
            "url": "wss://agent.example.com/a2a/websocket",
            "protocolBinding": "https://example.com/bindings/websocket/v1",
            "tenant": "acme",
            "protocolVersion": "1.0"
        }));
        // §4.4.3-§4.4.5, §4.4.7: every proto field.
        golden::<AgentCapabilities>(json!({
            "streaming": false,
            "pushNotifications": false,
            "extensions": [{
                "uri": "https://example.com/extensions/geolocation/v1",
                "description": "Location data",
                "required": true,
                "params": {"precision": "city"}
            }],
            "extendedAgentCard": false
        }));
        golden::<AgentCapabilities>(json!({}));
        golden::<AgentProvider>(json!({"url": "https://ai.google.dev", "organization": "Google"}));
        golden::<AgentSkill>(json!({
            "id": "s",
            "name": "S",
            "description": "d",
            "tags": [],
            "securityRequirements": [{"schemes": {"bearer": {}}}]
        }));
        golden::<AgentCardSignature>(
            json!({"protected": "eyJhbGciOiJFUzI1NiJ9", "signature": "c2ln", "header": {"kid": "key-1"}}),
        );
    }

    #[test]
    fn security_schemes_golden() {
        // §4.5 (tables of the proto messages); §6.9 for OpenID Connect.
        let schemes = [
            json!({"apiKeySecurityScheme": {"description": "key", "location": "header", "name": "X-API-Key"}}),
            json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}),
            json!({"openIdConnectSecurityScheme": {
                "openIdConnectUrl": "https://accounts.google.com/.well-known/openid-configuration"
            }}),
            json!({"mtlsSecurityScheme": {}}),
            json!({"oauth2SecurityScheme": {
                "flows": {"authorizationCode": {
                    "authorizationUrl": "https://auth.example.com/authorize",
                    "tokenUrl": "https://auth.example.com/token",
                    "refreshUrl": "https://auth.example.com/refresh",
                    "scopes": {"read": "Read access"},
                    "pkceRequired": true
                }},
                "oauth2MetadataUrl": "https://auth.example.com/.well-known/oauth-authorization-server"
            }}),
            json!({"oauth2SecurityScheme": {"flows": {"clientCredentials": {
                "tokenUrl": "https://auth.example.com/token", "scopes": {}
            }}}}),
            json!({"oauth2SecurityScheme": {"flows": {"deviceCode": {
                "deviceAuthorizationUrl": "https://auth.example.com/device",
                "tokenUrl": "https://auth.example.com/token",
                "scopes": {"read": "Read access"}
            }}}}),
            json!({"oauth2SecurityScheme": {"flows": {"implicit": {
                "authorizationUrl": "https://auth.example.com/authorize", "scopes": {"read": "Read access"}
            }}}}),
            json!({"oauth2SecurityScheme": {"flows": {"password": {
                "tokenUrl": "https://auth.example.com/token"
            }}}}),
        ];
        for scheme in schemes {
            golden::<SecurityScheme>(scheme);
        }
        // A oneof sets one member.
        assert!(read::<SecurityScheme>(json!({
            "mtlsSecurityScheme": {},
            "httpAuthSecurityScheme": {"scheme": "Bearer"}
        }))
        .is_err());
    }

    #[test]
    fn types_only_seen_inside_others_golden() {
        // §4.1.7 Artifact and §4.1.2 TaskStatus with every field; §4.3 SendMessageConfiguration
        // with every field (historyLength 0 is set, not absent: the proto field is `optional`).
        golden::<Artifact>(json!({
            "artifactId": "a1",
            "name": "answer.txt",
            "description": "the answer",
            "parts": [{"text": "42"}],
            "metadata": {"k": 1},
            "extensions": ["https://example.com/ext/v1"]
        }));
        golden::<TaskStatus>(json!({
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "Your answer?"}]},
            "timestamp": "2025-10-28T10:30:00Z"
        }));
        golden::<SendMessageConfiguration>(json!({
            "acceptedOutputModes": ["text/plain"],
            "taskPushNotificationConfig": {"url": "https://example.com/hook", "token": "t"},
            "historyLength": 0,
            "returnImmediately": true
        }));
        // §4.5 SecurityRequirement: scheme name to StringList; an empty list is `{}`.
        golden::<SecurityRequirement>(
            json!({"schemes": {"oauth": {"list": ["read", "write"]}, "key": {}}}),
        );
        golden::<StringList>(json!({"list": ["a"]}));
        golden::<AgentExtension>(json!({"uri": "https://example.com/ext/v1"}));
    }

    #[test]
    fn a_security_scheme_with_0_3_members_beside_its_oneof_reads_as_the_oneof() {
        // What cards served for both versions hold (the official Python SDK's, radkit's).
        let scheme = read::<SecurityScheme>(json!({
            "httpAuthSecurityScheme": {"scheme": "Bearer"},
            "type": "http",
            "scheme": "Bearer"
        }))
        .unwrap();
        assert_eq!(
            scheme,
            SecurityScheme::HttpAuth(HttpAuthSecurityScheme {
                description: String::new(),
                scheme: "Bearer".into(),
                bearer_format: String::new()
            })
        );
        // A 0.3 scheme alone has no 1.0 member: refused, naming the members.
        let e = read::<SecurityScheme>(json!({"type": "http", "scheme": "bearer"})).unwrap_err();
        assert!(e.contains("httpAuthSecurityScheme"), "{e}");
        let e =
            read::<SecurityScheme>(json!({"mtlsSecurityScheme": {"description": 5}})).unwrap_err();
        assert!(e.contains("`mtlsSecurityScheme`"), "{e}");
    }

    // ---- Conversions to and from the 0.3 model ----

    /// A 0.3 message with every part kind and every optional field.
    fn old_message(role: &str) -> old::Message {
        serde_json::from_value(json!({
            "kind": "message",
            "role": role,
            "messageId": "m1",
            "contextId": "c1",
            "taskId": "t1",
            "referenceTaskIds": ["t0"],
            "extensions": ["https://example.com/ext/v1"],
            "metadata": {"k": 1},
            "parts": [
                {"kind": "text", "text": "hi", "metadata": {"a": true}},
                {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "hi.txt"}},
                {"kind": "file", "file": {"uri": "https://example.com/a.png", "mimeType": "image/png"}},
                {"kind": "data", "data": {"x": [1, 2]}, "metadata": {"b": 2}}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn a_0_3_message_with_every_part_kind_survives_v1_and_back() {
        for role in ["user", "agent"] {
            let message = old_message(role);
            let v1 = Message::try_from(message.clone()).unwrap();
            assert_eq!(old::Message::try_from(v1).unwrap(), message);
        }
    }

    #[test]
    fn a_0_3_message_converts_to_the_v1_shape() {
        let v1 = Message::try_from(old_message("user")).unwrap();
        assert_eq!(
            serde_json::to_value(&v1).unwrap(),
            json!({
                "messageId": "m1",
                "contextId": "c1",
                "taskId": "t1",
                "role": "ROLE_USER",
                "parts": [
                    {"text": "hi", "metadata": {"a": true}},
                    {"raw": "aGk=", "filename": "hi.txt", "mediaType": "text/plain"},
                    {"url": "https://example.com/a.png", "mediaType": "image/png"},
                    {"data": {"x": [1, 2]}, "metadata": {"b": 2}}
                ],
                "metadata": {"k": 1},
                "extensions": ["https://example.com/ext/v1"],
                "referenceTaskIds": ["t0"]
            })
        );
    }

    #[test]
    fn a_0_3_task_with_history_artifacts_and_every_part_kind_survives_v1_and_back() {
        let message = serde_json::to_value(old_message("agent")).unwrap();
        let task: old::Task = serde_json::from_value(json!({
            "kind": "task",
            "id": "t1",
            "contextId": "c1",
            "status": {"state": "input-required", "message": message, "timestamp": "2025-10-28T10:30:00.000Z"},
            "history": [serde_json::to_value(old_message("user")).unwrap(), message],
            "artifacts": [{
                "artifactId": "a1",
                "name": "report",
                "description": "the report",
                "parts": message["parts"],
                "metadata": {"m": 1},
                "extensions": ["https://example.com/ext/v1"]
            }],
            "metadata": {"owner": "me"}
        }))
        .unwrap();
        let v1 = Task::try_from(task.clone()).unwrap();
        assert_eq!(v1.status.state, TaskState::InputRequired);
        assert_eq!(old::Task::try_from(v1).unwrap(), task);
    }

    #[test]
    fn every_0_3_task_state_but_unknown_survives_v1_and_back() {
        for state in old::TaskState::ALL {
            if state == old::TaskState::Unknown {
                continue;
            }
            let v1 = TaskState::try_from(state).unwrap();
            assert_eq!(old::TaskState::try_from(v1), Ok(state));
        }
    }

    #[test]
    fn the_0_3_update_events_survive_v1_and_back() {
        let status: old::TaskStatusUpdateEvent = serde_json::from_value(json!({
            "kind": "status-update",
            "taskId": "t1",
            "contextId": "c1",
            "status": {"state": "completed", "timestamp": "2025-10-28T10:30:00Z"},
            "final": true,
            "metadata": {"k": 1}
        }))
        .unwrap();
        let v1 = TaskStatusUpdateEvent::try_from(status.clone()).unwrap();
        assert_eq!(old::TaskStatusUpdateEvent::try_from(v1).unwrap(), status);

        let artifact: old::TaskArtifactUpdateEvent = serde_json::from_value(json!({
            "kind": "artifact-update",
            "taskId": "t1",
            "contextId": "c1",
            "artifact": {"artifactId": "a1", "parts": old_message("agent").parts},
            "append": true,
            "lastChunk": true,
            "metadata": {"k": 1}
        }))
        .unwrap();
        let v1 = TaskArtifactUpdateEvent::try_from(artifact.clone()).unwrap();
        assert!(v1.append && v1.last_chunk);
        assert_eq!(
            old::TaskArtifactUpdateEvent::try_from(v1).unwrap(),
            artifact
        );
    }

    #[test]
    fn a_v1_status_update_is_final_in_0_3_when_a_v1_stream_would_close() {
        for (state, is_final) in [
            (TaskState::Submitted, false),
            (TaskState::Working, false),
            (TaskState::InputRequired, true),
            (TaskState::AuthRequired, true),
            (TaskState::Completed, true),
            (TaskState::Failed, true),
            (TaskState::Canceled, true),
            (TaskState::Rejected, true),
        ] {
            let event = TaskStatusUpdateEvent {
                task_id: "t".into(),
                context_id: "c".into(),
                status: TaskStatus {
                    state,
                    message: None,
                    timestamp: None,
                },
                metadata: None,
            };
            let old = old::TaskStatusUpdateEvent::try_from(event).unwrap();
            assert_eq!(old.is_final, is_final, "{state:?}");
        }
    }

    #[test]
    fn values_without_a_counterpart_are_typed_errors_naming_the_field() {
        let message = |role: &str, part: Value| {
            read::<Message>(json!({"messageId": "m", "role": role, "parts": [part]})).unwrap()
        };
        let e = old::Message::try_from(message("ROLE_UNSPECIFIED", json!({"text": "x"})));
        assert_eq!(
            e,
            Err(V1Error::Unspecified {
                field: "Message.role"
            })
        );
        assert!(e.unwrap_err().to_string().contains("`Message.role`"));
        assert_eq!(
            old::Message::try_from(message("ROLE_USER", json!({"data": [1]}))),
            Err(V1Error::DataNotObject { field: "Part.data" })
        );
        assert_eq!(
            old::Message::try_from(message("ROLE_USER", json!({"filename": "a"}))),
            Err(V1Error::NoContent {
                field: "Part.content"
            })
        );
        let task = read::<Task>(json!({"id": "t", "status": {"state": "TASK_STATE_UNSPECIFIED"}}))
            .unwrap();
        assert_eq!(
            old::Task::try_from(task),
            Err(V1Error::Unspecified {
                field: "TaskStatus.state"
            })
        );

        assert_eq!(
            TaskState::try_from(old::TaskState::Unknown),
            Err(V1Error::UnknownState {
                field: "TaskStatus.state"
            })
        );
        let bad_bytes: old::Part =
            serde_json::from_value(json!({"kind": "file", "file": {"bytes": "not base64!"}}))
                .unwrap();
        let e = Part::try_from(bad_bytes).unwrap_err();
        assert!(
            matches!(
                e,
                V1Error::InvalidBase64 {
                    field: "file.bytes",
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn a_v1_text_part_loses_media_type_and_filename_in_0_3() {
        let part =
            read::<Part>(json!({"text": "# hi", "mediaType": "text/markdown", "filename": "a.md"}))
                .unwrap();
        assert_eq!(old::Part::try_from(part), Ok(old::Part::text("# hi")));
        let part = read::<Part>(json!({"url": "https://example.com/a", "filename": "a"})).unwrap();
        assert_eq!(
            serde_json::to_value(old::Part::try_from(part).unwrap()).unwrap(),
            json!({"kind": "file", "file": {"uri": "https://example.com/a", "name": "a"}})
        );
    }
}
