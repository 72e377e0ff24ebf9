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
