//! One HTTP exchange with a peer: the card `GET`, a JSON-RPC call, the opening of a JSON-RPC stream,
//! and the plain requests HTTP+JSON makes (`rest` frames them). It owns the headers (auth,
//! `A2A-Version`), the request ids, the timeouts, the size limits and the JSON-RPC envelope; what a
//! method's params and result mean is `wire`'s.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::Value;

use super::{ClientAuth, ClientError, ProtocolVersion};

/// How long the client waits, and for what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Establishing a TCP (and TLS) connection.
    pub connect: Duration,
    /// One request, from sending it to the last byte of its answer; for a stream, until the
    /// response's headers.
    pub request: Duration,
    /// The longest a stream may stay silent (keep-alive comments count as activity).
    pub stream_idle: Duration,
}

impl Default for Timeouts {
    /// 10 s to connect; 120 s per request (longer than a blocking send's wait on radkit, 60 s);
    /// 60 s of silence on a stream (radkit and the official SDKs send a keep-alive every 15 s).
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            request: Duration::from_secs(120),
            stream_idle: Duration::from_secs(60),
        }
    }
}

/// The most bytes the client reads of one answer or one SSE event, unless configured otherwise.
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// The HTTP side of a client: one connection pool, the auth headers, the limits.
#[derive(Debug, Clone)]
pub(crate) struct Transport {
    http: reqwest::Client,
    auth: HeaderMap,
    pub(crate) timeouts: Timeouts,
    pub(crate) max_body: usize,
}

/// What a streaming request opened: an SSE body, or a plain JSON answer (peers answer a stream
/// that cannot start with one JSON-RPC error, as a JSON body or as an SSE `error` event).
pub(crate) enum Opened {
    /// `text/event-stream`.
    Sse(reqwest::Response),
    /// Any other body, read whole.
    Json(Value),
}

/// A whole answer to a plain request, whatever its status (HTTP+JSON reads its errors' bodies).
pub(crate) struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The body, at most `max_body` bytes.
    pub body: Vec<u8>,
}

/// What a plain streaming request opened: an SSE body, or a whole answer of another kind.
pub(crate) enum OpenedPlain {
    /// `text/event-stream` with a success status.
    Sse(reqwest::Response),
    /// Anything else.
    Other(Answer),
}

/// A JSON-RPC request about to be sent: its id, method and params.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub id: String,
    pub method: &'static str,
    pub params: Value,
}

impl Call {
    /// A call with a fresh id (a UUID: unique across clients, restarts and retries).
    pub(crate) fn new(method: &'static str, params: Value) -> Self {
        Call {
            id: format!("radkit-{}", uuid::Uuid::new_v4()),
            method,
            params,
        }
    }

    fn body(&self) -> Value {
        serde_json::json!({
            "jsonrpc": "2.0",
            "id": self.id,
            "method": self.method,
            "params": self.params,
        })
    }

    /// The `result` of `envelope`, the answer to this call; its error as [`ClientError::Rpc`]. An
    /// error may carry a `null` id (the peer could not read ours); a result must carry ours.
    pub(crate) fn result_of(&self, envelope: Value) -> Result<Value, ClientError> {
        let Value::Object(mut envelope) = envelope else {
            return Err(self.protocol("is not a JSON-RPC response object"));
        };
        let id = envelope.remove("id").unwrap_or(Value::Null);
        if let Some(error) = envelope.remove("error").filter(|e| !e.is_null()) {
            if !(id.is_null() || id.as_str() == Some(&self.id)) {
                return Err(self.protocol(&format!("answers another request (id {id})")));
            }
            return Err(self.rpc_error(error));
        }
        if id.as_str() != Some(&self.id) {
            return Err(self.protocol(&format!("carries id {id}, not the request's `{}`", self.id)));
        }
        envelope
            .remove("result")
            .ok_or_else(|| self.protocol("has neither `result` nor `error`"))
    }

    fn rpc_error(&self, error: Value) -> ClientError {
        let code = error.get("code").and_then(Value::as_i64);
        let Some(code) = code else {
            return self.protocol(&format!(
                "holds an error without an integer `code`: {}",
                excerpt(&error.to_string())
            ));
        };
        ClientError::Rpc {
            method: self.method.to_owned(),
            code,
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            data: error.get("data").cloned(),
        }
    }

    pub(crate) fn protocol(&self, problem: &str) -> ClientError {
        ClientError::Protocol(format!("the answer to `{}` {problem}", self.method))
    }
}

/// At most 200 characters of `text`, for error messages.
pub(crate) fn excerpt(text: &str) -> String {
    const MAX: usize = 200;
    let mut out: String = text.chars().take(MAX).collect();
    if text.chars().count() > MAX {
        out.push('…');
    }
    out
}

impl Transport {
    pub(crate) fn new(
        auth: &ClientAuth,
        timeouts: Timeouts,
        max_body: usize,
    ) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .connect_timeout(timeouts.connect)
            .build()
            .map_err(|e| ClientError::Invalid(format!("cannot build the HTTP client: {e}")))?;
        Ok(Transport {
            http,
            auth: auth_headers(auth)?,
            timeouts,
            max_body,
        })
    }

    /// The credential headers sent with every request (the gRPC binding sends them as metadata).
    #[cfg(feature = "grpc")]
    pub(crate) fn auth(&self) -> &HeaderMap {
        &self.auth
    }

    /// `GET url`, its JSON body.
    pub(crate) async fn get_json(&self, url: &reqwest::Url) -> Result<Value, ClientError> {
        let request = crate::telemetry::traced(self.http.get(url.clone()))
            .headers(self.auth.clone())
            .header(ACCEPT, "application/json");
        let what = format!("the agent card at `{url}`");
        self.within(url.as_str(), async {
            let response = request
                .send()
                .await
                .map_err(|e| ClientError::transport(url.as_str(), &e))?;
            let body = self.checked_body(url.as_str(), response).await?;
            serde_json::from_slice(&body).map_err(|e| {
                ClientError::Card(format!(
                    "{what} is not JSON ({e}); check the URL: it should be an agent card or the base URL of an agent"
                ))
            })
        })
        .await
    }

    /// One JSON-RPC call to `url` speaking `version`; the call's `result`.
    pub(crate) async fn call(
        &self,
        url: &reqwest::Url,
        version: ProtocolVersion,
        call: &Call,
    ) -> Result<Value, ClientError> {
        let request = self.post(url, version, call, "application/json");
        let envelope = self
            .within(url.as_str(), async {
                let response = request
                    .send()
                    .await
                    .map_err(|e| ClientError::transport(url.as_str(), &e))?;
                let body = self.checked_body(url.as_str(), response).await?;
                serde_json::from_slice::<Value>(&body).map_err(|e| {
                    call.protocol(&format!(
                        "is not JSON ({e}): {}",
                        excerpt(&String::from_utf8_lossy(&body))
                    ))
                })
            })
            .await?;
        call.result_of(envelope)
    }

    /// Open a JSON-RPC stream (`message/stream`, `SubscribeToTask`, ...): the response once its
    /// headers arrived with a success status.
    pub(crate) async fn open(
        &self,
        url: &reqwest::Url,
        version: ProtocolVersion,
        call: &Call,
    ) -> Result<Opened, ClientError> {
        let request = self.post(url, version, call, "text/event-stream");
        self.within(url.as_str(), async {
            let response = request
                .send()
                .await
                .map_err(|e| ClientError::transport(url.as_str(), &e))?;
            if is_sse(&response) && response.status().is_success() {
                return Ok(Opened::Sse(response));
            }
            let body = self.checked_body(url.as_str(), response).await?;
            serde_json::from_slice(&body)
                .map(Opened::Json)
                .map_err(|e| {
                    call.protocol(&format!(
                        "is neither an event stream nor JSON ({e}): {}",
                        excerpt(&String::from_utf8_lossy(&body))
                    ))
                })
        })
        .await
    }

    /// A plain request (HTTP+JSON): `method url` with the auth and `A2A-Version: 1.0` headers and,
    /// when given, `body` as JSON.
    pub(crate) fn plain(
        &self,
        method: reqwest::Method,
        url: &reqwest::Url,
        body: Option<&Value>,
        accept: &'static str,
    ) -> reqwest::RequestBuilder {
        let mut request = crate::telemetry::traced(self.http.request(method, url.clone()))
            .headers(self.auth.clone())
            .header(ACCEPT, accept)
            .header("A2A-Version", "1.0");
        if let Some(body) = body {
            request = request.json(body);
        }
        request
    }

    /// Send a plain request and read its answer whole, whatever its status.
    pub(crate) async fn exchange(
        &self,
        url: &reqwest::Url,
        request: reqwest::RequestBuilder,
    ) -> Result<Answer, ClientError> {
        self.within(url.as_str(), async {
            let response = request
                .send()
                .await
                .map_err(|e| ClientError::transport(url.as_str(), &e))?;
            let status = response.status().as_u16();
            let body = read_bounded(url.as_str(), response, self.max_body).await?;
            Ok(Answer { status, body })
        })
        .await
    }

    /// Open a plain streaming request: the response once its headers arrived, as SSE when it is
    /// one with a success status, else read whole.
    pub(crate) async fn open_plain(
        &self,
        url: &reqwest::Url,
        request: reqwest::RequestBuilder,
    ) -> Result<OpenedPlain, ClientError> {
        self.within(url.as_str(), async {
            let response = request
                .send()
                .await
                .map_err(|e| ClientError::transport(url.as_str(), &e))?;
            if is_sse(&response) && response.status().is_success() {
                return Ok(OpenedPlain::Sse(response));
            }
            let status = response.status().as_u16();
            let body = read_bounded(url.as_str(), response, self.max_body).await?;
            Ok(OpenedPlain::Other(Answer { status, body }))
        })
        .await
    }

    fn post(
        &self,
        url: &reqwest::Url,
        version: ProtocolVersion,
        call: &Call,
        accept: &'static str,
    ) -> reqwest::RequestBuilder {
        let mut request = crate::telemetry::traced(self.http.post(url.clone()))
            .headers(self.auth.clone())
            .header(ACCEPT, accept)
            .json(&call.body());
        // A 0.3 request carries no version: 1.0 agents read a request without one as 0.3 (spec
        // §3.6.2), and 0.3 agents predate the header.
        if version == ProtocolVersion::V1_0 {
            request = request.header("A2A-Version", "1.0");
        }
        request
    }

    /// `fut` within the request timeout; its expiry is a transport error.
    async fn within<T>(
        &self,
        url: &str,
        fut: impl std::future::Future<Output = Result<T, ClientError>>,
    ) -> Result<T, ClientError> {
        let limit = self.timeouts.request;
        tokio::time::timeout(limit, fut).await.unwrap_or_else(|_| {
            Err(ClientError::Transport {
                url: url.to_owned(),
                detail: format!("no complete answer within {limit:?}"),
            })
        })
    }

    /// The body of a success response, at most `max_body` bytes; any other status is
    /// [`ClientError::Http`] with the start of its body.
    async fn checked_body(
        &self,
        url: &str,
        response: reqwest::Response,
    ) -> Result<Vec<u8>, ClientError> {
        let status = response.status();
        let body = read_bounded(url, response, self.max_body).await;
        if !status.is_success() {
            return Err(ClientError::http(
                url,
                status.as_u16(),
                body.as_deref().unwrap_or_default(),
            ));
        }
        body
    }

    /// The next chunk of a streamed body within the idle timeout; `None` at its end.
    pub(crate) async fn next_chunk(
        &self,
        url: &str,
        response: &mut reqwest::Response,
    ) -> Result<Option<hyper::body::Bytes>, ClientError> {
        let idle = self.timeouts.stream_idle;
        match tokio::time::timeout(idle, response.chunk()).await {
            Ok(Ok(chunk)) => Ok(chunk),
            Ok(Err(e)) => Err(ClientError::transport(url, &e)),
            Err(_) => Err(ClientError::Transport {
                url: url.to_owned(),
                detail: format!("the stream was silent for {idle:?}"),
            }),
        }
    }
}

/// True when the response is an event stream.
fn is_sse(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

/// A response's body, refused past `limit` bytes (its declared length is checked first).
async fn read_bounded(
    url: &str,
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, ClientError> {
    let too_large = || {
        ClientError::Protocol(format!(
            "the answer from `{url}` is larger than the limit of {limit} bytes"
        ))
    };
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| ClientError::transport(url, &e))?
    {
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The headers `auth` adds to every request, marked sensitive (never logged by the HTTP stack).
fn auth_headers(auth: &ClientAuth) -> Result<HeaderMap, ClientError> {
    let mut headers = HeaderMap::new();
    let (name, value) = match auth {
        ClientAuth::None => return Ok(headers),
        ClientAuth::Bearer(token) => (AUTHORIZATION, format!("Bearer {token}")),
        ClientAuth::Header { name, value } => {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                ClientError::Invalid(format!(
                    "`{}` is not an HTTP header name; use letters, digits and `-`",
                    excerpt(name)
                ))
            })?;
            (name, value.clone())
        }
    };
    let mut value = HeaderValue::from_str(&value).map_err(|_| {
        ClientError::Invalid(format!(
            "the `{name}` credential is not a valid HTTP header value; remove control characters and line breaks"
        ))
    })?;
    value.set_sensitive(true);
    headers.insert(name, value);
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_are_unique_per_call() {
        let a = Call::new("tasks/get", json!({}));
        let b = Call::new("tasks/get", json!({}));
        assert_ne!(a.id, b.id);
    }

    #[test]
    fn a_result_must_answer_this_call_and_an_error_may_carry_a_null_id() {
        let call = Call::new("tasks/get", json!({}));
        let ok = json!({"jsonrpc": "2.0", "id": call.id, "result": {"x": 1}});
        assert_eq!(call.result_of(ok).unwrap(), json!({"x": 1}));
        let other = json!({"jsonrpc": "2.0", "id": "nope", "result": {}});
        assert!(matches!(
            call.result_of(other),
            Err(ClientError::Protocol(_))
        ));
        let error =
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32001, "message": "gone"}});
        let e = call.result_of(error).unwrap_err();
        assert!(e.is_task_not_found(), "{e}");
        let neither = json!({"jsonrpc": "2.0", "id": call.id});
        assert!(matches!(
            call.result_of(neither),
            Err(ClientError::Protocol(_))
        ));
        let bad_code = json!({"jsonrpc": "2.0", "id": call.id, "error": {"code": "x"}});
        assert!(matches!(
            call.result_of(bad_code),
            Err(ClientError::Protocol(_))
        ));
        assert!(matches!(
            call.result_of(json!([1])),
            Err(ClientError::Protocol(_))
        ));
    }

    #[test]
    fn credentials_that_are_not_header_values_are_refused_up_front() {
        assert!(auth_headers(&ClientAuth::Bearer("a\nb".into())).is_err());
        assert!(auth_headers(&ClientAuth::Header {
            name: "bad name".into(),
            value: "v".into()
        })
        .is_err());
        let headers = auth_headers(&ClientAuth::Bearer("t".into())).unwrap();
        assert_eq!(headers[AUTHORIZATION], "Bearer t");
        assert!(headers[AUTHORIZATION].is_sensitive());
    }
}
