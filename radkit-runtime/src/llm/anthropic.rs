//! Anthropic's Messages API (`POST /v1/messages`) over reqwest.
//!
//! A structured answer is asked for the way Anthropic documents for every model: one tool whose
//! `input_schema` is the step's schema, forced with `tool_choice`; the tool call's `input` is the
//! answer. A schema that is not an object (Anthropic's tools take objects) is wrapped in
//! `{"value": ..}` and unwrapped from the answer. Usage (`input_tokens`, `output_tokens`) goes on
//! the receipt. Errors are classified as every HTTP provider's are (`llm/http.rs`): 429 and 529
//! (overloaded) are transient with `retry-after` honoured, 401 and 403 permanent.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::http::{
    self, client, excerpt, function_name, prompt_text, registered_name, result_text, schema_name,
};
use super::{LlmRequest, LlmResponse, Model, ToolCallRequest, Turn};
use crate::flow::tool_calls::rounds;
use crate::flow::EffectError;

/// The API version every request names (`anthropic-version`).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A model behind Anthropic's Messages API. Its `Debug` output never shows the API key.
#[derive(Clone)]
pub struct AnthropicModel {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    system: Option<String>,
    temperature: Option<f64>,
    max_tokens: u32,
}

impl std::fmt::Debug for AnthropicModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicModel")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl AnthropicModel {
    /// `model` (e.g. `claude-sonnet-4-5`) at `https://api.anthropic.com`, answers up to 4096 tokens.
    pub fn new(model: impl Into<String>) -> Self {
        AnthropicModel {
            client: client(Duration::from_secs(120)),
            base_url: "https://api.anthropic.com".to_owned(),
            api_key: None,
            model: model.into(),
            system: None,
            temperature: None,
            max_tokens: 4096,
        }
    }

    /// Another base URL (a proxy, a test server); `/v1/messages` is appended.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// With an API key (sent as `x-api-key`).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// With a request timeout (default 120 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.client = client(timeout);
        self
    }

    /// With a system prompt.
    pub fn system(mut self, prompt: impl Into<String>) -> Self {
        self.system = Some(prompt.into());
        self
    }

    /// With a sampling temperature.
    pub fn temperature(mut self, temperature: f64) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// The most tokens an answer may take (`max_tokens`, which the API requires; default 4096).
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    fn body(&self, request: &LlmRequest) -> Value {
        let mut messages = vec![json!({ "role": "user", "content": prompt_text(&request.input) })];
        for (calls, text, results) in rounds(&request.turns) {
            let said = (!text.is_empty()).then(|| json!({ "type": "text", "text": text }));
            let uses = calls.iter().map(|c| {
                json!({ "type": "tool_use", "id": c.id, "name": function_name(&c.name), "input": c.arguments })
            });
            messages.push(json!({ "role": "assistant", "content": said.into_iter().chain(uses).collect::<Vec<_>>() }));
            let answers: Vec<Value> = results
                .iter()
                .filter_map(|r| match r {
                    Turn::Result { id, output, error, .. } => Some(json!({
                        "type": "tool_result", "tool_use_id": id, "content": result_text(output), "is_error": error,
                    })),
                    Turn::Calls { .. } => None,
                })
                .collect();
            if !answers.is_empty() {
                messages.push(json!({ "role": "user", "content": answers }));
            }
        }
        let mut body = json!({
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": messages,
        });
        if let Some(system) = &self.system {
            body["system"] = json!(system);
        }
        if let Some(t) = self.temperature {
            body["temperature"] = json!(t);
        }
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({ "name": function_name(&t.name), "description": t.description, "input_schema": t.input_schema }))
            .collect();
        if let Some(schema) = &request.schema {
            let name = answer_tool(request, schema);
            tools.push(json!({
                "name": name,
                "description": "Give the answer, as JSON matching this tool's input schema.",
                "input_schema": object_schema(schema),
            }));
            // With tools to call too, the model must call one of them or the answer tool.
            body["tool_choice"] = if request.tools.is_empty() {
                json!({ "type": "tool", "name": name })
            } else {
                json!({ "type": "any" })
            };
        }
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools);
        }
        body
    }
}

/// The name of the tool that carries a structured answer: the schema's, unless an offered tool has
/// it.
fn answer_tool(request: &LlmRequest, schema: &Value) -> String {
    let name = schema_name(schema);
    if request.tools.iter().any(|t| function_name(&t.name) == name) {
        format!("{name}_answer")
    } else {
        name
    }
}

/// Anthropic's tools take an object: any other schema is wrapped as the property `value`.
fn object_schema(schema: &Value) -> Value {
    if schema.get("type").and_then(Value::as_str) == Some("object") {
        return schema.clone();
    }
    let mut inner = schema.clone();
    // Definitions stay at the root, where `$ref`s point.
    let mut wrapped = json!({ "type": "object", "required": ["value"] });
    for key in ["$defs", "definitions", "$schema"] {
        if let Some(v) = inner.as_object_mut().and_then(|o| o.remove(key)) {
            wrapped[key] = v;
        }
    }
    wrapped["properties"] = json!({ "value": inner });
    wrapped
}

#[async_trait]
impl Model for AnthropicModel {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, EffectError> {
        let name = &request.model;
        let url = format!("{}/v1/messages", self.base_url);
        let mut http = self
            .client
            .post(&url)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .header("Idempotency-Key", request.invocation_id.as_str())
            .json(&self.body(&request));
        if let Some(key) = &self.api_key {
            http = http.header("x-api-key", key);
        }
        let body = http::send_json(name, &url, http).await?;
        let blocks = body
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| http::missing(name, "`content`", &body))?;
        let truncated = body.get("stop_reason").and_then(Value::as_str) == Some("max_tokens");
        let usage = body.get("usage").cloned();
        let answering = request.schema.as_ref().map(|s| answer_tool(&request, s));
        let calls: Vec<ToolCallRequest> = blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
            .filter(|b| b.get("name").and_then(Value::as_str) != answering.as_deref())
            .map(|b| ToolCallRequest {
                id: b
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                name: registered_name(
                    &request.tools,
                    b.get("name").and_then(Value::as_str).unwrap_or_default(),
                ),
                arguments: b.get("input").cloned().unwrap_or(Value::Null),
            })
            .collect();
        if !calls.is_empty() {
            let said: String = blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            return Ok(LlmResponse {
                output: Value::String(said),
                usage,
                tool_calls: calls,
            });
        }
        let output = match &request.schema {
            Some(schema) => {
                let input = blocks
                    .iter()
                    .find(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                    .and_then(|b| b.get("input"))
                    .ok_or_else(|| {
                        let why = if truncated {
                            " (cut off at max_tokens)"
                        } else {
                            ""
                        };
                        EffectError::transient(format!(
                            "model `{name}` gave no structured answer{why}: {}",
                            excerpt(&body.to_string())
                        ))
                    })?;
                if schema.get("type").and_then(Value::as_str) == Some("object") {
                    input.clone()
                } else {
                    input.get("value").cloned().unwrap_or(Value::Null)
                }
            }
            None => {
                let text: String = blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect();
                if body.get("stop_reason").and_then(Value::as_str) == Some("refusal") {
                    return Err(EffectError::permanent(format!(
                        "model `{name}` refused: {}",
                        excerpt(&text)
                    )));
                }
                Value::String(text)
            }
        };
        Ok(LlmResponse::answer(output, usage))
    }
}
