//! What went wrong with an operation ([`OpError`]: a [`Kind`] and a message), and the one table of
//! how each binding spells it ([`Kind::spelling`]: the JSON-RPC code, the HTTP status, the
//! `google.rpc.Code` and the `google.rpc.ErrorInfo` of spec §5.4). Engine errors become operation
//! errors here too; internals (a store's message, a panic) are logged, never sent.

use crate::engine::EngineError;
use crate::store::StoreError;

/// The error codes A2A names (0.3 and 1.0 share them), and radkit's own.
pub mod codes {
    /// Invalid JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// Unknown method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// No such task.
    pub const TASK_NOT_FOUND: i64 = -32001;
    /// The task cannot be canceled.
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    /// Push notifications are not supported.
    pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
    /// The operation is not supported.
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
    /// Incompatible content types.
    pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
    /// The agent produced a response of the wrong type.
    pub const INVALID_AGENT_RESPONSE: i64 = -32006;
    /// The agent has no (authenticated) extended agent card.
    pub const EXTENDED_CARD_NOT_CONFIGURED: i64 = -32007;
    /// The client must use an extension the request did not declare (1.0).
    pub const EXTENSION_SUPPORT_REQUIRED: i64 = -32008;
    /// The request's `A2A-Version` is not one this agent speaks (1.0).
    pub const VERSION_NOT_SUPPORTED: i64 = -32009;
    /// radkit's own (in JSON-RPC's range for server errors): the store does not accept writes or
    /// cannot be reached right now (a full disk, a database that is down). Nothing of the request
    /// was acknowledged unless it says so; a task whose write failed resumes by itself once the store
    /// accepts writes again. Retry later.
    pub const STORAGE_UNAVAILABLE: i64 = -32050;
    /// radkit's own: the server already serves as many connections as it is configured to
    /// (`ServerConfig::max_connections`); sent with HTTP 503 on a connection that is then closed.
    /// Retry later, or reuse a connection.
    pub const TOO_MANY_CONNECTIONS: i64 = -32051;
    /// radkit's own: the caller already has as many `message/stream` and `tasks/resubscribe`
    /// streams open as the server allows one principal (`ServerConfig::max_streams_per_principal`).
    /// Close one, or poll with `tasks/get`. A refused `message/stream` started no task.
    pub const TOO_MANY_STREAMS: i64 = -32052;
}

/// What went wrong, whichever binding carried the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The request is not JSON.
    Unparsable,
    /// The request is not a request of its binding (a JSON-RPC envelope, a REST route's shape).
    BadRequest,
    /// No such method (JSON-RPC) or route.
    NoSuchMethod,
    /// The request's parameters are wrong: the message says which and how.
    InvalidInput,
    /// The server failed; the log has the details.
    Internal,
    /// No task of that id that the caller may see.
    TaskNotFound,
    /// The task has ended and cannot be canceled.
    TaskNotCancelable,
    /// A message to a task that has ended: 1.0 calls it `UnsupportedOperationError`; 0.3 names no
    /// error for it, and radkit's 0.3 binding has always answered invalid params.
    TaskEnded,
    /// Push notifications are not available (the store keeps no configs).
    PushNotSupported,
    /// The operation is not supported on this task or in this version.
    Unsupported,
    /// The request's or the answer's media type is not one this agent takes or gives.
    ContentTypeNotSupported,
    /// An agent answered with something that is not a valid answer.
    #[allow(
        dead_code,
        reason = "spec §5.4 names it and the table spells it; no operation of this server raises it"
    )]
    InvalidAgentResponse,
    /// There is no extended agent card for this caller.
    NoExtendedCard,
    /// The request must declare an extension it did not (1.0).
    #[allow(
        dead_code,
        reason = "spec §5.4 names it and the table spells it; this server requires no extension"
    )]
    ExtensionRequired,
    /// The request's `A2A-Version` is not one this agent speaks (1.0).
    VersionNotSupported,
    /// The store does not accept writes or cannot be reached right now; retry later.
    StorageUnavailable,
    /// The server serves as many connections as it may.
    TooManyConnections,
    /// The caller has as many streams open as it may.
    TooManyStreams,
}

/// The longest error message sent, in bytes (before the note saying how much was cut).
pub(crate) const MAX_MESSAGE_BYTES: usize = 1024;

/// An operation's error: what went wrong and a message for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OpError {
    /// What went wrong.
    pub kind: Kind,
    /// What to tell the client.
    pub message: String,
}

impl OpError {
    /// An error of `kind` saying `message`.
    ///
    /// A message longer than [`MAX_MESSAGE_BYTES`] is cut there (at a character boundary) and says
    /// how much was left out: an error may echo what the client sent (a task id, a method name), and
    /// what it echoes stays small on every binding (a gRPC status travels in trailers, which clients
    /// cap at 8–64 KiB).
    pub(crate) fn new(kind: Kind, message: impl Into<String>) -> Self {
        let mut message = message.into();
        if message.len() > MAX_MESSAGE_BYTES {
            let mut cut = MAX_MESSAGE_BYTES;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            let left_out = message.len() - cut;
            message.truncate(cut);
            message.push_str(&format!("… ({left_out} more bytes left out)"));
        }
        OpError { kind, message }
    }

    /// The caller has as many streams open as the server allows one caller.
    pub(crate) fn too_many_streams(limit: usize) -> Self {
        OpError::new(
            Kind::TooManyStreams,
            format!(
                "too many streams: at most {limit} `message/stream` or `tasks/resubscribe` streams may be open at once per caller; close one or poll with `tasks/get`"
            ),
        )
    }
}

/// Map an engine error to the operation error a client should see; internals are logged, not sent.
pub(crate) fn engine_error(error: EngineError, cancel: bool) -> OpError {
    match error {
        EngineError::TaskNotFound(id) => {
            OpError::new(Kind::TaskNotFound, format!("task {id} not found"))
        }
        e @ EngineError::TaskFinished { .. } if cancel => {
            OpError::new(Kind::TaskNotCancelable, e.to_string())
        }
        e @ EngineError::TaskFinished { .. } => OpError::new(Kind::TaskEnded, e.to_string()),
        e @ (EngineError::NotAwaitingInput { .. }
        | EngineError::UnknownSkill(_)
        | EngineError::SkillNotServed { .. }
        | EngineError::InvalidInput(_)) => OpError::new(Kind::InvalidInput, e.to_string()),
        e @ EngineError::NoSkillChosen { .. } => OpError::new(
            Kind::InvalidInput,
            format!("{e} (in message metadata `skillId`)"),
        ),
        EngineError::PushNotSupported => OpError::new(
            Kind::PushNotSupported,
            "push notifications are not supported by this agent's store; use streaming",
        ),
        e @ EngineError::PushConfigNotFound { .. } => {
            OpError::new(Kind::TaskNotFound, e.to_string())
        }
        e @ EngineError::PushTarget(_) => OpError::new(Kind::InvalidInput, e.to_string()),
        e @ EngineError::VersionMismatch { .. } => OpError::new(Kind::Unsupported, e.to_string()),
        e @ (EngineError::StorageUnavailable { .. }
        | EngineError::HostUnavailable(_)
        | EngineError::Store(StoreError::Backend { .. })) => {
            tracing::error!(error = %e, "storage unavailable");
            OpError::new(
                Kind::StorageUnavailable,
                "storage unavailable; retry later (the server log has the details)",
            )
        }
        other => {
            tracing::error!(error = %other, "request failed");
            OpError::new(
                Kind::Internal,
                "internal error; the server log has the details",
            )
        }
    }
}

/// The HTTP status and `google.rpc.Status` body of an error (spec §5.4, §11.6): the status of its
/// [`Spelling`], and A2A's own errors carry a `google.rpc.ErrorInfo` naming them.
pub(crate) fn http_body(error: &OpError) -> (axum::http::StatusCode, serde_json::Value) {
    let spelling = error.kind.spelling();
    let status = axum::http::StatusCode::from_u16(spelling.http)
        .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    let mut body = serde_json::json!({
        "code": spelling.http,
        "status": spelling.status,
        "message": error.message,
    });
    body["details"] = serde_json::json!([error.kind.error_info()]);
    (status, serde_json::json!({ "error": body }))
}

/// How each binding spells one [`Kind`] (spec §5.4): the JSON-RPC code, the HTTP status
/// (HTTP+JSON), the `google.rpc.Code` name (HTTP+JSON's `status`, gRPC), and the
/// `google.rpc.ErrorInfo` reason and domain every error carries. A2A's errors and JSON-RPC's
/// standard ones are named in the `a2a-protocol.org` domain as the official SDKs name them (the
/// error type in UPPER_SNAKE_CASE without `Error`: `INVALID_PARAMS`, `METHOD_NOT_FOUND`, ...), so a
/// client maps each back to its typed error on every binding; radkit's own name themselves in the
/// `radkit` domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spelling {
    /// The JSON-RPC error code (A2A 1.0).
    pub jsonrpc: i64,
    /// The JSON-RPC error code in A2A 0.3: the same, but for [`Kind::TaskEnded`].
    pub jsonrpc_0_3: i64,
    /// The HTTP status.
    pub http: u16,
    /// The `google.rpc.Code` name.
    pub status: &'static str,
    /// The `ErrorInfo` reason and domain.
    pub reason: (&'static str, &'static str),
}

const A2A: &str = "a2a-protocol.org";
const RADKIT: &str = "radkit";

impl Kind {
    /// Every kind.
    #[cfg(test)]
    pub(crate) const ALL: [Kind; 18] = [
        Kind::Unparsable,
        Kind::BadRequest,
        Kind::NoSuchMethod,
        Kind::InvalidInput,
        Kind::Internal,
        Kind::TaskNotFound,
        Kind::TaskNotCancelable,
        Kind::TaskEnded,
        Kind::PushNotSupported,
        Kind::Unsupported,
        Kind::ContentTypeNotSupported,
        Kind::InvalidAgentResponse,
        Kind::NoExtendedCard,
        Kind::ExtensionRequired,
        Kind::VersionNotSupported,
        Kind::StorageUnavailable,
        Kind::TooManyConnections,
        Kind::TooManyStreams,
    ];

    /// The one table: how every binding spells this kind.
    pub(crate) fn spelling(self) -> Spelling {
        let (jsonrpc, http, status, reason) = match self {
            Kind::Unparsable => (
                codes::PARSE_ERROR,
                400,
                "INVALID_ARGUMENT",
                ("PARSE_ERROR", A2A),
            ),
            Kind::BadRequest => (
                codes::INVALID_REQUEST,
                400,
                "INVALID_ARGUMENT",
                ("INVALID_REQUEST", A2A),
            ),
            Kind::NoSuchMethod => (
                codes::METHOD_NOT_FOUND,
                404,
                "NOT_FOUND",
                ("METHOD_NOT_FOUND", A2A),
            ),
            Kind::InvalidInput => (
                codes::INVALID_PARAMS,
                400,
                "INVALID_ARGUMENT",
                ("INVALID_PARAMS", A2A),
            ),
            Kind::Internal => (
                codes::INTERNAL_ERROR,
                500,
                "INTERNAL",
                ("INTERNAL_ERROR", A2A),
            ),
            Kind::TaskNotFound => (
                codes::TASK_NOT_FOUND,
                404,
                "NOT_FOUND",
                ("TASK_NOT_FOUND", A2A),
            ),
            Kind::TaskNotCancelable => (
                codes::TASK_NOT_CANCELABLE,
                400,
                "FAILED_PRECONDITION",
                ("TASK_NOT_CANCELABLE", A2A),
            ),
            Kind::TaskEnded => (
                codes::UNSUPPORTED_OPERATION,
                400,
                "FAILED_PRECONDITION",
                ("UNSUPPORTED_OPERATION", A2A),
            ),
            Kind::PushNotSupported => (
                codes::PUSH_NOTIFICATION_NOT_SUPPORTED,
                400,
                "FAILED_PRECONDITION",
                ("PUSH_NOTIFICATION_NOT_SUPPORTED", A2A),
            ),
            Kind::Unsupported => (
                codes::UNSUPPORTED_OPERATION,
                400,
                "FAILED_PRECONDITION",
                ("UNSUPPORTED_OPERATION", A2A),
            ),
            Kind::ContentTypeNotSupported => (
                codes::CONTENT_TYPE_NOT_SUPPORTED,
                400,
                "INVALID_ARGUMENT",
                ("CONTENT_TYPE_NOT_SUPPORTED", A2A),
            ),
            Kind::InvalidAgentResponse => (
                codes::INVALID_AGENT_RESPONSE,
                500,
                "INTERNAL",
                ("INVALID_AGENT_RESPONSE", A2A),
            ),
            Kind::NoExtendedCard => (
                codes::EXTENDED_CARD_NOT_CONFIGURED,
                400,
                "FAILED_PRECONDITION",
                ("EXTENDED_AGENT_CARD_NOT_CONFIGURED", A2A),
            ),
            Kind::ExtensionRequired => (
                codes::EXTENSION_SUPPORT_REQUIRED,
                400,
                "FAILED_PRECONDITION",
                ("EXTENSION_SUPPORT_REQUIRED", A2A),
            ),
            Kind::VersionNotSupported => (
                codes::VERSION_NOT_SUPPORTED,
                400,
                "FAILED_PRECONDITION",
                ("VERSION_NOT_SUPPORTED", A2A),
            ),
            Kind::StorageUnavailable => (
                codes::STORAGE_UNAVAILABLE,
                503,
                "UNAVAILABLE",
                ("STORAGE_UNAVAILABLE", RADKIT),
            ),
            Kind::TooManyConnections => (
                codes::TOO_MANY_CONNECTIONS,
                503,
                "UNAVAILABLE",
                ("TOO_MANY_CONNECTIONS", RADKIT),
            ),
            Kind::TooManyStreams => (
                codes::TOO_MANY_STREAMS,
                429,
                "RESOURCE_EXHAUSTED",
                ("TOO_MANY_STREAMS", RADKIT),
            ),
        };
        let jsonrpc_0_3 = match self {
            Kind::TaskEnded => codes::INVALID_PARAMS,
            _ => jsonrpc,
        };
        Spelling {
            jsonrpc,
            jsonrpc_0_3,
            http,
            status,
            reason,
        }
    }

    /// The `google.rpc.ErrorInfo` detail of this kind (ProtoJSON `Any` form): 1.0 JSON-RPC errors
    /// carry it in `data` (spec §9.5), HTTP+JSON errors in `details` (§11.6).
    pub(crate) fn error_info(self) -> serde_json::Value {
        let (reason, domain) = self.spelling().reason;
        serde_json::json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": domain,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_message_is_cut_at_a_character_boundary_saying_how_much_was_left_out() {
        let id = "é".repeat(50_000);
        let error = OpError::new(Kind::TaskNotFound, format!("task {id} not found"));
        assert!(
            error.message.len() < MAX_MESSAGE_BYTES + 64,
            "{}",
            error.message.len()
        );
        assert!(error.message.starts_with("task éé"));
        assert!(
            error.message.ends_with("more bytes left out)"),
            "{}",
            error.message
        );
        let short = OpError::new(Kind::TaskNotFound, "task t not found");
        assert_eq!(short.message, "task t not found");
    }

    #[test]
    fn every_kind_carries_an_error_info_reason_of_its_own() {
        for kind in Kind::ALL {
            let (reason, domain) = kind.spelling().reason;
            assert!(domain == A2A || domain == RADKIT, "{kind:?}: {domain}");
            let shared: Vec<Kind> = Kind::ALL
                .into_iter()
                .filter(|k| *k != kind && k.spelling().reason.0 == reason)
                .collect();
            match kind {
                Kind::TaskEnded => assert_eq!(shared, [Kind::Unsupported]),
                Kind::Unsupported => assert_eq!(shared, [Kind::TaskEnded]),
                _ => assert!(
                    shared.is_empty(),
                    "{kind:?} shares {reason} with {shared:?}"
                ),
            }
        }
        assert_eq!(
            Kind::InvalidInput.spelling().reason,
            ("INVALID_PARAMS", A2A),
            "the official SDKs raise InvalidParamsError for this reason"
        );
    }

    #[test]
    fn every_kind_but_a_message_to_an_ended_task_has_its_own_json_rpc_code() {
        for kind in Kind::ALL {
            let code = kind.spelling().jsonrpc;
            let shared: Vec<Kind> = Kind::ALL
                .into_iter()
                .filter(|k| *k != kind && k.spelling().jsonrpc == code)
                .collect();
            match kind {
                Kind::TaskEnded => assert_eq!(shared, [Kind::Unsupported]),
                Kind::Unsupported => assert_eq!(shared, [Kind::TaskEnded]),
                _ => assert!(shared.is_empty(), "{kind:?} shares {code} with {shared:?}"),
            }
            let in_0_3 = kind.spelling().jsonrpc_0_3;
            match kind {
                Kind::TaskEnded => assert_eq!(in_0_3, codes::INVALID_PARAMS),
                _ => assert_eq!(in_0_3, code, "{kind:?}"),
            }
        }
    }
}
