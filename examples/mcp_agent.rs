// A skill that uses the tools of an MCP server, with an approval gate before the destructive one.
//
//     cargo run --example mcp_agent --features mcp             # approves the deletion
//     cargo run --example mcp_agent --features mcp -- reject   # rejects it
//
// Offline: the MCP server is this program itself, re-executed with `--mcp-server` and spoken to over
// stdio (a notes store built with the official Rust SDK, `rmcp`). Its tools carry MCP annotations:
// `list` is read-only (Idempotent, runs even in plan mode), `delete` is destructive (AtMostOnce, and
// in the default permission mode the engine asks a human first, showing the exact call). Every call
// carries its InvocationId in `_meta` as `radkit/invocationId`.
//
// (A model choosing the tools — tool calling — is not part of radkit yet; the skill calls them with
// `ctx.tool(..)`, and `Effects::tool_schemas` lists their JSON Schemas for such a loop.)

use std::sync::{Arc, Mutex};

use radkit::effects::Effects;
use radkit::engine::{Caller, Engine, Request};
use radkit::model::{Message, Task};
use radkit::prelude::*;
use radkit::store::MemoryStore;
use radkit::tools::mcp::McpServer;
use serde_json::{json, Value};

/// Deletes a note, after looking it up.
#[derive(Default)]
struct TidyNotes;

#[flow_skill(id = "tidy_notes", name = "Tidy notes", register = false)]
impl TidyNotes {
    /// "delete <name>": check the note exists, then delete it (the engine asks for approval first).
    #[step(start)]
    async fn tidy(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let text = msg.joined_texts();
        let name = text.trim().strip_prefix("delete ").unwrap_or("").trim();
        let notes: Value = ctx.tool("notes.list").call(json!({})).await?;
        let exists = notes["notes"]
            .as_array()
            .is_some_and(|all| all.iter().any(|n| n == name));
        if !exists {
            return ctx.complete(format!("there is no note `{name}`: {notes}"), vec![]);
        }
        let done: String = ctx
            .tool("notes.delete")
            .call(json!({ "name": name }))
            .await?;
        ctx.complete(done, vec![])
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("--mcp-server") {
        return notes_server::serve().await;
    }
    let reject = std::env::args().nth(1).as_deref() == Some("reject");

    // Start the MCP server (this program, `--mcp-server`) and list its tools.
    let exe = std::env::current_exe()?.display().to_string();
    let notes = McpServer::stdio("notes", exe, ["--mcp-server"])
        .connect()
        .await?;
    let effects = Effects::new().tools_from(notes.clone());
    for schema in effects.tool_schemas() {
        if let Some((policy, mode)) = notes.treatment(&schema.name) {
            println!(
                "tool {} ({policy:?}, runs without asking from {mode:?}): {}",
                schema.name, schema.input_schema
            );
        }
    }

    let engine = Engine::builder(MemoryStore::new())
        .without_registered_skills()
        .skill(TidyNotes)
        .effects(effects)
        .start()
        .await?;
    let task = engine
        .send(Request::operator(Message::user_text("delete draft")))
        .await?;
    let asked = engine.wait_settled(&Caller::Operator, &task).await?;
    println!("\n[{:?}] {}", asked.status.state, said(&asked));
    // The exact call waiting for approval, as the status message's data part carries it.
    let parts = serde_json::to_value(&asked.status.message)?;
    for part in parts["parts"].as_array().into_iter().flatten() {
        if part["kind"] == "data" {
            println!("  {}", part["data"]);
        }
    }

    let answer = if reject { "reject" } else { "approve" };
    println!("> {answer}");
    let mut reply = Message::user_text(answer);
    reply.task_id = Some(task.to_string());
    engine.send(Request::operator(reply)).await?;
    let done = engine.wait_settled(&Caller::Operator, &task).await?;
    println!("[{:?}] {}", done.status.state, said(&done));

    let left: Value = {
        use radkit::tools::ToolSource;
        let list = notes
            .find("notes.list")
            .ok_or_else(|| anyhow::anyhow!("notes.list is gone"))?;
        let key = radkit::flow::InvocationId::from_string("example-final-list".to_owned());
        list.call(json!({}), &key).await?
    };
    println!("notes left: {}", left["notes"]);
    Ok(())
}

/// What the task's status message says.
fn said(task: &Task) -> String {
    task.status
        .message
        .as_ref()
        .map(|m| m.joined_texts())
        .unwrap_or_default()
}

/// The notes MCP server: three notes in memory, a read-only `list` and a destructive `delete`.
mod notes_server {
    use super::*;
    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
        ToolAnnotations,
    };
    use rmcp::service::{RequestContext, RoleServer};
    use rmcp::{ServerHandler, ServiceExt};

    #[derive(Clone)]
    struct Notes(Arc<Mutex<Vec<String>>>);

    fn schema(props: Value) -> Arc<serde_json::Map<String, Value>> {
        let schema = json!({ "type": "object", "properties": props });
        Arc::new(schema.as_object().cloned().unwrap_or_default())
    }

    impl ServerHandler for Notes {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn list_tools(
            &self,
            _: Option<PaginatedRequestParams>,
            _: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            Ok(ListToolsResult::with_all_items(vec![
                Tool::new("list", "List the notes", schema(json!({})))
                    .with_annotations(ToolAnnotations::new().read_only(true)),
                Tool::new(
                    "delete",
                    "Delete a note",
                    schema(json!({ "name": { "type": "string" } })),
                )
                .with_annotations(ToolAnnotations::new().read_only(false).destructive(true)),
            ]))
        }

        async fn call_tool(
            &self,
            request: CallToolRequestParams,
            _: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            let mut notes = self
                .0
                .lock()
                .map_err(|_| ErrorData::internal_error("the notes are poisoned", None))?;
            let result = match request.name.as_ref() {
                "list" => CallToolResult::structured(json!({ "notes": *notes })),
                "delete" => {
                    let args = request.arguments.unwrap_or_default();
                    let name = args.get("name").and_then(Value::as_str).unwrap_or("");
                    let before = notes.len();
                    notes.retain(|n| n != name);
                    if notes.len() == before {
                        CallToolResult::error(vec![ContentBlock::text(format!("no note `{name}`"))])
                    } else {
                        CallToolResult::success(vec![ContentBlock::text(format!(
                            "deleted `{name}`"
                        ))])
                    }
                }
                other => {
                    return Err(ErrorData::invalid_params(
                        format!("no tool `{other}`"),
                        None,
                    ))
                }
            };
            Ok(CallToolResponse::Complete(result))
        }
    }

    pub async fn serve() -> anyhow::Result<()> {
        let notes = Notes(Arc::new(Mutex::new(vec![
            "groceries".to_owned(),
            "draft".to_owned(),
            "ideas".to_owned(),
        ])));
        notes
            .serve(rmcp::transport::stdio())
            .await?
            .waiting()
            .await?;
        Ok(())
    }
}
