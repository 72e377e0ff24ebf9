//! Tool calling by models, as the journal keeps it: the tool calls a model asked for, and the turns
//! of a tool-calling conversation after its prompt. A model call offering tools is one journaled
//! `llm` command per round (its `turns` say what came before), and each tool call it asks for is
//! its own journaled `tool` command ([`crate::flow::LlmCall::tools`]).

use serde::{Deserialize, Serialize};

/// A tool call a model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    /// The provider's id of the call (made up from its position when the provider gives none).
    pub id: String,
    /// The registered tool name.
    pub name: String,
    /// The arguments (a JSON object).
    pub arguments: serde_json::Value,
}

/// One turn after the prompt in a tool-calling conversation, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "turn", rename_all = "snake_case")]
pub enum Turn {
    /// The model asked for these calls (saying `text` beside them, if anything).
    Calls {
        /// The calls, in the order the model gave them.
        calls: Vec<ToolCallRequest>,
        /// What the model said with them.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        text: String,
    },
    /// The result of call `id` of tool `name`: its output, or (`error`) the error it failed with.
    Result {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// What the tool returned, or the error's message.
        output: serde_json::Value,
        /// The call failed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        error: bool,
    },
}

/// The results of `turns` that answer the calls of the turn before them, grouped with those calls:
/// `(calls and text, results)` pairs, oldest first. Providers that want each round as one message
/// of calls and one of results render these.
pub fn rounds(turns: &[Turn]) -> Vec<(&[ToolCallRequest], &str, Vec<&Turn>)> {
    let mut out: Vec<(&[ToolCallRequest], &str, Vec<&Turn>)> = Vec::new();
    for turn in turns {
        match turn {
            Turn::Calls { calls, text } => out.push((calls, text, Vec::new())),
            result @ Turn::Result { .. } => {
                if let Some(last) = out.last_mut() {
                    last.2.push(result);
                }
            }
        }
    }
    out
}
