//! The skills the agent serves: each one's entry on the agent card and its step graph, drawn in the
//! browser by Mermaid from the same text `radkit graph` prints.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;

use super::super::AppState;
use super::{layout, session};

/// `GET /console/skills`.
pub(super) async fn page(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let Ok(viewer) = session::viewer(&state, &headers) else {
        return Redirect::to("/console/login").into_response();
    };
    // The card as served (1.0), for each skill's entry.
    let card: serde_json::Value =
        serde_json::from_str(&state.cards.public(true).body).unwrap_or_default();
    let entries = card
        .get("skills")
        .and_then(|s| s.as_array())
        .cloned()
        .unwrap_or_default();
    let skills = state.engine.skills();
    let body = html! {
        h1 { "Skills" }
        p.hint { (skills.len()) " served · the card is at " a href="/.well-known/agent-card.json" { "/.well-known/agent-card.json" } }
        @for skill in &skills {
            section.skill id=(format!("skill-{}", skill.id)) {
                h2 { (skill.name) " " code { (skill.id) } }
                p { (skill.description) }
                dl.meta {
                    dt { "Version" } dd { code { (skill.version) } }
                    @if !skill.tags.is_empty() { dt { "Tags" } dd { (skill.tags.join(", ")) } }
                    dt { "Tasks" } dd { a href=(format!("/console?skill={}", skill.id)) { "this skill's tasks" } }
                }
                h3 { "Step graph" }
                pre.mermaid data-testid="graph" { (crate::registry::mermaid(skill)) }
                details {
                    summary { "Card entry" }
                    @match entries.iter().find(|e| e.get("id").and_then(|i| i.as_str()) == Some(skill.id.as_str())) {
                        Some(entry) => (layout::json(entry)),
                        None => p.empty { "Not on the card." },
                    }
                }
            }
        }
        script type="module" {
            (maud::PreEscaped(format!(
                "import {{ drawGraphs }} from '{}'; drawGraphs('{}');",
                super::assets::path("console.js"),
                super::assets::path("mermaid.js")
            )))
        }
    };
    layout::page("Skills", "skills", Some(&viewer), body).into_response()
}
