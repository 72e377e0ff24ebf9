//! A2A client: how radkit calls another agent, over the binding the peer's card offers that the
//! client prefers — JSON-RPC (A2A 0.3 or 1.0), HTTP+JSON or gRPC (1.0) — with the same API on
//! each. It owns the conversation with one peer — the card, the endpoint, the requests, the
//! answers and streams — and hands back the crate's model (`crate::model`) whatever the peer
//! speaks. It uses `crate::model` only: never the engine, the server or the store, which build on
//! it. `card` picks the interface; `wire` (JSON-RPC), `rest` and `grpc` frame each binding;
//! `transport` makes the HTTP exchanges; `stream` follows streams.
//!
//! ```no_run
//! # async fn demo() -> Result<(), radkit_runtime::client::ClientError> {
//! use radkit_runtime::client::{A2aClient, ClientAuth, Reply};
//! use radkit_runtime::model::Message;
//!
//! let peer = A2aClient::connect("http://127.0.0.1:8080", ClientAuth::None).await?;
//! let reply = peer.send(Message::user_text("hello"), true).await?;
//! if let Reply::Task(task) = reply {
//!     let task = peer.get(&task.id).await?;
//!     println!("{:?}", task.status.state);
//! }
//! # Ok(()) }
//! ```
//!
//! Every call is one HTTP request (one gRPC call) with the client's timeouts ([`Timeouts`]); bodies,
//! single SSE events and gRPC messages are read up to a limit (16 MiB unless
//! [`ClientBuilder::max_body_bytes`] says otherwise).
//! Nothing is retried here: [`ClientError::is_transient`] tells the caller (the engine's durable
//! effects) whether retrying can help.

mod card;
mod error;
#[cfg(feature = "grpc")]
mod grpc;
mod rest;
pub(crate) mod sse;
mod stream;
mod transport;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use serde_json::Value;

use crate::model::{v1, ArtifactUpdate, Message, StatusUpdate, Task};

pub use crate::model::Binding;
pub use card::WELL_KNOWN_CARD_PATH;
pub use error::{codes, ClientError, BODY_EXCERPT};
pub use transport::{Timeouts, DEFAULT_MAX_BODY_BYTES};

use stream::{Follows, Framing};
use transport::Transport;
use wire::{Dialect, Method};

/// The credentials sent with every request (the card's fetch included).
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientAuth {
    /// No credentials.
    #[default]
    None,
    /// `Authorization: Bearer <token>`.
    Bearer(String),
    /// One header of the caller's choosing (an API key: `X-API-Key: <key>`).
    Header {
        /// The header's name.
        name: String,
        /// Its value.
        value: String,
    },
}

impl std::fmt::Debug for ClientAuth {
    /// Names the kind of credential, never the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientAuth::None => f.write_str("None"),
            ClientAuth::Bearer(_) => f.write_str("Bearer(***)"),
            ClientAuth::Header { name, .. } => write!(f, "Header({name}: ***)"),
        }
    }
}

/// The A2A version spoken to a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProtocolVersion {
    /// A2A 0.3: `message/send`, `tasks/get`, ..., `kind`-tagged JSON; no `A2A-Version` header.
    V0_3,
    /// A2A 1.0: `SendMessage`, `GetTask`, ..., ProtoJSON; `A2A-Version: 1.0` on every request.
    V1_0,
}

/// Where a peer posts a task's updates (a push-notification config given with a send).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushTarget {
    /// The webhook URL.
    pub url: String,
    /// The token the peer sends back in `X-A2A-Notification-Token`.
    pub token: String,
}

/// The answer to a send: the task the message created or continued, or a direct reply.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Reply {
    /// The task (its id is the one to `get`, `cancel` or `subscribe` to).
    Task(Task),
    /// The agent answered with a message and made no task.
    Message(Message),
}

/// One event of a stream.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// The task as it is now (a stream's first event, usually).
    Task(Task),
    /// A message from the agent (a stream that is one message: the whole answer).
    Message(Message),
    /// A status change. In a 1.0 stream, `final` is set for terminal and interrupted states.
    Status(StatusUpdate),
    /// An artifact or a chunk of one.
    Artifact(ArtifactUpdate),
}

/// Settings for [`A2aClient`]s: credentials, the bindings in order of preference, a forced
/// version, timeouts, the size limit.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    auth: ClientAuth,
    bindings: Vec<Binding>,
    version: Option<ProtocolVersion>,
    timeouts: Timeouts,
    max_body: usize,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            auth: ClientAuth::None,
            bindings: card::spoken(),
            version: None,
            timeouts: Timeouts::default(),
            max_body: DEFAULT_MAX_BODY_BYTES,
        }
    }
}

impl ClientBuilder {
    /// The credentials to send.
    pub fn auth(mut self, auth: ClientAuth) -> Self {
        self.auth = auth;
        self
    }

    /// The bindings to speak, most preferred first (default: JSON-RPC, HTTP+JSON, then gRPC when
    /// the `grpc` feature is compiled). The client speaks the first of them the card offers; one
    /// binding alone forces it. A binding this build cannot speak (gRPC without the `grpc`
    /// feature), or none at all, is a [`ClientError::Invalid`] at connect.
    pub fn bindings(mut self, bindings: impl IntoIterator<Item = Binding>) -> Self {
        self.bindings = bindings.into_iter().collect();
        self
    }

    /// Speak `version` whatever the card says (see [`A2aClient::connect_version`]). HTTP+JSON and
    /// gRPC are A2A 1.0 only: forcing 0.3 leaves JSON-RPC.
    pub fn version(mut self, version: ProtocolVersion) -> Self {
        self.version = Some(version);
        self
    }

    /// All timeouts at once.
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// How long establishing a connection may take (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.connect = timeout;
        self
    }

    /// How long one request may take, to the end of its answer (default 120 s); for a stream, to
    /// its response headers.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.request = timeout;
        self
    }

    /// How long a stream may be silent before it is given up (default 60 s).
    pub fn stream_idle_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.stream_idle = timeout;
        self
    }

    /// The most bytes read of one answer or one SSE event (default 16 MiB); more is a
    /// [`ClientError::Protocol`].
    pub fn max_body_bytes(mut self, limit: usize) -> Self {
        self.max_body = limit;
        self
    }

    /// Fetch the card at `url` (a card URL, or a base URL to which
    /// `/.well-known/agent-card.json` is appended) and pick the interface from its
    /// `supportedInterfaces`: the first of [`ClientBuilder::bindings`] it offers (JSON-RPC in 1.0
    /// when listed, else 0.3 — a 0.3 card's `url` is its 0.3 JSON-RPC interface). A card that
    /// offers none of them is a [`ClientError::Card`] naming what it offers.
    pub async fn connect(self, url: &str) -> Result<A2aClient, ClientError> {
        let spoken = card::spoken();
        if let Some(unspoken) = self.bindings.iter().find(|b| !spoken.contains(b)) {
            return Err(ClientError::Invalid(format!(
                "this build cannot speak {unspoken}; compile radkit with its `grpc` feature, or prefer another binding"
            )));
        }
        if self.bindings.is_empty() {
            return Err(ClientError::Invalid(
                "no binding to speak; give `ClientBuilder::bindings` at least one".to_owned(),
            ));
        }
        let transport = Transport::new(&self.auth, self.timeouts, self.max_body)?;
        let from = card::card_url(url)?;
        let card_json = transport.get_json(&from).await?;
        let card = card::read_card(card_json.clone(), &from)?;
        let endpoint = card::endpoint(&card, &from, &self.bindings, self.version)?;
        let backend = match endpoint.binding {
            Binding::HttpJson => Backend::Rest(rest::Rest {
                base: endpoint.url.clone(),
                tenant: endpoint.tenant.clone(),
            }),
            #[cfg(feature = "grpc")]
            Binding::Grpc => Backend::Grpc(Box::new(grpc::Grpc::new(
                &endpoint.url,
                endpoint.tenant.clone(),
                transport.auth(),
                self.timeouts,
                self.max_body,
            )?)),
            _ => Backend::JsonRpc,
        };
        Ok(A2aClient {
            inner: Arc::new(Inner {
                transport,
                endpoint,
                backend,
                card,
                card_json,
            }),
        })
    }
}

/// A client of one peer agent. Cheap to clone (the connection pool and the card are shared).
#[derive(Clone)]
pub struct A2aClient {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Transport,
    endpoint: card::Endpoint,
    backend: Backend,
    card: v1::AgentCard,
    card_json: Value,
}

/// How requests are framed: the binding picked, with what it needs beyond the HTTP transport.
enum Backend {
    /// JSON-RPC at the endpoint, in its version (`wire`).
    JsonRpc,
    /// HTTP+JSON under the endpoint.
    Rest(rest::Rest),
    /// gRPC at the endpoint's target, over its own HTTP/2 connection.
    #[cfg(feature = "grpc")]
    Grpc(Box<grpc::Grpc>),
}

impl std::fmt::Debug for A2aClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("A2aClient")
            .field("binding", &self.inner.endpoint.binding)
            .field("endpoint", &self.inner.endpoint.url.as_str())
            .field("version", &self.inner.endpoint.version)
            .field("agent", &self.inner.card.name)
            .finish_non_exhaustive()
    }
}

impl A2aClient {
    /// Settings beyond the defaults (timeouts, size limit, a forced version).
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// Fetch the card (a card URL, or a base URL to which `/.well-known/agent-card.json` is
    /// appended) and pick the interface (see [`ClientBuilder::connect`]: JSON-RPC when the card
    /// offers it, else HTTP+JSON, else gRPC). Default timeouts and limit.
    pub async fn connect(url: &str, auth: ClientAuth) -> Result<A2aClient, ClientError> {
        Self::builder().auth(auth).connect(url).await
    }

    /// [`A2aClient::connect`] with the version forced (for tests, and for peers whose card lies):
    /// the card's JSON-RPC interface of that version, else its other JSON-RPC interface spoken in
    /// that version; for 1.0, HTTP+JSON or gRPC when the card has no JSON-RPC.
    pub async fn connect_version(
        url: &str,
        auth: ClientAuth,
        version: ProtocolVersion,
    ) -> Result<A2aClient, ClientError> {
        Self::builder()
            .auth(auth)
            .version(version)
            .connect(url)
            .await
    }

    /// The version spoken to the peer.
    pub fn version(&self) -> ProtocolVersion {
        self.inner.endpoint.version
    }

    /// The binding spoken to the peer.
    pub fn binding(&self) -> Binding {
        self.inner.endpoint.binding
    }

    /// The URL of the interface spoken: the JSON-RPC endpoint, the HTTP+JSON base, or the gRPC
    /// target as `http://host:port/`.
    pub fn endpoint(&self) -> &str {
        self.inner.endpoint.url.as_str()
    }

    /// The peer's card as A2A 1.0 sees it (a 0.3 card's `url`, `preferredTransport` and
    /// `additionalInterfaces` are its `supportedInterfaces`; its security schemes and requirements
    /// are in their 1.0 form). [`A2aClient::card_json`] is the document as served.
    pub fn card(&self) -> &v1::AgentCard {
        &self.inner.card
    }

    /// The card document exactly as the peer served it.
    pub fn card_json(&self) -> &Value {
        &self.inner.card_json
    }

    fn dialect(&self) -> Dialect {
        Dialect {
            version: self.inner.endpoint.version,
            tenant: self.inner.endpoint.tenant.clone(),
        }
    }

    async fn call(&self, call: &transport::Call) -> Result<Value, ClientError> {
        let endpoint = &self.inner.endpoint;
        self.inner
            .transport
            .call(&endpoint.url, endpoint.version, call)
            .await
    }

    /// One HTTP+JSON request and its whole answer.
    async fn exchange(&self, call: &rest::RestCall) -> Result<transport::Answer, ClientError> {
        let transport = &self.inner.transport;
        let request = call.request(transport, "application/json");
        transport.exchange(&call.url, request).await
    }

    /// Send `message` as it is (its `messageId` is the caller's, so a retry is recognised as the
    /// same message by peers that deduplicate, radkit among them; set `taskId` to answer a task
    /// waiting for input). `return_immediately` is 0.3 `configuration.blocking: false` / 1.0
    /// `configuration.returnImmediately: true`: the answer comes once the task exists, instead
    /// of once it settles.
    pub async fn send(
        &self,
        message: Message,
        return_immediately: bool,
    ) -> Result<Reply, ClientError> {
        self.send_configured(message, return_immediately, None)
            .await
    }

    /// Like [`A2aClient::send`], asking the peer to post the task's updates to `push` (A2A push
    /// notifications; the peer sends `push.token` in `X-A2A-Notification-Token`).
    pub async fn send_with_push(
        &self,
        message: Message,
        return_immediately: bool,
        push: &PushTarget,
    ) -> Result<Reply, ClientError> {
        self.send_configured(message, return_immediately, Some(push))
            .await
    }

    async fn send_configured(
        &self,
        message: Message,
        return_immediately: bool,
        push: Option<&PushTarget>,
    ) -> Result<Reply, ClientError> {
        let dialect = self.dialect();
        match &self.inner.backend {
            Backend::JsonRpc => {
                let call = dialect.send_with(Method::Send, message, return_immediately, push)?;
                let result = self.call(&call).await?;
                dialect.reply(&call, result)
            }
            Backend::Rest(rest) => {
                let request = dialect.v1_send(Method::Send, message, return_immediately, push);
                let call = rest.send(Method::Send, &request)?;
                let answer = self.exchange(&call).await?;
                call.reply(answer)
            }
            #[cfg(feature = "grpc")]
            Backend::Grpc(grpc) => {
                let request = dialect.v1_send(Method::Send, message, return_immediately, push);
                grpc.send(request).await
            }
        }
    }

    /// The task as the peer has it now.
    pub async fn get(&self, task_id: &str) -> Result<Task, ClientError> {
        self.about_task(Method::Get, task_id).await
    }

    /// Ask the peer to cancel the task; the task as the peer answers it. A task that already
    /// ended gives an error with [`ClientError::is_not_cancelable`].
    pub async fn cancel(&self, task_id: &str) -> Result<Task, ClientError> {
        self.about_task(Method::Cancel, task_id).await
    }

    async fn about_task(&self, method: Method, task_id: &str) -> Result<Task, ClientError> {
        match &self.inner.backend {
            Backend::JsonRpc => {
                let dialect = self.dialect();
                let call = dialect.about_task(method, task_id);
                let result = self.call(&call).await?;
                dialect.task(&call, result)
            }
            Backend::Rest(rest) => {
                let call = rest.about_task(method, task_id);
                let answer = self.exchange(&call).await?;
                call.read::<v1::Task, Task>(answer)
            }
            #[cfg(feature = "grpc")]
            Backend::Grpc(grpc) => grpc.task(method, task_id).await,
        }
    }

    /// Follow a task (0.3 `tasks/resubscribe`, 1.0 `SubscribeToTask`): its events until one shows
    /// it terminal or waiting for input (`input-required`, `auth-required`), then the stream ends.
    /// A stream that closes before that ends with [`ClientError::StreamClosed`]; poll with
    /// [`A2aClient::get`] or subscribe again.
    pub fn subscribe(&self, task_id: &str) -> BoxStream<'static, Result<StreamEvent, ClientError>> {
        let dialect = self.dialect();
        let framing = match &self.inner.backend {
            Backend::JsonRpc => Framing::JsonRpc {
                call: dialect.about_task(Method::Subscribe, task_id),
                dialect,
            },
            Backend::Rest(rest) => Framing::Rest(rest.about_task(Method::Subscribe, task_id)),
            #[cfg(feature = "grpc")]
            Backend::Grpc(grpc) => {
                return grpc.follow(
                    grpc::Opening::Subscribe(task_id.to_owned()),
                    Follows::Subscription,
                )
            }
        };
        self.follow(Ok(framing), Follows::Subscription)
    }

    /// Send `message` and follow what it starts (0.3 `message/stream`, 1.0
    /// `SendStreamingMessage`): the events until the task is terminal or waiting for input, or the
    /// one message that answers it. A first task snapshot in an interrupted state does not end the
    /// stream (it may show the state the message answers). Ends like [`A2aClient::subscribe`].
    pub fn send_streaming(
        &self,
        message: Message,
    ) -> BoxStream<'static, Result<StreamEvent, ClientError>> {
        let dialect = self.dialect();
        let framing = match &self.inner.backend {
            Backend::JsonRpc => dialect
                .send(Method::Stream, message, false)
                .map(|call| Framing::JsonRpc { dialect, call }),
            Backend::Rest(rest) => {
                let request = dialect.v1_send(Method::Stream, message, false, None);
                rest.send(Method::Stream, &request).map(Framing::Rest)
            }
            #[cfg(feature = "grpc")]
            Backend::Grpc(grpc) => {
                let request = dialect.v1_send(Method::Stream, message, false, None);
                return grpc.follow(grpc::Opening::Send(Box::new(request)), Follows::Send);
            }
        };
        self.follow(framing, Follows::Send)
    }

    fn follow(
        &self,
        framing: Result<Framing, ClientError>,
        follows: Follows,
    ) -> BoxStream<'static, Result<StreamEvent, ClientError>> {
        let url = match &framing {
            Ok(Framing::Rest(call)) => call.url.clone(),
            _ => self.inner.endpoint.url.clone(),
        };
        stream::follow(self.inner.transport.clone(), url, framing, follows)
    }
}
