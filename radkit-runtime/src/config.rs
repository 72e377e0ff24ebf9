//! [`ServerConfig`]: how an agent presents itself (the name, description, version and URL on its
//! card, whether it asks for a bearer token, its extended card and the key that signs its cards) and what its A2A server accepts (tokens, body and
//! history, connection, timeout and stream limits). The registry reads it to build the card and the server to serve requests, so it
//! sits below both; it holds settings and their defaults, never behaviour. Public as
//! `server::ServerConfig`.

use std::sync::Arc;
use std::time::Duration;

use crate::model::{Binding, CardSigner, ExtendedCard};

/// How the server presents itself and what it accepts.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Agent name on the card.
    pub name: String,
    /// Agent description on the card.
    pub description: String,
    /// Agent version on the card.
    pub version: String,
    /// The public URL of the JSON-RPC endpoint (the card's `url`).
    pub url: String,
    /// Bearer tokens and the principal each one authenticates; empty means no auth.
    pub tokens: Vec<(String, String)>,
    /// Largest accepted request body, in bytes; larger bodies get 413 before parsing.
    pub max_body_bytes: usize,
    /// Most history messages returned when a client does not ask for a `historyLength`.
    pub max_history: usize,
    /// Most connections served at once; one more is answered 503 with the JSON-RPC error -32051
    /// and closed, never queued. Each costs a file descriptor, so keep it well under the process's
    /// limit (`ulimit -n`) less what the store needs.
    pub max_connections: usize,
    /// How long a client may take to send a request's head (the request line and the headers),
    /// from its first byte, or from the connection's opening for its first request, and then its
    /// body, from the end of the head; then the connection is closed.
    pub header_timeout: Duration,
    /// How long a keep-alive connection may wait for its next request with none in flight; then it
    /// is closed. A response being sent (an SSE stream) is in flight, never idle.
    pub idle_timeout: Duration,
    /// Most `message/stream` and `tasks/resubscribe` streams open at once for one principal (the
    /// operator, when auth is off, is one); one more is refused with the JSON-RPC error -32052.
    pub max_streams_per_principal: usize,
    /// The extended agent card served to authenticated callers (`GetExtendedAgentCard`, 0.3
    /// `agent/getAuthenticatedExtendedCard`): what it adds to the public card. Served only when
    /// `tokens` is set too (an extended card is for authenticated callers); the card's
    /// `capabilities.extendedAgentCard` says whether it is.
    pub extended_card: Option<ExtendedCard>,
    /// Signs the public and the extended card (A2A 1.0 §8.4) when set.
    pub card_signer: Option<Arc<CardSigner>>,
    /// How long clients may cache the public card (its `Cache-Control: max-age`, spec 1.0 §8.6);
    /// it carries an `ETag` too, so a client past this age revalidates with `If-None-Match`.
    pub card_max_age: Duration,
    /// Serve the public card with the A2A 0.3 members beside the 1.0 card (the default), so that
    /// 0.3 clients read it too; off, every request gets the 1.0 card alone (a request that says
    /// `A2A-Version: 1.0` always does). Strict 1.0 validators (a JSON schema without additional
    /// properties) accept only the latter.
    pub card_0_3_members: bool,
    /// The A2A bindings the agent offers: listed on its card and served (default: JSON-RPC,
    /// HTTP+JSON and gRPC — gRPC only in a build with the `grpc` feature). A binding left out is
    /// neither listed nor served: its requests are refused with an answer naming the bindings
    /// offered (JSON-RPC: HTTP 404 with the error -32601; HTTP+JSON: 404 with a
    /// `google.rpc.Status` whose `ErrorInfo` says `METHOD_NOT_FOUND`; gRPC: `UNIMPLEMENTED`). The
    /// card, the JWKS and the call webhook are served whatever the list. `serverless::lambda`
    /// leaves gRPC out: a function platform's HTTP front door cannot carry it.
    pub bindings: Vec<Binding>,
    /// Also serve every skill as an MCP tool at `/mcp` (streamable HTTP, behind the same tokens;
    /// see `radkit serve --mcp`). Default off.
    #[cfg(feature = "mcp")]
    #[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
    pub mcp: bool,
    /// Serve the web console at `/console` (default on): the tasks, their journals, answers,
    /// approvals and cancels, the skills and their graphs. With `tokens` set it asks for one and
    /// shows each principal its own tasks; see `console_admins`.
    #[cfg(feature = "console")]
    #[cfg_attr(docsrs, doc(cfg(feature = "console")))]
    pub console: bool,
    /// Principals that see (and may answer or cancel) every task in the console, as the operator
    /// does; others see their own. Only for the console: the A2A API keeps scoping tasks to their
    /// principal.
    #[cfg(feature = "console")]
    #[cfg_attr(docsrs, doc(cfg(feature = "console")))]
    pub console_admins: Vec<String>,
}

impl ServerConfig {
    /// True when the agent offers `binding` (see [`ServerConfig::bindings`]); gRPC only in a build
    /// that serves it.
    pub fn offers(&self, binding: Binding) -> bool {
        self.bindings.contains(&binding) && (binding != Binding::Grpc || cfg!(feature = "grpc"))
    }

    /// Defaults for an agent reachable at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        ServerConfig {
            name: "radkit agent".to_owned(),
            description: "Durable agent skills served over A2A by radkit.".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            url: url.into(),
            tokens: Vec::new(),
            max_body_bytes: 1024 * 1024,
            max_history: 1000,
            max_connections: 512,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_streams_per_principal: 64,
            extended_card: None,
            card_signer: None,
            card_max_age: Duration::from_secs(300),
            card_0_3_members: true,
            bindings: Binding::ALL.to_vec(),
            #[cfg(feature = "mcp")]
            mcp: false,
            #[cfg(feature = "console")]
            console: true,
            #[cfg(feature = "console")]
            console_admins: Vec::new(),
        }
    }
}
