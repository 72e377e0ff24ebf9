//! The served skills as MCP tools (`ServerConfig::mcp`, `radkit serve --mcp`): a streamable HTTP
//! MCP endpoint at `/mcp`, on the official Rust SDK's server (`rmcp`), beside the A2A bindings on
//! the same port and over the same tasks.
//!
//! Each skill is one tool, named by its id (reduced to the characters MCP allows), described by its
//! card entry, taking `message` (the text to send) and `taskId` (a task to continue). A call is a
//! blocking A2A send through the same operation layer (`ops`), as the caller's principal (the
//! same bearer tokens as the API; `/mcp` answers 401 without one when tokens are configured):
//!
//! * a task that completes answers with its message and its artifacts' text (and the same as
//!   `structuredContent`: `taskId`, `state`, `message`, `artifacts`);
//! * a task that asks for input asks the MCP client through elicitation (a form with one string,
//!   `answer`) when the client supports it, and the answer continues the task — up to
//!   [`MAX_QUESTIONS`] times in one call; otherwise (or when the user declines) the call answers
//!   with the question and the `taskId` to answer it with;
//! * a task still working after [`WAIT`] answers with its `taskId`: calling the tool again with
//!   that `taskId` and no `message` waits for it again (the task runs on, durably, whatever the
//!   MCP client does);
//! * a task that fails, is rejected or is canceled is a tool error (`isError`).
//!
//! MCP's task extension (SEP-2663) is not served: a long call is continued by `taskId` instead.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitationAction, ElicitationSchema, ErrorData, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::{
    session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use rmcp::ServerHandler;
use serde_json::{json, Map, Value};

use super::ops::{self, Answer};
use super::AppState;
use crate::engine::Caller;
use crate::model::{Message, Part, Task, TaskId, TaskState};

/// How long one call waits for its task to settle before answering with its `taskId`.
pub(crate) const WAIT: Duration = ops::BLOCKING_WAIT;

/// The most questions one call asks its MCP client (a skill that keeps asking is answered with
/// its last question and `taskId` after that).
pub(crate) const MAX_QUESTIONS: usize = 16;

/// The routes of the MCP endpoint (`/mcp`), behind the API's bearer tokens.
pub(crate) fn routes(state: Arc<AppState>) -> Router<Arc<AppState>> {
    let config =
        StreamableHttpServerConfig::default().with_allowed_hosts(allowed_hosts(&state.config.url));
    let tools = Arc::new(SkillTools::list(&state));
    let handler_state = state.clone();
    let service = StreamableHttpService::new(
        move || {
            Ok(SkillTools {
                state: handler_state.clone(),
                tools: tools.clone(),
            })
        },
        LocalSessionManager::default().into(),
        config,
    );
    Router::new()
        .nest_service("/mcp", service)
        .route_layer(axum::middleware::from_fn_with_state(state, authorized))
}

/// The `Host`s the endpoint answers (rmcp refuses others, against DNS rebinding): loopback, and
/// the host of the agent's public URL.
fn allowed_hosts(url: &str) -> Vec<String> {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    let authority = url
        .split_once("://")
        .map_or(url, |(_, rest)| rest)
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default();
    if !authority.is_empty() {
        hosts.push(authority.to_owned());
        // The host without its port: `example.com:8080` -> `example.com`, `[::1]:80` -> `[::1]`.
        let host = match authority.strip_prefix('[') {
            Some(rest) => rest.split_once(']').map(|(h, _)| format!("[{h}]")),
            None => authority
                .rsplit_once(':')
                .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
                .map(|(h, _)| h.to_owned()),
        };
        hosts.extend(host);
    }
    hosts.sort();
    hosts.dedup();
    hosts
}

/// Refuse a request to `/mcp` without a valid token when tokens are configured (HTTP 401 with
/// `WWW-Authenticate: Bearer`, as MCP's authorization wants it).
async fn authorized(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    match state.tokens.caller(request.headers()) {
        Ok(_) => next.run(request).await,
        Err(_) => (
            StatusCode::UNAUTHORIZED,
            [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
            "a bearer token is required",
        )
            .into_response(),
    }
}

/// One MCP session's handler: the served skills as tools.
#[derive(Clone)]
struct SkillTools {
    state: Arc<AppState>,
    /// Tool name -> (skill id, tool).
    tools: Arc<BTreeMap<String, (String, Tool)>>,
}

/// A skill id as an MCP tool name: `[A-Za-z0-9_.-]`, at most 128 characters.
fn tool_name(skill_id: &str) -> String {
    skill_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(128)
        .collect()
}

impl SkillTools {
    /// The tools of the engine's skills.
    fn list(state: &AppState) -> BTreeMap<String, (String, Tool)> {
        let schema = json!({
            "type": "object",
            "properties": {
                "message": { "type": "string", "description": "What to send the skill: a request, or the answer to its question." },
                "taskId": { "type": "string", "description": "The task to continue (answer its question, or wait for it again); omit to start a new task." }
            },
            "additionalProperties": false
        });
        let schema = Arc::new(schema.as_object().cloned().unwrap_or_default());
        state
            .engine
            .skills()
            .into_iter()
            .map(|skill| {
                let name = tool_name(&skill.id);
                let mut tool = Tool::new(name.clone(), skill.description.clone(), schema.clone());
                tool.title = Some(skill.name.clone());
                (name, (skill.id, tool))
            })
            .collect()
    }

    /// The caller of the request: its bearer token's principal (the middleware let it in).
    fn caller(&self, context: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
        let headers = context
            .extensions
            .get::<axum::http::request::Parts>()
            .map(|parts| parts.headers.clone())
            .unwrap_or_default();
        self.state
            .tokens
            .caller(&headers)
            .map_err(|_| ErrorData::invalid_request("a bearer token is required", None))
    }

    /// Run one call: send (or wait), ask the client while the task asks, answer with the task.
    async fn run(
        &self,
        tool: &str,
        skill_id: &str,
        args: &Map<String, Value>,
        caller: &Caller,
        peer: &Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let text = |key: &str| -> Result<Option<String>, ErrorData> {
            match args.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(ErrorData::invalid_params(
                    format!("`{key}` must be a string, got {other}"),
                    None,
                )),
            }
        };
        if let Some(unknown) = args
            .keys()
            .find(|k| !matches!(k.as_str(), "message" | "taskId"))
        {
            return Err(ErrorData::invalid_params(
                format!("unknown argument `{unknown}`: the arguments are `message` and `taskId`"),
                None,
            ));
        }
        let (message, task_id) = (text("message")?, text("taskId")?);
        let mut task = match (message, task_id) {
            (None, None) => return Err(ErrorData::invalid_params(
                "give a `message` (to start a task or answer one) or a `taskId` (to wait for it)",
                None,
            )),
            (Some(text), task_id) => match self.send(skill_id, text, task_id, caller).await {
                Ok(Answer::Task(task)) => task,
                Ok(Answer::Message(message)) => {
                    return Ok(CallToolResult::success(vec![ContentBlock::text(
                        message.joined_texts(),
                    )]))
                }
                Err(failed) => return Ok(failed),
            },
            (None, Some(task_id)) => match self.wait(&TaskId::from(task_id.as_str()), caller).await
            {
                Ok(task) => task,
                Err(failed) => return Ok(failed),
            },
        };
        let elicits = peer
            .supported_elicitation_modes()
            .contains(&rmcp::service::ElicitationMode::Form);
        for _ in 0..MAX_QUESTIONS {
            if task.status.state != TaskState::InputRequired || !elicits {
                break;
            }
            let Some(answer) = ask(peer, &task).await else {
                break;
            };
            task = match self
                .send(skill_id, answer, Some(task.id.clone()), caller)
                .await
            {
                Ok(Answer::Task(task)) => task,
                Ok(Answer::Message(message)) => {
                    return Ok(CallToolResult::success(vec![ContentBlock::text(
                        message.joined_texts(),
                    )]))
                }
                Err(failed) => return Ok(failed),
            };
        }
        Ok(result(tool, &task))
    }

    /// A blocking send of `text` to the skill (a new task), or as the answer of `task_id`.
    async fn send(
        &self,
        skill_id: &str,
        text: String,
        task_id: Option<String>,
        caller: &Caller,
    ) -> Result<Answer, CallToolResult> {
        let mut message = Message::user_text(text);
        let metadata = match &task_id {
            Some(_) => None,
            None => Some(Map::from_iter([("skillId".to_owned(), json!(skill_id))])),
        };
        message.task_id = task_id;
        let send = ops::Send {
            message,
            metadata,
            blocking: true,
            history_length: Some(0),
            accepted_output_modes: None,
            push: None,
        };
        ops::send_task(&self.state, caller, send)
            .await
            .map_err(|e| CallToolResult::error(vec![ContentBlock::text(e.message)]))
    }

    /// Wait (within [`WAIT`]) for the task to settle, and answer with it as it is then.
    async fn wait(&self, task_id: &TaskId, caller: &Caller) -> Result<Task, CallToolResult> {
        let failed = |message: String| CallToolResult::error(vec![ContentBlock::text(message)]);
        let engine = &self.state.engine;
        match tokio::time::timeout(WAIT, engine.wait_settled_with(caller, task_id, Some(0))).await {
            Ok(settled) => settled.map_err(|e| failed(e.to_string())),
            Err(_) => ops::get_task(&self.state, caller, task_id, Some(0))
                .await
                .map_err(|e| failed(e.message)),
        }
    }
}

/// Ask the MCP client the task's question (a form with one string, `answer`); `None` when the user
/// declines or cancels, or the client cannot be asked.
async fn ask(peer: &Peer<RoleServer>, task: &Task) -> Option<String> {
    let question = status_text(task);
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: if question.is_empty() {
            "The skill needs your input.".to_owned()
        } else {
            question
        },
        requested_schema: ElicitationSchema::builder()
            .required_string("answer")
            .build_unchecked(),
    };
    let answered = peer.create_elicitation(params).await.ok()?;
    match answered.action {
        ElicitationAction::Accept => answered
            .content
            .as_ref()
            .and_then(|c| c.get("answer"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    }
}

/// The task's status message as text.
fn status_text(task: &Task) -> String {
    task.status
        .message
        .as_ref()
        .map(Message::joined_texts)
        .unwrap_or_default()
}

/// The tool's result for `task` as it is now.
fn result(tool: &str, task: &Task) -> CallToolResult {
    let said = status_text(task);
    let state = task.status.state;
    let mut structured = json!({
        "taskId": task.id.as_str(),
        "contextId": task.context_id,
        "state": state.as_str(),
        "message": said,
    });
    let artifacts: Vec<Value> = task
        .artifacts
        .iter()
        .map(|a| {
            json!({
                "artifactId": a.artifact_id,
                "name": a.name,
                "text": a.parts.iter().filter_map(Part::as_text).collect::<String>(),
            })
        })
        .collect();
    let id = task.id.as_str();
    let (text, error) = match state {
        TaskState::Completed => (said.clone(), false),
        TaskState::InputRequired | TaskState::AuthRequired => (
            format!(
                "{said}\n\n(The skill waits for an answer: call `{tool}` again with `taskId` \"{id}\" and your answer as `message`.)"
            ),
            false,
        ),
        TaskState::Submitted | TaskState::Working => (
            format!(
                "Task {id} is still working: call `{tool}` again with `taskId` \"{id}\" (and no `message`) to wait for its result."
            ),
            false,
        ),
        _ => (
            if said.is_empty() {
                format!("the task ended {}", state.as_str())
            } else {
                said.clone()
            },
            true,
        ),
    };
    let mut content = vec![ContentBlock::text(text)];
    if state == TaskState::Completed {
        content.extend(
            artifacts
                .iter()
                .filter_map(|a| a["text"].as_str().filter(|t| !t.is_empty()))
                .map(|t| ContentBlock::text(t.to_owned())),
        );
    }
    structured["artifacts"] = Value::Array(artifacts);
    let mut result = if error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = Some(structured);
    result
}

impl ServerHandler for SkillTools {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        let mut info =
            rmcp::model::ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new(
            self.state.config.name.clone(),
            self.state.config.version.clone(),
        );
        info.instructions = Some(format!(
            "{} Each tool is a durable skill: a call that asks back or outlasts {} s answers with a `taskId` to continue it with.",
            self.state.config.description,
            WAIT.as_secs()
        ));
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.caller(&context)?;
        Ok(ListToolsResult::with_all_items(
            self.tools.values().map(|(_, tool)| tool.clone()).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = self.caller(&context)?;
        let name = request.name.as_ref();
        let Some((skill_id, _)) = self.tools.get(name) else {
            return Err(ErrorData::invalid_params(format!("no tool `{name}`"), None));
        };
        let args = request.arguments.clone().unwrap_or_default();
        self.run(name, skill_id, &args, &caller, &context.peer)
            .await
            .map(CallToolResponse::Complete)
    }
}
