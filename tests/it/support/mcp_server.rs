//! The MCP server the MCP tests talk to, built with the official Rust SDK (`rmcp`): served over stdio
//! by this test binary re-executed with [`SERVE_ENV`] set (see `main.rs`), and over streamable HTTP
//! in process. Every call is appended to a log file as one JSON line (`tool`, `key` — the request's
//! `_meta` idempotency key —, `args`, `pid`), so a test sees what the server saw, across restarts.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::http::HeaderMap;
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

    /// Log a call, with the `Authorization`, `x-tenant` and `traceparent` headers of the HTTP
    /// request it came in (`headers`; none over stdio) and the `traceparent` of its `_meta`.
    fn record(
        &self,
        tool: &str,
        key: Option<&Value>,
        meta_traceparent: Option<&str>,
        args: &Value,
        headers: Option<&HeaderMap>,
    ) {
        let header = |name: &str| {
            headers
                .and_then(|h| h.get(name))
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let line = json!({ "tool": tool, "key": key, "args": args, "pid": std::process::id(),
            "auth": header("authorization"), "tenant": header("x-tenant"),
            "traceparent": header("traceparent"), "meta_traceparent": meta_traceparent });
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
        let headers = context
            .extensions
            .get::<axum::http::request::Parts>()
            .map(|parts| &parts.headers);
        let traceparent = request
            .meta
            .as_ref()
            .and_then(|m| m.get_traceparent())
            .or_else(|| context.meta.0 .0.get("traceparent").and_then(Value::as_str));
        self.record(tool, key.as_ref(), traceparent, &args, headers);
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

/// [`TestServer`] over streamable HTTPS on a loopback port, with a certificate for `127.0.0.1`
/// issued by a certificate authority made for the test: its URL, and the authority's PEM (what a
/// client must trust). Each connection's TLS handshake runs on its own task.
pub async fn serve_https(log: &Path) -> (String, String) {
    use rmcp::transport::streamable_http_server::{
        session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
    };
    use tokio_rustls::rustls;

    let ca_key = rcgen::KeyPair::generate().expect("a CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::new()).expect("CA parameters");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "radkit test CA");
    let ca = ca_params.self_signed(&ca_key).expect("the CA certificate");
    let key = rcgen::KeyPair::generate().expect("a server key");
    let params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("server parameters");
    let cert = params
        .signed_by(&key, &ca, &ca_key)
        .expect("the server certificate");
    let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    )
    .expect("the server's TLS settings");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));

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
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    // Handshakes off the accept loop: a client that never finishes one holds only its own task.
    tokio::spawn(async move {
        while let Ok((tcp, peer)) = listener.accept().await {
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    let _ = tx.send((tls, peer)).await;
                }
            });
        }
    });
    let tls_listener = TlsListener { rx, addr };
    tokio::spawn(async move {
        let _ = axum::serve(tls_listener, router).await;
    });
    (format!("https://{addr}/mcp"), ca.pem())
}

/// Connections whose TLS handshake succeeded, as an axum listener.
struct TlsListener {
    rx: tokio::sync::mpsc::Receiver<(
        tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
        std::net::SocketAddr,
    )>,
    addr: std::net::SocketAddr,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(accepted) => accepted,
            // The accept loop ended: serve nothing more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
