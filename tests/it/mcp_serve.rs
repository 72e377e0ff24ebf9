//! The served skills as MCP tools (`ServerConfig::mcp`, `radkit serve --mcp`), spoken to by the
//! official Rust SDK's client (`rmcp`) over streamable HTTP at `/mcp`: each skill a tool with its
//! card entry; a call runs the skill durably and answers with its message and artifacts; a
//! question is asked through elicitation of a client that supports it, and otherwise answered with
//! the `taskId` to continue; a failed task is a tool error; bad arguments are invalid params; and
//! the API's tokens guard the endpoint, each principal seeing its own tasks only.

use std::sync::{Arc, Mutex};

use radkit::engine::{Caller, Engine};
use radkit::model::TaskState;
use radkit::prelude::*;
use radkit::store::MemoryStore;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    ErrorData, GetTaskParams, Implementation, InputRequest, ProtocolVersion, TaskPayload,
    TaskStatus, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{json, Value};

use crate::support::agent::{start, Agent};

/// `ask` asks for a name and greets it; `fail` fails; anything else is echoed.
#[derive(Default)]
struct Greeter;

#[flow_skill(
    id = "greeter",
    name = "Greeter",
    description = "Greets whoever asks.",
    register = false
)]
impl Greeter {
    #[step(start)]
    async fn start(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let text = msg.joined_texts();
        if text == "ask" {
            return await_input!(slot = "name", message = "What is your name?");
        }
        if text == "fail" {
            return ctx.fail("no luck today");
        }
        ctx.complete(
            format!("Echo: {text}"),
            vec![Artifact::from_text("echo.txt", text)],
        )
    }

    #[step(resume_from = "start")]
    async fn named(&self, ctx: &StepCtx, name: Content) -> StepResult {
        ctx.complete(format!("Hello, {}!", name.joined_texts()), vec![])
    }
}

async fn agent(tokens: Vec<(String, String)>) -> Agent {
    let builder = Engine::builder(MemoryStore::new())
        .without_registered_skills()
        .skill(Greeter);
    start(builder, |mut config| {
        config.mcp = true;
        config.tokens = tokens;
        config
    })
    .await
}

/// An MCP client; with `answer`, it supports form elicitation and answers every question with
/// it (recording the questions it was asked); with `tasks`, it declares MCP's tasks extension.
#[derive(Clone, Default)]
struct Client {
    answer: Option<String>,
    asked: Arc<Mutex<Vec<String>>>,
    tasks: bool,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = match self.tasks {
            true => ClientCapabilities::builder().enable_tasks().build(),
            false => ClientCapabilities::default(),
        };
        if self.answer.is_some() {
            capabilities.elicitation = Some(ElicitationCapability::new());
        }
        ClientConfig::new(capabilities, Implementation::new("radkit-test", "1"))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.asked.lock().unwrap().push(message);
        }
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(json!({ "answer": self.answer.clone().unwrap_or_default() }));
        Ok(result)
    }
}

async fn connect(
    agent: &Agent,
    client: Client,
    token: Option<&str>,
) -> Result<RunningService<RoleClient, Client>, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", agent.url));
    if let Some(token) = token {
        config = config.auth_header(token.to_owned());
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    client.serve(transport).await.map_err(|e| e.to_string())
}

async fn call(
    service: &RunningService<RoleClient, Client>,
    args: Value,
) -> Result<CallToolResult, rmcp::service::ServiceError> {
    let mut params = CallToolRequestParams::new("greeter");
    params.arguments = args.as_object().cloned();
    service.call_tool(params).await
}

fn text_of(result: &CallToolResult) -> Vec<String> {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

fn structured(result: &CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or_default()
}

#[test(multi_thread)]
async fn skills_are_tools_and_a_call_answers_with_the_tasks_message_and_artifacts() {
    let agent = agent(Vec::new()).await;
    let service = connect(&agent, Client::default(), None).await.unwrap();
    let tools = service.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "greeter");
    assert_eq!(
        tools[0].description.as_deref(),
        Some("Greets whoever asks.")
    );
    assert_eq!(tools[0].title.as_deref(), Some("Greeter"));

    let result = call(&service, json!({ "message": "hi" })).await.unwrap();
    assert_ne!(result.is_error, Some(true));
    assert_eq!(text_of(&result), ["Echo: hi", "hi"]);
    let out = structured(&result);
    assert_eq!(out["state"], "completed");
    assert_eq!(out["artifacts"][0]["name"], "echo.txt");
    // The task is the engine's, durable, as any A2A client's.
    let task_id = out["taskId"].as_str().unwrap();
    let task = agent
        .engine
        .task(&Caller::Operator, &task_id.into(), None)
        .await
        .unwrap();
    assert_eq!(task.status.state, TaskState::Completed);
    service.cancel().await.unwrap();
}

#[test(multi_thread)]
async fn a_question_is_elicited_from_a_client_that_supports_it() {
    let agent = agent(Vec::new()).await;
    let client = Client {
        answer: Some("Ada".to_owned()),
        ..Client::default()
    };
    let asked = client.asked.clone();
    let service = connect(&agent, client, None).await.unwrap();
    let result = call(&service, json!({ "message": "ask" })).await.unwrap();
    assert_eq!(text_of(&result), ["Hello, Ada!"]);
    assert_eq!(structured(&result)["state"], "completed");
    assert_eq!(*asked.lock().unwrap(), ["What is your name?"]);
    service.cancel().await.unwrap();
}

#[test(multi_thread)]
async fn without_elicitation_the_call_answers_with_the_task_to_continue() {
    let agent = agent(Vec::new()).await;
    let service = connect(&agent, Client::default(), None).await.unwrap();
    let asked = call(&service, json!({ "message": "ask" })).await.unwrap();
    assert_ne!(asked.is_error, Some(true));
    let out = structured(&asked);
    assert_eq!(out["state"], "input-required");
    assert_eq!(out["message"], "What is your name?");
    let task_id = out["taskId"].as_str().unwrap().to_owned();
    assert!(
        text_of(&asked)[0].contains(&task_id),
        "{:?}",
        text_of(&asked)
    );

    let done = call(&service, json!({ "message": "Ada", "taskId": task_id }))
        .await
        .unwrap();
    assert_eq!(text_of(&done), ["Hello, Ada!"]);
    // Waiting on a task by its id alone answers with it as it is.
    let again = call(&service, json!({ "taskId": task_id })).await.unwrap();
    assert_eq!(structured(&again)["state"], "completed");
    service.cancel().await.unwrap();
}

#[test(multi_thread)]
async fn a_failed_task_is_a_tool_error_and_bad_arguments_are_invalid_params() {
    let agent = agent(Vec::new()).await;
    let service = connect(&agent, Client::default(), None).await.unwrap();
    let failed = call(&service, json!({ "message": "fail" })).await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(structured(&failed)["state"], "failed");
    for bad in [
        json!({}),
        json!({ "message": 5 }),
        json!({ "message": "hi", "extra": true }),
    ] {
        let refused = call(&service, bad.clone()).await;
        assert!(
            matches!(&refused, Err(rmcp::service::ServiceError::McpError(e)) if e.code == rmcp::model::ErrorCode::INVALID_PARAMS),
            "{bad}: {refused:?}"
        );
    }
    let unknown = call(&service, json!({ "taskId": "no-such-task" }))
        .await
        .unwrap();
    assert_eq!(unknown.is_error, Some(true));
    service.cancel().await.unwrap();
}

#[test(multi_thread)]
async fn tokens_guard_the_endpoint_and_a_principal_sees_only_its_own_tasks() {
    let agent = agent(vec![
        ("token-a".to_owned(), "alice".to_owned()),
        ("token-b".to_owned(), "bob".to_owned()),
    ])
    .await;
    let refused = connect(&agent, Client::default(), None).await;
    assert!(refused.is_err(), "no token, no session");
    let raw = reqwest::Client::new()
        .post(format!("{}/mcp", agent.url))
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 401);
    assert_eq!(raw.headers()["www-authenticate"], "Bearer");

    let alice = connect(&agent, Client::default(), Some("token-a"))
        .await
        .unwrap();
    let asked = call(&alice, json!({ "message": "ask" })).await.unwrap();
    let task_id = structured(&asked)["taskId"].as_str().unwrap().to_owned();
    let bob = connect(&agent, Client::default(), Some("token-b"))
        .await
        .unwrap();
    let stolen = call(&bob, json!({ "message": "Mallory", "taskId": task_id }))
        .await
        .unwrap();
    assert_eq!(stolen.is_error, Some(true), "{stolen:?}");
    let done = call(&alice, json!({ "message": "Ada", "taskId": task_id }))
        .await
        .unwrap();
    assert_eq!(text_of(&done), ["Hello, Ada!"]);
    alice.cancel().await.unwrap();
    bob.cancel().await.unwrap();
}

/// Poll `tasks/get` until the task leaves `working`.
async fn settled_task(
    service: &RunningService<RoleClient, Client>,
    id: &str,
) -> rmcp::model::GetTaskResult {
    crate::support::common::within(
        crate::support::common::PATIENCE,
        "the MCP task to settle",
        async {
            loop {
                let got = service.get_task(GetTaskParams::new(id)).await.unwrap();
                if got.task.status() != TaskStatus::Working {
                    return got;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        },
    )
    .await
}

/// A client with MCP's tasks extension gets the skill's task: `tasks/get` shows the question as
/// an elicitation input request, `tasks/update` answers it, and the completed task holds the tool
/// result; `tasks/cancel` cancels another.
#[test(multi_thread)]
async fn a_client_with_the_tasks_extension_follows_the_skills_task() {
    let agent = agent(Vec::new()).await;
    let client = Client {
        tasks: true,
        ..Client::default()
    };
    let service = connect(&agent, client, None).await.unwrap();
    let mut params = CallToolRequestParams::new("greeter");
    params.arguments = json!({ "message": "ask" }).as_object().cloned();
    let CallToolResponse::Task(created) = service.call_tool_once(params).await.unwrap() else {
        panic!("expected a task");
    };
    let id = created.task.task_id.clone();
    // The MCP task is the radkit task.
    agent
        .engine
        .task(&Caller::Operator, &id.as_str().into(), None)
        .await
        .unwrap();

    let asked = settled_task(&service, &id).await;
    let TaskPayload::InputRequired { input_requests } = &asked.task.payload else {
        panic!("expected input_required, got {asked:?}");
    };
    let (key, request) = input_requests.iter().next().unwrap();
    let InputRequest::Elicitation(request) = request else {
        panic!("expected an elicitation, got {request:?}");
    };
    assert!(
        matches!(&request.params, ElicitRequestParams::FormElicitationParams { message, .. } if message == "What is your name?")
    );
    let wrong = service
        .update_task(UpdateTaskParams::new(
            id.clone(),
            [(
                "other".to_owned(),
                json!({ "action": "accept", "content": { "answer": "x" } }),
            )]
            .into(),
        ))
        .await;
    assert!(wrong.is_err(), "an answer to another request is refused");
    service
        .update_task(UpdateTaskParams::new(
            id.clone(),
            [(
                key.clone(),
                json!({ "action": "accept", "content": { "answer": "Ada" } }),
            )]
            .into(),
        ))
        .await
        .unwrap();
    let done = settled_task(&service, &id).await;
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("expected completed, got {done:?}");
    };
    assert_eq!(result["content"][0]["text"], "Hello, Ada!");
    assert_eq!(result["structuredContent"]["state"], "completed");

    let mut params = CallToolRequestParams::new("greeter");
    params.arguments = json!({ "message": "ask" }).as_object().cloned();
    let CallToolResponse::Task(other) = service.call_tool_once(params).await.unwrap() else {
        panic!("expected a task");
    };
    service
        .cancel_task(CancelTaskParams::new(other.task.task_id.clone()))
        .await
        .unwrap();
    let canceled = settled_task(&service, &other.task.task_id).await;
    assert_eq!(canceled.task.status(), TaskStatus::Cancelled);
    service.cancel().await.unwrap();
}

/// `radkit serve --mcp`: the command line's flag serves the program's skills at `/mcp`.
#[test(multi_thread)]
async fn radkit_serve_mcp_serves_the_programs_skills_as_tools() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--mcp", "--data-dir"])
        .arg(dir.path())
        .args(["--default-skill", "conformance"]);
    let server = crate::support::common::serve_command(cmd);
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", server.url));
    let service = Client::default()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap();
    let tools = service.list_all_tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "conformance"),
        "{:?}",
        tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>()
    );
    let mut params = CallToolRequestParams::new("conformance");
    params.arguments = json!({ "message": "hello" }).as_object().cloned();
    let done = service.call_tool(params).await.unwrap();
    assert_eq!(structured(&done)["state"], "completed", "{done:?}");
    service.cancel().await.unwrap();
}
