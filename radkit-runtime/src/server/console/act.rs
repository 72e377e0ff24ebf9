//! What the console changes: answer a task that waits for input, approve or reject an approval gate,
//! cancel a task. Each goes through the operations every A2A binding calls (`ops::start`,
//! `ops::cancel_task`), so it is checked as an A2A request is, and each is refused without the
//! session's CSRF token and the console's origin ([`session::check_change`]). The answers are JSON:
//! `{"state": ...}` or `{"error": ...}` with a status that says why.

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::super::errors::{Kind, OpError};
use super::super::{ops, AppState};
use super::session::{self, Viewer};
use crate::model::{Message, Part, Role, TaskId};

/// An answer typed on the page.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Answer {
    text: String,
}

/// A decision on an approval gate.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Decide {
    decision: String,
    #[serde(default)]
    note: String,
}

fn refused(status: StatusCode, text: impl Into<String>) -> Response {
    (status, Json(json!({ "error": text.into() }))).into_response()
}

fn op_error(error: OpError) -> Response {
    let status = match error.kind {
        Kind::TaskNotFound => StatusCode::NOT_FOUND,
        Kind::InvalidInput | Kind::TaskEnded | Kind::TaskNotCancelable | Kind::Unsupported => {
            StatusCode::CONFLICT
        }
        Kind::StorageUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    refused(status, error.message)
}

/// The viewer, if the change may be made: signed in, same origin, CSRF token.
fn changer(state: &AppState, headers: &HeaderMap) -> Result<Viewer, Response> {
    let viewer = session::viewer(state, headers)
        .map_err(|_| refused(StatusCode::UNAUTHORIZED, "sign in to the console first"))?;
    if !session::check_change(state, &viewer, headers) {
        return Err(refused(
            StatusCode::FORBIDDEN,
            "this change did not come from the console's page (a missing or stale CSRF token, or another origin): reload the page",
        ));
    }
    Ok(viewer)
}

/// Send `parts` to the task, as a `message/send` to it would, and answer with its state.
async fn send(state: &AppState, viewer: &Viewer, id: String, parts: Vec<Part>) -> Response {
    // The task's context, as its client would name it; the task must be the viewer's.
    let task_id = TaskId::from(id.clone());
    let task = match ops::get_task(state, &viewer.caller, &task_id, Some(0)).await {
        Ok(task) => task,
        Err(e) => return op_error(e),
    };
    let mut message = Message::new(Role::User, parts);
    message.message_id = uuid::Uuid::new_v4().to_string();
    message.task_id = Some(id);
    message.context_id = Some(task.context_id);
    let send = ops::Send {
        message,
        metadata: None,
        blocking: false,
        history_length: Some(0),
        accepted_output_modes: None,
        push: None,
    };
    match ops::start(state, &viewer.caller, &send).await {
        Ok(_) => match state.engine.state(&viewer.caller, &task_id).await {
            Ok(task_state) => Json(json!({ "state": task_state.as_str() })).into_response(),
            Err(e) => op_error(super::super::errors::engine_error(e, false)),
        },
        Err(e) => op_error(e),
    }
}

/// `POST /console/tasks/{id}/answer` with `{"text"}`.
pub(super) async fn answer(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Json<Answer>, JsonRejection>,
) -> Response {
    let viewer = match changer(&state, &headers) {
        Ok(viewer) => viewer,
        Err(refusal) => return refusal,
    };
    let Json(answer) = match body {
        Ok(body) => body,
        Err(e) => return refused(StatusCode::BAD_REQUEST, e.body_text()),
    };
    if answer.text.trim().is_empty() {
        return refused(StatusCode::BAD_REQUEST, "the answer is empty");
    }
    send(&state, &viewer, id, vec![Part::text(answer.text)]).await
}

/// `POST /console/tasks/{id}/decide` with `{"decision": "approve" | "reject", "note"}`: the reply
/// an approval gate reads (a data part with the decision, the note as text).
pub(super) async fn decide(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Json<Decide>, JsonRejection>,
) -> Response {
    let viewer = match changer(&state, &headers) {
        Ok(viewer) => viewer,
        Err(refusal) => return refusal,
    };
    let Json(decide) = match body {
        Ok(body) => body,
        Err(e) => return refused(StatusCode::BAD_REQUEST, e.body_text()),
    };
    if decide.decision != "approve" && decide.decision != "reject" {
        return refused(
            StatusCode::BAD_REQUEST,
            format!("`{}` is not a decision: approve or reject", decide.decision),
        );
    }
    let mut data = serde_json::Map::new();
    data.insert("decision".into(), decide.decision.into());
    let mut parts = vec![Part::data(data)];
    if !decide.note.trim().is_empty() {
        parts.push(Part::text(decide.note));
    }
    send(&state, &viewer, id, parts).await
}

/// `POST /console/tasks/{id}/cancel`.
pub(super) async fn cancel(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let viewer = match changer(&state, &headers) {
        Ok(viewer) => viewer,
        Err(refusal) => return refusal,
    };
    match ops::cancel_task(&state, &viewer.caller, &TaskId::from(id)).await {
        Ok(task) => Json(json!({ "state": task.status.state.as_str() })).into_response(),
        Err(e) => op_error(e),
    }
}

/// `POST /console/logout`: the session ends.
pub(super) async fn logout(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if let Err(refusal) = changer(&state, &headers) {
        return refusal;
    }
    (
        StatusCode::NO_CONTENT,
        [(
            axum::http::header::SET_COOKIE,
            session::cleared_cookie(&state),
        )],
    )
        .into_response()
}
