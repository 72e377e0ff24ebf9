//! An agent in this process: an engine and `radkit::server::serve` on a loopback port, stopped when
//! dropped; and the bounded HTTP client the tests speak to it with.

use std::net::SocketAddr;
use std::time::Duration;

use radkit::engine::{Engine, EngineBuilder};
use radkit::flow::FlowSkill;
use radkit::server::ServerConfig;
use radkit::store::MemoryStore;

/// How long any one request to an in-process agent may take before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// An engine served on a loopback port; the server is stopped and the engine halted when dropped.
pub struct Agent {
    pub addr: SocketAddr,
    /// `http://<addr>` (no trailing slash; the card's URL is `<url>/`).
    pub url: String,
    pub engine: Engine,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Agent {
    /// Stop serving and halt the engine, as a crash would (nothing more is written or posted).
    pub fn crash(&self) {
        self.server.abort();
        self.engine.halt();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.crash();
    }
}

/// `engine` served on `listener` with `config`'s changes to the default settings.
pub fn serve_on(
    listener: tokio::net::TcpListener,
    engine: Engine,
    config: impl FnOnce(ServerConfig) -> ServerConfig,
) -> Agent {
    let addr = listener.local_addr().expect("local address");
    let url = format!("http://{addr}");
    let config = config(ServerConfig::new(format!("{url}/")));
    let server = tokio::spawn(radkit::server::serve(listener, engine.clone(), config));
    Agent {
        addr,
        url,
        engine,
        server,
    }
}

/// `engine` served on a fresh loopback port with `config`'s changes to the default settings.
pub async fn serve(engine: Engine, config: impl FnOnce(ServerConfig) -> ServerConfig) -> Agent {
    serve_on(loopback().await, engine, config)
}

/// A connection timeout long enough not to fire during a test.
pub const LONG: Duration = Duration::from_secs(60);

/// `config` with header and idle timeouts that do not fire during a test (the connection tests set
/// the one they test).
pub fn lasting(mut config: ServerConfig) -> ServerConfig {
    config.header_timeout = LONG;
    config.idle_timeout = LONG;
    config
}

/// `builder`'s engine started (its tasks recovered) and served with `config`'s changes.
pub async fn start(
    builder: EngineBuilder,
    config: impl FnOnce(ServerConfig) -> ServerConfig,
) -> Agent {
    let engine = builder.start().await.expect("start the engine");
    serve(engine, config).await
}

/// `skill` alone over a fresh memory store, default settings.
pub async fn serving(skill: impl FlowSkill) -> Agent {
    start(only(MemoryStore::new(), skill), |c| c).await
}

/// An engine builder over `store` that serves `skill` and no registered skill.
pub fn only(store: impl radkit::store::Store, skill: impl FlowSkill) -> EngineBuilder {
    Engine::builder(store)
        .without_registered_skills()
        .skill(skill)
}

/// A listener on a free loopback port.
pub async fn loopback() -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port")
}

/// Bearer `tokens` as `ServerConfig::tokens` takes them: (token, principal).
pub fn tokens(tokens: &[(&str, &str)]) -> Vec<(String, String)> {
    tokens
        .iter()
        .map(|(token, principal)| ((*token).to_owned(), (*principal).to_owned()))
        .collect()
}

/// An HTTP client whose every request fails the test after [`PATIENCE`].
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(PATIENCE)
        .build()
        .expect("an HTTP client")
}
