//! [`Message`] and [`Part`]: one turn of communication and its pieces of content, as the engine,
//! the journal and steps hold them.
//!
//! Their serde form is the journal's: what radkit has always written (it began as A2A 0.3's JSON:
//! parts tagged by `kind`, inline file bytes as base64), so journals written by earlier versions read
//! unchanged. It is not a wire format: the servers and the client write and read
//! [`v0_3`](super::v0_3) and [`v1`](super::v1), which convert from and to these types.

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use super::{new_id, Metadata};

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The client.
    User,
    /// The agent.
    Agent,
}

/// Where a file's content is: inline, or at a URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileContent {
    /// The content itself.
    Bytes(Vec<u8>),
    /// Where the content lives (a URL).
    Uri(String),
}

/// A file: its content or where it lives, with its media type and name when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// The content, or where it is.
    pub content: FileContent,
    /// Media (MIME) type, e.g. `application/pdf`.
    pub media_type: Option<String>,
    /// File name, e.g. `invoice.pdf`.
    pub name: Option<String>,
}

impl File {
    /// A file held inline.
    pub fn bytes(bytes: impl Into<Vec<u8>>, media_type: Option<String>) -> Self {
        File {
            content: FileContent::Bytes(bytes.into()),
            media_type,
            name: None,
        }
    }

    /// A file at a URI.
    pub fn uri(uri: impl Into<String>, media_type: Option<String>) -> Self {
        File {
            content: FileContent::Uri(uri.into()),
            media_type,
            name: None,
        }
    }

    /// The file with a name.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

/// One piece of content: text, a file, or a JSON object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Part {
    /// Plain text.
    Text {
        /// The text.
        text: String,
        /// Part metadata.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Metadata>,
    },
    /// A file.
    File {
        /// The file.
        #[serde(with = "stored_file")]
        file: File,
        /// Part metadata.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Metadata>,
    },
    /// A JSON object.
    Data {
        /// The object.
        data: serde_json::Map<String, serde_json::Value>,
        /// Part metadata.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Metadata>,
    },
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text {
            text: text.into(),
            metadata: None,
        }
    }

    /// A data part holding a JSON object.
    pub fn data(data: serde_json::Map<String, serde_json::Value>) -> Self {
        Part::Data {
            data,
            metadata: None,
        }
    }

    /// A file part.
    pub fn file(file: File) -> Self {
        Part::File {
            file,
            metadata: None,
        }
    }

    /// The text of a text part.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Part::Text { text, .. } => Some(text),
            _ => None,
        }
    }

    /// The part's media type: `text/plain` for text, `application/json` for data, the file's own
    /// (`application/octet-stream` when it has none).
    pub fn media_type(&self) -> &str {
        match self {
            Part::Text { .. } => "text/plain",
            Part::Data { .. } => "application/json",
            Part::File { file, .. } => file
                .media_type
                .as_deref()
                .unwrap_or("application/octet-stream"),
        }
    }

    /// The part's metadata.
    pub fn metadata(&self) -> Option<&Metadata> {
        match self {
            Part::Text { metadata, .. }
            | Part::File { metadata, .. }
            | Part::Data { metadata, .. } => metadata.as_ref(),
        }
    }
}

/// One turn of communication between a client and an agent.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// Sender.
    pub role: Role,
    /// Content.
    pub parts: Vec<Part>,
    /// Unique id, chosen by the sender.
    pub message_id: String,
    /// The task this message belongs to.
    #[serde(default)]
    pub task_id: Option<String>,
    /// The context (conversation) id.
    #[serde(default)]
    pub context_id: Option<String>,
    /// Tasks this message refers to.
    #[serde(default, deserialize_with = "stored_list")]
    pub reference_task_ids: Vec<String>,
    /// URIs of the extensions this message uses.
    #[serde(default, deserialize_with = "stored_list")]
    pub extensions: Vec<String>,
    /// Metadata.
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

/// Writes a message as the journal always has, `"kind": "message"` included (readers ignore it).
impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Message", 9)?;
        s.serialize_field("role", &self.role)?;
        s.serialize_field("parts", &self.parts)?;
        s.serialize_field("messageId", &self.message_id)?;
        if let Some(task_id) = &self.task_id {
            s.serialize_field("taskId", task_id)?;
        }
        if let Some(context_id) = &self.context_id {
            s.serialize_field("contextId", context_id)?;
        }
        if !self.reference_task_ids.is_empty() {
            s.serialize_field("referenceTaskIds", &self.reference_task_ids)?;
        }
        if !self.extensions.is_empty() {
            s.serialize_field("extensions", &self.extensions)?;
        }
        if let Some(metadata) = &self.metadata {
            s.serialize_field("metadata", metadata)?;
        }
        s.serialize_field("kind", "message")?;
        s.end()
    }
}

impl Message {
    /// A message with the given role and parts and a fresh id.
    pub fn new(role: Role, parts: Vec<Part>) -> Self {
        Message {
            role,
            parts,
            message_id: new_id(),
            task_id: None,
            context_id: None,
            reference_task_ids: Vec::new(),
            extensions: Vec::new(),
            metadata: None,
        }
    }

    /// A user message of one text part.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::new(Role::User, vec![Part::text(text)])
    }

    /// An agent message of one text part.
    pub fn agent_text(text: impl Into<String>) -> Self {
        Self::new(Role::Agent, vec![Part::text(text)])
    }

    /// All text parts joined with newlines.
    pub fn joined_texts(&self) -> String {
        joined(&self.parts)
    }
}

pub(crate) fn joined(parts: &[Part]) -> String {
    let mut out = String::new();
    for text in parts.iter().filter_map(Part::as_text) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(text);
    }
    out
}

/// A list the journal wrote only when it had items (never `null`, but read `null` as empty).
pub(crate) fn stored_list<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(deserializer)?.unwrap_or_default())
}

/// Standard base64, padded when written and read with or without padding, in either alphabet (what
/// both wire versions accept).
pub(crate) mod base64_text {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::Engine as _;

    const PADDING_OPTIONAL: GeneralPurposeConfig =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    pub(crate) const STANDARD: GeneralPurpose =
        GeneralPurpose::new(&base64::alphabet::STANDARD, PADDING_OPTIONAL);
    const URL_SAFE: GeneralPurpose =
        GeneralPurpose::new(&base64::alphabet::URL_SAFE, PADDING_OPTIONAL);

    /// Standard base64 with padding.
    pub(crate) fn encode(bytes: &[u8]) -> String {
        STANDARD.encode(bytes)
    }

    /// The standard or the URL-safe alphabet, padded or not.
    pub(crate) fn decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
        STANDARD
            .decode(text)
            .or_else(|e| URL_SAFE.decode(text).map_err(|_| e))
    }
}

/// A file as the journal stores it: `{"bytes": base64 | "uri": ..., "mimeType"?, "name"?}`.
mod stored_file {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{base64_text, File, FileContent};

    #[derive(Serialize, Deserialize)]
    struct Stored {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uri: Option<String>,
        #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    }

    pub(super) fn serialize<S: Serializer>(file: &File, serializer: S) -> Result<S::Ok, S::Error> {
        let (bytes, uri) = match &file.content {
            FileContent::Bytes(bytes) => (Some(base64_text::encode(bytes)), None),
            FileContent::Uri(uri) => (None, Some(uri.clone())),
        };
        Stored {
            bytes,
            uri,
            mime_type: file.media_type.clone(),
            name: file.name.clone(),
        }
        .serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<File, D::Error> {
        let stored = Stored::deserialize(deserializer)?;
        let content = match (stored.bytes, stored.uri) {
            (Some(bytes), None) => FileContent::Bytes(
                base64_text::decode(&bytes)
                    .map_err(|e| serde::de::Error::custom(format!("file bytes: {e}")))?,
            ),
            (None, Some(uri)) => FileContent::Uri(uri),
            _ => {
                return Err(serde::de::Error::custom(
                    "a stored file holds exactly one of `bytes` and `uri`",
                ))
            }
        };
        Ok(File {
            content,
            media_type: stored.mime_type,
            name: stored.name,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_message_is_stored_as_the_journal_always_wrote_it() {
        let stored = json!({
            "role": "agent",
            "parts": [
                { "kind": "text", "text": "hi" },
                { "kind": "file", "file": { "bytes": "aGk=", "mimeType": "text/plain", "name": "a" } },
                { "kind": "file", "file": { "uri": "https://example.com/a" } },
                { "kind": "data", "data": { "n": 1 }, "metadata": { "m": true } }
            ],
            "messageId": "m-1",
            "taskId": "t-1",
            "contextId": "c-1",
            "referenceTaskIds": ["t-0"],
            "kind": "message"
        });
        let message: Message = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(
            message.parts[1],
            Part::File {
                file: File::bytes(b"hi".to_vec(), Some("text/plain".into())).named("a"),
                metadata: None
            }
        );
        assert_eq!(message.reference_task_ids, ["t-0"]);
        assert_eq!(serde_json::to_value(&message).unwrap(), stored);
    }

    #[test]
    fn a_stored_file_with_both_or_neither_content_is_refused() {
        for file in [
            json!({ "bytes": "aGk=", "uri": "u" }),
            json!({ "name": "a" }),
        ] {
            let part = json!({ "kind": "file", "file": file });
            let error = serde_json::from_value::<Part>(part)
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("exactly one of `bytes` and `uri`"),
                "{error}"
            );
        }
    }
}
