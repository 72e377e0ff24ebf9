//! Model providers. The engine calls a [`Model`] to perform an `llm` command; the model never sees the
//! journal, and its answer becomes the command's receipt. [`ScriptedModel`] is always here;
//! `OpenAiModel`, an OpenAI-compatible endpoint, comes with the `openai` cargo feature.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::flow::{EffectError, InvocationId};
pub use crate::flow::{ToolCallRequest, Turn};

#[cfg(feature = "openai")]
mod anthropic;
#[cfg(feature = "openai")]
mod env;
#[cfg(feature = "openai")]
mod gemini;
#[cfg(feature = "openai")]
mod http;
#[cfg(feature = "openai")]
mod ollama;
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
mod openai;
mod scripted;

#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub use anthropic::AnthropicModel;
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub use env::{from_env, from_spec, Provider};
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub use gemini::GeminiModel;
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub use ollama::OllamaModel;
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub use openai::{ConfigError, OpenAiModel};
pub use scripted::{ScriptError, ScriptedModel};

/// One model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmRequest {
    /// The registered model name the step asked for (`ctx.llm("critic")`).
    pub model: String,
    /// The input the step passed.
    pub input: serde_json::Value,
    /// JSON Schema the answer must match (structured output), if any.
    pub schema: Option<serde_json::Value>,
    /// The command's id (an idempotency key for gateways that support one).
    pub invocation_id: InvocationId,
    /// Tools the model may ask for (tool calling), in the order the step offered them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<crate::tools::ToolSchema>,
    /// The conversation after the prompt: the model's earlier tool calls and their results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<Turn>,
}

/// A model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmResponse {
    /// The answer: a JSON string for text, any JSON for structured output.
    pub output: serde_json::Value,
    /// Token usage, recorded on the receipt.
    pub usage: Option<serde_json::Value>,
    /// The tool calls the model asked for instead of answering (then `output` is what it said
    /// beside them, as a string, or null).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRequest>,
}

impl LlmResponse {
    /// The answer `output`, with `usage` if any, and no tool calls.
    pub fn answer(output: serde_json::Value, usage: Option<serde_json::Value>) -> Self {
        LlmResponse {
            output,
            usage,
            tool_calls: Vec::new(),
        }
    }
}

/// A language model.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a radkit model",
    note = "implement `radkit::llm::Model` (one async `complete` method)"
)]
#[async_trait]
pub trait Model: Send + Sync + 'static {
    /// Answer one request. Transient errors (timeouts, 429, 5xx) are retried by the engine.
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, EffectError>;
}

/// A shared model is a model (what [`from_env`] and [`from_spec`] return).
#[async_trait]
impl Model for std::sync::Arc<dyn Model> {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, EffectError> {
        (**self).complete(request).await
    }
}
