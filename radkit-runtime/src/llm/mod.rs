//! Model providers. The engine calls a [`Model`] to perform an `llm` command; the model never sees the
//! journal, and its answer becomes the command's receipt. [`ScriptedModel`] is always here;
//! `OpenAiModel`, an OpenAI-compatible endpoint, comes with the `openai` cargo feature.
//!
//! The HTTP providers stream natively ([`Model::stream`]): each speaks its provider's streaming
//! form, sends the answer's text to [`Tokens`] as it arrives, and returns the answer `complete`
//! would have returned for it.

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

/// Where a streamed model call sends its text while the model generates it (see
/// [`Model::stream`]). The engine hands one to each attempt of a call a step asked to stream
/// (`ctx.llm(..).stream_artifact(..)` / `.stream_status()`) and relays what it is sent to the
/// task's live subscribers; nothing sent here is journaled (the answer the model returns is the
/// receipt). Sending never blocks: a subscriber that does not keep up misses chunks, never the
/// journaled answer.
#[derive(Clone, Default)]
pub struct Tokens {
    sink: Option<std::sync::Arc<TokenSink>>,
}

/// What [`Tokens`] sends each piece to.
type TokenSink = dyn Fn(&str) + Send + Sync;

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("live", &self.is_live())
            .finish()
    }
}

impl Tokens {
    /// Nowhere: what is sent is dropped (a call not streamed, a host without live subscribers).
    pub fn none() -> Self {
        Tokens::default()
    }

    /// Each piece of text to `sink`, in the order it is sent.
    pub fn new(sink: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Tokens {
            sink: Some(std::sync::Arc::new(sink)),
        }
    }

    /// Send the next piece of the answer's text (empty pieces are skipped).
    pub fn send(&self, text: &str) {
        if let (Some(sink), false) = (&self.sink, text.is_empty()) {
            sink(text);
        }
    }

    /// True when what is sent goes somewhere.
    pub fn is_live(&self) -> bool {
        self.sink.is_some()
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

    /// Answer one request, sending the answer's text to `tokens` as it is generated, and return
    /// the whole answer as [`complete`](Self::complete) does (it becomes the receipt). Called for
    /// the calls a step asked to stream; a model that cannot stream keeps this default, which
    /// answers with `complete` and sends nothing (the client then sees the answer when it is
    /// journaled). An attempt that fails after sending text is retried like any other: the next
    /// attempt's text replaces it for the client.
    async fn stream(
        &self,
        request: LlmRequest,
        tokens: &Tokens,
    ) -> Result<LlmResponse, EffectError> {
        let _ = tokens;
        self.complete(request).await
    }
}

/// A shared model is a model (what [`from_env`] and [`from_spec`] return).
#[async_trait]
impl Model for std::sync::Arc<dyn Model> {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, EffectError> {
        (**self).complete(request).await
    }

    async fn stream(
        &self,
        request: LlmRequest,
        tokens: &Tokens,
    ) -> Result<LlmResponse, EffectError> {
        (**self).stream(request, tokens).await
    }
}
