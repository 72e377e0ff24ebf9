//! An OpenAI-compatible chat-completions client (OpenAI, Ollama, vLLM, gateways) over reqwest.
//!
//! Errors are classified for the engine's retries: timeouts, connection failures, 408, 429 and 5xx
//! are transient (429 and 503 carry `Retry-After`); other 4xx and answers that cannot be read are
//! permanent, except a structured answer that is not JSON, which is transient (asking again usually
//! helps). A structured answer that is JSON but not the step's type fails at the step with a decode
//! error naming the model.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{LlmRequest, LlmResponse, Model};
use crate::flow::EffectError;

/// A chat-completions endpoint.
#[derive(Clone, Debug)]
pub struct OpenAiModel {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    system: Option<String>,
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
        }
    }

    /// From the environment: `RADKIT_LLM_BASE_URL` (or `OPENAI_BASE_URL`, default the OpenAI API),
    /// `RADKIT_LLM_API_KEY` (or `OPENAI_API_KEY`), `RADKIT_LLM_MODEL` (or `OPENAI_MODEL`, required).
    pub fn from_env() -> Result<Self, String> {
        let var = |a: &str, b: &str| {
            std::env::var(a)
                .or_else(|_| std::env::var(b))
                .ok()
                .filter(|v| !v.is_empty())
        };
        let model = var("RADKIT_LLM_MODEL", "OPENAI_MODEL")
            .ok_or("set RADKIT_LLM_MODEL (or OPENAI_MODEL) to the model name")?;
        let base = var("RADKIT_LLM_BASE_URL", "OPENAI_BASE_URL")
            .unwrap_or_else(|| "https://api.openai.com/v1".to_owned());
        let mut m = OpenAiModel::new(base, model);
        m.api_key = var("RADKIT_LLM_API_KEY", "OPENAI_API_KEY");
        Ok(m)
    }

    /// With an API key (sent as a bearer token).
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

    fn body(&self, request: &LlmRequest) -> Value {
        let mut messages = Vec::new();
        if let Some(system) = &self.system {
            messages.push(json!({ "role": "system", "content": system }));
        }
        if request.schema.is_some() {
            messages.push(json!({ "role": "system", "content": "Answer with one JSON value that matches the given JSON Schema, and nothing else." }));
        }
        messages.push(json!({ "role": "user", "content": prompt_text(&request.input) }));
        let mut body = json!({ "model": self.model, "messages": messages });
        if let Some(schema) = &request.schema {
            body["response_format"] = json!({ "type": "json_schema", "json_schema": { "name": "answer", "schema": schema, "strict": false } });
        }
        body
    }
}

fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_default()
}

/// The text sent to the model: a string as is, content parts joined, anything else as JSON.
fn prompt_text(input: &Value) -> String {
    match input {
        Value::String(s) => s.clone(),
        Value::Array(parts) if parts.iter().all(|p| p.get("kind").is_some()) => parts
            .iter()
            .map(|p| {
                p.get("text")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| p.to_string())
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_secs_f64(s.min(3600.0)))
}

fn excerpt(text: &str) -> String {
    let t: String = text.chars().take(300).collect();
    if text.chars().count() > 300 {
        format!("{t}…")
    } else {
        t
    }
}

#[async_trait]
impl Model for OpenAiModel {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, EffectError> {
        let url = format!("{}/chat/completions", self.base_url);
        let mut http = self.client.post(&url).json(&self.body(&request));
        if let Some(key) = &self.api_key {
            http = http.bearer_auth(key);
        }
        let response = http.send().await.map_err(|e| {
            let kind = if e.is_timeout() {
                "timed out"
            } else {
                "failed"
            };
            EffectError::transient(format!(
                "model `{}` request to {url} {kind}: {e}",
                request.model
            ))
        })?;
        let status = response.status();
        let hint = retry_after(response.headers());
        let text = response.text().await.map_err(|e| {
            EffectError::transient(format!(
                "reading the answer of model `{}`: {e}",
                request.model
            ))
        })?;
        if !status.is_success() {
            let message = format!(
                "model `{}` answered HTTP {status}: {}",
                request.model,
                excerpt(&text)
            );
            let transient =
                status.as_u16() == 408 || status.as_u16() == 429 || status.is_server_error();
            let error = if transient {
                EffectError::transient(message)
            } else {
                EffectError::permanent(message)
            };
            return Err(match hint {
                Some(delay) => error.retry_after(delay),
                None => error,
            });
        }
        let body: Value = serde_json::from_str(&text).map_err(|e| {
            EffectError::transient(format!(
                "model `{}` answered with something that is not JSON ({e}): {}",
                request.model,
                excerpt(&text)
            ))
        })?;
        let content = body
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                EffectError::permanent(format!(
                    "model `{}` answered without `choices[0].message.content`: {}",
                    request.model,
                    excerpt(&text)
                ))
            })?;
        let output = if request.schema.is_some() {
            let trimmed = content
                .trim()
                .trim_start_matches("```json")
                .trim_start_matches("```")
                .trim_end_matches("```")
                .trim();
            serde_json::from_str::<Value>(trimmed).map_err(|e| {
                EffectError::transient(format!(
                    "model `{}` gave a structured answer that is not JSON ({e}): {}",
                    request.model,
                    excerpt(content)
                ))
            })?
        } else {
            Value::String(content.to_owned())
        };
        Ok(LlmResponse {
            output,
            usage: body.get("usage").cloned(),
        })
    }
}
