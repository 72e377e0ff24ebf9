//! The call webhook: `POST /radkit/calls/{task}/{call}`, where remote agents that this agent
//! called post their tasks' updates (A2A push notifications, `EngineBuilder::call_webhook`). A post
//! with the token the engine gave for that call, before it expires, wakes the task, which asks its
//! callees where they stand (`Engine::call_notified`: coalesced with the task's other posts and
//! spaced, so a flood of posts costs the caller's journal nothing). The body is read only to skip
//! the updates of a callee that still works (its status `working` or `submitted`, or an artifact
//! chunk): those would wake the caller for nothing. A body that says nothing readable wakes it
//! (asking costs a `get`; missing an end costs a recheck). Every good post is answered 204, a
//! wrong, expired or missing token 401, a webhook that is not configured 404.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};

use super::AppState;

pub(super) async fn notified(
    State(state): State<Arc<AppState>>,
    Path((task_id, call)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let token = headers
        .get("x-a2a-notification-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if still_working(&body) {
        return match state.engine.call_notification_valid(&task_id, &call, token) {
            None => StatusCode::NOT_FOUND,
            Some(false) => StatusCode::UNAUTHORIZED,
            Some(true) => StatusCode::NO_CONTENT,
        };
    }
    match state.engine.call_notified(&task_id, &call, token) {
        None => StatusCode::NOT_FOUND,
        Some(false) => StatusCode::UNAUTHORIZED,
        Some(true) => StatusCode::NO_CONTENT,
    }
}

/// True when the posted update shows the callee still working: a task or status update in state
/// `submitted`/`working` (0.3 names or 1.0 `TASK_STATE_*`), or an artifact update.
fn still_working(body: &[u8]) -> bool {
    let Ok(update) = serde_json::from_slice::<serde_json::Value>(body) else {
        return false;
    };
    if update.get("artifactUpdate").is_some()
        || update.get("kind") == Some(&"artifact-update".into())
    {
        return true;
    }
    let state = [
        "/status/state",
        "/statusUpdate/status/state",
        "/task/status/state",
    ]
    .iter()
    .find_map(|p| update.pointer(p).and_then(|s| s.as_str()));
    state.is_some_and(|s| {
        let s = s.to_ascii_lowercase();
        s.ends_with("working") || s.ends_with("submitted")
    })
}

#[cfg(test)]
mod tests {
    use super::still_working;

    #[test]
    fn only_updates_of_a_settled_callee_or_unreadable_ones_wake_the_caller() {
        let working = [
            r#"{"kind":"task","status":{"state":"working"}}"#,
            r#"{"statusUpdate":{"status":{"state":"TASK_STATE_WORKING"}}}"#,
            r#"{"task":{"status":{"state":"TASK_STATE_SUBMITTED"}}}"#,
            r#"{"artifactUpdate":{"artifact":{}}}"#,
        ];
        for body in working {
            assert!(still_working(body.as_bytes()), "{body}");
        }
        let wake = [
            r#"{"kind":"task","status":{"state":"completed"}}"#,
            r#"{"statusUpdate":{"status":{"state":"TASK_STATE_INPUT_REQUIRED"}}}"#,
            r#"{"task":{"status":{"state":"TASK_STATE_FAILED"}}}"#,
            "not json",
            "{}",
        ];
        for body in wake {
            assert!(!still_working(body.as_bytes()), "{body}");
        }
    }
}
