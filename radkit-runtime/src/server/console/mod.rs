//! The web console at `/console` (feature `console`, `ServerConfig::console`): an operator's window
//! into the agent's tasks, served by the same server on the same port, behind the same tokens.
//!
//! Pages are rendered here with maud (HTML checked at compile time, every value escaped) and a small
//! script (`console/console.js`) adds what needs a browser: the live streams, the actions, the
//! step graphs drawn by the vendored Mermaid. Every file is embedded in the binary (`assets`). The
//! console reads through the engine's calls (list, view, journal, the feed of changed tasks) and
//! changes tasks through the operations the A2A bindings call (`act`), with the same checks.

mod act;
mod assets;
mod layout;
mod list;
mod live;
mod login;
mod session;
mod skills;
mod task;
mod timeline;

use std::sync::Arc;

use axum::http::{header, HeaderValue};
use axum::response::{Redirect, Response};
use axum::routing::{get, post};
use axum::Router;

use super::AppState;

pub(crate) use session::Sessions;

/// The console's routes, all under `/console`.
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/console", get(list::page))
        .route(
            "/console/",
            get(|| async { Redirect::permanent("/console") }),
        )
        .route("/console/events", get(live::list_events))
        .route("/console/login", get(login::page).post(login::sign_in))
        .route("/console/logout", post(act::logout))
        .route("/console/skills", get(skills::page))
        .route("/console/tasks/{id}", get(task::page))
        .route("/console/tasks/{id}/fragment", get(task::fragment))
        .route("/console/tasks/{id}/events", get(live::task_events))
        .route("/console/tasks/{id}/journal.json", get(task::journal_json))
        .route(
            "/console/tasks/{id}/files/{artifact}/{part}",
            get(task::file),
        )
        .route("/console/tasks/{id}/answer", post(act::answer))
        .route("/console/tasks/{id}/decide", post(act::decide))
        .route("/console/tasks/{id}/cancel", post(act::cancel))
        .route("/console/assets/{name}", get(assets::serve))
        .layer(axum::middleware::map_response(guarded))
}

/// What every console answer carries: a content security policy that runs only the console's own
/// script and loads nothing from elsewhere (Mermaid's drawings style themselves inline), no framing
/// by another site (an approve button under someone else's page), no type sniffing, no referrer to
/// other sites.
async fn guarded(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        ),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends `Origin: null` with a
    // form post, and the sign-in form's origin check could not tell it from a foreign page's.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}
