//! The A2A 1.0 HTTP+JSON (REST) binding: the paths of `a2a.proto`'s HTTP annotations
//! (`POST /message:send`, `POST /message:stream`, `GET /tasks/{id}`, `POST /tasks/{id}:cancel`,
//! `GET` or `POST /tasks/{id}:subscribe`, `GET /tasks`, the push-config paths,
//! `GET /extendedAgentCard`) over the same operations as JSON-RPC (`methods`), with ProtoJSON bodies
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
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

use super::jsonrpc::{codes, RpcError};
use super::methods::{self, decode_params};
use super::methods_v1::send_of;
use super::stream::{self, Envelope};
use super::version::Version;
use super::wire::Wire;
use super::AppState;
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

/// How an A2A error is written outside JSON-RPC (spec §5.4): its HTTP status, its `google.rpc.Code`
/// name, and the `google.rpc.ErrorInfo` reason and domain that name it. One table for the REST and
/// gRPC bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mapping {
    /// The HTTP status (REST).
    pub http: u16,
    /// The `google.rpc.Code` name (`NOT_FOUND`, …): REST's `status`, gRPC's status code.
    pub status: &'static str,
    /// The `ErrorInfo` reason, for A2A's own errors and radkit's named ones.
    pub reason: Option<&'static str>,
    /// The `ErrorInfo` domain: `a2a-protocol.org` for A2A's errors, `radkit` for radkit's own.
    pub domain: &'static str,
}

/// The §5.4 mapping of a JSON-RPC error code. A2A's own errors carry a `google.rpc.ErrorInfo`
/// naming them; radkit's own (storage, limits) name themselves in the `radkit` domain.
pub(crate) fn mapping(code: i64) -> Mapping {
    let (http, status, reason, domain) = match code {
        codes::TASK_NOT_FOUND => (404, "NOT_FOUND", Some("TASK_NOT_FOUND"), "a2a-protocol.org"),
        codes::TASK_NOT_CANCELABLE => (
            400,
            "FAILED_PRECONDITION",
            Some("TASK_NOT_CANCELABLE"),
            "a2a-protocol.org",
        ),
        codes::PUSH_NOTIFICATION_NOT_SUPPORTED => (
            400,
            "FAILED_PRECONDITION",
            Some("PUSH_NOTIFICATION_NOT_SUPPORTED"),
            "a2a-protocol.org",
        ),
        codes::UNSUPPORTED_OPERATION => (
            400,
            "FAILED_PRECONDITION",
            Some("UNSUPPORTED_OPERATION"),
            "a2a-protocol.org",
        ),
        codes::CONTENT_TYPE_NOT_SUPPORTED => (
            400,
            "INVALID_ARGUMENT",
            Some("CONTENT_TYPE_NOT_SUPPORTED"),
            "a2a-protocol.org",
        ),
        codes::INVALID_AGENT_RESPONSE => (
            500,
            "INTERNAL",
            Some("INVALID_AGENT_RESPONSE"),
            "a2a-protocol.org",
        ),
        codes::EXTENDED_CARD_NOT_CONFIGURED => (
            400,
            "FAILED_PRECONDITION",
            Some("EXTENDED_AGENT_CARD_NOT_CONFIGURED"),
            "a2a-protocol.org",
        ),
        codes::EXTENSION_SUPPORT_REQUIRED => (
            400,
            "FAILED_PRECONDITION",
            Some("EXTENSION_SUPPORT_REQUIRED"),
            "a2a-protocol.org",
        ),
        codes::VERSION_NOT_SUPPORTED => (
            400,
            "FAILED_PRECONDITION",
            Some("VERSION_NOT_SUPPORTED"),
            "a2a-protocol.org",
        ),
        codes::PARSE_ERROR | codes::INVALID_REQUEST | codes::INVALID_PARAMS => {
            (400, "INVALID_ARGUMENT", None, "")
        }
        codes::METHOD_NOT_FOUND => (404, "NOT_FOUND", None, ""),
        codes::STORAGE_UNAVAILABLE => (503, "UNAVAILABLE", Some("STORAGE_UNAVAILABLE"), "radkit"),
        codes::TOO_MANY_CONNECTIONS => (503, "UNAVAILABLE", Some("TOO_MANY_CONNECTIONS"), "radkit"),
        codes::TOO_MANY_STREAMS => (
            429,
            "RESOURCE_EXHAUSTED",
            Some("TOO_MANY_STREAMS"),
            "radkit",
        ),
        _ => (500, "INTERNAL", None, ""),
    };
    Mapping {
        http,
        status,
        reason,
        domain,
    }
}

/// The HTTP status and `google.rpc.Status` body of an error (spec §5.4, §11.6).
pub(crate) fn status_body(error: &RpcError) -> (StatusCode, Value) {
    let Mapping {
        http,
        status,
        reason,
        domain,
    } = mapping(error.code);
    let details: Vec<Value> = reason
        .map(|reason| {
            json!({
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": domain,
            })
        })
        .into_iter()
        .collect();
    let status_code = StatusCode::from_u16(http).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut body = json!({ "code": http, "status": status, "message": error.message });
    if !details.is_empty() {
        body["details"] = Value::Array(details);
    }
    (status_code, json!({ "error": body }))
}

/// An error as a REST response.
pub(crate) fn error_response(error: RpcError) -> Response {
    let (status, body) = status_body(&error);
    a2a_json(status, body)
}

/// An operation's answer: its body with 200, or its error.
fn reply(answer: Result<Value, RpcError>) -> Response {
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
    Error(RpcError),
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
            Refused::Unreadable(why) => error_response(RpcError::new(
                codes::INVALID_REQUEST,
                format!("the request body could not be read: {why}"),
            )),
        }
    }
}

/// The body of a request, or why it is refused (over the server's limit: 413 with a status body).
fn body_of(
    state: &AppState,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<axum::body::Bytes, Refused> {
    body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => Refused::TooLarge(state.config.max_body_bytes),
        _ => Refused::Unreadable(rejection.body_text()),
    })
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
            return Err(Refused::Error(RpcError::new(
                codes::VERSION_NOT_SUPPORTED,
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
fn body_json(body: &[u8]) -> Result<Value, RpcError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(body)
        .map_err(|e| RpcError::new(codes::PARSE_ERROR, format!("the body is not JSON: {e}")))
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
    let body = match body_of(&state, body) {
        Ok(body) => body,
        Err(refused) => return refused.into_response(),
    };
    let answer = match body_json(&body).and_then(send_of) {
        Ok(send) => methods::send_task(&state, &caller, send)
            .await
            .and_then(|task| Wire::V1_0.send_response(task)),
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
    let body = match body_of(&state, body) {
        Ok(body) => body,
        Err(refused) => return refused.into_response(),
    };
    let resume = match stream::last_event_id(&headers) {
        Ok(resume) => resume,
        Err(e) => return error_response(e),
    };
    let send = body_json(&body).and_then(send_of);
    methods::stream_send(state, caller, Envelope::Bare, send, resume, Wire::V1_0)
        .await
        .unwrap_or_else(error_response)
}

/// `/tasks/{rest}`: the task id, and what follows it (`:cancel`, `:subscribe`, or
/// `/pushNotificationConfigs…`).
fn split_task_path(rest: &str) -> (&str, &str) {
    match rest.find(['/', ':']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    }
}

fn history_length(query: &HashMap<String, String>) -> Result<Option<i64>, RpcError> {
    query
        .get("historyLength")
        .map(|v| {
            v.parse::<i64>().map_err(|_| {
                RpcError::new(
                    codes::INVALID_PARAMS,
                    format!("`historyLength` must be an integer, got `{v}`"),
                )
            })
        })
        .transpose()
}

fn push_not_supported() -> Response {
    error_response(RpcError::new(
        codes::PUSH_NOTIFICATION_NOT_SUPPORTED,
        "push notifications are not supported; use POST /message:stream or GET /tasks/{id}:subscribe",
    ))
}

fn no_such_path(path: &str) -> Response {
    error_response(RpcError::new(
        codes::METHOD_NOT_FOUND,
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
    let task_id = Ok(TaskId::from(id.to_owned()));
    methods::subscribe(
        state,
        caller,
        Envelope::Bare,
        task_id,
        resume,
        Wire::V1_0,
        true,
    )
    .await
    .unwrap_or_else(error_response)
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
                    methods::get_task(&state, &caller, &TaskId::from(id.to_owned()), history)
                        .await
                        .and_then(|task| Wire::V1_0.task(task))
                }
                Err(e) => Err(e),
            };
            reply(answer)
        }
        (id, ":subscribe") => subscribe(state, caller, &headers, id).await,
        (_, tail) if tail.starts_with("/pushNotificationConfigs") => push_not_supported(),
        _ => no_such_path(&rest),
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
    let body = match body_of(&state, body) {
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
                methods::cancel_task(&state, &caller, &TaskId::from(id.to_owned()))
                    .await
                    .and_then(|task| Wire::V1_0.task(task)),
            )
        }
        (id, ":subscribe") => subscribe(state, caller, &headers, id).await,
        (_, tail) if tail.starts_with("/pushNotificationConfigs") => push_not_supported(),
        _ => no_such_path(&rest),
    }
}

async fn tasks_delete(
    State(state): State<Arc<AppState>>,
    Path(rest): Path<String>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if let Err(refused) = admit(&state, &headers, &query) {
        return refused.into_response();
    }
    match split_task_path(&rest) {
        (_, tail) if tail.starts_with("/pushNotificationConfigs") => push_not_supported(),
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
                    return error_response(RpcError::new(
                        codes::INVALID_PARAMS,
                        format!("`{key}` must be an integer, got `{value}`"),
                    ))
                }
            },
            "includeArtifacts" => match value.as_str() {
                "true" => json!(true),
                "false" => json!(false),
                _ => {
                    return error_response(RpcError::new(
                        codes::INVALID_PARAMS,
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
        Ok(request) => super::methods_v1::list_tasks(&state, &caller, request).await,
        Err(e) => Err(e),
    };
    reply(answer)
}

async fn extended_card(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if let Err(refused) = admit(&state, &headers, &query) {
        return refused.into_response();
    }
    error_response(RpcError::new(
        codes::UNSUPPORTED_OPERATION,
        "this agent declares no extended agent card (capabilities.extendedAgentCard is false)",
    ))
}
