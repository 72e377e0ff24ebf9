//! Google's Gemini API (`POST /v1beta/models/{model}:generateContent`, or
//! `:streamGenerateContent?alt=sse` when streamed) over reqwest.
//!
//! A structured answer is asked for with `generationConfig.responseMimeType: application/json` and
//! the step's JSON Schema as `responseJsonSchema`. Usage (`usageMetadata`) goes on the receipt. A
//! prompt blocked by Gemini's safety filters, or an answer stopped by them, is permanent. Errors are
//! classified as every HTTP provider's are (`llm/http.rs`): 429 (`RESOURCE_EXHAUSTED`) and 503 are
//! transient, with the `RetryInfo.retryDelay` Gemini puts in the error body honoured.
//!
//! Streamed ([`Model::stream`]): `POST ..:streamGenerateContent?alt=sse`, each SSE event one
//! GenerateContentResponse chunk whose text parts are sent as they arrive; the chunks are read into
//! the answer `complete` gives. A body that ends (or is cut) before a `finishReason` is transient.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::http::{self, client, excerpt, function_name, prompt_text, registered_name, Streamed};
use super::{LlmRequest, LlmResponse, Model, Tokens, ToolCallRequest, Turn};
use crate::flow::tool_calls::rounds;
use crate::flow::EffectError;

/// A model behind the Gemini API. Its `Debug` output never shows the API key.
#[derive(Clone)]
pub struct GeminiModel {
    client: http::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    system: Option<String>,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
}

impl std::fmt::Debug for GeminiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeminiModel")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl GeminiModel {
    /// `model` (e.g. `gemini-2.5-flash`) at `https://generativelanguage.googleapis.com`.
    pub fn new(model: impl Into<String>) -> Self {
        GeminiModel {
            client: client(Duration::from_secs(120)),
            base_url: "https://generativelanguage.googleapis.com".to_owned(),
            api_key: None,
            model: model.into(),
            system: None,
            temperature: None,
            max_tokens: None,
        }
    }

    /// Another base URL (a proxy, a test server); `/v1beta/models/..` is appended.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// With an API key (sent as `x-goog-api-key`).
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

    /// With a system instruction.
    pub fn system(mut self, prompt: impl Into<String>) -> Self {
        self.system = Some(prompt.into());
        self
    }

    /// With a sampling temperature.
    pub fn temperature(mut self, temperature: f64) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// With an upper bound on the answer's tokens (`maxOutputTokens`).
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    fn body(&self, request: &LlmRequest) -> Value {
        let mut contents =
            vec![json!({ "role": "user", "parts": [{ "text": prompt_text(&request.input) }] })];
        for (calls, text, results) in rounds(&request.turns) {
            let said = (!text.is_empty()).then(|| json!({ "text": text }));
            let asked = calls.iter().map(|c| {
                json!({ "functionCall": { "name": function_name(&c.name), "args": c.arguments } })
            });
            contents.push(json!({ "role": "model", "parts": said.into_iter().chain(asked).collect::<Vec<_>>() }));
            let answers: Vec<Value> = results
                .iter()
                .filter_map(|r| match r {
                    Turn::Result { name, output, error, .. } => {
                        let key = if *error { "error" } else { "output" };
                        Some(json!({ "functionResponse": { "name": function_name(name), "response": { key: output } } }))
                    }
                    Turn::Calls { .. } => None,
                })
                .collect();
            if !answers.is_empty() {
                contents.push(json!({ "role": "user", "parts": answers }));
            }
        }
        let mut body = json!({ "contents": contents });
        if !request.tools.is_empty() {
            let declarations: Vec<Value> = request
                .tools
                .iter()
                .map(|t| json!({ "name": function_name(&t.name), "description": t.description, "parametersJsonSchema": t.input_schema }))
                .collect();
            body["tools"] = json!([{ "functionDeclarations": declarations }]);
        }
        if let Some(system) = &self.system {
            body["systemInstruction"] = json!({ "parts": [{ "text": system }] });
        }
        let mut config = serde_json::Map::new();
        if let Some(t) = self.temperature {
            config.insert("temperature".into(), json!(t));
        }
        if let Some(n) = self.max_tokens {
            config.insert("maxOutputTokens".into(), json!(n));
        }
        if let Some(schema) = &request.schema {
            config.insert("responseMimeType".into(), json!("application/json"));
            config.insert("responseJsonSchema".into(), schema.clone());
        }
        if !config.is_empty() {
            body["generationConfig"] = Value::Object(config);
        }
        body
    }
}

impl GeminiModel {
    /// The request for `request`, streamed (`:streamGenerateContent?alt=sse`) or not
    /// (`:generateContent`): the URL and the request to send.
    fn http(&self, request: &LlmRequest, stream: bool) -> (String, reqwest::RequestBuilder) {
        let method = if stream {
            "streamGenerateContent?alt=sse"
        } else {
            "generateContent"
        };
        let url = format!("{}/v1beta/models/{}:{method}", self.base_url, self.model);
        let http = if stream {
            self.client.post_stream(&url)
        } else {
            self.client.post(&url)
        };
        let mut http = http.json(&self.body(request));
        if let Some(key) = &self.api_key {
            http = http.header("x-goog-api-key", key);
        }
        (url, http)
    }

    /// The answer of a whole (or a streamed, reassembled) GenerateContentResponse.
    fn read(request: &LlmRequest, body: &Value) -> Result<LlmResponse, EffectError> {
        let name = &request.model;
        if let Some(reason) = body
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str)
        {
            return Err(EffectError::permanent(format!(
                "model `{name}` blocked the prompt ({reason})"
            )));
        }
        let candidate = body
            .pointer("/candidates/0")
            .ok_or_else(|| http::missing(name, "`candidates[0]`", body))?;
        let finish = candidate
            .get("finishReason")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if matches!(
            finish,
            "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT"
        ) {
            return Err(EffectError::permanent(format!(
                "model `{name}` stopped its answer ({finish}): {}",
                excerpt(&candidate.to_string())
            )));
        }
        let usage = body.get("usageMetadata").cloned();
        let parts = candidate
            .pointer("/content/parts")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        // A call without Gemini's `id` is named by its position in the answer.
        let calls: Vec<ToolCallRequest> = parts
            .iter()
            .filter_map(|p| p.get("functionCall"))
            .enumerate()
            .map(|(i, c)| ToolCallRequest {
                id: c
                    .get("id")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("call-{i}"), str::to_owned),
                name: registered_name(
                    &request.tools,
                    c.get("name").and_then(Value::as_str).unwrap_or_default(),
                ),
                arguments: c.get("args").cloned().unwrap_or(json!({})),
            })
            .collect();
        if !calls.is_empty() {
            let said: String = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            return Ok(LlmResponse {
                output: Value::String(said),
                usage,
                tool_calls: calls,
            });
        }
        let text: String = candidate
            .pointer("/content/parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect();
        let output = match request.schema {
            Some(_) => http::structured(name, &text, finish == "MAX_TOKENS")?,
            None => Value::String(text),
        };
        Ok(LlmResponse::answer(output, usage))
    }

    /// A streamed answer reassembled into the response `complete` reads: each chunk is a
    /// GenerateContentResponse whose first candidate's parts are appended in order (the text
    /// parts sent to `tokens`; a `functionCall` part comes whole), with the last `finishReason`,
    /// `usageMetadata` and `promptFeedback`. Gemini's stream has no end event: it is complete when a
    /// `finishReason` (or a blocked prompt's `blockReason`) came before the body ended; the body
    /// ending without one means the model had not stopped (transient). An `error` chunk is
    /// classified by its `status`.
    async fn read_stream(
        request: &LlmRequest,
        tokens: &Tokens,
        mut events: Streamed,
    ) -> Result<Value, EffectError> {
        let name = &request.model;
        let mut candidate: Option<Value> = None;
        let mut parts: Vec<Value> = Vec::new();
        let mut body = json!({});
        while let Some(data) = events.next().await? {
            let mut chunk = http::chunk_json(name, &data)?;
            if let Some(error) = chunk.get("error") {
                let said = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let status = error.get("status").and_then(Value::as_str);
                let code = error
                    .get("code")
                    .and_then(Value::as_u64)
                    .and_then(|c| u16::try_from(c).ok());
                return Err(match (status, code) {
                    (Some(kind), _) => http::stream_failed(name, kind, said),
                    // Only an HTTP code: classified as an answer with that status is.
                    (None, Some(code)) => http::refused(name, code, None, &error.to_string()),
                    (None, None) => http::stream_failed(name, "error", said),
                });
            }
            for key in [
                "usageMetadata",
                "promptFeedback",
                "modelVersion",
                "responseId",
            ] {
                if let Some(v) = chunk.get(key) {
                    body[key] = v.clone();
                }
            }
            let Some(mut next) = chunk.pointer_mut("/candidates/0").map(Value::take) else {
                continue;
            };
            for part in next
                .pointer_mut("/content/parts")
                .and_then(Value::as_array_mut)
                .map(std::mem::take)
                .into_iter()
                .flatten()
            {
                if let Some(text) = part.get("text").and_then(Value::as_str) {
                    tokens.send(text);
                }
                parts.push(part);
            }
            // The latest candidate's fields (finishReason, safetyRatings..) over the earlier ones'.
            let merged = candidate.get_or_insert_with(|| json!({}));
            if let Some(fields) = next.as_object() {
                for (k, v) in fields {
                    merged[k] = v.clone();
                }
            }
        }
        let blocked = body.pointer("/promptFeedback/blockReason").is_some();
        match candidate {
            Some(mut candidate) if candidate.get("finishReason").is_some() => {
                let role = candidate
                    .pointer("/content/role")
                    .cloned()
                    .unwrap_or(json!("model"));
                candidate["content"] = json!({ "role": role, "parts": parts });
                body["candidates"] = json!([candidate]);
                Ok(body)
            }
            _ if blocked => Ok(body),
            _ => Err(http::cut_short(name, "a `finishReason`")),
        }
    }
}

#[async_trait]
impl Model for GeminiModel {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, EffectError> {
        let (url, http) = self.http(&request, false);
        let body = http::send_json(&request.model, &url, http).await?;
        Self::read(&request, &body)
    }

    /// `streamGenerateContent?alt=sse`: each text part sent to `tokens` as it arrives, the chunks
    /// read into the answer `complete` gives.
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
