//! A2A 1.0.1 wire types in their JSON (ProtoJSON) form, and their conversions from and to radkit's
//! model (`convert.rs`). The servers and the client use it; the engine, the journal and the stores
//! never do.
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
//! radkit's model converts to these with `From` (it never fails) and back with `TryFrom` and
//! [`WireError`](super::WireError): 1.0 has values the model lacks (`*_UNSPECIFIED`, content-less
//! parts, data parts that are not JSON objects). Where 1.0 has a field the model does not, reading
//! drops it, as each impl documents.

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::message::base64_text;
use super::Metadata;

mod convert;

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
                base64_text::decode(&text)
                    .map_err(|e| format!("`raw` is not valid base64: {e}"))?,
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
// Helpers
// ---------------------------------------------------------------------------------------------

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

/// Standard base64 with padding.
fn serialize_base64<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&base64_text::encode(bytes))
}

#[cfg(test)]
mod tests;
