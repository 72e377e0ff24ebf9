//! The MCP server the MCP tests talk to, built with the official Rust SDK (`rmcp`): served over stdio
//! by this test binary re-executed with [`SERVE_ENV`] set (see `main.rs`), and over streamable HTTP
//! in process. Every call is appended to a log file as one JSON line (`tool`, `key` — the request's
//! `_meta` idempotency key —, `args`, `pid`), so a test sees what the server saw, across restarts.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::ServerHandler;
use serde_json::{json, Value};

/// Set to a log file's path, the test binary serves [`TestServer`] on stdio instead of testing.
pub const SERVE_ENV: &str = "RADKIT_TEST_MCP_SERVE";

/// The `_meta` key radkit sends the InvocationId under.
const KEY: &str = "radkit/invocationId";

/// The test server: tools with every kind of annotation, one that appears later, one that kills
/// its process once.
#[derive(Clone)]
pub struct TestServer {
    log: PathBuf,
    grown: Arc<AtomicBool>,
}

impl TestServer {
    /// A server logging its calls to `log`.
    pub fn new(log: impl Into<PathBuf>) -> Self {
        TestServer {
            log: log.into(),
            grown: Arc::new(AtomicBool::new(false)),
        }
    }

    fn tools(&self) -> Vec<Tool> {
        let object = |props: Value| -> Arc<serde_json::Map<String, Value>> {
            let schema = json!({ "type": "object", "properties": props });
            Arc::new(schema.as_object().cloned().unwrap_or_default())
        };
        let name = json!({ "name": { "type": "string" } });
        let mut tools = vec![
            Tool::new("lookup", "Read a value", object(name.clone()))
                .with_annotations(ToolAnnotations::new().read_only(true)),
            Tool::new("put", "Store a value", object(name.clone())).with_annotations(
                ToolAnnotations::new()
                    .read_only(false)
                    .destructive(false)
                    .idempotent(true),
            ),
            Tool::new("delete", "Delete a value", object(name.clone())).with_annotations(
                ToolAnnotations::new()
                    .read_only(false)
                    .destructive(true)
                    .idempotent(false),
            ),
            Tool::new(
                "send",
                "Send a message (no annotations)",
                object(name.clone()),
            ),
            Tool::new("grow", "Add the tool `late`", object(json!({}))).with_annotations(
                ToolAnnotations::new()
                    .read_only(false)
                    .destructive(false)
                    .idempotent(true),
            ),
            Tool::new(
                "die_once",
                "Kill the server the first time (no annotations)",
                object(json!({})),
            ),
            Tool::new("fail", "Answer with an error result", object(json!({})))
                .with_annotations(ToolAnnotations::new().read_only(true)),
        ];
        if self.grown.load(Ordering::SeqCst) {
            tools.push(
                Tool::new("late", "Listed after `grow`", object(json!({})))
                    .with_annotations(ToolAnnotations::new().read_only(true)),
            );
        }
        tools
    }

    fn record(&self, tool: &str, key: Option<&Value>, args: &Value) {
        let line = json!({ "tool": tool, "key": key, "args": args, "pid": std::process::id() });
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
        {
            let _ = writeln!(file, "{line}");
        }
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let key = request
            .meta
            .as_ref()
            .and_then(|m| m.0 .0.get(KEY))
            .or_else(|| context.meta.0 .0.get(KEY))
            .cloned();
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let tool = request.name.as_ref();
        if !self.tools().iter().any(|t| t.name == tool) {
            return Err(ErrorData::invalid_params(format!("no tool `{tool}`"), None));
        }
        self.record(tool, key.as_ref(), &args);
        let text = |t: String| {
            CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(t)]))
        };
        Ok(match tool {
            "lookup" => CallToolResponse::Complete(CallToolResult::structured(
                json!({ "key": key, "pid": std::process::id(), "name": args["name"] }),
            )),
            "grow" => {
                self.grown.store(true, Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                text("grown".to_owned())
            }
            "die_once" => {
                let marker = self.log.with_extension("died");
                if !marker.exists() {
                    let _ = std::fs::write(&marker, b"died");
                    std::process::exit(3);
                }
                text("survived".to_owned())
            }
            "fail" => CallToolResponse::Complete(CallToolResult::error(vec![ContentBlock::text(
                "no such thing",
            )])),
            other => text(format!("{other} {}", args["name"].as_str().unwrap_or(""))),
        })
    }
}

/// Serve [`TestServer`] on stdin/stdout, logging to `log`, until the client goes away.
pub fn serve_stdio(log: &Path) -> std::process::ExitCode {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return std::process::ExitCode::FAILURE;
    };
    runtime.block_on(async {
        use rmcp::ServiceExt;
        match TestServer::new(log).serve(rmcp::transport::stdio()).await {
            Ok(running) => {
                let _ = running.waiting().await;
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("test MCP server: {e}");
                std::process::ExitCode::FAILURE
            }
        }
    })
}

/// Serve [`TestServer`] over streamable HTTP on a loopback port, logging to `log`; its endpoint URL.
/// The server runs until the runtime ends.
pub async fn serve_http(log: &Path) -> String {
    use rmcp::transport::streamable_http_server::{
        session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
    };
    let server = TestServer::new(log);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("a bound address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}/mcp")
}

/// The calls the server logged to `log`, in order.
pub fn calls(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
