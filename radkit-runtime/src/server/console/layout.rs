//! The frame every console page shares: head (the stylesheet, the script, the CSRF token for the
//! script's requests), navigation, who is signed in, and the page's body; and the small pieces the
//! pages render alike (times, state badges, JSON).

use axum::response::Html;
use maud::{html, Markup, DOCTYPE};

use super::session::Viewer;
use crate::model::TaskState;

/// A whole page: `title`, the navigation with `current` marked, and `body`.
pub(super) fn page(
    title: &str,
    current: &str,
    viewer: Option<&Viewer>,
    body: Markup,
) -> Html<String> {
    Html(frame(title, current, viewer, body).into_string())
}

fn frame(title: &str, current: &str, viewer: Option<&Viewer>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(viewer) = viewer {
                    meta name="radkit-csrf" content=(viewer.csrf);
                }
                title { (title) " · radkit console" }
                link rel="stylesheet" href=(super::assets::path("console.css"));
                script type="module" src=(super::assets::path("console.js")) {}
            }
            body {
                header.top {
                    a.brand href="/console" { "radkit" }
                    nav {
                        a href="/console" aria-current=[(current == "tasks").then_some("page")] { "Tasks" }
                        a href="/console/skills" aria-current=[(current == "skills").then_some("page")] { "Skills" }
                    }
                    @if let Some(viewer) = viewer {
                        div.who {
                            span data-testid="principal" { (viewer.label()) }
                            @if viewer.signed_in() {
                                button.link type="button" data-action="logout" { "Sign out" }
                            }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// A time (ms since the epoch) as UTC, to the second; the exact value in the title.
pub(super) fn time(ms: i64) -> Markup {
    let text = chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| ms.to_string());
    html! { time datetime=(ms) title=(format!("{ms} ms")) { (text) } }
}

/// A duration in ms, short.
pub(super) fn duration(ms: i64) -> String {
    match ms {
        ms if ms < 1_000 => format!("{ms} ms"),
        ms if ms < 60_000 => format!("{:.1} s", ms as f64 / 1_000.0),
        ms if ms < 3_600_000 => format!("{:.1} min", ms as f64 / 60_000.0),
        ms => format!("{:.1} h", ms as f64 / 3_600_000.0),
    }
}

/// A state as a badge.
pub(super) fn state(state: TaskState) -> Markup {
    html! { span class=(format!("state state-{}", state.as_str())) data-state=(state.as_str()) { (state.as_str()) } }
}

/// A JSON value, pretty, in a block.
pub(super) fn json(value: &serde_json::Value) -> Markup {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    html! { pre.json { (text) } }
}

/// A notice (an error the page explains).
pub(super) fn notice(text: &str) -> Markup {
    html! { p.notice role="alert" { (text) } }
}
