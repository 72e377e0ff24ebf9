//! Signing in: a form that takes one of the server's bearer tokens and answers with a session cookie
//! for its principal. The form is checked by origin (it has no session to carry a CSRF token), and
//! a wrong token is answered the same way whichever it was.

use std::sync::Arc;

use axum::extract::rejection::FormRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::html;
use serde::Deserialize;

use super::super::AppState;
use super::{layout, session};

/// The sign-in form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct SignIn {
    token: String,
}

fn form(error: Option<&str>) -> axum::response::Html<String> {
    let body = html! {
        h1 { "Sign in" }
        @if let Some(error) = error { (layout::notice(error)) }
        form.login method="post" action="/console/login" {
            label { "Token " input type="password" name="token" autocomplete="current-password" required autofocus data-testid="token"; }
            button type="submit" data-testid="sign-in" { "Sign in" }
        }
        p.hint { "Use one of the agent's bearer tokens (`radkit serve --token`). The console shows the tasks of its principal." }
    };
    layout::page("Sign in", "", None, body)
}

/// `GET /console/login`.
pub(super) async fn page(State(state): State<Arc<AppState>>) -> Response {
    if state.config.tokens.is_empty() {
        return Redirect::to("/console").into_response();
    }
    form(None).into_response()
}

/// `POST /console/login`: a session for the token's principal, then the task list.
pub(super) async fn sign_in(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Form<SignIn>, FormRejection>,
) -> Response {
    if state.config.tokens.is_empty() {
        return Redirect::to("/console").into_response();
    }
    if !session::same_origin(&headers) {
        return (
            StatusCode::FORBIDDEN,
            form(Some("This sign-in did not come from the console's page.")),
        )
            .into_response();
    }
    let Ok(Form(sign_in)) = body else {
        return (
            StatusCode::BAD_REQUEST,
            form(Some("Send the form with a token.")),
        )
            .into_response();
    };
    match session::principal_of_token(&state, &sign_in.token) {
        Some(principal) => (
            [(
                header::SET_COOKIE,
                session::session_cookie(&state, &principal),
            )],
            Redirect::to("/console"),
        )
            .into_response(),
        None => (
            StatusCode::UNAUTHORIZED,
            form(Some("That is not one of this agent's tokens.")),
        )
            .into_response(),
    }
}
