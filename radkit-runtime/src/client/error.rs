//! What can go wrong when calling another agent, classified for the caller's retries: the network
//! and the peer's overload are transient; an A2A error, an answer that is not A2A, a card without a
//! usable interface and a misconfigured client are not (except radkit's own "retry later" codes).

/// The JSON-RPC error codes the client gives a meaning to (A2A names them; radkit adds its own).
pub mod codes {
    /// No such task (A2A `TaskNotFoundError`).
    pub const TASK_NOT_FOUND: i64 = -32001;
    /// The task cannot be canceled (A2A `TaskNotCancelableError`).
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    /// radkit's own: the peer's store is unavailable; retry later.
    pub const STORAGE_UNAVAILABLE: i64 = -32050;
    /// radkit's own: the peer serves as many connections as it allows; retry later.
    pub const TOO_MANY_CONNECTIONS: i64 = -32051;
    /// radkit's own: the caller has as many streams open as the peer allows; retry later or poll.
    pub const TOO_MANY_STREAMS: i64 = -32052;
}

/// An error from [`A2aClient`](super::A2aClient).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The request did not get an answer: the connection was refused or reset, a timeout passed, or
    /// the body stopped arriving. Transient.
    #[error("no answer from the agent at `{url}`: {detail}; check that it is running and reachable, or retry")]
    Transport {
        /// The URL called.
        url: String,
        /// What the HTTP client reported.
        detail: String,
    },
    /// The peer answered with an HTTP status other than success. 5xx, 408 and 429 are transient.
    #[error("the agent at `{url}` answered HTTP {status}: {body}")]
    Http {
        /// The URL called.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body (at most [`BODY_EXCERPT`] characters), for the log.
        body: String,
    },
    /// The peer answered with an A2A error: a JSON-RPC error, or on HTTP+JSON and gRPC a
    /// `google.rpc.Status` whose `google.rpc.ErrorInfo` names one (its reason read as the JSON-RPC
    /// code A2A gives the same error, spec §5.4), so the same checks work on every binding.
    #[error("the agent refused `{method}` with error {code}: {message}")]
    Rpc {
        /// The method called (`SendMessage`, `GetTask`, ...; 0.3's `message/send`, ...).
        method: String,
        /// The JSON-RPC error code (A2A's: -32001 task not found, -32002 not cancelable, ...).
        code: i64,
        /// The peer's message.
        message: String,
        /// The error's `data`, if any (1.0 peers put a `google.rpc.ErrorInfo` list there; over
        /// HTTP+JSON and gRPC it is the status's `details`).
        data: Option<serde_json::Value>,
    },
    /// The peer answered a gRPC call with a status that names no A2A error (no `ErrorInfo` with a
    /// reason A2A or radkit defines). `UNAVAILABLE`, `RESOURCE_EXHAUSTED`, `DEADLINE_EXCEEDED` and
    /// `ABORTED` are transient.
    #[error("the agent at `{url}` answered `{method}` with gRPC status {code}: {message}")]
    Grpc {
        /// The target called.
        url: String,
        /// The RPC.
        method: String,
        /// The gRPC status code (`14` is `UNAVAILABLE`).
        code: i32,
        /// The status message (at most [`BODY_EXCERPT`] characters).
        message: String,
    },
    /// The answer is not what A2A says it is: not JSON, not a JSON-RPC response to this request, a
    /// result of the wrong shape, a malformed or oversized SSE event, or a body over the size limit.
    #[error("the agent's answer is not valid A2A: {0}")]
    Protocol(String),
    /// A stream ended before the task reached a terminal or interrupted state (the connection was
    /// closed, or the peer ended the response). Transient: subscribe again, or poll with `get`.
    #[error(
        "the stream from `{url}` ended before the task settled; subscribe again or poll the task"
    )]
    StreamClosed {
        /// The URL streamed from.
        url: String,
    },
    /// The agent card cannot be used: it is not a card, or offers no interface the client speaks
    /// (the message names what it offers).
    #[error("{0}")]
    Card(String),
    /// The client was given something it cannot send: an invalid URL or header value, a message
    /// that has no form in the peer's protocol version.
    #[error("{0}")]
    Invalid(String),
}

/// How many characters of an error body [`ClientError::Http`] keeps.
pub const BODY_EXCERPT: usize = 512;

impl ClientError {
    /// True when the same request may succeed later unchanged: transport failures, a stream that
    /// closed early, HTTP 408, 429 and 5xx, and radkit's "retry later" codes (-32050 to -32052).
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Transport { .. } | ClientError::StreamClosed { .. } => true,
            ClientError::Http { status, .. } => {
                *status == 408 || *status == 429 || (500..600).contains(status)
            }
            ClientError::Rpc { code, .. } => matches!(
                *code,
                codes::STORAGE_UNAVAILABLE | codes::TOO_MANY_CONNECTIONS | codes::TOO_MANY_STREAMS
            ),
            // UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, ABORTED.
            ClientError::Grpc { code, .. } => matches!(*code, 14 | 8 | 4 | 10),
            ClientError::Protocol(_) | ClientError::Card(_) | ClientError::Invalid(_) => false,
        }
    }

    /// The JSON-RPC error code, for [`ClientError::Rpc`].
    pub fn rpc_code(&self) -> Option<i64> {
        match self {
            ClientError::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The peer has no such task (A2A `TaskNotFoundError`, -32001).
    pub fn is_task_not_found(&self) -> bool {
        self.rpc_code() == Some(codes::TASK_NOT_FOUND)
    }

    /// The task cannot be canceled, usually because it already ended (A2A
    /// `TaskNotCancelableError`, -32002).
    pub fn is_not_cancelable(&self) -> bool {
        self.rpc_code() == Some(codes::TASK_NOT_CANCELABLE)
    }

    /// The A2A error a `google.rpc.Status` names (HTTP+JSON's error body, gRPC's status details):
    /// the first `ErrorInfo` in `details` whose reason A2A (or radkit, in its own domain) defines,
    /// as [`ClientError::Rpc`] with that error's JSON-RPC code; `None` when none does.
    pub(crate) fn from_status(
        method: &str,
        message: &str,
        details: &[serde_json::Value],
    ) -> Option<Self> {
        let code = details.iter().find_map(|detail| {
            let is_info = detail
                .get("@type")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.ErrorInfo"));
            let reason = detail.get("reason").and_then(serde_json::Value::as_str)?;
            let domain = detail.get("domain").and_then(serde_json::Value::as_str);
            is_info.then(|| code_of_reason(reason, domain)).flatten()
        })?;
        Some(ClientError::Rpc {
            method: method.to_owned(),
            code,
            message: excerpt(message),
            data: Some(serde_json::Value::Array(details.to_vec())),
        })
    }

    pub(crate) fn transport(url: &str, error: &reqwest::Error) -> Self {
        ClientError::Transport {
            url: url.to_owned(),
            detail: describe(error),
        }
    }

    pub(crate) fn http(url: &str, status: u16, body: &[u8]) -> Self {
        ClientError::Http {
            url: url.to_owned(),
            status,
            body: excerpt(&String::from_utf8_lossy(body)),
        }
    }
}

/// The JSON-RPC code of the error an `ErrorInfo` reason names (spec §5.4; the official SDKs name
/// JSON-RPC's standard errors the same way), radkit's own in the `radkit` domain.
fn code_of_reason(reason: &str, domain: Option<&str>) -> Option<i64> {
    const A2A: [(&str, i64); 14] = [
        ("TASK_NOT_FOUND", codes::TASK_NOT_FOUND),
        ("TASK_NOT_CANCELABLE", codes::TASK_NOT_CANCELABLE),
        ("PUSH_NOTIFICATION_NOT_SUPPORTED", -32003),
        ("UNSUPPORTED_OPERATION", -32004),
        ("CONTENT_TYPE_NOT_SUPPORTED", -32005),
        ("INVALID_AGENT_RESPONSE", -32006),
        ("EXTENDED_AGENT_CARD_NOT_CONFIGURED", -32007),
        ("EXTENSION_SUPPORT_REQUIRED", -32008),
        ("VERSION_NOT_SUPPORTED", -32009),
        ("PARSE_ERROR", -32700),
        ("INVALID_REQUEST", -32600),
        ("METHOD_NOT_FOUND", -32601),
        ("INVALID_PARAMS", -32602),
        ("INTERNAL_ERROR", -32603),
    ];
    const RADKIT: [(&str, i64); 3] = [
        ("STORAGE_UNAVAILABLE", codes::STORAGE_UNAVAILABLE),
        ("TOO_MANY_CONNECTIONS", codes::TOO_MANY_CONNECTIONS),
        ("TOO_MANY_STREAMS", codes::TOO_MANY_STREAMS),
    ];
    let table: &[(&str, i64)] = match domain {
        Some("radkit") => &RADKIT,
        _ => &A2A,
    };
    table
        .iter()
        .find(|(r, _)| *r == reason)
        .map(|(_, code)| *code)
}

/// At most [`BODY_EXCERPT`] characters of `text`.
pub(crate) fn excerpt(text: &str) -> String {
    let mut out: String = text.trim().chars().take(BODY_EXCERPT).collect();
    if text.trim().chars().count() > BODY_EXCERPT {
        out.push('…');
    }
    out
}

/// A reqwest error and its causes, `: `-separated (the useful part, "connection refused", is a
/// cause), with a timeout said as such.
fn describe(error: &reqwest::Error) -> String {
    let mut text = if error.is_timeout() {
        "timed out".to_owned()
    } else if error.is_connect() {
        "cannot connect".to_owned()
    } else {
        "the request failed".to_owned()
    };
    let mut cause = std::error::Error::source(error);
    while let Some(e) = cause {
        let more = e.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpc(code: i64) -> ClientError {
        ClientError::Rpc {
            method: "tasks/get".into(),
            code,
            message: "m".into(),
            data: None,
        }
    }

    #[test]
    fn overload_and_the_network_are_transient_and_refusals_are_not() {
        let http = |status| ClientError::Http {
            url: "u".into(),
            status,
            body: String::new(),
        };
        for transient in [
            http(500),
            http(503),
            http(429),
            http(408),
            rpc(-32050),
            rpc(-32052),
            ClientError::StreamClosed { url: "u".into() },
            ClientError::Transport {
                url: "u".into(),
                detail: "d".into(),
            },
        ] {
            assert!(transient.is_transient(), "{transient:?}");
        }
        for permanent in [
            http(400),
            http(401),
            http(404),
            rpc(-32001),
            rpc(-32603),
            ClientError::Protocol("p".into()),
            ClientError::Card("c".into()),
        ] {
            assert!(!permanent.is_transient(), "{permanent:?}");
        }
        assert!(rpc(-32001).is_task_not_found() && !rpc(-32001).is_not_cancelable());
        assert!(rpc(-32002).is_not_cancelable());
    }

    #[test]
    fn a_status_naming_an_a2a_error_reads_as_its_json_rpc_code() {
        let details = |reason: &str, domain: &str| {
            vec![
                serde_json::json!({"@type": "type.googleapis.com/google.rpc.BadRequest"}),
                serde_json::json!({"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": reason, "domain": domain}),
            ]
        };
        let e = ClientError::from_status(
            "GetTask",
            "gone",
            &details("TASK_NOT_FOUND", "a2a-protocol.org"),
        );
        assert!(
            e.as_ref().is_some_and(ClientError::is_task_not_found),
            "{e:?}"
        );
        let e = ClientError::from_status(
            "CancelTask",
            "",
            &details("TASK_NOT_CANCELABLE", "a2a-protocol.org"),
        );
        assert!(e.is_some_and(|e| e.is_not_cancelable()));
        let e = ClientError::from_status("SendMessage", "", &details("TOO_MANY_STREAMS", "radkit"));
        assert!(e.is_some_and(|e| e.is_transient()));
        assert_eq!(
            ClientError::from_status("GetTask", "", &details("MYSTERY", "x")),
            None
        );
        assert_eq!(ClientError::from_status("GetTask", "", &[]), None);
        let grpc = |code| ClientError::Grpc {
            url: "u".into(),
            method: "GetTask".into(),
            code,
            message: String::new(),
        };
        assert!(grpc(14).is_transient() && !grpc(5).is_transient());
    }

    #[test]
    fn an_http_error_keeps_an_excerpt_of_the_body() {
        let body = "x".repeat(BODY_EXCERPT * 2);
        let ClientError::Http { body, status, .. } = ClientError::http("u", 502, body.as_bytes())
        else {
            unreachable!()
        };
        assert_eq!(status, 502);
        assert_eq!(body.chars().count(), BODY_EXCERPT + 1);
    }
}
