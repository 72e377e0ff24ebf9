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
//! A client that declares MCP's tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) gets
//! the skill's task itself instead: the call answers at once with a task whose id is the radkit
//! task's; `tasks/get` shows it (`working`; `input_required` with the question as an elicitation
//! input request keyed by the question's message id; `completed` with the tool result, an
//! `isError` one for a failed task; `cancelled`), `tasks/update` answers the question, and
//! `tasks/cancel` cancels the task.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, DetailedTask, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationSchema, ErrorData, GetTaskParams, GetTaskResult, Implementation,
    InputRequest, ListToolsResult, PaginatedRequestParams, ServerCapabilities, Task as McpTask,
    TaskPayload, TaskStatus, Tool, UpdateTaskParams,
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
            .fold(BTreeMap::new(), |mut tools, skill| {
                // Two ids that reduce to one name (`a b`, `a_b`): the later gets a suffix.
                let base = tool_name(&skill.id);
                let name = (1..)
                    .map(|n| match n {
                        1 => base.clone(),
                        n => format!("{}_{n}", base.chars().take(120).collect::<String>()),
                    })
                    .find(|name| !tools.contains_key(name))
                    .unwrap_or(base);
                let mut tool = Tool::new(name.clone(), skill.description.clone(), schema.clone());
                tool.title = Some(skill.name.clone());
                tools.insert(name, (skill.id, tool));
                tools
            })
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
        message: Option<String>,
        task_id: Option<String>,
        caller: &Caller,
        peer: &Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut task = match (message, task_id) {
            (Some(text), task_id) => match self.send(skill_id, text, task_id, caller).await {
                Ok(Answer::Task(task)) => task,
                Ok(Answer::Message(message)) => {
                    return Ok(CallToolResult::success(vec![ContentBlock::text(
                        message.joined_texts(),
                    )]))
                }
                Err(failed) => return Ok(failed),
            },
            (None, Some(task_id)) => {
                match self.wait(&TaskId::from(task_id.as_str()), caller).await {
                    Ok(task) => task,
                    Err(failed) => return Ok(failed),
                }
            }
            (None, None) => {
                return Err(ErrorData::invalid_params(
                    "give a `message` or a `taskId`",
                    None,
                ))
            }
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

    /// Start (or continue) the task without waiting, as the MCP task that follows it.
    async fn start_task(
        &self,
        skill_id: &str,
        message: Option<String>,
        task_id: Option<String>,
        caller: &Caller,
    ) -> Result<CreateTaskResult, ErrorData> {
        let refused = op_error;
        let task = match (message, task_id) {
            (Some(text), task_id) => ops::start(
                &self.state,
                caller,
                &send_of(skill_id, text, task_id, false),
            )
            .await
            .map_err(refused)?,
            (None, Some(task_id)) => TaskId::from(task_id.as_str()),
            (None, None) => {
                return Err(ErrorData::invalid_params(
                    "give a `message` or a `taskId`",
                    None,
                ))
            }
        };
        let task = ops::get_task(&self.state, caller, &task, Some(0))
            .await
            .map_err(refused)?;
        Ok(CreateTaskResult::new(detailed(&task).task))
    }

    /// The caller's task `id`; one it cannot see is invalid params.
    async fn task(&self, id: &str, caller: &Caller) -> Result<Task, ErrorData> {
        ops::get_task(&self.state, caller, &TaskId::from(id), Some(0))
            .await
            .map_err(op_error)
    }

    /// A blocking send of `text` to the skill (a new task), or as the answer of `task_id`.
    async fn send(
        &self,
        skill_id: &str,
        text: String,
        task_id: Option<String>,
        caller: &Caller,
    ) -> Result<Answer, CallToolResult> {
        ops::send_task(&self.state, caller, send_of(skill_id, text, task_id, true))
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
    let answered = peer
        .create_elicitation(elicitation(&status_text(task)))
        .await
        .ok()?;
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
        let mut info = rmcp::model::ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        );
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
        let (message, task_id) = arguments(&args)?;
        if context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks())
        {
            return self
                .start_task(skill_id, message, task_id, &caller)
                .await
                .map(CallToolResponse::Task);
        }
        self.run(name, skill_id, message, task_id, &caller, &context.peer)
            .await
            .map(CallToolResponse::Complete)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let caller = self.caller(&context)?;
        let task = self.task(&request.task_id, &caller).await?;
        Ok(GetTaskResult::new(detailed(&task)))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = self.caller(&context)?;
        let task = self.task(&request.task_id, &caller).await?;
        let key = question_key(&task).ok_or_else(|| {
            ErrorData::invalid_params(
                format!(
                    "task {} asks nothing: it is {}",
                    request.task_id,
                    task.status.state.as_str()
                ),
                None,
            )
        })?;
        let response = request.input_responses.get(&key).ok_or_else(|| {
            ErrorData::invalid_params(
                format!("the task's outstanding input request is `{key}`"),
                None,
            )
        })?;
        let answered: ElicitResult = serde_json::from_value(response.clone()).map_err(|e| {
            ErrorData::invalid_params(format!("`{key}` is not an elicitation result: {e}"), None)
        })?;
        match answered.action {
            ElicitationAction::Accept => {
                let answer = answered
                    .content
                    .as_ref()
                    .and_then(|c| c.get("answer"))
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        ErrorData::invalid_params(
                            format!("`{key}` accepted without a string `answer`"),
                            None,
                        )
                    })?;
                let send = send_of("", answer.to_owned(), Some(task.id.to_string()), false);
                ops::send_task(&self.state, &caller, send)
                    .await
                    .map(drop)
                    .map_err(op_error)
            }
            // Declined or dismissed: the task keeps waiting for an answer (`tasks/cancel`
            // cancels it).
            _ => Ok(()),
        }
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = self.caller(&context)?;
        let task_id = TaskId::from(request.task_id.as_str());
        ops::cancel_task(&self.state, &caller, &task_id)
            .await
            .map(drop)
            .map_err(op_error)
    }
}

/// An operation's error as MCP's: the server's own failures (a store that cannot be reached) as
/// internal errors, a caller's mistakes (no such task, a task that ended) as invalid params.
fn op_error(e: super::errors::OpError) -> ErrorData {
    match e.kind {
        super::errors::Kind::Internal | super::errors::Kind::StorageUnavailable => {
            ErrorData::internal_error(e.message, None)
        }
        _ => ErrorData::invalid_params(e.message, None),
    }
}

/// A call's `message` and `taskId`; anything else, or neither, is invalid.
fn arguments(args: &Map<String, Value>) -> Result<(Option<String>, Option<String>), ErrorData> {
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
    match (text("message")?, text("taskId")?) {
        (None, None) => Err(ErrorData::invalid_params(
            "give a `message` (to start a task or answer one) or a `taskId` (to wait for it)",
            None,
        )),
        given => Ok(given),
    }
}

/// A send of `text`: a new task of skill `skill_id`, or the answer of task `task_id`; blocking or
/// not.
fn send_of(skill_id: &str, text: String, task_id: Option<String>, blocking: bool) -> ops::Send {
    let mut message = Message::user_text(text);
    // A new task names its skill; an answer goes to the task's own.
    let metadata = match &task_id {
        Some(_) => None,
        None => Some(Map::from_iter([("skillId".to_owned(), json!(skill_id))])),
    };
    message.task_id = task_id;
    ops::Send {
        message,
        metadata,
        blocking,
        history_length: Some(0),
        accepted_output_modes: None,
        push: None,
    }
}

/// The key of the task's outstanding question (its status message's id), when it asks one.
fn question_key(task: &Task) -> Option<String> {
    matches!(
        task.status.state,
        TaskState::InputRequired | TaskState::AuthRequired
    )
    .then(|| {
        let id = task
            .status
            .message
            .as_ref()
            .map_or("question", |m| m.message_id.as_str());
        format!("question-{id}")
    })
}

/// The MCP task of a radkit task, with the payload its state has.
fn detailed(task: &Task) -> DetailedTask {
    let at = task.status.timestamp.clone().unwrap_or_default();
    let said = status_text(task);
    let payload = match task.status.state {
        TaskState::Submitted | TaskState::Working => TaskPayload::Working,
        TaskState::InputRequired | TaskState::AuthRequired => {
            let key = question_key(task).unwrap_or_default();
            TaskPayload::InputRequired {
                input_requests: BTreeMap::from([(
                    key,
                    InputRequest::Elicitation(ElicitRequest::new(elicitation(&said))),
                )]),
            }
        }
        TaskState::Canceled => TaskPayload::Cancelled,
        _ => TaskPayload::Completed {
            result: serde_json::to_value(result("", task))
                .ok()
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default(),
        },
    };
    let mut mcp_task = McpTask::new(task.id.as_str(), TaskStatus::Working, at.clone(), at);
    if !said.is_empty() {
        mcp_task = mcp_task.with_status_message(said);
    }
    DetailedTask::new(mcp_task, payload)
}

/// The form that asks `question`: one required string, `answer`.
fn elicitation(question: &str) -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: if question.is_empty() {
            "The skill needs your input.".to_owned()
        } else {
            question.to_owned()
        },
        requested_schema: ElicitationSchema::builder()
            .required_string("answer")
            .build_unchecked(),
    }
}
