//! Another A2A agent as a callee: declared by name with its card URL and credentials
//! ([`AgentSpec`], `EngineBuilder::agent`), connected on first use (the card says which bindings
//! and protocol versions it offers; the spec may prefer or force one), spoken to through
//! [`crate::client::A2aClient`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::OnceCell;

use super::webhook::CallWebhook;
use super::{settled, Progress, Started};
use crate::client::{
    A2aClient, Binding, ClientAuth, ClientError, ProtocolVersion, PushTarget, Reply, StreamEvent,
};
use crate::flow::EffectError;
use crate::model::{Message, Task};

/// An agent a step may call with `ctx.agent(name)`: where its card is and how to authenticate.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    url: String,
    bearer: Option<String>,
    version: Option<ProtocolVersion>,
    bindings: Option<Vec<Binding>>,
}

impl AgentSpec {
    /// The agent whose card is at `url` (a card URL, or the agent's base URL, to which
    /// `/.well-known/agent-card.json` is appended).
    pub fn new(url: impl Into<String>) -> Self {
        AgentSpec {
            url: url.into(),
            bearer: None,
            version: None,
            bindings: None,
        }
    }

    /// Authenticate with this bearer token.
    pub fn bearer(mut self, token: impl Into<String>) -> Self {
        self.bearer = Some(token.into());
        self
    }

    /// Speak this protocol version whatever the card says.
    pub fn version(mut self, version: ProtocolVersion) -> Self {
        self.version = Some(version);
        self
    }

    /// Speak `binding` to this agent, whatever else its card offers (a card without it is an error
    /// of the call naming what the card offers). Without it, the first of JSON-RPC, HTTP+JSON and
    /// gRPC the card offers.
    pub fn binding(self, binding: Binding) -> Self {
        self.bindings([binding])
    }

    /// Speak the first of `bindings` the agent's card offers (most preferred first).
    pub fn bindings(mut self, bindings: impl IntoIterator<Item = Binding>) -> Self {
        self.bindings = Some(bindings.into_iter().collect());
        self
    }

    /// The card URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// The agents an engine may call, each connected once, and where they post their tasks' updates.
#[derive(Default)]
pub struct Agents {
    agents: BTreeMap<String, RemotePeer>,
    webhook: Option<CallWebhook>,
}

impl Agents {
    /// The declared agents; `webhook`: the call webhook's base URL and key (see `webhook.rs`).
    pub(crate) fn new(specs: BTreeMap<String, AgentSpec>, webhook: Option<CallWebhook>) -> Self {
        Agents {
            webhook,
            agents: specs
                .into_iter()
                .map(|(name, spec)| {
                    let peer = RemotePeer {
                        spec: Arc::new(spec),
                        client: Arc::new(OnceCell::new()),
                        push_refused: Arc::default(),
                    };
                    (name, peer)
                })
                .collect(),
        }
    }

    /// The engine's call webhook, when it has one.
    pub(crate) fn webhook(&self) -> Option<&CallWebhook> {
        self.webhook.as_ref()
    }

    /// The card URL (or base URL) the agent `name` was declared with.
    pub(crate) fn url(&self, name: &str) -> Option<&str> {
        self.agents.get(name).map(|peer| peer.spec.url.as_str())
    }

    pub(crate) fn peer(&self, name: &str) -> Option<RemotePeer> {
        self.agents.get(name).cloned()
    }

    /// "; declared agents are a, b" (or nothing), for error messages.
    pub(crate) fn known(&self) -> String {
        if self.agents.is_empty() {
            return String::new();
        }
        let names: Vec<&str> = self.agents.keys().map(String::as_str).collect();
        format!("; declared agents are {}", names.join(", "))
    }
}

#[derive(Clone)]
pub(crate) struct RemotePeer {
    spec: Arc<AgentSpec>,
    client: Arc<OnceCell<A2aClient>>,
    /// The agent refused this engine's call webhook once: it is not offered again.
    push_refused: Arc<std::sync::atomic::AtomicBool>,
}

/// The stream a future makes, flattened (the client is connected lazily).
fn async_stream_of<F, Fut>(make: F) -> futures::stream::BoxStream<'static, Progress>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = futures::stream::BoxStream<'static, Progress>>
        + Send
        + 'static,
{
    futures::stream::once(make()).flatten().boxed()
}

fn effect_error(e: ClientError) -> EffectError {
    if e.is_transient() {
        EffectError::transient(e.to_string())
    } else {
        EffectError::permanent(e.to_string())
    }
}

impl RemotePeer {
    /// The client, connecting (reading the card) on first use; a card that cannot be read now is
    /// read again next time.
    async fn client(&self) -> Result<&A2aClient, EffectError> {
        self.client
            .get_or_try_init(|| async {
                let auth = match &self.spec.bearer {
                    Some(token) => ClientAuth::Bearer(token.clone()),
                    None => ClientAuth::None,
                };
                let mut builder = A2aClient::builder().auth(auth);
                if let Some(version) = self.spec.version {
                    builder = builder.version(version);
                }
                if let Some(bindings) = &self.spec.bindings {
                    builder = builder.bindings(bindings.iter().copied());
                }
                builder.connect(&self.spec.url).await
            })
            .await
            .map_err(effect_error)
    }

    /// True when the agent's card says it posts push notifications.
    pub async fn pushes(&self) -> bool {
        !self.push_refused.load(std::sync::atomic::Ordering::SeqCst)
            && self
                .client()
                .await
                .is_ok_and(|c| c.card().capabilities.push_notifications == Some(true))
    }

    /// Send the call's message (asking for pushes to `push` when given).
    pub async fn start(
        &self,
        message: Message,
        push: Option<PushTarget>,
    ) -> Result<(Started, bool), EffectError> {
        let client = self.client().await?;
        let reply_to = message.task_id.clone();
        let message_id = message.message_id.clone();
        let mut pushed = push.is_some();
        let sent = match &push {
            Some(target) => match client.send_with_push(message.clone(), true, target).await {
                // The agent refuses the webhook (an address its rules forbid, push turned off):
                // the call goes on without it, followed by a watcher.
                Err(e) if !e.is_transient() => {
                    tracing::info!(agent = %self.spec.url, error = %e, "the agent refused the call webhook; calling without it");
                    self.push_refused
                        .store(true, std::sync::atomic::Ordering::SeqCst);
                    pushed = false;
                    client.send(message, true).await
                }
                sent => sent,
            },
            None => client.send(message, true).await,
        };
        match sent {
            Ok(Reply::Task(task)) => Ok((Started::Task(task), pushed)),
            Ok(Reply::Message(message)) => Ok((Started::Message(message), false)),
            // A reply the remote task took before a crash cut the call off: the task moved on and
            // its history holds the message.
            Err(e) if reply_to.is_some() && !e.is_transient() => {
                let task = self.get(reply_to.as_deref().unwrap_or_default()).await?;
                let delivered = task.history.iter().any(|m| m.message_id == message_id);
                if delivered {
                    Ok((Started::Task(task), false))
                } else {
                    Err(effect_error(e))
                }
            }
            Err(e) => Err(effect_error(e)),
        }
    }

    pub async fn get(&self, task_id: &str) -> Result<Task, EffectError> {
        let client = self.client().await?;
        client.get(task_id).await.map_err(effect_error)
    }

    pub async fn cancel(&self, task_id: &str) -> Result<(), EffectError> {
        let client = self.client().await?;
        match client.cancel(task_id).await {
            Ok(_) => Ok(()),
            // Ended meanwhile: nothing left to cancel.
            Err(e) if e.is_not_cancelable() => Ok(()),
            Err(e) => Err(effect_error(e)),
        }
    }

    /// The remote task's status updates and artifacts, until it settles or the subscription ends.
    pub fn follow(&self, task_id: &str) -> futures::stream::BoxStream<'static, Progress> {
        let (peer, task_id) = (self.clone(), task_id.to_owned());
        let stream = async_stream_of(move || async move {
            let Ok(client) = peer.client().await else {
                return futures::stream::empty().boxed();
            };
            client
                .subscribe(&task_id)
                .take_while(|event| futures::future::ready(event.is_ok()))
                .filter_map(|event| {
                    futures::future::ready(match event {
                        Ok(StreamEvent::Status(update)) => {
                            Some(Progress::status(update.status.state, update.status.message))
                        }
                        // The task as the subscription opens: its status message is where it
                        // stands now.
                        Ok(StreamEvent::Task(task)) => {
                            Some(Progress::status(task.status.state, task.status.message))
                        }
                        Ok(StreamEvent::Artifact(update)) => Some(Progress::artifact(
                            update.artifact,
                            update.append,
                            update.last_chunk,
                        )),
                        _ => None,
                    })
                })
                .boxed()
        });
        stream
    }

    /// Follow the remote task with a subscription; when the peer cannot stream or the stream
    /// breaks, poll it (1 s, doubling to 30 s). Returns when it settles.
    pub async fn watch(&self, task_id: &str) {
        // An agent whose card cannot be read now is tried again, patiently: the watcher wakes
        // the task only when the callee settled (or at its deadline, the recheck).
        let mut delay = Duration::from_secs(1);
        let client = loop {
            match self.client().await {
                Ok(client) => break client,
                Err(_) => {
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(30));
                }
            }
        };
        let mut events = client.subscribe(task_id);
        while let Some(event) = events.next().await {
            let state = match event {
                Ok(StreamEvent::Task(task)) => Some(task.status.state),
                Ok(StreamEvent::Status(update)) => Some(update.status.state),
                Ok(StreamEvent::Message(_)) => None,
                Ok(StreamEvent::Artifact(_)) => None,
                Err(_) => break,
            };
            if state.is_some_and(settled) {
                return;
            }
        }
        drop(events);
        let mut delay = Duration::from_secs(1);
        loop {
            if let Ok(task) = client.get(task_id).await {
                if settled(task.status.state) {
                    return;
                }
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(30));
        }
    }
}
