//! OpenAI over reqwest: the Chat Completions API (also what OpenAI-compatible servers speak: Ollama's
//! `/v1`, vLLM, gateways) or the Responses API ([`OpenAiModel::responses`]).
//!
//! Errors are classified for the engine's retries as every HTTP provider's are (`llm/http.rs`):
//! timeouts, connection failures, 408, 429 and 5xx are transient with `Retry-After` honoured; 401
//! and 403 are permanent; a structured answer that is not JSON is transient (asking again usually
//! helps; the message says when the answer was cut off at the token limit). A refusal is permanent. A
//! structured answer that is JSON but not the step's type fails at the step with a decode error
//! naming the model. The client never sees the journal: the engine retries and receipts.
//!
//! Streamed ([`Model::stream`]): Chat Completions with `stream: true` and
//! `stream_options.include_usage` (`delta.content` pieces sent as they arrive, `delta.tool_calls`
//! fragments joined by index, usage from the last chunk, complete at `data: [DONE]`), or the
//! Responses API with `stream: true` (`response.output_text.delta` pieces sent, the full response
//! of `response.completed` read). Either is read into the answer `complete` gives; tool-call
//! arguments are never sent as text. A stream cut before its end is transient; an error in it
//! (`response.failed`, an `error` event or chunk) is classified by its code.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::http::{
    self, client, excerpt, function_name, prompt_text, registered_name, result_text, schema_name,
    Streamed, JSON_ONLY,
};
use super::{LlmRequest, LlmResponse, Model, Tokens, ToolCallRequest, Turn};
use crate::flow::EffectError;

/// Why [`OpenAiModel::from_env`] could not build a client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No model name in the environment.
    #[error("set RADKIT_LLM_MODEL (or OPENAI_MODEL) to the model name")]
    MissingModel,
    /// The base URL is not an http(s) URL.
    #[error("`{0}` is not an http:// or https:// base URL (e.g. `https://api.openai.com/v1`, `http://127.0.0.1:11434/v1`)")]
    BadBaseUrl(String),
    /// A model spec that is not `provider:model`.
    #[error(
        "`{0}` is not `provider:model` (e.g. `anthropic:claude-sonnet-4-5`, `ollama:llama3.2`)"
    )]
    BadSpec(String),
    /// A provider radkit does not speak.
    #[error("unknown model provider `{0}`; expected openai, openai-responses, anthropic, gemini or ollama")]
    UnknownProvider(String),
}

/// A chat-completions endpoint. Its `Debug` output never shows the API key.
#[derive(Clone)]
pub struct OpenAiModel {
    client: http::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    system: Option<String>,
    strict: bool,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
    /// The Responses API (`/responses`) instead of Chat Completions.
    responses: bool,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("strict", &self.strict)
            .finish_non_exhaustive()
    }
}

impl OpenAiModel {
    /// A client for `model` at `base_url` (e.g. `https://api.openai.com/v1`, `http://127.0.0.1:11434/v1`).
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiModel {
            client: client(Duration::from_secs(120)),
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            api_key: None,
            model: model.into(),
            system: None,
            strict: false,
            temperature: None,
            max_tokens: None,
            responses: false,
        }
    }

    /// Speak OpenAI's Responses API (`POST /responses`: `instructions`, `input`,
    /// `text.format` for structured output, `max_output_tokens`) instead of Chat Completions.
    pub fn responses(mut self) -> Self {
        self.responses = true;
        self
    }

    /// From the environment: `RADKIT_LLM_BASE_URL` (or `OPENAI_BASE_URL`, default the OpenAI API),
    /// `RADKIT_LLM_API_KEY` (or `OPENAI_API_KEY`), `RADKIT_LLM_MODEL` (or `OPENAI_MODEL`, required),
    /// and `RADKIT_LLM_TIMEOUT_SECS` (default 120). The `RADKIT_` names win; empty values are unset.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Like [`from_env`](Self::from_env), reading variables through `var` (tests, config files).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |a: &str, b: &str| {
            var(a)
                .filter(|v| !v.trim().is_empty())
                .or_else(|| var(b).filter(|v| !v.trim().is_empty()))
                .map(|v| v.trim().to_owned())
        };
        let model = get("RADKIT_LLM_MODEL", "OPENAI_MODEL").ok_or(ConfigError::MissingModel)?;
        let base = get("RADKIT_LLM_BASE_URL", "OPENAI_BASE_URL")
            .unwrap_or_else(|| "https://api.openai.com/v1".to_owned());
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ConfigError::BadBaseUrl(base));
        }
        let mut m = OpenAiModel::new(base, model);
        m.api_key = get("RADKIT_LLM_API_KEY", "OPENAI_API_KEY");
        if let Some(secs) = get("RADKIT_LLM_TIMEOUT_SECS", "RADKIT_LLM_TIMEOUT_SECS")
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
        {
            m = m.timeout(Duration::from_secs_f64(secs));
        }
        Ok(m)
    }

    /// The base URL requests go to (without the trailing `/chat/completions`).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The provider's model name.
    pub fn model_name(&self) -> &str {
        &self.model
    }

    /// With an API key (sent as a bearer token).
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

    /// Ask for strict structured output (`"strict": true`, default false). OpenAI then guarantees
    /// the schema, but accepts only its strict subset (every property required, no additional
    /// properties): use it with types whose schemas fit, and leave it off for local servers.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// With a sampling temperature.
    pub fn temperature(mut self, temperature: f64) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// With an upper bound on the answer's tokens (`max_tokens`).
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    fn body(&self, request: &LlmRequest) -> Value {
        let mut messages = Vec::new();
        if let Some(system) = &self.system {
            messages.push(json!({ "role": "system", "content": system }));
        }
        if request.schema.is_some() {
            messages.push(json!({ "role": "system", "content": JSON_ONLY }));
        }
        messages.push(json!({ "role": "user", "content": prompt_text(&request.input) }));
        for turn in &request.turns {
            messages.push(match turn {
                Turn::Calls { calls, text } => json!({
                    "role": "assistant",
                    "content": if text.is_empty() { Value::Null } else { json!(text) },
                    "tool_calls": calls.iter().map(|c| json!({
                        "id": c.id, "type": "function",
                        "function": { "name": function_name(&c.name), "arguments": c.arguments.to_string() },
                    })).collect::<Vec<_>>(),
                }),
                Turn::Result { id, output, .. } => {
                    json!({ "role": "tool", "tool_call_id": id, "content": result_text(output) })
                }
            });
        }
        let mut body = json!({ "model": self.model, "messages": messages });
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({ "type": "function", "function": {
                    "name": function_name(&t.name), "description": t.description, "parameters": t.input_schema,
                } }))
                .collect();
        }
        if let Some(schema) = &request.schema {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": { "name": schema_name(schema), "schema": schema, "strict": self.strict },
            });
        }
        if let Some(t) = self.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(n) = self.max_tokens {
            body["max_tokens"] = json!(n);
        }
        body
    }
}

impl OpenAiModel {
    /// The Responses API's body: the system prompt as `instructions`, the prompt as `input`, a
    /// schema as `text.format`.
    fn responses_body(&self, request: &LlmRequest) -> Value {
        let mut body = json!({ "model": self.model, "input": prompt_text(&request.input) });
        if !request.turns.is_empty() {
            let mut items = vec![json!({ "role": "user", "content": prompt_text(&request.input) })];
            for turn in &request.turns {
                match turn {
                    Turn::Calls { calls, text } => {
                        if !text.is_empty() {
                            items.push(json!({ "role": "assistant", "content": text }));
                        }
                        items.extend(calls.iter().map(|c| json!({
                            "type": "function_call", "call_id": c.id,
                            "name": function_name(&c.name), "arguments": c.arguments.to_string(),
                        })));
                    }
                    Turn::Result { id, output, .. } => items.push(json!({
                        "type": "function_call_output", "call_id": id, "output": result_text(output),
                    })),
                }
            }
            body["input"] = Value::Array(items);
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "type": "function", "name": function_name(&t.name),
                        "description": t.description, "parameters": t.input_schema,
                    })
                })
                .collect();
        }
        let instructions: Vec<&str> = self
            .system
            .as_deref()
            .into_iter()
            .chain(request.schema.as_ref().map(|_| JSON_ONLY))
            .collect();
        if !instructions.is_empty() {
            body["instructions"] = json!(instructions.join("\n\n"));
        }
        if let Some(schema) = &request.schema {
            body["text"] = json!({ "format": {
                "type": "json_schema", "name": schema_name(schema), "schema": schema, "strict": self.strict,
            } });
        }
        if let Some(t) = self.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(n) = self.max_tokens {
            body["max_output_tokens"] = json!(n);
        }
        body
    }

    /// The tool calls of a Chat Completions answer (`choices[0].message.tool_calls`).
    fn chat_calls(request: &LlmRequest, body: &Value) -> Result<Vec<ToolCallRequest>, EffectError> {
        body.pointer("/choices/0/message/tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                let called = c
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                Ok(ToolCallRequest {
                    id: c
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    name: registered_name(&request.tools, called),
                    arguments: http::arguments(
                        &request.model,
                        c.pointer("/function/arguments").unwrap_or(&Value::Null),
                    )?,
                })
            })
            .collect()
    }

    /// The tool calls of a Responses answer (its `function_call` items).
    fn responses_calls(
        request: &LlmRequest,
        body: &Value,
    ) -> Result<Vec<ToolCallRequest>, EffectError> {
        body.get("output")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|item| item.get("type").and_then(Value::as_str) == Some("function_call"))
            .map(|c| {
                let called = c.get("name").and_then(Value::as_str).unwrap_or_default();
                Ok(ToolCallRequest {
                    id: c
                        .get("call_id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    name: registered_name(&request.tools, called),
                    arguments: http::arguments(
                        &request.model,
                        c.get("arguments").unwrap_or(&Value::Null),
                    )?,
                })
            })
            .collect()
    }

    /// A Chat Completions answer: `choices[0].message` (`content` or `refusal`).
    fn chat_answer(request: &LlmRequest, body: &Value) -> Result<Value, EffectError> {
        let name = &request.model;
        if let Some(refusal) = body
            .pointer("/choices/0/message/refusal")
            .and_then(Value::as_str)
        {
            // Structured outputs: the model declined; asking again gets the same answer.
            return Err(EffectError::permanent(format!(
                "model `{name}` refused: {}",
                excerpt(refusal)
            )));
        }
        let truncated = body
            .pointer("/choices/0/finish_reason")
            .and_then(Value::as_str)
            == Some("length");
        let content = body
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| http::missing(name, "`choices[0].message.content`", body))?;
        match request.schema {
            Some(_) => http::structured(name, content, truncated),
            None => Ok(Value::String(content.to_owned())),
        }
    }

    /// A Responses answer: the `output_text` parts of its `message` items (or a `refusal` part);
    /// `status: incomplete` with reason `max_output_tokens` is a cut-off answer.
    fn responses_answer(request: &LlmRequest, body: &Value) -> Result<Value, EffectError> {
        let name = &request.model;
        let mut text = String::new();
        for item in body
            .get("output")
            .and_then(Value::as_array)
            .ok_or_else(|| http::missing(name, "`output`", body))?
            .iter()
            .filter(|item| item.get("type").and_then(Value::as_str) == Some("message"))
        {
            for part in item
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                match part.get("type").and_then(Value::as_str) {
                    Some("output_text") => {
                        text.push_str(part.get("text").and_then(Value::as_str).unwrap_or_default())
                    }
                    Some("refusal") => {
                        let refusal = part
                            .get("refusal")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        return Err(EffectError::permanent(format!(
                            "model `{name}` refused: {}",
                            excerpt(refusal)
                        )));
                    }
                    _ => {}
                }
            }
        }
        let truncated = body.get("status").and_then(Value::as_str) == Some("incomplete");
        match request.schema {
            Some(_) => http::structured(name, &text, truncated),
            None if text.is_empty() && truncated => Err(EffectError::transient(format!(
                "model `{name}` stopped before answering (status `incomplete`): {}",
                excerpt(&body.to_string())
            ))),
            None => Ok(Value::String(text)),
        }
    }
}

impl OpenAiModel {
    /// The request for `request`, streamed or not: the URL and the request to send.
    fn http(&self, request: &LlmRequest, stream: bool) -> (String, reqwest::RequestBuilder) {
        let (url, mut body) = if self.responses {
            (
                format!("{}/responses", self.base_url),
                self.responses_body(request),
            )
        } else {
            (
                format!("{}/chat/completions", self.base_url),
                self.body(request),
            )
        };
        let http = if stream {
            body["stream"] = json!(true);
            if !self.responses {
                body["stream_options"] = json!({ "include_usage": true });
            }
            self.client.post_stream(&url)
        } else {
            self.client.post(&url)
        };
        // The command's id lets gateways that deduplicate requests recognise a reissue.
        let mut http = http
            .header("Idempotency-Key", request.invocation_id.as_str())
            .json(&body);
        if let Some(key) = &self.api_key {
            http = http.bearer_auth(key);
        }
        (url, http)
    }

    /// The answer of a whole (or a streamed, reassembled) Chat Completions or Responses body.
    fn read(&self, request: &LlmRequest, body: &Value) -> Result<LlmResponse, EffectError> {
        let usage = body.get("usage").cloned();
        let calls = if self.responses {
            Self::responses_calls(request, body)?
        } else {
            Self::chat_calls(request, body)?
        };
        if !calls.is_empty() {
            let said = body
                .pointer("/choices/0/message/content")
                .cloned()
                .unwrap_or(Value::Null);
            return Ok(LlmResponse {
                output: said,
                usage,
                tool_calls: calls,
            });
        }
        let output = if self.responses {
            Self::responses_answer(request, body)?
        } else {
            Self::chat_answer(request, body)?
        };
        Ok(LlmResponse::answer(output, usage))
    }

    /// A streamed Chat Completions answer reassembled into the body `complete` reads: the
    /// `delta.content` pieces (each sent to `tokens`) and `delta.refusal` pieces joined, the
    /// `delta.tool_calls` fragments joined by their `index` (the id and name in the first, the
    /// `arguments` in pieces), the last `finish_reason` and `usage`; complete at `data: [DONE]`.
    async fn chat_stream(
        request: &LlmRequest,
        tokens: &Tokens,
        mut events: Streamed,
    ) -> Result<Value, EffectError> {
        let name = &request.model;
        let mut content: Option<String> = None;
        let mut refusal: Option<String> = None;
        let mut calls: Vec<Value> = Vec::new();
        let mut finish = Value::Null;
        let mut usage = Value::Null;
        while let Some(data) = events.next().await? {
            if data.trim() == "[DONE]" {
                let mut message = json!({ "role": "assistant", "content": content });
                if let Some(refusal) = refusal {
                    message["refusal"] = json!(refusal);
                }
                if !calls.is_empty() {
                    message["tool_calls"] = Value::Array(calls);
                }
                let mut body = json!({ "choices": [{ "index": 0, "message": message, "finish_reason": finish }] });
                if !usage.is_null() {
                    body["usage"] = usage;
                }
                return Ok(body);
            }
            let chunk = http::chunk_json(name, &data)?;
            if let Some(error) = chunk.get("error") {
                return Err(openai_error(name, error));
            }
            if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
                usage = u.clone();
            }
            let Some(choice) = chunk.pointer("/choices/0") else {
                continue;
            };
            if let Some(f) = choice.get("finish_reason").filter(|f| !f.is_null()) {
                finish = f.clone();
            }
            let Some(delta) = choice.get("delta") else {
                continue;
            };
            if let Some(text) = delta.get("content").and_then(Value::as_str) {
                tokens.send(text);
                content.get_or_insert_with(String::new).push_str(text);
            }
            if let Some(text) = delta.get("refusal").and_then(Value::as_str) {
                refusal.get_or_insert_with(String::new).push_str(text);
            }
            for fragment in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                // A fragment without `index` (some compatible servers send each call whole)
                // starts a call when it has an id, else continues the last one.
                let slot = match fragment.get("index").and_then(Value::as_u64) {
                    Some(i) => (i as usize).min(calls.len()),
                    None if fragment.get("id").is_some() => calls.len(),
                    None => calls.len().saturating_sub(1),
                };
                if slot == calls.len() {
                    calls.push(json!({ "id": "", "type": "function",
                        "function": { "name": "", "arguments": "" } }));
                }
                let call = &mut calls[slot];
                if let Some(id) = fragment
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                {
                    call["id"] = json!(id);
                }
                if let Some(called) = fragment
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                {
                    call["function"]["name"] = json!(called);
                }
                if let Some(piece) = fragment
                    .pointer("/function/arguments")
                    .and_then(Value::as_str)
                {
                    let mut arguments = call["function"]["arguments"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    arguments.push_str(piece);
                    call["function"]["arguments"] = json!(arguments);
                }
            }
        }
        Err(http::cut_short(name, "`data: [DONE]`"))
    }

    /// A streamed Responses answer: the `response.output_text.delta` pieces sent to `tokens`, and
    /// the full response that `response.completed` (or `response.incomplete`) carries, which is
    /// what `complete` reads. `response.failed` and `error` events are classified by their code.
    async fn responses_stream(
        request: &LlmRequest,
        tokens: &Tokens,
        mut events: Streamed,
    ) -> Result<Value, EffectError> {
        let name = &request.model;
        while let Some(data) = events.next().await? {
            let mut event = http::chunk_json(name, &data)?;
            match event
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default()
            {
                "response.output_text.delta" => tokens.send(
                    event
                        .get("delta")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                ),
                "response.completed" | "response.incomplete" => {
                    return match event.get_mut("response").map(Value::take) {
                        Some(response) if response.is_object() => Ok(response),
                        _ => Err(http::malformed(name, "without its `response`", &data)),
                    };
                }
                "response.failed" => {
                    let error = event.pointer("/response/error").unwrap_or(&Value::Null);
                    return Err(openai_error(name, error));
                }
                "error" => {
                    let error = event
                        .get("error")
                        .filter(|e| e.is_object())
                        .unwrap_or(&event);
                    return Err(openai_error(name, error));
                }
                _ => {}
            }
        }
        Err(http::cut_short(name, "`response.completed`"))
    }
}

/// An OpenAI error object met in a stream (`{"code", "type", "message"}`), by its code or type.
fn openai_error(name: &str, error: &Value) -> EffectError {
    let kind = ["code", "type"]
        .iter()
        .filter_map(|k| error.get(*k).and_then(Value::as_str))
        .find(|k| !k.is_empty())
        .unwrap_or("error");
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| error.to_string(), str::to_owned);
    http::stream_failed(name, kind, &message)
}

#[async_trait]
impl Model for OpenAiModel {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, EffectError> {
        let (url, http) = self.http(&request, false);
        let body = http::send_json(&request.model, &url, http).await?;
        self.read(&request, &body)
    }

    /// Chat Completions with `stream: true` and `stream_options.include_usage`, or the Responses
    /// API with `stream: true`; each piece of answer text (not tool-call arguments) is sent to
    /// `tokens`, and the stream is read into the answer `complete` gives.
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
        let body = if self.responses {
            Self::responses_stream(&request, tokens, events).await?
        } else {
            Self::chat_stream(&request, tokens, events).await?
        };
        self.read(&request, &body)
    }
}
