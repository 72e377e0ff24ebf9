//! `Content`: the parts of a message, as a step sees them (the seed API's helper type).

use serde::{Deserialize, Serialize};

use super::message::joined;
use super::{Message, Part, Role};

/// The content of a message: an ordered list of parts. Steps receive the user's message as `Content`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Content {
    parts: Vec<Part>,
}

impl Content {
    /// Content of one text part.
    pub fn from_text(text: impl Into<String>) -> Self {
        Content {
            parts: vec![Part::text(text)],
        }
    }

    /// Content from parts.
    pub fn from_parts(parts: Vec<Part>) -> Self {
        Content { parts }
    }

    /// The parts.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The text parts, in order.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(Part::as_text)
    }

    /// All text parts joined with newlines.
    pub fn joined_texts(&self) -> String {
        joined(&self.parts)
    }

    /// True when there is no part at all.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// An agent message carrying this content.
    pub fn into_agent_message(self) -> Message {
        Message::new(Role::Agent, self.parts)
    }
}

impl From<Message> for Content {
    fn from(message: Message) -> Self {
        Content {
            parts: message.parts,
        }
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Self {
        Content::from_text(text)
    }
}

impl From<String> for Content {
    fn from(text: String) -> Self {
        Content::from_text(text)
    }
}
