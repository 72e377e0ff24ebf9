//! MCP tool servers: the tools of a Model Context Protocol server, over stdio (a child process) or
//! streamable HTTP, offered to the engine as a [`ToolSource`] on the official Rust SDK (`rmcp`).
//! Each tool is registered as `<server>.<tool>` with the effect policy and least permission mode its
//! annotations declare (overridable per tool); a call sends the command's InvocationId in the
//! request's `_meta` under [`INVOCATION_ID_META_KEY`]. A connection that closed (a stdio server
//! that exited) is opened again on the next call; tools/list_changed lists the tools again. This
//! module owns the connection and the listing; it never sees the journal (the engine decides
//! whether a call runs, and retries it).
//!
//! ```no_run
//! # async fn run() -> Result<(), radkit_runtime::tools::mcp::McpError> {
//! use radkit_runtime::effects::Effects;
//! use radkit_runtime::flow::EffectPolicy;
//! use radkit_runtime::tools::mcp::McpServer;
//!
//! let files = McpServer::stdio("files", "my-mcp-server", ["--root", "/srv/data"])
//!     // The server does not annotate `append`, but it deduplicates on the `_meta` key.
//!     .policy("append", EffectPolicy::Idempotent)
//!     .connect()
//!     .await?;
//! let effects = Effects::new().tools_from(files);
//! // in a step: let text: String = ctx.tool("files.read").call(&json!({"path": "a.txt"})).await?;
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ErrorCode,
    Implementation, MetaObject, ProtocolVersion, RequestMetaObject, ToolAnnotations,
};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ServiceExt};

use self::http_client::http_transport;
use super::{Tool, ToolSchema, ToolSource};
use crate::flow::{EffectError, EffectPolicy, InvocationId, PermissionMode};

/// The `_meta` key of a tools/call request that carries the command's InvocationId: the same on
/// every retry and every reissue after a crash, so a server deduplicates on it.
pub const INVOCATION_ID_META_KEY: &str = "radkit/invocationId";

/// How long a call waits for its answer unless [`McpServer::timeout`] says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

mod http_client;

/// Why an MCP server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The server's name cannot prefix tool names.
    #[error("invalid MCP server name `{0}`; use letters, digits, `_` and `-` only")]
    InvalidName(String),
    /// The stdio server's process could not be started.
    #[error("cannot start MCP server `{server}` (`{command}`): {reason}")]
    Spawn {
        /// The server's name.
        server: String,
        /// The command.
        command: String,
        /// Why.
        reason: String,
    },
    /// The MCP handshake failed (or the HTTP endpoint did not answer).
    #[error("cannot connect to MCP server `{server}`: {reason}")]
    Connect {
        /// The server's name.
        server: String,
        /// Why.
        reason: String,
    },
    /// tools/list failed.
    #[error("MCP server `{server}` did not list its tools: {reason}")]
    List {
        /// The server's name.
        server: String,
        /// Why.
        reason: String,
    },
}

#[derive(Debug, Clone)]
enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        dir: Option<PathBuf>,
    },
    Http {
        url: String,
        /// A bearer token, sent as `Authorization: Bearer …` (never shown by `Debug`).
        bearer: Option<Secret>,
        /// Headers sent with every request (their values never shown by `Debug`: they may be
        /// credentials).
        headers: Vec<(String, Secret)>,
        /// PEM certificates trusted besides the platform's roots.
        roots: Vec<Vec<u8>>,
    },
}

/// A credential whose `Debug` output is redacted.
#[derive(Clone)]
struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A per-tool override of what the annotations say.
#[derive(Debug, Clone, Default)]
struct Override {
    policy: Option<EffectPolicy>,
    min_mode: Option<PermissionMode>,
}

/// An MCP server to connect to: where it is and how its tools are treated. [`connect`](Self::connect)
/// starts it (stdio) or reaches it (HTTP), lists its tools and returns them as [`McpTools`].
#[derive(Debug, Clone)]
pub struct McpServer {
    name: String,
    transport: Transport,
    overrides: HashMap<String, Override>,
    timeout: Duration,
}

impl McpServer {
    /// A server run as the child process `command args…`, speaking MCP on its stdin and stdout (its
    /// stderr is this process's). Its tools are named `<name>.<tool>`.
    pub fn stdio(
        name: impl Into<String>,
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        McpServer::new(
            name.into(),
            Transport::Stdio {
                command: command.into(),
                args: args.into_iter().map(Into::into).collect(),
                env: Vec::new(),
                dir: None,
            },
        )
    }

    /// A server at the streamable HTTP endpoint `url` (`https://mcp.example.com/mcp`, or
    /// `http://127.0.0.1:8000/mcp`). Its tools are named `<name>.<tool>`. An `https://` server's
    /// certificate is checked against the platform's root certificates (and those added with
    /// [`root_certificate_pem`](Self::root_certificate_pem)).
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        McpServer::new(
            name.into(),
            Transport::Http {
                url: url.into(),
                bearer: None,
                headers: Vec::new(),
                roots: Vec::new(),
            },
        )
    }

    /// Send `token` as `Authorization: Bearer <token>` with every request to the HTTP server (no
    /// effect over stdio). `Debug` output never shows it.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        if let Transport::Http { bearer, .. } = &mut self.transport {
            *bearer = Some(Secret(token.into()));
        }
        self
    }

    /// Send the header `name: value` with every request to the HTTP server (no effect over
    /// stdio). A name or value HTTP does not allow fails [`connect`](Self::connect) with
    /// [`McpError::Connect`].
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Transport::Http { headers, .. } = &mut self.transport {
            headers.push((name.into(), Secret(value.into())));
        }
        self
    }

    /// Trust the PEM certificate(s) `pem` as roots for the HTTPS server besides the platform's (a
    /// private CA, a self-signed server); no effect over stdio. A PEM that does not parse fails
    /// [`connect`](Self::connect) with [`McpError::Connect`].
    pub fn root_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        if let Transport::Http { roots, .. } = &mut self.transport {
            roots.push(pem.into());
        }
        self
    }

    fn new(name: String, transport: Transport) -> Self {
        McpServer {
            name,
            transport,
            overrides: HashMap::new(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Set the environment variable `key` for the stdio server's process (no effect over HTTP).
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let Transport::Stdio { env, .. } = &mut self.transport {
            env.push((key.into(), value.into()));
        }
        self
    }

    /// Run the stdio server's process in `dir` (no effect over HTTP).
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        if let Transport::Stdio { dir: d, .. } = &mut self.transport {
            *d = Some(dir.into());
        }
        self
    }

    /// Run the server's tool `tool` (its MCP name, without the server's prefix) under `policy`,
    /// whatever its annotations say (see [`annotated`]).
    pub fn policy(mut self, tool: impl Into<String>, policy: EffectPolicy) -> Self {
        self.overrides.entry(tool.into()).or_default().policy = Some(policy);
        self
    }

    /// The least permission mode in which `tool` runs without asking, whatever its annotations say.
    pub fn min_mode(mut self, tool: impl Into<String>, mode: PermissionMode) -> Self {
        self.overrides.entry(tool.into()).or_default().min_mode = Some(mode);
        self
    }

    /// How long a call waits for its answer (default [`DEFAULT_TIMEOUT`]). A call without an answer
    /// in time has an unknown outcome (see [`McpTools`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Start (stdio) or reach (HTTP) the server and list its tools.
    pub async fn connect(self) -> Result<McpTools, McpError> {
        let valid = !self.name.is_empty()
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(McpError::InvalidName(self.name));
        }
        let shared = Arc::new(Shared {
            server: self,
            conn: tokio::sync::Mutex::new(None),
            tools: RwLock::new(BTreeMap::new()),
        });
        shared.peer().await?;
        Ok(McpTools { shared })
    }
}

/// The effect policy and least permission mode an MCP tool's annotations declare, read with the MCP
/// defaults for missing hints (`readOnlyHint` false, `destructiveHint` true, `idempotentHint` false):
///
/// | annotations | policy | least mode without asking |
/// | --- | --- | --- |
/// | `readOnlyHint` | `Idempotent` | `Plan` |
/// | `idempotentHint` | `Idempotent` | as below |
/// | otherwise | `AtMostOnce` | as below |
/// | not read-only, `destructiveHint` (the default) | | `Bypass`: asked in `default` and `acceptEdits` |
/// | not read-only, `destructiveHint: false` | | `AcceptEdits` |
///
/// So a tool without annotations is treated as destructive and not idempotent: it is asked for
/// and never reissued after a crash until [`McpServer::policy`] and [`McpServer::min_mode`] say
/// otherwise.
pub fn annotated(annotations: Option<&ToolAnnotations>) -> (EffectPolicy, PermissionMode) {
    let read_only = annotations.and_then(|a| a.read_only_hint).unwrap_or(false);
    let destructive = annotations.and_then(|a| a.destructive_hint).unwrap_or(true);
    let idempotent = annotations.and_then(|a| a.idempotent_hint).unwrap_or(false);
    if read_only {
        return (EffectPolicy::Idempotent, PermissionMode::Plan);
    }
    let policy = if idempotent {
        EffectPolicy::Idempotent
    } else {
        EffectPolicy::AtMostOnce
    };
    let mode = if destructive {
        PermissionMode::Bypass
    } else {
        PermissionMode::AcceptEdits
    };
    (policy, mode)
}

/// The tools of one connected MCP server, a [`ToolSource`] for
/// [`Effects::tools_from`](crate::effects::Effects::tools_from). Cloning shares the connection.
///
/// * A closed connection (a stdio server that exited, an HTTP session that ended) is opened again,
///   and the tools listed again, by the next call.
/// * A call that fails before it reaches the server is transient (the engine retries it). One
///   whose connection closes or whose answer does not come in time may have run: it is transient
///   for `Idempotent`, `AtLeastOnce` and `Compensate` tools (retried with the same `_meta` key) and
///   permanent for `AtMostOnce` ones, saying the outcome is unknown.
/// * A tool's error result (`isError`) is permanent, with the server's text; a JSON-RPC
///   invalid-params or unknown-method error too; other JSON-RPC errors are treated like a closed
///   connection.
/// * tools/list_changed lists the tools again: new ones become callable, changed ones take their
///   new annotations, and removed ones are gone (a call to one fails permanently: no tool is
///   registered under its name). Journaled calls keep the policy they were issued with.
#[derive(Clone)]
pub struct McpTools {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for McpTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTools")
            .field("server", &self.shared.server.name)
            .field("tools", &self.shared.names())
            .finish()
    }
}

impl McpTools {
    /// The server's name (the prefix of its tools' names).
    pub fn server(&self) -> &str {
        &self.shared.server.name
    }

    /// The names of the tools listed now (`<server>.<tool>`), sorted.
    pub fn names(&self) -> Vec<String> {
        self.shared.names()
    }

    /// The effect policy and least permission mode the tool registered as `name` runs under now.
    pub fn treatment(&self, name: &str) -> Option<(EffectPolicy, PermissionMode)> {
        self.shared.listed(name).map(|t| (t.policy, t.min_mode))
    }

    /// List the tools again now (what tools/list_changed does), opening the connection if it
    /// closed.
    pub async fn refresh(&self) -> Result<(), McpError> {
        let peer = self.shared.peer().await?;
        self.shared.list(&peer).await
    }
}

impl ToolSource for McpTools {
    fn find(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.shared.listed(name).map(|t| t as Arc<dyn Tool>)
    }

    fn schemas(&self) -> Vec<ToolSchema> {
        match self.shared.tools.read() {
            Ok(tools) => tools.values().map(|t| t.schema.clone()).collect(),
            Err(_) => Vec::new(),
        }
    }
}

type Connection = RunningService<RoleClient, Listener>;

/// The open connection, numbered so that a call whose connection broke discards that one only.
struct Open {
    generation: u64,
    service: Connection,
}

/// A connection's peer, with the connection's number.
struct Link {
    generation: u64,
    peer: Peer<RoleClient>,
}

/// The connection and the listing, shared by [`McpTools`], its tools (weakly) and the connection's
/// notification handler (weakly).
struct Shared {
    server: McpServer,
    conn: tokio::sync::Mutex<Option<Open>>,
    /// By registered name (`<server>.<tool>`).
    tools: RwLock<BTreeMap<String, Arc<McpTool>>>,
}

impl Shared {
    fn names(&self) -> Vec<String> {
        match self.tools.read() {
            Ok(tools) => tools.keys().cloned().collect(),
            Err(_) => Vec::new(),
        }
    }

    fn listed(&self, name: &str) -> Option<Arc<McpTool>> {
        self.tools.read().ok()?.get(name).cloned()
    }

    /// The open connection's peer, connecting (and listing) first when there is none or it closed.
    async fn peer(self: &Arc<Self>) -> Result<Peer<RoleClient>, McpError> {
        Ok(self.link().await?.peer)
    }

    async fn link(self: &Arc<Self>) -> Result<Link, McpError> {
        let mut conn = self.conn.lock().await;
        let usable = |o: &&Open| !o.service.is_closed() && !o.service.peer().is_transport_closed();
        if let Some(open) = conn.as_ref().filter(usable) {
            return Ok(Link {
                generation: open.generation,
                peer: open.service.peer().clone(),
            });
        }
        let generation = match conn.take() {
            Some(old) => {
                tracing::info!(server = %self.server.name, "MCP connection closed; reconnecting");
                old.generation + 1
            }
            None => 0,
        };
        let service = self.open().await?;
        let peer = service.peer().clone();
        *conn = Some(Open {
            generation,
            service,
        });
        drop(conn);
        self.list(&peer).await?;
        Ok(Link { generation, peer })
    }

    /// Drop connection `generation` (its transport broke), so the next call opens another.
    async fn discard(&self, generation: u64) {
        let mut conn = self.conn.lock().await;
        if conn.as_ref().is_some_and(|o| o.generation == generation) {
            *conn = None;
        }
    }

    async fn open(self: &Arc<Self>) -> Result<Connection, McpError> {
        let server = &self.server.name;
        let listener = Listener {
            shared: Arc::downgrade(self),
            info: ClientConfig::new(
                ClientCapabilities::default(),
                Implementation::new("radkit", env!("CARGO_PKG_VERSION")),
            )
            // The newest released revision (the SDK's newest is a draft without `initialize`,
            // which servers of earlier revisions, such as the Python SDK's, do not speak).
            .with_protocol_version(ProtocolVersion::V_2025_11_25),
        };
        let connect_error = |e: rmcp::service::ClientInitializeError| McpError::Connect {
            server: server.clone(),
            reason: e.to_string(),
        };
        match &self.server.transport {
            Transport::Stdio {
                command,
                args,
                env,
                dir,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args);
                cmd.envs(env.iter().map(|(k, v)| (k, v)));
                if let Some(dir) = dir {
                    cmd.current_dir(dir);
                }
                let (process, _) = TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::inherit())
                    .spawn()
                    .map_err(|e| McpError::Spawn {
                        server: server.clone(),
                        command: command.clone(),
                        reason: e.to_string(),
                    })?;
                listener.serve(process).await.map_err(connect_error)
            }
            Transport::Http {
                url,
                bearer,
                headers,
                roots,
            } => {
                let refused = |reason: String| McpError::Connect {
                    server: server.clone(),
                    reason,
                };
                let transport =
                    http_transport(url, bearer.as_ref(), headers, roots).map_err(refused)?;
                listener.serve(transport).await.map_err(connect_error)
            }
        }
    }

    /// List the tools through `peer` and replace the listing.
    async fn list(self: &Arc<Self>, peer: &Peer<RoleClient>) -> Result<(), McpError> {
        let listed = peer.list_all_tools().await.map_err(|e| McpError::List {
            server: self.server.name.clone(),
            reason: e.to_string(),
        })?;
        let tools: BTreeMap<String, Arc<McpTool>> = listed
            .into_iter()
            .map(|tool| {
                let name = format!("{}.{}", self.server.name, tool.name);
                let (mut policy, mut min_mode) = annotated(tool.annotations.as_ref());
                if let Some(o) = self.server.overrides.get(tool.name.as_ref()) {
                    policy = o.policy.unwrap_or(policy);
                    min_mode = o.min_mode.unwrap_or(min_mode);
                }
                let schema = ToolSchema {
                    name: name.clone(),
                    description: tool.description.as_ref().map(|d| d.to_string()),
                    input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
                };
                let tool = McpTool {
                    shared: Arc::downgrade(self),
                    tool: tool.name.to_string(),
                    registered: name.clone(),
                    policy,
                    min_mode,
                    schema,
                };
                (name, Arc::new(tool))
            })
            .collect();
        tracing::debug!(server = %self.server.name, tools = tools.len(), "MCP tools listed");
        match self.tools.write() {
            Ok(mut current) => *current = tools,
            Err(poisoned) => *poisoned.into_inner() = tools,
        }
        Ok(())
    }
}

/// The connection's handler: identifies radkit and lists the tools again when they change.
struct Listener {
    shared: Weak<Shared>,
    info: ClientConfig,
}

impl ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        // Listed from a task of its own: the answer arrives through the loop that runs this handler.
        tokio::spawn(async move {
            if let Err(e) = shared.list(&context.peer).await {
                tracing::warn!(error = %e, "MCP tools not listed again after tools/list_changed");
            }
        });
    }
}

/// One tool of an MCP server.
struct McpTool {
    shared: Weak<Shared>,
    /// Its MCP name.
    tool: String,
    /// `<server>.<tool>`.
    registered: String,
    policy: EffectPolicy,
    min_mode: PermissionMode,
    schema: ToolSchema,
}

impl McpTool {
    /// The error of a call that may have reached the server but has no answer.
    fn unknown(&self, key: &InvocationId, why: String) -> EffectError {
        if self.policy == EffectPolicy::AtMostOnce {
            EffectError::permanent(format!(
                "outcome unknown: MCP tool `{}` (invocation {key}): {why}; it was not retried",
                self.registered
            ))
        } else {
            EffectError::transient(format!("MCP tool `{}`: {why}", self.registered))
        }
    }
}

#[async_trait]
impl Tool for McpTool {
    fn policy(&self) -> EffectPolicy {
        self.policy
    }

    fn min_mode(&self) -> PermissionMode {
        self.min_mode
    }

    async fn call(
        &self,
        args: serde_json::Value,
        key: &InvocationId,
    ) -> Result<serde_json::Value, EffectError> {
        let arguments = match args {
            serde_json::Value::Object(map) => Some(map),
            serde_json::Value::Null => None,
            other => {
                return Err(EffectError::permanent(format!(
                    "the arguments of MCP tool `{}` must be a JSON object, not `{other}`",
                    self.registered
                )))
            }
        };
        let shared = self.shared.upgrade().ok_or_else(|| {
            EffectError::permanent(format!(
                "MCP tool `{}`: its server's tools were dropped",
                self.registered
            ))
        })?;
        let Link { generation, peer } = shared
            .link()
            .await
            .map_err(|e| EffectError::transient(e.to_string()))?;
        let mut meta = MetaObject::new();
        meta.0.insert(
            INVOCATION_ID_META_KEY.to_owned(),
            serde_json::Value::String(key.as_str().to_owned()),
        );
        // The call joins the caller's trace: W3C trace context under `_meta` (`traceparent`,
        // `tracestate`, as OpenTelemetry's conventions for MCP say), and over HTTP also as headers.
        for (name, value) in crate::telemetry::trace_context() {
            match name.as_str() {
                "traceparent" => meta.set_traceparent(value),
                "tracestate" => meta.set_tracestate(value),
                _ => {}
            }
        }
        let mut params = CallToolRequestParams::new(self.tool.clone());
        params.arguments = arguments;
        params.meta = Some(RequestMetaObject(meta));
        let timeout = shared.server.timeout;
        let answer = match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Ok(answer) => answer,
            Err(_) => {
                return Err(self.unknown(key, format!("no answer within {timeout:?}")));
            }
        };
        if matches!(
            answer,
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))
        ) {
            shared.discard(generation).await;
        }
        match answer {
            Ok(result) if result.is_error == Some(true) => Err(EffectError::permanent(format!(
                "MCP tool `{}` failed: {}",
                self.registered,
                text_of(&result)
            ))),
            Ok(result) => Ok(output(result)),
            Err(ServiceError::McpError(e))
                if [
                    ErrorCode::INVALID_PARAMS,
                    ErrorCode::METHOD_NOT_FOUND,
                    ErrorCode::INVALID_REQUEST,
                ]
                .contains(&e.code) =>
            {
                Err(EffectError::permanent(format!(
                    "MCP tool `{}` refused the call: {}",
                    self.registered, e.message
                )))
            }
            // The request could not be written: it never reached the server.
            Err(ServiceError::TransportSend(e)) => Err(EffectError::transient(format!(
                "MCP tool `{}`: the request was not sent: {e}",
                self.registered
            ))),
            Err(e) => Err(self.unknown(key, e.to_string())),
        }
    }
}

/// A call's value: its structured content when it has some; else its one text block as a string;
/// else its content blocks as JSON.
fn output(result: CallToolResult) -> serde_json::Value {
    if let Some(value) = result.structured_content {
        return value;
    }
    match result.content.as_slice() {
        [one] if one.as_text().is_some() => {
            serde_json::Value::String(one.as_text().map(|t| t.text.clone()).unwrap_or_default())
        }
        blocks => serde_json::to_value(blocks).unwrap_or(serde_json::Value::Null),
    }
}

/// The text blocks of a result, joined (what an error result says).
fn text_of(result: &CallToolResult) -> String {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    if texts.is_empty() {
        "the server gave no reason".to_owned()
    } else {
        texts.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_map_to_policy_and_least_mode_with_mcp_defaults() {
        use EffectPolicy::*;
        use PermissionMode::*;
        let hints = |read_only, destructive, idempotent| {
            let mut a = ToolAnnotations::new();
            a.read_only_hint = read_only;
            a.destructive_hint = destructive;
            a.idempotent_hint = idempotent;
            annotated(Some(&a))
        };
        assert_eq!(annotated(None), (AtMostOnce, Bypass), "no annotations");
        assert_eq!(hints(None, None, None), (AtMostOnce, Bypass), "no hints");
        assert_eq!(hints(Some(true), None, None), (Idempotent, Plan));
        assert_eq!(
            hints(Some(true), Some(true), Some(false)),
            (Idempotent, Plan)
        );
        assert_eq!(
            hints(Some(false), Some(false), Some(true)),
            (Idempotent, AcceptEdits)
        );
        assert_eq!(hints(Some(false), None, Some(true)), (Idempotent, Bypass));
        assert_eq!(hints(None, Some(false), None), (AtMostOnce, AcceptEdits));
        assert_eq!(hints(None, Some(true), Some(false)), (AtMostOnce, Bypass));
    }
}
