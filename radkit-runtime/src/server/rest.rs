//! The A2A 1.0 HTTP+JSON (REST) binding: the paths of `a2a.proto`'s HTTP annotations
//! (`POST /message:send`, `POST /message:stream`, `GET /tasks/{id}`, `POST /tasks/{id}:cancel`,
//! `GET` or `POST /tasks/{id}:subscribe`, `GET /tasks`, the push-config paths,
//! `GET /extendedAgentCard`) over the same operations as JSON-RPC (`ops`, `open`), with ProtoJSON bodies
//! (`application/a2a+json`), SSE streams of bare `StreamResponse`s, and errors as
//! `google.rpc.Status` with the HTTP status and the `google.rpc.ErrorInfo` reason of spec §5.4 and
//! §11.6.
//!
//! REST is served for 1.0 only: a request without `A2A-Version` is taken as 1.0 (0.3 clients speak
//! JSON-RPC), one naming another version is `VersionNotSupportedError`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::Router;
use serde_json::{json, Value};

use super::errors::{Kind, OpError};
use super::jsonrpc::decode_params;
use super::open::{self, Target};
use super::stream::{self, Envelope};
use super::v1_requests::send_of;
use super::version::Version;
use super::{ops, AppState};
use crate::engine::Caller;
use crate::model::{v1, TaskId};

/// The media type of REST bodies.
const A2A_JSON: &str = "application/a2a+json";

/// The REST routes, for the server's router.
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/message:send", post(message_send))
        .route("/message:stream", post(message_stream))
        .route("/tasks", get(list_tasks))
        .route(
            "/tasks/{*rest}",
            get(tasks_get).post(tasks_post).delete(tasks_delete),
        )
        .route("/extendedAgentCard", get(extended_card))
}

/// The same paths, every method answered by `handler` (the binding is not offered).
pub(crate) fn refused<H, T>(handler: H) -> Router<Arc<AppState>>
where
    H: axum::handler::Handler<T, Arc<AppState>> + Clone,
    T: 'static,
{
    Router::new()
        .route("/message:send", any(handler.clone()))
        .route("/message:stream", any(handler.clone()))
        .route("/tasks", any(handler.clone()))
        .route("/tasks/{*rest}", any(handler.clone()))
        .route("/extendedAgentCard", any(handler))
}

/// An error as a REST response.
pub(crate) fn error_response(error: OpError) -> Response {
    let (status, body) = super::errors::http_body(&error);
    a2a_json(status, body)
}

/// An operation's answer: its body with 200, or its error.
fn reply(answer: Result<Value, OpError>) -> Response {
    match answer {
        Ok(body) => a2a_json(StatusCode::OK, body),
        Err(e) => error_response(e),
    }
}

fn a2a_json(status: StatusCode, body: Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    response
        .headers_mut()
        .insert("content-type", HeaderValue::from_static(A2A_JSON));
    response
}

/// Why a REST request was turned away before its operation ran.
enum Refused {
    /// A version this binding does not speak, or bad input.
    Error(OpError),
    /// No valid bearer token.
    Unauthorized,
    /// A body over the server's limit (bytes).
    TooLarge(usize),
    /// A body that could not be read.
    Unreadable(String),
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::Error(e) => error_response(e),
            Refused::Unauthorized => {
                let body = json!({ "error": {
                    "code": 401,
                    "status": "UNAUTHENTICATED",
                    "message": "missing or invalid bearer token",
                } });
                let mut response = a2a_json(StatusCode::UNAUTHORIZED, body);
                response
                    .headers_mut()
                    .insert("www-authenticate", HeaderValue::from_static("Bearer"));
                response
            }
            Refused::TooLarge(limit) => a2a_json(
                StatusCode::PAYLOAD_TOO_LARGE,
                json!({ "error": {
                    "code": 413,
                    "status": "RESOURCE_EXHAUSTED",
                    "message": format!("the request body is larger than the limit of {limit} bytes"),
                } }),
            ),
            Refused::Unreadable(why) => error_response(OpError::new(
                Kind::BadRequest,
                format!("the request body could not be read: {why}"),
            )),
        }
    }
}

/// The body of a request, or why it is refused (over the server's limit: 413 with a status body;
/// declared as something other than JSON: `ContentTypeNotSupportedError`).
fn body_of(
    state: &AppState,
    headers: &HeaderMap,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<axum::body::Bytes, Refused> {
    let body = body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => Refused::TooLarge(state.config.max_body_bytes),
        _ => Refused::Unreadable(rejection.body_text()),
    })?;
    if !body.iter().all(u8::is_ascii_whitespace) {
        super::media::check_json(headers).map_err(Refused::Error)?;
    }
    Ok(body)
}

/// The caller of a REST request, after its version and credentials are checked.
fn admit(
    state: &AppState,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
) -> Result<Caller, Refused> {
    let version = match headers.get("a2a-version") {
        Some(_) => Version::of_request(headers, None),
        None => match query
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("A2A-Version"))
        {
            Some((_, v)) => Version::parse(v),
            // The spec reads no version as 0.3, which has no HTTP+JSON binding here: a client of
            // this binding that sends none is taken to speak 1.0 rather than refused.
            None => Ok(Version::V1_0),
        },
    };
    match version.map_err(Refused::Error)? {
        Version::V1_0 => {}
        Version::V0_3 => {
            return Err(Refused::Error(OpError::new(
                Kind::VersionNotSupported,
                "the HTTP+JSON binding speaks A2A 1.0; A2A 0.3 is served over JSON-RPC at POST /",
            )))
        }
    }
    state
        .tokens
        .caller(headers)
        .map_err(|_| Refused::Unauthorized)
}

/// A request body as JSON (an empty body is `{}`).
fn body_json(body: &[u8]) -> Result<Value, OpError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(body)
        .map_err(|e| OpError::new(Kind::Unparsable, format!("the body is not JSON: {e}")))
}

async fn message_send(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let caller = match admit(&state, &headers, &query) {
        Ok(caller) => caller,
        Err(refused) => return refused.into_response(),
    };
    let body = match body_of(&state, &headers, body) {
        Ok(body) => body,
        Err(refused) => return refused.into_response(),
    };
    let answer = match body_json(&body).and_then(send_of) {
        Ok(send) => ops::send_task(&state, &caller, send)
            .await
            .and_then(|answer| Version::V1_0.send_response(answer)),
        Err(e) => Err(e),
    };
    reply(answer)
}

async fn message_stream(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let caller = match admit(&state, &headers, &query) {
        Ok(caller) => caller,
        Err(refused) => return refused.into_response(),
    };
    let body = match body_of(&state, &headers, body) {
        Ok(body) => body,
        Err(refused) => return refused.into_response(),
    };
    let resume = match stream::last_event_id(&headers) {
        Ok(resume) => resume,
        Err(e) => return error_response(e),
    };
    let target = body_json(&body).and_then(send_of).map(Target::send);
    match open::open(&state, &caller, target, resume).await {
        Ok(opened) => stream::sse(opened, Envelope::Bare, Version::V1_0).into_response(),
        Err(e) => error_response(e),
    }
}

/// `/tasks/{rest}`: the task id, and what follows it (`:cancel`, `:subscribe`, or
/// `/pushNotificationConfigs…`).
fn split_task_path(rest: &str) -> (&str, &str) {
    match rest.find(['/', ':']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    }
}

fn history_length(query: &HashMap<String, String>) -> Result<Option<i64>, OpError> {
    query
        .get("historyLength")
        .map(|v| {
            v.parse::<i64>().map_err(|_| {
                OpError::new(
                    Kind::InvalidInput,
                    format!("`historyLength` must be an integer, got `{v}`"),
                )
            })
        })
        .transpose()
}

/// What follows `/tasks/{id}` on a push-config path: `None` for another path, `Some(None)` for
/// `/pushNotificationConfigs`, `Some(Some(id))` for `/pushNotificationConfigs/{id}`.
fn push_path(tail: &str) -> Option<Option<&str>> {
    match tail.strip_prefix("/pushNotificationConfigs")? {
        "" | "/" => Some(None),
        rest => rest
            .strip_prefix('/')
            .filter(|id| !id.is_empty() && !id.contains('/'))
            .map(Some),
    }
}

/// `GET /tasks/{id}/pushNotificationConfigs`: `ListTaskPushNotificationConfigs`, its fields as
/// query parameters.
async fn list_push_configs(
    state: &AppState,
    caller: &Caller,
    id: &str,
    query: &HashMap<String, String>,
) -> Response {
    let page_size = match query.get("pageSize").map(|v| v.parse::<i32>()) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            return error_response(OpError::new(
                Kind::InvalidInput,
                "`pageSize` must be an integer",
            ))
        }
    };
    let request = v1::ListTaskPushNotificationConfigsRequest {
        tenant: String::new(),
        task_id: id.to_owned(),
        page_size,
        page_token: query.get("pageToken").cloned().unwrap_or_default(),
    };
    reply(
        super::v1_requests::list_push(state, caller, request)
            .await
            .and_then(super::wire::json),
    )
}

fn no_such_path(path: &str) -> Response {
    error_response(OpError::new(
        Kind::NoSuchMethod,
        format!("no A2A operation at `/tasks/{path}`"),
    ))
}

async fn subscribe(
    state: Arc<AppState>,
    caller: Caller,
    headers: &HeaderMap,
    id: &str,
) -> Response {
    let resume = match stream::last_event_id(headers) {
        Ok(resume) => resume,
        Err(e) => return error_response(e),
    };
    let target = Target::Task {
        id: TaskId::from(id.to_owned()),
        until_end: true,
    };
    match open::open(&state, &caller, Ok(target), resume).await {
        Ok(opened) => stream::sse(opened, Envelope::Bare, Version::V1_0).into_response(),
        Err(e) => error_response(e),
    }
}

async fn tasks_get(
    State(state): State<Arc<AppState>>,
    Path(rest): Path<String>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let caller = match admit(&state, &headers, &query) {
        Ok(caller) => caller,
        Err(refused) => return refused.into_response(),
    };
    match split_task_path(&rest) {
        (id, "") => {
            let answer = match history_length(&query) {
                Ok(history) => {
                    ops::get_task(&state, &caller, &TaskId::from(id.to_owned()), history)
                        .await
                        .and_then(|task| Version::V1_0.task(task))
                }
                Err(e) => Err(e),
            };
            reply(answer)
        }
        (id, ":subscribe") => subscribe(state, caller, &headers, id).await,
        (id, tail) => match push_path(tail) {
            Some(None) => list_push_configs(&state, &caller, id, &query).await,
            Some(Some(config_id)) => {
                let request = v1::GetTaskPushNotificationConfigRequest {
                    tenant: String::new(),
                    task_id: id.to_owned(),
                    id: config_id.to_owned(),
                };
                reply(
                    super::v1_requests::get_push(&state, &caller, request)
                        .await
                        .and_then(super::wire::json),
                )
            }
            None => no_such_path(&rest),
        },
    }
}

async fn tasks_post(
    State(state): State<Arc<AppState>>,
    Path(rest): Path<String>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let caller = match admit(&state, &headers, &query) {
        Ok(caller) => caller,
        Err(refused) => return refused.into_response(),
    };
    let body = match body_of(&state, &headers, body) {
        Ok(body) => body,
        Err(refused) => return refused.into_response(),
    };
    match split_task_path(&rest) {
        (id, ":cancel") => {
            // The body (a `CancelTaskRequest`, its id in the path) may carry metadata; it must be
            // well-formed if present.
            if let Err(e) = body_json(&body).and_then(|v| {
                let mut v = v;
                if let Some(map) = v.as_object_mut() {
                    map.entry("id").or_insert_with(|| json!(id));
                }
                decode_params::<v1::CancelTaskRequest>(v)
            }) {
                return error_response(e);
            }
            reply(
                ops::cancel_task(&state, &caller, &TaskId::from(id.to_owned()))
                    .await
                    .and_then(|task| Version::V1_0.task(task)),
            )
        }
        (id, ":subscribe") => subscribe(state, caller, &headers, id).await,
        (id, tail) if push_path(tail) == Some(None) => {
            // `CreateTaskPushNotificationConfig`: the body is the config, its task in the path.
            let config = body_json(&body).and_then(|mut v| {
                if let Some(map) = v.as_object_mut() {
                    map.insert("taskId".to_owned(), json!(id));
                }
                decode_params::<v1::TaskPushNotificationConfig>(v)
            });
            let answer = match config {
                Ok(config) => super::v1_requests::create_push(&state, &caller, config)
                    .await
                    .and_then(super::wire::json),
                Err(e) => Err(e),
            };
            reply(answer)
        }
        _ => no_such_path(&rest),
    }
}

async fn tasks_delete(
    State(state): State<Arc<AppState>>,
    Path(rest): Path<String>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let caller = match admit(&state, &headers, &query) {
        Ok(caller) => caller,
        Err(refused) => return refused.into_response(),
    };
    let (id, tail) = split_task_path(&rest);
    match push_path(tail) {
        Some(Some(config_id)) => {
            let request = v1::DeleteTaskPushNotificationConfigRequest {
                tenant: String::new(),
                task_id: id.to_owned(),
                id: config_id.to_owned(),
            };
            reply(
                super::v1_requests::delete_push(&state, &caller, request)
                    .await
                    .map(|()| json!({})),
            )
        }
        _ => no_such_path(&rest),
    }
}

/// `GET /tasks`: `ListTasks` with its fields as query parameters (spec 11.5: camelCase names,
/// numbers and booleans as text, enums by name).
async fn list_tasks(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let caller = match admit(&state, &headers, &query) {
        Ok(caller) => caller,
        Err(refused) => return refused.into_response(),
    };
    let mut fields = serde_json::Map::new();
    for (key, value) in &query {
        let value = match key.as_str() {
            "pageSize" | "historyLength" => match value.parse::<i64>() {
                Ok(n) => json!(n),
                Err(_) => {
                    return error_response(OpError::new(
                        Kind::InvalidInput,
                        format!("`{key}` must be an integer, got `{value}`"),
                    ))
                }
            },
            "includeArtifacts" => match value.as_str() {
                "true" => json!(true),
                "false" => json!(false),
                _ => {
                    return error_response(OpError::new(
                        Kind::InvalidInput,
                        format!("`includeArtifacts` must be `true` or `false`, got `{value}`"),
                    ))
                }
            },
            "contextId" | "status" | "pageToken" | "statusTimestampAfter" | "tenant" => {
                json!(value)
            }
            // The version, and parameters this operation does not have.
            _ => continue,
        };
        fields.insert(key.clone(), value);
    }
    let answer = match decode_params::<v1::ListTasksRequest>(Value::Object(fields)) {
        Ok(request) => super::v1_requests::list_tasks(&state, &caller, request).await,
        Err(e) => Err(e),
    };
    reply(answer)
}

async fn extended_card(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let caller = match admit(&state, &headers, &query) {
        Ok(caller) => caller,
        Err(refused) => return refused.into_response(),
    };
    let answer = super::card::extended_card_v1(&state, &caller).and_then(super::card::to_json);
    let mut response = reply(answer);
    // Spec 1.0 §13.3: a card for this caller, not for shared caches.
    response.headers_mut().insert(
        "cache-control",
        HeaderValue::from_static("private, no-cache"),
    );
    response
}
