//! A2A 0.3 `Message` and `Part`.

use serde::{Deserialize, Serialize};

use crate::model::Metadata;

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The client.
    User,
    /// The agent.
    Agent,
}

/// A file, either inline (base64 `bytes`) or by `uri`; never both (the A2A schema's `FileWithBytes`
/// and `FileWithUri`), so a file with both is refused rather than one of them dropped.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FileContent {
    /// Inline base64 content.
    Bytes {
        /// Base64-encoded content.
        bytes: String,
        /// MIME type.
        #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// File name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// Content by reference.
    Uri {
        /// Where the file lives.
        uri: String,
        /// MIME type.
        #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// File name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
}

impl<'de> Deserialize<'de> for FileContent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Either {
            #[serde(default)]
            bytes: Option<String>,
            #[serde(default)]
            uri: Option<String>,
            #[serde(rename = "mimeType", default)]
            mime_type: Option<String>,
            #[serde(default)]
            name: Option<String>,
        }
        let Either {
            bytes,
            uri,
            mime_type,
            name,
        } = Either::deserialize(deserializer)?;
        match (bytes, uri) {
            (Some(bytes), None) => Ok(FileContent::Bytes {
                bytes,
                mime_type,
                name,
            }),
            (None, Some(uri)) => Ok(FileContent::Uri {
                uri,
                mime_type,
                name,
            }),
            (Some(_), Some(_)) => Err(serde::de::Error::custom(
                "`file` has both `bytes` and `uri`; send one of them",
            )),
            (None, None) => Err(serde::de::Error::custom(
                "`file` has neither `bytes` nor `uri`; send one of them",
            )),
        }
    }
}

/// One piece of content: text, file or structured data (`kind` discriminates).
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
        file: FileContent,
        /// Part metadata.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Metadata>,
    },
    /// A JSON object.
    Data {
        /// The data (a JSON object per the schema).
        data: serde_json::Map<String, serde_json::Value>,
        /// Part metadata.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Metadata>,
    },
}

/// One turn of communication between client and agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// Sender.
    pub role: Role,
    /// Content.
    pub parts: Vec<Part>,
    /// Unique id, chosen by the sender.
    pub message_id: String,
    /// The task this message belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The context (conversation) id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// Tasks this message refers to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_task_ids: Option<Vec<String>>,
    /// Extension URIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<String>>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Always `"message"`.
    #[serde(default = "message_kind")]
    pub kind: MessageKind,
}

/// The constant `kind` discriminator of a message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MessageKind {
    /// `"message"`
    #[default]
    #[serde(rename = "message")]
    Message,
}

fn message_kind() -> MessageKind {
    MessageKind::Message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(file: serde_json::Value) -> Result<Part, serde_json::Error> {
        serde_json::from_value(serde_json::json!({ "kind": "file", "file": file }))
    }

    #[test]
    fn a_file_is_bytes_or_a_uri_and_never_both() {
        let bytes = part(serde_json::json!({ "bytes": "aGk=", "mimeType": "text/plain" })).unwrap();
        assert_eq!(
            bytes,
            Part::File {
                file: FileContent::Bytes {
                    bytes: "aGk=".to_owned(),
                    mime_type: Some("text/plain".to_owned()),
                    name: None
                },
                metadata: None
            }
        );
        let uri = part(serde_json::json!({ "uri": "https://example.com/a", "name": "a" })).unwrap();
        assert!(matches!(
            &uri,
            Part::File { file: FileContent::Uri { uri, name: Some(name), .. }, .. }
                if uri == "https://example.com/a" && name == "a"
        ));
        for p in [&bytes, &uri] {
            let text = serde_json::to_value(p).unwrap();
            assert_eq!(&serde_json::from_value::<Part>(text).unwrap(), p);
        }
        let both = part(serde_json::json!({ "bytes": "aGk=", "uri": "https://example.com/a" }))
            .unwrap_err()
            .to_string();
        assert!(both.contains("`file` has both `bytes` and `uri`"), "{both}");
        let neither = part(serde_json::json!({ "name": "a" }))
            .unwrap_err()
            .to_string();
        assert!(neither.contains("neither `bytes` nor `uri`"), "{neither}");
    }
}
