//! [`ServerConfig`]: how an agent presents itself (the name, description, version and URL on its
//! card, and whether it asks for a bearer token) and what its A2A server accepts (tokens, body and
//! history limits). The registry reads it to build the card and the server to serve requests, so it
//! sits below both; it holds settings and their defaults, never behaviour. Public as
//! `server::ServerConfig`.

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
}

impl ServerConfig {
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
        }
    }
}
