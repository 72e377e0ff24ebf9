//! The task list: the tasks the viewer may see, filtered by state, skill, principal, status time and
//! id prefix, newest status first, a page at a time, with the count of each state; and the rows
//! and counts the live stream sends as they change.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};
use serde::Deserialize;

use super::super::AppState;
use super::layout;
use super::session::{self, Viewer};
use crate::model::TaskState;
use crate::store::{TaskView, ViewQuery};

/// Tasks per page.
pub(super) const PAGE_SIZE: usize = 50;

/// The list's query string (every value as typed; [`Filters::parse`] checks them).
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct Params {
    state: Option<String>,
    skill: Option<String>,
    principal: Option<String>,
    since: Option<String>,
    until: Option<String>,
    q: Option<String>,
    after: Option<String>,
}

/// The filters of a list, checked.
#[derive(Debug, Clone, Default)]
pub(super) struct Filters {
    pub state: Option<TaskState>,
    pub skill: Option<String>,
    pub principal: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub prefix: Option<String>,
    pub after: Option<(i64, String)>,
}

/// A time as typed in the filter: `2026-11-28T09:30` (a browser's `datetime-local`, read as UTC),
/// with seconds, or RFC 3339 with an offset.
fn parse_time(text: &str) -> Result<i64, String> {
    let text = text.trim();
    for format in ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"] {
        if let Ok(t) = chrono::NaiveDateTime::parse_from_str(text, format) {
            return Ok(t.and_utc().timestamp_millis());
        }
    }
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|_| format!("`{text}` is not a time: use 2026-11-28T09:30 (UTC) or RFC 3339"))
}

fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

impl Params {
    /// The filters, or what is wrong with one.
    pub(super) fn parse(&self) -> Result<Filters, String> {
        let state = match given(&self.state) {
            None => None,
            Some(s) => {
                Some(TaskState::parse(s).ok_or_else(|| format!("`{s}` is not a task state"))?)
            }
        };
        let after = match given(&self.after) {
            None => None,
            Some(token) => Some(
                super::super::ops::page_position(token)
                    .map_err(|_| "the page link is not one of this console's".to_owned())?,
            ),
        };
        Ok(Filters {
            state,
            skill: given(&self.skill).map(str::to_owned),
            principal: given(&self.principal).map(str::to_owned),
            since_ms: given(&self.since).map(parse_time).transpose()?,
            until_ms: given(&self.until).map(parse_time).transpose()?,
            prefix: given(&self.q).map(str::to_owned),
            after,
        })
    }

    /// The query string of these filters with `after` replaced.
    fn with_after(&self, after: Option<&str>) -> String {
        let mut pairs = url_pairs(self);
        if let Some(after) = after {
            pairs.push(("after", after.to_owned()));
        }
        encode(&pairs)
    }

    /// The query string of these filters with `state` replaced (and no page position).
    fn with_state(&self, state: Option<TaskState>) -> String {
        let mut params = self.clone();
        params.state = state.map(|s| s.as_str().to_owned());
        encode(&url_pairs(&params))
    }
}

fn url_pairs(params: &Params) -> Vec<(&'static str, String)> {
    [
        ("state", &params.state),
        ("skill", &params.skill),
        ("principal", &params.principal),
        ("since", &params.since),
        ("until", &params.until),
        ("q", &params.q),
    ]
    .into_iter()
    .filter_map(|(k, v)| given(v).map(|v| (k, v.to_owned())))
    .collect()
}

fn encode(pairs: &[(&str, String)]) -> String {
    let mut out = String::new();
    for (k, v) in pairs {
        out.push(if out.is_empty() { '?' } else { '&' });
        out.push_str(k);
        out.push('=');
        for byte in v.bytes() {
            match byte {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    out.push(char::from(byte))
                }
                other => out.push_str(&format!("%{other:02X}")),
            }
        }
    }
    out
}

impl Filters {
    /// The store query of these filters for `viewer`, `limit` tasks.
    pub(super) fn query(&self, viewer: &Viewer, limit: usize) -> ViewQuery {
        ViewQuery {
            // A principal's own tasks whatever it asks (the engine enforces it too).
            principal: match viewer.admin {
                true => self.principal.clone(),
                false => viewer.principal.clone(),
            },
            state: self.state,
            skill_id: self.skill.clone(),
            status_since_ms: self.since_ms,
            status_before_ms: self.until_ms,
            id_prefix: self.prefix.clone(),
            after: self.after.clone(),
            limit,
            history: Some(0),
            ..ViewQuery::default()
        }
    }
}

/// One task's row.
pub(super) fn row(view: &TaskView) -> Markup {
    let record = &view.record;
    html! {
        tr id=(format!("task-{}", record.id)) data-task=(record.id) {
            td.id { a href=(format!("/console/tasks/{}", record.id)) { code { (record.id) } } }
            td { (layout::state(record.state)) }
            td { (record.skill_id) }
            td { (record.principal.as_deref().unwrap_or("—")) }
            td { (layout::time(view.status_at_ms)) }
            td { (layout::time(record.created_at_ms)) }
        }
    }
}

/// The count of each state among the tasks `filters` match (the state filter aside), as links that
/// filter by it.
pub(super) async fn counts(
    state: &AppState,
    viewer: &Viewer,
    params: &Params,
    filters: &Filters,
) -> Result<Markup, crate::engine::EngineError> {
    let counted = state
        .engine
        .state_counts(&viewer.caller, filters.query(viewer, 0))
        .await?;
    let counts: Vec<(TaskState, u64)> = TaskState::ALL
        .into_iter()
        .map(|s| {
            (
                s,
                counted.iter().find(|(c, _)| *c == s).map_or(0, |(_, n)| *n),
            )
        })
        .collect();
    let all: u64 = counts.iter().map(|(_, n)| n).sum();
    let matching = match filters.state {
        None => all,
        Some(wanted) => counts
            .iter()
            .find(|(s, _)| *s == wanted)
            .map_or(0, |(_, n)| *n),
    };
    let first_page = filters.after.is_none();
    Ok(html! {
        div #counts {
        nav.counts aria-label="Tasks by state" {
            a href=(format!("/console{}", params.with_state(None))) aria-current=[filters.state.is_none().then_some("true")] {
                "all " span.count data-count="all" { (all) }
            }
            @for (task_state, total) in counts {
                a href=(format!("/console{}", params.with_state(Some(task_state)))) aria-current=[(filters.state == Some(task_state)).then_some("true")] {
                    (layout::state(task_state)) " " span.count data-count=(task_state.as_str()) { (total) }
                }
            }
        }
        p.total { span data-testid="matching" { (matching) } " matching" @if !first_page { " · " a href=(format!("/console{}", params.with_after(None))) { "first page" } } }
        }
    })
}

/// `GET /console`: the list.
pub(super) async fn page(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(params): Query<Params>,
) -> Response {
    let viewer = match session::viewer(&state, &headers) {
        Ok(viewer) => viewer,
        Err(session::SignIn) => return Redirect::to("/console/login").into_response(),
    };
    let (status, body) = match render(&state, &viewer, &params).await {
        Ok(body) => (StatusCode::OK, body),
        Err((status, text)) => (status, filter_form(&state, &viewer, &params, Some(&text))),
    };
    (status, layout::page("Tasks", "tasks", Some(&viewer), body)).into_response()
}

async fn render(
    state: &AppState,
    viewer: &Viewer,
    params: &Params,
) -> Result<Markup, (StatusCode, String)> {
    let filters = params
        .parse()
        .map_err(|text| (StatusCode::BAD_REQUEST, text))?;
    let failed = |e: crate::engine::EngineError| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    let mut page = state
        .engine
        .list_views(&viewer.caller, filters.query(viewer, PAGE_SIZE + 1))
        .await
        .map_err(failed)?;
    let more = page.views.len() > PAGE_SIZE;
    page.views.truncate(PAGE_SIZE);
    let next = match (more, page.views.last()) {
        (true, Some(last)) => Some(super::super::ops::page_token(
            last.status_at_ms,
            &last.record.id,
        )),
        _ => None,
    };
    let counts = counts(state, viewer, params, &filters)
        .await
        .map_err(failed)?;
    let first_page = filters.after.is_none();
    Ok(html! {
        (filter_form(state, viewer, params, None))
        (counts)
        table.tasks data-live=(if first_page { "first" } else { "page" }) data-query=(params.with_after(None)) {
            thead { tr { th { "Task" } th { "State" } th { "Skill" } th { "Principal" } th { "Status changed" } th { "Created" } } }
            tbody #rows {
                @for view in &page.views { (row(view)) }
            }
        }
        @if page.views.is_empty() { p.empty { "No task matches." } }
        @if let Some(next) = next {
            p.pager { a rel="next" href=(format!("/console{}", params.with_after(Some(&next)))) { "next page →" } }
        }
    })
}

fn filter_form(state: &AppState, viewer: &Viewer, params: &Params, error: Option<&str>) -> Markup {
    let skills = state.engine.skills();
    let value = |v: &Option<String>| v.clone().unwrap_or_default();
    html! {
        @if let Some(error) = error { (layout::notice(error)) }
        form.filters method="get" action="/console" {
            label { "Id starts with " input type="search" name="q" value=(value(&params.q)) placeholder="task id prefix"; }
            label { "State "
                select name="state" {
                    option value="" { "any" }
                    @for s in TaskState::ALL {
                        option value=(s.as_str()) selected[params.state.as_deref() == Some(s.as_str())] { (s.as_str()) }
                    }
                }
            }
            label { "Skill "
                select name="skill" {
                    option value="" { "any" }
                    @for skill in &skills {
                        option value=(skill.id) selected[params.skill.as_deref() == Some(skill.id.as_str())] { (skill.id) }
                    }
                }
            }
            @if viewer.admin && !state.config.tokens.is_empty() {
                label { "Principal " input type="text" name="principal" value=(value(&params.principal)); }
            }
            label { "Changed since " input type="datetime-local" name="since" value=(value(&params.since)); }
            label { "before " input type="datetime-local" name="until" value=(value(&params.until)); }
            button type="submit" { "Filter" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_as_typed_are_checked_with_a_reason() {
        let params = Params {
            state: Some("input-required".into()),
            since: Some("2026-11-28T09:30".into()),
            until: Some("2026-11-28T10:00:00+01:00".into()),
            q: Some("  ab ".into()),
            ..Params::default()
        };
        let filters = params.parse().unwrap();
        assert_eq!(filters.state, Some(TaskState::InputRequired));
        assert_eq!(filters.since_ms, Some(1_795_858_200_000));
        assert_eq!(filters.until_ms, Some(1_795_856_400_000));
        assert_eq!(filters.prefix.as_deref(), Some("ab"));
        for (params, says) in [
            (
                Params {
                    state: Some("sleeping".into()),
                    ..Params::default()
                },
                "not a task state",
            ),
            (
                Params {
                    since: Some("yesterday".into()),
                    ..Params::default()
                },
                "not a time",
            ),
            (
                Params {
                    after: Some("%%%".into()),
                    ..Params::default()
                },
                "page link",
            ),
        ] {
            let error = params.parse().unwrap_err();
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn a_query_string_keeps_the_filters_and_escapes_them() {
        let params = Params {
            state: Some("working".into()),
            q: Some("a&b=c d".into()),
            after: Some("x".into()),
            ..Params::default()
        };
        assert_eq!(params.with_after(None), "?state=working&q=a%26b%3Dc%20d");
        assert_eq!(params.with_state(None), "?q=a%26b%3Dc%20d");
    }
}
