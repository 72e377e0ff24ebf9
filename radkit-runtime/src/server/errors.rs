//! What a client is told when the engine refuses or fails a request: the A2A error for each engine
//! error. Internals (a store's message, a panic) are logged, never sent.

use super::jsonrpc::{codes, RpcError};
use crate::engine::EngineError;
use crate::store::StoreError;

/// Map an engine error to the A2A error a client should see; internals are logged, not sent.
pub(crate) fn engine_error(error: EngineError, cancel: bool) -> RpcError {
    match error {
        EngineError::TaskNotFound(id) => {
            RpcError::new(codes::TASK_NOT_FOUND, format!("task {id} not found"))
        }
        e @ EngineError::TaskFinished { .. } if cancel => {
            RpcError::new(codes::TASK_NOT_CANCELABLE, e.to_string())
        }
        e @ (EngineError::TaskFinished { .. }
        | EngineError::NotAwaitingInput { .. }
        | EngineError::UnknownSkill(_)
        | EngineError::SkillNotServed { .. }
        | EngineError::InvalidInput(_)) => RpcError::new(codes::INVALID_PARAMS, e.to_string()),
        e @ EngineError::NoSkillChosen { .. } => RpcError::new(
            codes::INVALID_PARAMS,
            format!("{e} (in message metadata `skillId`)"),
        ),
        EngineError::PushNotSupported => RpcError::new(
            codes::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "push notifications are not supported by this agent's store; use streaming",
        ),
        e @ EngineError::PushConfigNotFound { .. } => {
            RpcError::new(codes::TASK_NOT_FOUND, e.to_string())
        }
        e @ EngineError::PushTarget(_) => RpcError::new(codes::INVALID_PARAMS, e.to_string()),
        e @ EngineError::VersionMismatch { .. } => {
            RpcError::new(codes::UNSUPPORTED_OPERATION, e.to_string())
        }
        e @ (EngineError::StorageUnavailable { .. }
        | EngineError::Store(StoreError::Backend { .. })) => {
            tracing::error!(error = %e, "storage unavailable");
            RpcError::new(
                codes::STORAGE_UNAVAILABLE,
                "storage unavailable; retry later (the server log has the details)",
            )
        }
        other => {
            tracing::error!(error = %other, "request failed");
            RpcError::new(
                codes::INTERNAL_ERROR,
                "internal error; the server log has the details",
            )
        }
    }
}

/// How an error code is reported by the bindings that name errors by status (spec §5.4): the HTTP
/// status (HTTP+JSON), the `google.rpc.Code` name (HTTP+JSON's `status`, gRPC), and the
/// `google.rpc.ErrorInfo` reason and domain of an A2A error (radkit's own name themselves in the
/// `radkit` domain; JSON-RPC's standard errors have none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mapping {
    /// The HTTP status.
    pub http: u16,
    /// The `google.rpc.Code` name.
    pub status: &'static str,
    /// The `ErrorInfo` reason and domain, for errors that have one.
    pub reason: Option<(&'static str, &'static str)>,
}

const A2A: &str = "a2a-protocol.org";

/// The table of spec §5.4 (and radkit's own codes), one source for every binding.
pub(crate) fn mapping(code: i64) -> Mapping {
    let (http, status, reason) = match code {
        codes::TASK_NOT_FOUND => (404, "NOT_FOUND", Some(("TASK_NOT_FOUND", A2A))),
        codes::TASK_NOT_CANCELABLE => (
            400,
            "FAILED_PRECONDITION",
            Some(("TASK_NOT_CANCELABLE", A2A)),
        ),
        codes::PUSH_NOTIFICATION_NOT_SUPPORTED => (
            400,
            "FAILED_PRECONDITION",
            Some(("PUSH_NOTIFICATION_NOT_SUPPORTED", A2A)),
        ),
        codes::UNSUPPORTED_OPERATION => (
            400,
            "FAILED_PRECONDITION",
            Some(("UNSUPPORTED_OPERATION", A2A)),
        ),
        codes::CONTENT_TYPE_NOT_SUPPORTED => (
            400,
            "INVALID_ARGUMENT",
            Some(("CONTENT_TYPE_NOT_SUPPORTED", A2A)),
        ),
        codes::INVALID_AGENT_RESPONSE => (500, "INTERNAL", Some(("INVALID_AGENT_RESPONSE", A2A))),
        codes::EXTENDED_CARD_NOT_CONFIGURED => (
            400,
            "FAILED_PRECONDITION",
            Some(("EXTENDED_AGENT_CARD_NOT_CONFIGURED", A2A)),
        ),
        codes::EXTENSION_SUPPORT_REQUIRED => (
            400,
            "FAILED_PRECONDITION",
            Some(("EXTENSION_SUPPORT_REQUIRED", A2A)),
        ),
        codes::VERSION_NOT_SUPPORTED => (
            400,
            "FAILED_PRECONDITION",
            Some(("VERSION_NOT_SUPPORTED", A2A)),
        ),
        codes::PARSE_ERROR | codes::INVALID_REQUEST | codes::INVALID_PARAMS => {
            (400, "INVALID_ARGUMENT", None)
        }
        codes::METHOD_NOT_FOUND => (404, "NOT_FOUND", None),
        codes::STORAGE_UNAVAILABLE => (503, "UNAVAILABLE", Some(("STORAGE_UNAVAILABLE", "radkit"))),
        codes::TOO_MANY_CONNECTIONS => {
            (503, "UNAVAILABLE", Some(("TOO_MANY_CONNECTIONS", "radkit")))
        }
        codes::TOO_MANY_STREAMS => (
            429,
            "RESOURCE_EXHAUSTED",
            Some(("TOO_MANY_STREAMS", "radkit")),
        ),
        _ => (500, "INTERNAL", None),
    };
    Mapping {
        http,
        status,
        reason,
    }
}

/// The `google.rpc.ErrorInfo` detail of an error code (ProtoJSON `Any` form), if it has one: 1.0
/// JSON-RPC errors carry it in `data` (spec §9.5), HTTP+JSON errors in `details` (§11.6).
pub(crate) fn error_info(code: i64) -> Option<serde_json::Value> {
    mapping(code).reason.map(|(reason, domain)| {
        serde_json::json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": domain,
        })
    })
}
