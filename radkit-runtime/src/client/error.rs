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
    /// The peer answered with a JSON-RPC error.
    #[error("the agent refused `{method}` with error {code}: {message}")]
    Rpc {
        /// The method called.
        method: String,
        /// The JSON-RPC error code (A2A's: -32001 task not found, -32002 not cancelable, ...).
        code: i64,
        /// The peer's message.
        message: String,
        /// The error's `data`, if any (1.0 peers put a `google.rpc.ErrorInfo` list there).
        data: Option<serde_json::Value>,
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
    /// The agent card cannot be used: it is not a card, or offers no JSON-RPC interface.
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

    pub(crate) fn transport(url: &str, error: &reqwest::Error) -> Self {
        ClientError::Transport {
            url: url.to_owned(),
            detail: describe(error),
        }
    }

    pub(crate) fn http(url: &str, status: u16, body: &[u8]) -> Self {
        let text = String::from_utf8_lossy(body);
        let mut body: String = text.trim().chars().take(BODY_EXCERPT).collect();
        if text.trim().chars().count() > BODY_EXCERPT {
            body.push('…');
        }
        ClientError::Http {
            url: url.to_owned(),
            status,
            body,
        }
    }
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
