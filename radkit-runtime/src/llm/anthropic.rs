//! Anthropic's Messages API (`POST /v1/messages`) over reqwest.
//!
//! A structured answer is asked for the way Anthropic documents for every model: one tool whose
//! `input_schema` is the step's schema, forced with `tool_choice`; the tool call's `input` is the
//! answer. A schema that is not an object (Anthropic's tools take objects) is wrapped in
//! `{"value": ..}` and unwrapped from the answer. Usage (`input_tokens`, `output_tokens`) goes on
//! the receipt. Errors are classified as every HTTP provider's are (`llm/http.rs`): 429 and 529
//! (overloaded) are transient with `retry-after` honoured, 401 and 403 permanent.
//!
//! Streamed ([`Model::stream`]): `stream: true`, the events (`message_start`,
//! `content_block_start`/`_delta`/`_stop`, `message_delta`, `message_stop`) read into the message
//! `complete` reads. Each `text_delta` is sent as it arrives; a structured answer's
//! `input_json_delta` pieces are sent too when its schema is an object (they are the answer's
//! JSON); other tools' arguments never are. A stream cut before `message_stop` is transient; an
//! `error` event is classified by its type (`overloaded_error`, `rate_limit_error`, `api_error`
//! transient; `authentication_error` and the others permanent).

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::http::{
    self, client, excerpt, function_name, prompt_text, registered_name, result_text, schema_name,
    Streamed,
};
use super::{LlmRequest, LlmResponse, Model, Tokens, ToolCallRequest, Turn};
use crate::flow::tool_calls::rounds;
use crate::flow::EffectError;

/// The API version every request names (`anthropic-version`).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A model behind Anthropic's Messages API. Its `Debug` output never shows the API key.
#[derive(Clone)]
pub struct AnthropicModel {
    client: http::Client,
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

    /// With a request timeout (default 120 s): a call answered whole must be answered
    /// within it; a streamed call has no total limit but fails (transiently) when its stream is
    /// silent that long.
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

impl AnthropicModel {
    /// The request for `request`, streamed or not: the URL and the request to send.
    fn http(&self, request: &LlmRequest, stream: bool) -> (String, reqwest::RequestBuilder) {
        let url = format!("{}/v1/messages", self.base_url);
        let mut body = self.body(request);
        let http = if stream {
            body["stream"] = json!(true);
            self.client.post_stream(&url)
        } else {
            self.client.post(&url)
        };
        let mut http = http
            .header("anthropic-version", ANTHROPIC_VERSION)
            .header("Idempotency-Key", request.invocation_id.as_str())
            .json(&body);
        if let Some(key) = &self.api_key {
            http = http.header("x-api-key", key);
        }
        (url, http)
    }

    /// The answer of a whole (or a streamed, reassembled) Messages body.
    fn read(request: &LlmRequest, body: &Value) -> Result<LlmResponse, EffectError> {
        let name = &request.model;
        let blocks = body
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| http::missing(name, "`content`", body))?;
        let truncated = body.get("stop_reason").and_then(Value::as_str) == Some("max_tokens");
        let usage = body.get("usage").cloned();
        let answering = request.schema.as_ref().map(|s| answer_tool(request, s));
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

    /// A streamed answer reassembled into the message `complete` reads: `message_start`'s message,
    /// each `content_block_start`'s block at its `index`, `text_delta` pieces joined into their
    /// text block (and sent to `tokens`), `input_json_delta` pieces joined and read as their
    /// `tool_use` block's `input` at `content_block_stop`, `message_delta`'s stop reason and usage
    /// merged in; complete at `message_stop`. An `error` event is classified by its type
    /// (`overloaded_error`, `rate_limit_error`, `api_error` transient; others permanent).
    ///
    /// A structured answer arrives as the input of the answer tool: its JSON pieces are sent to
    /// `tokens` too, being the answer's text, when the schema is an object; a schema wrapped as
    /// `{"value": ..}` sends nothing (the pieces would carry the wrapper).
    async fn read_stream(
        request: &LlmRequest,
        tokens: &Tokens,
        mut events: Streamed,
    ) -> Result<Value, EffectError> {
        let name = &request.model;
        let answering = request
            .schema
            .as_ref()
            .filter(|s| s.get("type").and_then(Value::as_str) == Some("object"))
            .map(|s| answer_tool(request, s));
        let mut message = json!({ "content": [] });
        // The `input_json_delta` pieces of each tool_use block not stopped yet, by index.
        let mut inputs: std::collections::BTreeMap<usize, String> = Default::default();
        // The text of each text block not stopped yet, by index (joined here, written into its
        // block when it stops: copying the block's text at every piece would be quadratic).
        let mut texts: std::collections::BTreeMap<usize, String> = Default::default();
        while let Some(data) = events.next().await? {
            let event = http::chunk_json(name, &data)?;
            let index = event
                .get("index")
                .and_then(Value::as_u64)
                .map(|i| i as usize);
            match event
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default()
            {
                "message_start" => {
                    message = event.get("message").cloned().unwrap_or_default();
                    if !message.is_object() {
                        return Err(http::malformed(name, "without its `message`", &data));
                    }
                    message["content"] = json!([]);
                }
                "content_block_start" => {
                    let (Some(i), Some(block)) =
                        (index, event.get("content_block").filter(|b| b.is_object()))
                    else {
                        return Err(http::malformed(name, "without its block", &data));
                    };
                    let blocks = content(&mut message);
                    if i < blocks.len() {
                        blocks[i] = block.clone();
                    } else {
                        blocks.push(block.clone());
                    }
                }
                "content_block_delta" => {
                    let block = index.and_then(|i| content(&mut message).get_mut(i));
                    let (Some(block), Some(delta)) = (block, event.get("delta")) else {
                        return Err(http::malformed(name, "for a block it did not start", &data));
                    };
                    match delta
                        .get("type")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                    {
                        "text_delta" => {
                            let piece = delta
                                .get("text")
                                .and_then(Value::as_str)
                                .unwrap_or_default();
                            tokens.send(piece);
                            texts
                                .entry(index.unwrap_or_default())
                                .or_insert_with(|| {
                                    block
                                        .get("text")
                                        .and_then(Value::as_str)
                                        .unwrap_or_default()
                                        .to_owned()
                                })
                                .push_str(piece);
                        }
                        "input_json_delta" => {
                            let piece = delta
                                .get("partial_json")
                                .and_then(Value::as_str)
                                .unwrap_or_default();
                            if answering.is_some()
                                && block.get("name").and_then(Value::as_str) == answering.as_deref()
                            {
                                tokens.send(piece);
                            }
                            inputs
                                .entry(index.unwrap_or_default())
                                .or_default()
                                .push_str(piece);
                        }
                        // Thinking, signatures, citations: not read by `complete` either.
                        _ => {}
                    }
                }
                "content_block_stop" => {
                    if let Some(i) = index {
                        stop_text(&mut message, i, texts.remove(&i));
                        stop_block(name, &mut message, i, inputs.remove(&i))?;
                    }
                }
                "message_delta" => {
                    if let Some(delta) = event.get("delta").and_then(Value::as_object) {
                        for (k, v) in delta {
                            message[k] = v.clone();
                        }
                    }
                    if let Some(usage) = event.get("usage").and_then(Value::as_object) {
                        if !message["usage"].is_object() {
                            message["usage"] = json!({});
                        }
                        for (k, v) in usage {
                            message["usage"][k] = v.clone();
                        }
                    }
                }
                "message_stop" => {
                    for (i, text) in std::mem::take(&mut texts) {
                        stop_text(&mut message, i, Some(text));
                    }
                    for (i, input) in std::mem::take(&mut inputs) {
                        stop_block(name, &mut message, i, Some(input))?;
                    }
                    return Ok(message);
                }
                "error" => {
                    let error = event.get("error").unwrap_or(&Value::Null);
                    let kind = error.get("type").and_then(Value::as_str).unwrap_or("error");
                    let said = error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    return Err(http::stream_failed(name, kind, said));
                }
                // `ping`, and events added later.
                _ => {}
            }
        }
        Err(http::cut_short(name, "`message_stop`"))
    }
}

/// The `content` blocks of a message being reassembled.
fn content(message: &mut Value) -> &mut Vec<Value> {
    if !message["content"].is_array() {
        message["content"] = json!([]);
    }
    match &mut message["content"] {
        Value::Array(blocks) => blocks,
        _ => unreachable!("set to an array above"),
    }
}

/// A text block stopped: the text its pieces joined to is its `text`.
fn stop_text(message: &mut Value, index: usize, text: Option<String>) {
    if let (Some(text), Some(block)) = (text, content(message).get_mut(index)) {
        if let Some(block) = block.as_object_mut() {
            block.insert("text".to_owned(), Value::String(text));
        }
    }
}

/// A block stopped: the JSON its `input_json_delta` pieces joined to is its `input` (none keeps
/// the `{}` it started with). Pieces that do not join to JSON are a garbled stream (transient).
fn stop_block(
    name: &str,
    message: &mut Value,
    index: usize,
    input: Option<String>,
) -> Result<(), EffectError> {
    let Some(input) = input.filter(|i| !i.trim().is_empty()) else {
        return Ok(());
    };
    let value: Value = serde_json::from_str(&input).map_err(|e| {
        http::malformed(
            name,
            &format!("with a tool input that is not JSON ({e})"),
            &input,
        )
    })?;
    if let Some(block) = content(message)
        .get_mut(index)
        .and_then(Value::as_object_mut)
    {
        block.insert("input".to_owned(), value);
    }
    Ok(())
}

#[async_trait]
impl Model for AnthropicModel {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, EffectError> {
        let (url, http) = self.http(&request, false);
        let body = http::send_json(&request.model, &url, http).await?;
        Self::read(&request, &body)
    }

    /// The Messages API with `stream: true`: each `text_delta` (and a structured answer's JSON
    /// pieces) sent to `tokens`, the events read into the answer `complete` gives.
    async fn stream(
        &self,
        request: LlmRequest,
        tokens: &Tokens,
    ) -> Result<LlmResponse, EffectError> {
        let (url, http) = self.http(&request, true);
        let events = http::send_stream(
            &request.model,
            &url,
            http::Framing::Sse,
            self.client.idle(),
            http,
        )
        .await?;
        let body = Self::read_stream(&request, tokens, events).await?;
        Self::read(&request, &body)
    }
}
