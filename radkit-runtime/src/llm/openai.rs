//! An OpenAI-compatible chat-completions client (OpenAI, Ollama, vLLM, gateways) over reqwest.
//!
//! Errors are classified for the engine's retries: timeouts, connection failures, 408, 429 and 5xx
//! are transient (429 and 503 carry `Retry-After`); other 4xx and answers that cannot be read are
//! permanent, except a structured answer that is not JSON, which is transient (asking again usually
//! helps; the message says when the answer was cut off at the token limit). A refusal is permanent. A
//! structured answer that is JSON but not the step's type fails at the step with a decode error
//! naming the model. The client never sees the journal: the engine retries and receipts.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{LlmRequest, LlmResponse, Model};
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
}

/// A chat-completions endpoint. Its `Debug` output never shows the API key.
#[derive(Clone)]
pub struct OpenAiModel {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    system: Option<String>,
    strict: bool,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
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
        }
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
            messages.push(json!({ "role": "system", "content": "Answer with one JSON value that matches the given JSON Schema, and nothing else." }));
        }
        messages.push(json!({ "role": "user", "content": prompt_text(&request.input) }));
        let mut body = json!({ "model": self.model, "messages": messages });
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

/// The schema's name for `response_format`: its `title` (schemars puts the Rust type's name there),
/// reduced to the characters OpenAI accepts (`[a-zA-Z0-9_-]`, at most 64), or `answer`.
fn schema_name(schema: &Value) -> String {
    let name: String = schema
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.trim_matches('_').is_empty() {
        "answer".to_owned()
    } else {
        name
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

/// `Retry-After` as seconds (`2`, `0.5`) or an HTTP date, capped at an hour. Also reads the
/// `retry-after-ms` header some gateways (Azure OpenAI) send.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    const CAP_SECS: f64 = 3600.0;
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        return Some(Duration::from_secs_f64((ms / 1000.0).min(CAP_SECS)));
    }
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Some(secs) = value
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
    {
        return Some(Duration::from_secs_f64(secs.min(CAP_SECS)));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait_ms = (at.with_timezone(&chrono::Utc) - chrono::Utc::now())
        .num_milliseconds()
        .max(0);
    Some(Duration::from_millis(wait_ms as u64).min(Duration::from_secs_f64(CAP_SECS)))
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
        // The command's id lets gateways that deduplicate requests recognise a reissue.
        let mut http = self
            .client
            .post(&url)
            .header("Idempotency-Key", request.invocation_id.as_str())
            .json(&self.body(&request));
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
        if let Some(refusal) = body
            .pointer("/choices/0/message/refusal")
            .and_then(Value::as_str)
        {
            // Structured outputs: the model declined; asking again gets the same answer.
            return Err(EffectError::permanent(format!(
                "model `{}` refused: {}",
                request.model,
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
                let why = if truncated {
                    " because it was cut off at the token limit (finish_reason `length`)"
                } else {
                    ""
                };
                EffectError::transient(format!(
                    "model `{}` gave a structured answer that is not JSON{why} ({e}): {}",
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
