//! A task's page: its status, what it asks (with the exact action an approval gate proposes),
//! its messages and artifacts (text shown, files downloadable), its calls to other agents and
//! child skills linked to their tasks, its push deliveries, and its journal as a timeline. The
//! page's script replaces the task's part of it when the live stream says the task changed.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};

use super::super::AppState;
use super::layout;
use super::session::{self, Viewer};
use crate::engine::EngineError;
use crate::flow::CmdKind;
use crate::journal::{Entry, JournalRecord};
use crate::model::{FileContent, Message, Part, TaskId, TaskState};
use crate::store::TaskView;

/// Journal records the timeline shows (the newest); the whole journal is at `journal.json`.
const TIMELINE_RECORDS: usize = 2_000;
/// How many of a task's newest leases the timeline shows (on a store with leases).
const LEASE_CHANGES: usize = 200;

/// Why a task cannot be shown.
pub(super) enum Missing {
    /// No such task, or not the viewer's.
    NotFound,
    /// The store failed.
    Failed(EngineError),
}

impl From<EngineError> for Missing {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::TaskNotFound(_) => Missing::NotFound,
            other => Missing::Failed(other),
        }
    }
}

impl Missing {
    fn answer(self, viewer: &Viewer, id: &str) -> Response {
        let (status, text) = match self {
            Missing::NotFound => (
                StatusCode::NOT_FOUND,
                format!("No task `{id}` that you may see."),
            ),
            Missing::Failed(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        };
        let body =
            html! { h1 { "Task" } (layout::notice(&text)) p { a href="/console" { "All tasks" } } };
        (status, layout::page("Task", "tasks", Some(viewer), body)).into_response()
    }
}

/// `GET /console/tasks/{id}`.
pub(super) async fn page(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let Ok(viewer) = session::viewer(&state, &headers) else {
        return Redirect::to("/console/login").into_response();
    };
    match body(&state, &viewer, &id).await {
        Ok(body) => {
            let page = html! { div #task data-task=(id) { (body) } };
            layout::page(&format!("Task {id}"), "tasks", Some(&viewer), page).into_response()
        }
        Err(missing) => missing.answer(&viewer, &id),
    }
}

/// `GET /console/tasks/{id}/fragment`: the task's part of its page, for the script to swap in.
pub(super) async fn fragment(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let Ok(viewer) = session::viewer(&state, &headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    match body(&state, &viewer, &id).await {
        Ok(body) => (
            [(header::CACHE_CONTROL, "no-store")],
            axum::response::Html(body.into_string()),
        )
            .into_response(),
        Err(Missing::NotFound) => StatusCode::NOT_FOUND.into_response(),
        Err(Missing::Failed(e)) => {
            (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
        }
    }
}

/// `GET /console/tasks/{id}/journal.json`: the whole journal, as stored.
pub(super) async fn journal_json(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let Ok(viewer) = session::viewer(&state, &headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    match state
        .engine
        .journal(&viewer.caller, &TaskId::from(id))
        .await
    {
        Ok(journal) => axum::Json(journal).into_response(),
        Err(EngineError::TaskNotFound(_)) => StatusCode::NOT_FOUND.into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// `GET /console/tasks/{id}/files/{artifact}/{part}`: a file part of an artifact, as an
/// attachment (never rendered by the browser as a page of this origin).
pub(super) async fn file(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path((id, artifact, part)): Path<(String, usize, usize)>,
) -> Response {
    let Ok(viewer) = session::viewer(&state, &headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let view = match state
        .engine
        .view(&viewer.caller, &TaskId::from(id), Some(0))
        .await
    {
        Ok(view) => view,
        Err(EngineError::TaskNotFound(_)) => return StatusCode::NOT_FOUND.into_response(),
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    };
    let Some(Part::File { file, .. }) =
        view.artifacts.get(artifact).and_then(|a| a.parts.get(part))
    else {
        return (StatusCode::NOT_FOUND, "no such file part").into_response();
    };
    let FileContent::Bytes(bytes) = &file.content else {
        return (
            StatusCode::NOT_FOUND,
            "this file part is a link, not content",
        )
            .into_response();
    };
    let name: String = file
        .name
        .as_deref()
        .unwrap_or("file")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._- ".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    (
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
        ],
        bytes.clone(),
    )
        .into_response()
}

async fn body(state: &AppState, viewer: &Viewer, id: &str) -> Result<Markup, Missing> {
    let task_id = TaskId::from(id.to_owned());
    let view = state.engine.view(&viewer.caller, &task_id, None).await?;
    let journal = state.engine.journal(&viewer.caller, &task_id).await?;
    let deliveries = match state.engine.store().push() {
        Some(push) => Some(
            push.push_deliveries(id)
                .await
                .map_err(|e| Missing::Failed(e.into()))?,
        ),
        None => None,
    };
    let (lease, mut lease_log) = match state.engine.store().leases() {
        Some(leases) => (
            leases
                .holder(id)
                .await
                .map_err(|e| Missing::Failed(e.into()))?,
            leases
                .lease_log(id, LEASE_CHANGES)
                .await
                .map_err(|e| Missing::Failed(e.into()))?,
        ),
        None => (None, Vec::new()),
    };
    let shown = &journal[journal.len().saturating_sub(TIMELINE_RECORDS)..];
    if shown.len() < journal.len() {
        // Only the leases of the part of the journal shown.
        let since = shown.first().map_or(i64::MIN, |r| r.at_ms);
        lease_log.retain(|c| c.claimed_at_ms >= since);
    }
    Ok(html! {
        (header(&view, lease.as_ref()))
        (act(&view))
        section #messages {
            h2 { "Messages" }
            @if view.history.is_empty() { p.empty { "None." } }
            @for message in &view.history { (message_item(message)) }
            @if let Some(status) = &view.status_message {
                h3 { "Status message" }
                (message_item(status))
            }
        }
        section #artifacts {
            h2 { "Artifacts" }
            @if view.artifacts.is_empty() { p.empty { "None." } }
            @for (a, artifact) in view.artifacts.iter().enumerate() {
                article.artifact data-artifact=(artifact.artifact_id) {
                    h3 { (artifact.name.as_deref().unwrap_or(&artifact.artifact_id)) }
                    @if let Some(d) = &artifact.description { p { (d) } }
                    @for (p, part) in artifact.parts.iter().enumerate() {
                        (part_view(part, Some(&format!("/console/tasks/{id}/files/{a}/{p}"))))
                    }
                }
            }
        }
        (calls(state, &journal))
        @if let Some(deliveries) = deliveries { (pushes(&deliveries, view.record.last_seq)) }
        section #journal {
            h2 { "Journal" }
            p.hint {
                (journal.len()) " entries"
                @if shown.len() < journal.len() { ", the newest " (shown.len()) " shown" }
                " · " a href=(format!("/console/tasks/{id}/journal.json")) { "journal.json" }
            }
            (super::timeline::render(shown, &lease_log))
        }
    })
}

fn header(view: &TaskView, lease: Option<&crate::store::LeaseHolder>) -> Markup {
    let record = &view.record;
    html! {
        h1 { "Task " code #task-id { (record.id) } " " (layout::state(record.state)) }
        dl.meta {
            dt { "Skill" } dd { a href=(format!("/console/skills#skill-{}", record.skill_id)) { code { (record.skill_id) } } " version " code { (record.skill_version) } }
            dt { "Principal" } dd { (record.principal.as_deref().unwrap_or("— (operator)")) }
            dt { "Context" } dd { code { (record.context_id) } }
            dt { "Created" } dd { (layout::time(record.created_at_ms)) }
            dt { "Status changed" } dd { (layout::time(view.status_at_ms)) }
            dt { "Journal" } dd { (record.last_seq) " entries" }
            @if let Some(wake) = record.wake_at_ms { dt { "Timer due" } dd { (layout::time(wake)) } }
            @if let Some(lease) = lease {
                dt { "Lease" }
                dd data-testid="lease" {
                    @match (&lease.owner, lease.expires_ms) {
                        (Some(owner), Some(until)) => { "held by " code { (owner) } " until " (layout::time(until)) }
                        (Some(owner), None) => { "last held by " code { (owner) } }
                        (None, _) => { "free" }
                    }
                    " · fencing token " code { (lease.token) }
                    @if lease.token > 1 { " (" (lease.token - 1) " claims after the first)" }
                }
            }
        }
    }
}

/// The approval a question proposes, if it is an approval gate's.
fn approval(message: &Message) -> Option<&serde_json::Map<String, serde_json::Value>> {
    message.parts.iter().find_map(|part| match part {
        Part::Data { data, .. }
            if data.get("type").and_then(|t| t.as_str()) == Some("approval_request") =>
        {
            Some(data)
        }
        _ => None,
    })
}

/// What the viewer can do: answer, approve or reject, cancel.
fn act(view: &TaskView) -> Markup {
    let record = &view.record;
    let waiting = record.state == TaskState::InputRequired;
    let question = view.status_message.as_ref().filter(|_| waiting);
    if question.is_none() && record.state.is_terminal() {
        return html! {};
    }
    html! {
        section #act data-task=(record.id) {
            @if let Some(question) = question {
                h2 { "Waiting for input" }
                p.question data-testid="question" { (question.joined_texts()) }
                @if let Some(request) = approval(question) {
                    div.approval data-testid="approval" {
                        dl.meta {
                            dt { "Action" } dd { code data-testid="approval-tool" { (request.get("tool").and_then(|t| t.as_str()).unwrap_or("?")) } }
                            dt { "Reason" } dd { (request.get("reason").and_then(|t| t.as_str()).unwrap_or("")) }
                            dt { "If nobody answers" } dd { (request.get("default").and_then(|t| t.as_str()).unwrap_or("reject")) }
                            @if let Some(ms) = request.get("expires_in_ms").and_then(|t| t.as_i64()) { dt { "Expires after" } dd { (layout::duration(ms)) } }
                        }
                        h3 { "Arguments, exactly as proposed" }
                        (layout::json(request.get("arguments").unwrap_or(&serde_json::Value::Null)))
                        form.decide data-action="decide" {
                            label { "Note " input type="text" name="note" placeholder="optional"; }
                            button type="submit" name="decision" value="approve" data-testid="approve" { "Approve" }
                            button.danger type="submit" name="decision" value="reject" data-testid="reject" { "Reject" }
                        }
                    }
                } @else {
                    form.answer data-action="answer" {
                        label { "Answer " textarea name="text" rows="3" required data-testid="answer-text" {} }
                        button type="submit" data-testid="answer" { "Send answer" }
                    }
                }
            }
            @if !record.state.is_terminal() {
                form.cancel data-action="cancel" {
                    button.danger type="submit" data-testid="cancel" { "Cancel task" }
                }
            }
            p.result role="status" {}
        }
    }
}

/// `user` or `agent`.
fn role(message: &Message) -> String {
    match serde_json::to_value(message.role) {
        Ok(serde_json::Value::String(role)) => role,
        _ => "?".to_owned(),
    }
}

fn message_item(message: &Message) -> Markup {
    html! {
        article class=(format!("message role-{}", role(message))) {
            header { strong { (role(message)) } " · " code { (message.message_id) } }
            @for part in &message.parts { (part_view(part, None)) }
        }
    }
}

fn part_view(part: &Part, download: Option<&str>) -> Markup {
    match part {
        Part::Text { text, .. } => html! { pre.text { (text) } },
        Part::Data { data, .. } => layout::json(&serde_json::Value::Object(data.clone())),
        Part::File { file, .. } => {
            let name = file.name.as_deref().unwrap_or("file");
            let media = file
                .media_type
                .as_deref()
                .unwrap_or("application/octet-stream");
            match (&file.content, download) {
                (FileContent::Bytes(bytes), Some(href)) => html! {
                    p.file { a href=(href) download=(name) { (name) } " (" (media) ", " (bytes.len()) " bytes)" }
                },
                (FileContent::Bytes(bytes), None) => {
                    html! { p.file { (name) " (" (media) ", " (bytes.len()) " bytes)" } }
                }
                (FileContent::Uri(uri), _)
                    if uri.starts_with("https://") || uri.starts_with("http://") =>
                {
                    html! {
                        p.file { a href=(uri) rel="noopener noreferrer" { (name) } " (" (media) ", link)" }
                    }
                }
                (FileContent::Uri(uri), _) => {
                    html! { p.file { (name) " (" (media) ") at " code { (uri) } } }
                }
            }
        }
    }
}

/// One call of the task: to another agent or a child skill.
struct Call<'a> {
    id: &'a crate::flow::InvocationId,
    kind: &'a CmdKind,
    issued_ms: i64,
    callee: Option<&'a str>,
    outcome: Option<Result<(), &'a str>>,
}

fn calls(state: &AppState, journal: &[JournalRecord]) -> Markup {
    let mut calls: Vec<Call<'_>> = Vec::new();
    for record in journal {
        match &record.entry {
            Entry::CommandIssued { id, cmd, .. } if cmd.kind.is_call() => calls.push(Call {
                id,
                kind: &cmd.kind,
                issued_ms: record.at_ms,
                callee: None,
                outcome: None,
            }),
            Entry::CallStarted { id, task_id, .. } => {
                if let Some(call) = calls.iter_mut().find(|c| c.id == id) {
                    call.callee = Some(task_id);
                }
            }
            Entry::ReceiptRecorded { receipt } => {
                if let Some(call) = calls.iter_mut().find(|c| c.id == &receipt.id) {
                    call.outcome = Some(
                        receipt
                            .outcome
                            .as_ref()
                            .map(|_| ())
                            .map_err(|e| e.message.as_str()),
                    );
                }
            }
            _ => {}
        }
    }
    if calls.is_empty() {
        return html! {};
    }
    html! {
        section #calls {
            h2 { "Calls" }
            table {
                thead { tr { th { "Call" } th { "To" } th { "Callee task" } th { "Issued" } th { "Outcome" } } }
                tbody {
                    @for call in &calls {
                        tr {
                            td { a href=(format!("#inv-{}", call.id)) { code { (call.id) } } }
                            td {
                                @match call.kind {
                                    CmdKind::Skill { skill, .. } => { "skill " code { (skill) } " (this agent)" }
                                    CmdKind::Agent { agent, .. } => {
                                        "agent " code { (agent) }
                                        @if let Some(url) = state.engine.agent_url(agent) { " at " code.url { (url) } }
                                    }
                                    other => { (other.kind_name()) }
                                }
                            }
                            td {
                                @match (call.callee, call.kind) {
                                    (Some(callee), CmdKind::Skill { .. }) => { a.callee href=(format!("/console/tasks/{callee}")) { code { (callee) } } }
                                    (Some(callee), _) => { code.callee { (callee) } " (remote)" }
                                    (None, _) => { "—" }
                                }
                            }
                            td { (layout::time(call.issued_ms)) }
                            td {
                                @match call.outcome {
                                    None => { "waiting" }
                                    Some(Ok(())) => span.ok { "ok" },
                                    Some(Err(e)) => span.error { (e) },
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn pushes(deliveries: &[crate::store::PushDelivery], last_seq: u64) -> Markup {
    if deliveries.is_empty() {
        return html! {};
    }
    html! {
        section #pushes {
            h2 { "Push deliveries" }
            table {
                thead { tr { th { "Config" } th { "Webhook" } th { "Delivered" } th { "Failed attempts" } th { "Next attempt" } th { "Sender" } } }
                tbody {
                    @for d in deliveries {
                        tr {
                            td { code { (d.config.id) } }
                            td { code.url { (d.config.url) } }
                            td { "up to entry " (d.delivered_seq) " of " (last_seq) @if d.finished { " · finished" } }
                            td { (d.attempts) }
                            td { @if d.finished || d.delivered_seq >= last_seq { "—" } @else if d.next_at_ms == 0 { "now" } @else { (layout::time(d.next_at_ms)) } }
                            td { (d.sender.as_deref().unwrap_or("—")) }
                        }
                    }
                }
            }
        }
    }
}
