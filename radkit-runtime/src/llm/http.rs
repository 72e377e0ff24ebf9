//! What every HTTP model provider shares: the client, posting one request and classifying its
//! answer for the engine's retries, streaming one request's answer, the prompt text, and reading a
//! structured answer. Each provider module only builds its body and reads its answer (and, when
//! streamed, its events).
//!
//! The classification: a request that timed out or could not connect, HTTP 408, 409, 429, 5xx and
//! Anthropic's 529 (overloaded) are transient, with the provider's `Retry-After` (or
//! `retry-after-ms`, or Gemini's `RetryInfo.retryDelay` in the error body) honoured; 401 and 403
//! are permanent, saying to check the credentials; other 4xx and answers that cannot be read are
//! permanent.
//!
//! Streaming ([`send_stream`]): the status is classified as above before anything is read. Then a
//! stream that is cut (a connection error, a body that ends before the provider's end marker, a
//! silence longer than the timeout) or a chunk that is not JSON is transient: the engine retries
//! the call, and the next attempt's text replaces what was already sent. An error event in the
//! stream is classified by its type ([`stream_failed`]). Memory is bounded: one SSE event or one
//! NDJSON line is at most [`EVENT_LIMIT`] bytes and a whole streamed body at most
//! [`STREAM_LIMIT`]; past either the call fails permanently (asking again would only pay for the
//! same oversized answer).

use std::collections::VecDeque;
use std::time::Duration;

use serde_json::Value;

use crate::client::sse::SseParser;
use crate::flow::EffectError;

/// A provider's HTTP client and its timeout. A call answered whole ([`post`](Self::post)) must be
/// answered within the timeout; a streamed call ([`post_stream`](Self::post_stream)) has no total
/// limit, since a long answer may take minutes to generate, but is cut (transiently) when its
/// stream is silent for the timeout ([`send_stream`]).
#[derive(Debug, Clone)]
pub(super) struct Client {
    http: reqwest::Client,
    timeout: Duration,
}

/// A client with the request `timeout` and a 10 s connect timeout.
pub(super) fn client(timeout: Duration) -> Client {
    Client {
        http: reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default(),
        timeout,
    }
}

impl Client {
    /// A request answered whole: the exchange, body included, within the timeout.
    pub(super) fn post(&self, url: &str) -> reqwest::RequestBuilder {
        crate::telemetry::traced(self.http.post(url).timeout(self.timeout))
    }

    /// A streamed request: no total limit ([`send_stream`] limits each wait to [`idle`](Self::idle)).
    pub(super) fn post_stream(&self, url: &str) -> reqwest::RequestBuilder {
        crate::telemetry::traced(self.http.post(url))
    }

    /// The longest a stream may stay silent (the timeout).
    pub(super) fn idle(&self) -> Duration {
        self.timeout
    }
}

/// The error of a request that could not be sent or answered.
fn send_failed(name: &str, url: &str, e: &reqwest::Error) -> EffectError {
    let kind = if e.is_timeout() {
        "timed out"
    } else {
        "failed"
    };
    EffectError::transient(format!("model `{name}` request to {url} {kind}: {e}"))
}

/// Send `request` for model `name` (the registered name, for messages) and read its JSON answer.
pub(super) async fn send_json(
    name: &str,
    url: &str,
    request: reqwest::RequestBuilder,
) -> Result<Value, EffectError> {
    let response = request
        .send()
        .await
        .map_err(|e| send_failed(name, url, &e))?;
    let status = response.status();
    let hint = retry_after(response.headers());
    let text = response.text().await.map_err(|e| {
        EffectError::transient(format!("reading the answer of model `{name}`: {e}"))
    })?;
    if !status.is_success() {
        return Err(refused(name, status.as_u16(), hint, &text));
    }
    serde_json::from_str(&text).map_err(|e| {
        EffectError::transient(format!(
            "model `{name}` answered with something that is not JSON ({e}): {}",
            excerpt(&text)
        ))
    })
}

/// The most bytes one SSE event or one NDJSON line of a streamed answer may take.
pub(super) const EVENT_LIMIT: usize = 1 << 20;

/// The most bytes a streamed answer's body may take (every event of it).
pub(super) const STREAM_LIMIT: usize = 16 << 20;

/// How a streamed body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// Server-sent events (OpenAI, Anthropic, Gemini with `alt=sse`): each event's `data`.
    Sse,
    /// One JSON value a line (Ollama): each non-blank line.
    Ndjson,
}

enum Splitter {
    Sse(SseParser),
    /// The bytes of the line not ended yet.
    Lines(Vec<u8>),
}

/// A streamed answer being read: [`next`](Self::next) gives each event's data in order.
pub(super) struct Streamed {
    name: String,
    url: String,
    response: reqwest::Response,
    idle: Duration,
    splitter: Splitter,
    pending: VecDeque<String>,
    read: usize,
    ended: bool,
}

/// Send the streamed `request` for model `name`: a status other than 2xx is classified as
/// [`send_json`] classifies it (its body read within `idle`); a 2xx answer is returned to be read
/// event by event, each wait for the next bytes limited to `idle`.
pub(super) async fn send_stream(
    name: &str,
    url: &str,
    framing: Framing,
    idle: Duration,
    request: reqwest::RequestBuilder,
) -> Result<Streamed, EffectError> {
    let response = tokio::time::timeout(idle, request.send())
        .await
        .map_err(|_| {
            EffectError::transient(format!(
                "model `{name}` request to {url} timed out: no answer within {idle:?}"
            ))
        })?
        .map_err(|e| send_failed(name, url, &e))?;
    let status = response.status();
    if !status.is_success() {
        let hint = retry_after(response.headers());
        let text = tokio::time::timeout(idle, response.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        return Err(refused(name, status.as_u16(), hint, &text));
    }
    Ok(Streamed {
        name: name.to_owned(),
        url: url.to_owned(),
        response,
        idle,
        splitter: match framing {
            Framing::Sse => Splitter::Sse(SseParser::new(EVENT_LIMIT)),
            Framing::Ndjson => Splitter::Lines(Vec::new()),
        },
        pending: VecDeque::new(),
        read: 0,
        ended: false,
    })
}

impl Streamed {
    /// The data of the next event (SSE) or the next non-blank line (NDJSON); `None` where the body
    /// ends cleanly. A connection cut or a silence of the idle timeout is transient; an event over
    /// [`EVENT_LIMIT`] or a body over [`STREAM_LIMIT`] is permanent.
    pub(super) async fn next(&mut self) -> Result<Option<String>, EffectError> {
        loop {
            if let Some(data) = self.pending.pop_front() {
                return Ok(Some(data));
            }
            if self.ended {
                return Ok(None);
            }
            let name = &self.name;
            let chunk = match tokio::time::timeout(self.idle, self.response.chunk()).await {
                Err(_) => {
                    return Err(EffectError::transient(format!(
                        "the stream of model `{name}` from {} was silent for {:?}",
                        self.url, self.idle
                    )))
                }
                Ok(Err(e)) => {
                    return Err(EffectError::transient(format!(
                        "the stream of model `{name}` from {} was cut: {e}",
                        self.url
                    )))
                }
                Ok(Ok(None)) => {
                    self.ended = true;
                    // NDJSON's last line may lack its newline.
                    if let Splitter::Lines(line) = &mut self.splitter {
                        let line = std::mem::take(line);
                        self.line(&line);
                    }
                    continue;
                }
                Ok(Ok(Some(chunk))) => chunk,
            };
            self.read += chunk.len();
            if self.read > STREAM_LIMIT {
                return Err(EffectError::permanent(format!(
                    "the streamed answer of model `{name}` is larger than the limit of {STREAM_LIMIT} bytes"
                )));
            }
            let too_large = || {
                EffectError::permanent(format!(
                    "an event in the stream of model `{name}` is larger than the limit of {EVENT_LIMIT} bytes"
                ))
            };
            match &mut self.splitter {
                Splitter::Sse(parser) => {
                    let events = parser.push(&chunk).map_err(|_| too_large())?;
                    self.pending.extend(events.into_iter().map(|e| e.data));
                }
                Splitter::Lines(line) => {
                    let mut ended = Vec::new();
                    for &byte in chunk.iter() {
                        if byte == b'\n' {
                            ended.push(std::mem::take(line));
                        } else if line.len() >= EVENT_LIMIT {
                            return Err(too_large());
                        } else {
                            line.push(byte);
                        }
                    }
                    for line in ended {
                        self.line(&line);
                    }
                }
            }
        }
    }

    /// An NDJSON line: queued unless blank.
    fn line(&mut self, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        if !line.trim().is_empty() {
            self.pending.push_back(line.trim().to_owned());
        }
    }
}

/// One event's data as JSON; not JSON is transient (a garbled stream; asking again usually helps).
pub(super) fn chunk_json(name: &str, data: &str) -> Result<Value, EffectError> {
    serde_json::from_str(data)
        .map_err(|e| malformed(name, &format!("that is not JSON ({e})"), data))
}

/// A streamed chunk that cannot be read (`why` says how): transient, as a garbled stream is.
pub(super) fn malformed(name: &str, why: &str, data: &str) -> EffectError {
    EffectError::transient(format!(
        "model `{name}` streamed a chunk {why}: {}",
        excerpt(data)
    ))
}

/// A stream that ended before its `marker`: transient (the answer was cut short).
pub(super) fn cut_short(name: &str, marker: &str) -> EffectError {
    EffectError::transient(format!(
        "the stream of model `{name}` ended before its end ({marker}): the answer was cut short"
    ))
}

/// An error event in a stream, by its `kind` (Anthropic's `error.type`, OpenAI's `code` or
/// `type`, Gemini's `status`): overload, rate limits, server errors and timeouts are transient;
/// refused credentials are permanent, saying so; anything else (an invalid request) is permanent.
pub(super) fn stream_failed(name: &str, kind: &str, message: &str) -> EffectError {
    let text = format!(
        "model `{name}` failed while streaming ({kind}): {}",
        excerpt(message)
    );
    let k = kind.to_ascii_lowercase();
    if [
        "authentication",
        "permission",
        "invalid_api_key",
        "unauthenticated",
    ]
    .iter()
    .any(|w| k.contains(w))
    {
        return EffectError::permanent(format!(
            "{text} (the provider refused the credentials: check the API key)"
        ));
    }
    if [
        "overloaded",
        "rate_limit",
        "server_error",
        "api_error",
        "internal",
        "unavailable",
        "resource_exhausted",
        "timeout",
        "deadline_exceeded",
    ]
    .iter()
    .any(|w| k.contains(w))
    {
        EffectError::transient(text)
    } else {
        EffectError::permanent(text)
    }
}

/// The error for an answer with HTTP `status` and `body`.
pub(super) fn refused(name: &str, status: u16, hint: Option<Duration>, body: &str) -> EffectError {
    let message = format!("model `{name}` answered HTTP {status}: {}", excerpt(body));
    let error = match status {
        401 | 403 => {
            return EffectError::permanent(format!(
                "{message} (the provider refused the credentials: check the API key)"
            ))
        }
        408 | 409 | 429 | 529 | 500..=599 => EffectError::transient(message),
        _ => EffectError::permanent(message),
    };
    match hint.or_else(|| retry_info(body)) {
        Some(delay) if error.is_transient() => error.retry_after(delay),
        _ => error,
    }
}

/// The longest wait a provider's hint is taken for.
const HINT_CAP: Duration = Duration::from_secs(3600);

/// `Retry-After` as seconds (`2`, `0.5`) or an HTTP date, capped at an hour. Also reads the
/// `retry-after-ms` header some gateways (Azure OpenAI) send.
pub(super) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0).min(HINT_CAP));
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
        return Some(Duration::from_secs_f64(secs.min(HINT_CAP.as_secs_f64())));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait_ms = (at.with_timezone(&chrono::Utc) - chrono::Utc::now())
        .num_milliseconds()
        .max(0);
    Some(Duration::from_millis(wait_ms.unsigned_abs()).min(HINT_CAP))
}

/// Gemini's hint in the error body: `error.details[]` holding a `google.rpc.RetryInfo` whose
/// `retryDelay` is a duration such as `"12s"` or `"0.5s"`.
fn retry_info(body: &str) -> Option<Duration> {
    let body: Value = serde_json::from_str(body).ok()?;
    let delay = body
        .pointer("/error/details")?
        .as_array()?
        .iter()
        .find(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })?
        .get("retryDelay")?
        .as_str()?;
    let secs = delay
        .strip_suffix('s')?
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)?;
    Some(Duration::from_secs_f64(secs.min(HINT_CAP.as_secs_f64())))
}

/// At most 300 characters of `text`, for error messages.
pub(super) fn excerpt(text: &str) -> String {
    let t: String = text.chars().take(300).collect();
    if text.chars().count() > 300 {
        format!("{t}…")
    } else {
        t
    }
}

/// The text sent to the model: a string as is, content parts joined, anything else as JSON.
pub(super) fn prompt_text(input: &Value) -> String {
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

/// The instruction added when a structured answer is asked for.
pub(super) const JSON_ONLY: &str =
    "Answer with one JSON value that matches the given JSON Schema, and nothing else.";

/// A structured answer given as text: the JSON in it (a Markdown fence around it is dropped). Not
/// JSON is transient (asking again usually helps); `truncated` says it was cut off at the token
/// limit.
pub(super) fn structured(name: &str, text: &str, truncated: bool) -> Result<Value, EffectError> {
    let trimmed = text
        .trim()
        .trim_start_matches("```json")
        .trim_start_matches("```")
        .trim_end_matches("```")
        .trim();
    serde_json::from_str::<Value>(trimmed).map_err(|e| {
        let why = if truncated {
            " because it was cut off at the token limit"
        } else {
            ""
        };
        EffectError::transient(format!(
            "model `{name}` gave a structured answer that is not JSON{why} ({e}): {}",
            excerpt(text)
        ))
    })
}

/// The schema's name where a provider wants one (OpenAI's `response_format`, Anthropic's answer
/// tool): its `title` (schemars puts the Rust type's name there), reduced to `[a-zA-Z0-9_-]`, at
/// most 64 characters, or `answer`.
pub(super) fn schema_name(schema: &Value) -> String {
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

/// An answer without the field a provider must send.
pub(super) fn missing(name: &str, what: &str, body: &Value) -> EffectError {
    EffectError::permanent(format!(
        "model `{name}` answered without {what}: {}",
        excerpt(&body.to_string())
    ))
}

/// A registered tool name as the providers' function names allow it (`[a-zA-Z0-9_-]`, at most 64:
/// an MCP tool's `server.tool` becomes `server_tool`).
pub(super) fn function_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// The registered name of the offered tool a model called as `called` (its [`function_name`]).
pub(super) fn registered_name(tools: &[crate::tools::ToolSchema], called: &str) -> String {
    tools
        .iter()
        .find(|t| function_name(&t.name) == called)
        .map_or_else(|| called.to_owned(), |t| t.name.clone())
}

/// A tool's result as the text a provider's tool-result message carries.
pub(super) fn result_text(output: &Value) -> String {
    match output {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A call's arguments sent as a JSON string (OpenAI's `arguments`): the object they hold. Not JSON
/// is transient (asking again usually helps).
pub(super) fn arguments(name: &str, raw: &Value) -> Result<Value, EffectError> {
    match raw {
        Value::String(text) if text.trim().is_empty() => Ok(Value::Object(Default::default())),
        Value::String(text) => serde_json::from_str(text).map_err(|e| {
            EffectError::transient(format!(
                "model `{name}` called a tool with arguments that are not JSON ({e}): {}",
                excerpt(text)
            ))
        }),
        other => Ok(other.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_is_permanent_and_overload_is_transient_with_its_hint() {
        let denied = refused("m", 401, None, "{}");
        assert!(!denied.is_transient());
        assert!(denied.message.contains("check the API key"), "{denied:?}");
        let overloaded = refused("m", 529, Some(Duration::from_secs(3)), "{}");
        assert!(overloaded.is_transient());
        assert_eq!(overloaded.retry_after_ms, Some(3000));
        assert!(!refused("m", 400, Some(Duration::from_secs(3)), "{}").is_transient());
    }

    #[test]
    fn gemini_retry_info_in_the_body_is_the_hint() {
        let body = r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[
            {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"12s"}]}}"#;
        assert_eq!(refused("m", 429, None, body).retry_after_ms, Some(12_000));
    }

    #[test]
    fn a_fenced_structured_answer_is_read_and_a_cut_off_one_says_so() {
        assert_eq!(
            structured("m", "```json\n{\"a\":1}\n```", false).unwrap(),
            serde_json::json!({"a": 1})
        );
        let cut = structured("m", "{\"a\":", true).unwrap_err();
        assert!(cut.is_transient() && cut.message.contains("token limit"));
    }

    #[test]
    fn stream_error_events_are_classified_by_their_type() {
        assert!(stream_failed("m", "overloaded_error", "Overloaded").is_transient());
        assert!(stream_failed("m", "rate_limit_error", "slow down").is_transient());
        assert!(stream_failed("m", "server_error", "oops").is_transient());
        assert!(stream_failed("m", "UNAVAILABLE", "busy").is_transient());
        let denied = stream_failed("m", "authentication_error", "bad key");
        assert!(!denied.is_transient() && denied.message.contains("check the API key"));
        assert!(!stream_failed("m", "invalid_request_error", "bad").is_transient());
        assert!(chunk_json("m", "{\"a\":").unwrap_err().is_transient());
        assert!(cut_short("m", "`message_stop`").is_transient());
    }
}
