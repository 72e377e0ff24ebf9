//! Ollama's native chat API (`POST /api/chat`; `stream: false`, or `true` when streamed, answered
//! as NDJSON lines) over reqwest. (Ollama also speaks OpenAI's Chat Completions at `/v1`, which
//! [`super::OpenAiModel`] reaches.)
//!
//! A structured answer is asked for with the step's JSON Schema as `format`. Usage
//! (`prompt_eval_count`, `eval_count`) goes on the receipt. An unknown model (404) is permanent;
//! a server that is not up is transient, as every connection failure is (`llm/http.rs`).
//!
//! Streamed ([`Model::stream`]), each line's `message.content` is sent as it arrives and the lines
//! are read into the same answer; a stream that ends before its `"done": true` line, or an
//! `{"error": ..}` line, is transient.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::http::{
    self, client, function_name, prompt_text, registered_name, result_text, Streamed, JSON_ONLY,
};
use super::{LlmRequest, LlmResponse, Model, Tokens, ToolCallRequest, Turn};
use crate::flow::EffectError;

/// A model served by Ollama.
#[derive(Debug, Clone)]
pub struct OllamaModel {
    client: http::Client,
    base_url: String,
    model: String,
    system: Option<String>,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
}

impl OllamaModel {
    /// `model` (e.g. `llama3.2`) at `http://127.0.0.1:11434`.
    pub fn new(model: impl Into<String>) -> Self {
        OllamaModel {
            client: client(Duration::from_secs(300)),
            base_url: "http://127.0.0.1:11434".to_owned(),
            model: model.into(),
            system: None,
            temperature: None,
            max_tokens: None,
        }
    }

    /// Another server (`OLLAMA_HOST`); `/api/chat` is appended.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// With a request timeout (default 300 s: local models can be slow to load): a call answered
    /// whole must be answered within it; a streamed call has no total limit but fails
    /// (transiently) when its stream is silent that long.
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

    /// With an upper bound on the answer's tokens (`num_predict`).
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
                    "role": "assistant", "content": text,
                    "tool_calls": calls.iter().map(|c| json!({
                        "function": { "name": function_name(&c.name), "arguments": c.arguments },
                    })).collect::<Vec<_>>(),
                }),
                Turn::Result { name, output, .. } => json!({
                    "role": "tool", "tool_name": function_name(name), "content": result_text(output),
                }),
            });
        }
        let mut body = json!({ "model": self.model, "messages": messages, "stream": false });
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
            body["format"] = schema.clone();
        }
        let mut options = serde_json::Map::new();
        if let Some(t) = self.temperature {
            options.insert("temperature".into(), json!(t));
        }
        if let Some(n) = self.max_tokens {
            options.insert("num_predict".into(), json!(n));
        }
        if !options.is_empty() {
            body["options"] = Value::Object(options);
        }
        body
    }
}

impl OllamaModel {
    /// The request for `request`, streamed or not: the URL and the request to send.
    fn http(&self, request: &LlmRequest, stream: bool) -> (String, reqwest::RequestBuilder) {
        let url = format!("{}/api/chat", self.base_url);
        let mut body = self.body(request);
        body["stream"] = json!(stream);
        let http = if stream {
            self.client.post_stream(&url)
        } else {
            self.client.post(&url)
        };
        let http = http.json(&body);
        (url, http)
    }

    /// The answer of a whole (or a streamed, reassembled) `/api/chat` body.
    fn read(request: &LlmRequest, body: &Value) -> Result<LlmResponse, EffectError> {
        let name = &request.model;
        let usage = ["prompt_eval_count", "eval_count"]
            .iter()
            .filter_map(|k| Some(((*k).to_owned(), body.get(*k)?.clone())))
            .collect::<serde_json::Map<_, _>>();
        let usage = (!usage.is_empty()).then_some(Value::Object(usage));
        // Ollama gives its calls no ids: each is named by its position in the answer.
        let calls = body
            .pointer("/message/tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, c)| {
                let called = c
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                Ok(ToolCallRequest {
                    id: format!("call-{i}"),
                    name: registered_name(&request.tools, called),
                    arguments: http::arguments(
                        name,
                        c.pointer("/function/arguments").unwrap_or(&Value::Null),
                    )?,
                })
            })
            .collect::<Result<Vec<_>, EffectError>>()?;
        if !calls.is_empty() {
            return Ok(LlmResponse {
                output: body
                    .pointer("/message/content")
                    .cloned()
                    .unwrap_or(Value::Null),
                usage,
                tool_calls: calls,
            });
        }
        let content = body
            .pointer("/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| http::missing(name, "`message.content`", body))?;
        let truncated = body.get("done_reason").and_then(Value::as_str) == Some("length");
        let output = match request.schema {
            Some(_) => http::structured(name, content, truncated)?,
            None => Value::String(content.to_owned()),
        };
        Ok(LlmResponse::answer(output, usage))
    }

    /// A streamed answer (NDJSON) reassembled into the body `complete` reads: the `message.content`
    /// pieces joined (each sent to `tokens`), the `message.tool_calls` of every line in order, and
    /// the last line's counts and `done_reason`; complete at `"done": true`. An `{"error": ..}` line
    /// is transient: Ollama had accepted the request, so it failed while generating.
    async fn read_stream(
        request: &LlmRequest,
        tokens: &Tokens,
        mut lines: Streamed,
    ) -> Result<Value, EffectError> {
        let name = &request.model;
        let mut content = String::new();
        let mut calls: Vec<Value> = Vec::new();
        while let Some(line) = lines.next().await? {
            let mut chunk = http::chunk_json(name, &line)?;
            if let Some(error) = chunk.get("error") {
                let said = error
                    .as_str()
                    .map_or_else(|| error.to_string(), str::to_owned);
                return Err(EffectError::transient(format!(
                    "model `{name}` failed while streaming: {}",
                    http::excerpt(&said)
                )));
            }
            if let Some(text) = chunk.pointer("/message/content").and_then(Value::as_str) {
                tokens.send(text);
                content.push_str(text);
            }
            if let Some(more) = chunk
                .pointer_mut("/message/tool_calls")
                .and_then(Value::as_array_mut)
            {
                calls.append(more);
            }
            if chunk.get("done").and_then(Value::as_bool) == Some(true) {
                let mut message = json!({ "role": "assistant", "content": content });
                if !calls.is_empty() {
                    message["tool_calls"] = Value::Array(calls);
                }
                chunk["message"] = message;
                return Ok(chunk);
            }
        }
        Err(http::cut_short(name, "`\"done\": true`"))
    }
}

#[async_trait]
impl Model for OllamaModel {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, EffectError> {
        let (url, http) = self.http(&request, false);
        let body = http::send_json(&request.model, &url, http).await?;
        Self::read(&request, &body)
    }

    /// `/api/chat` with `stream: true`: each line's content sent to `tokens`, the lines read into
    /// the answer `complete` gives.
    async fn stream(
        &self,
        request: LlmRequest,
        tokens: &Tokens,
    ) -> Result<LlmResponse, EffectError> {
        let (url, http) = self.http(&request, true);
        let lines = http::send_stream(
            &request.model,
            &url,
            http::Framing::Ndjson,
            self.client.idle(),
            http,
        )
        .await?;
        let body = Self::read_stream(&request, tokens, lines).await?;
        Self::read(&request, &body)
    }
}
