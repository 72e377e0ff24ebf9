//! Push notifications: the engine's API over a task's webhooks (set, get, list, delete — scoped
//! to the caller who may see the task) and their delivery (`deliver`), which follows each
//! config's durable cursor through the task's journal (`store::push`). It never writes the
//! journal: a delivery is an effect of the journal, not part of it, so replay and the fold are the
//! same with or without webhooks.

mod deliver;
mod target;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use reqwest::header::HeaderValue;
use tokio::sync::Notify;

use super::{Caller, Engine, EngineError, Inner};
use crate::model::TaskId;
use crate::store::{PushConfig, PushStore, Store};
pub use target::TargetError;

/// Most webhooks one task may have.
pub const MAX_CONFIGS_PER_TASK: usize = 16;

/// How push notifications are delivered.
#[derive(Debug, Clone)]
pub struct PushSettings {
    /// Allow webhooks on private, loopback and link-local addresses (off by default: spec 1.0
    /// §13.2's SSRF rule). Tests and trusted networks turn it on.
    pub allow_private: bool,
    /// How often the sender looks for pending deliveries (new records, retries due, work left by
    /// a stopped sender); a config set on this engine wakes it at once.
    pub poll: Duration,
    /// The delay after the first failed delivery; it doubles with each further failure.
    pub retry_base: Duration,
    /// The longest delay between attempts.
    pub retry_max: Duration,
    /// The limit on one webhook request (connecting included).
    pub timeout: Duration,
    /// How long a claimed config is the sender's before another may take it over; each
    /// acknowledged update extends it.
    pub lease: Duration,
}

impl Default for PushSettings {
    fn default() -> Self {
        PushSettings {
            allow_private: false,
            poll: Duration::from_millis(250),
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(300),
            timeout: Duration::from_secs(10),
            lease: Duration::from_secs(60),
        }
    }
}

/// Most deliveries (each at most one post in flight) at once from one engine: each is an outbound
/// socket, outside the server's connection limit, and a client could otherwise set webhooks on many
/// tasks that all point at an address that never answers. The sender claims no more configs than
/// it has room for, so nothing it claimed waits in memory for a slot (and outlives its claim).
pub(crate) const MAX_DELIVERIES_IN_FLIGHT: usize = 64;

/// Most deliveries in flight at once to one receiver (a URL's host and port): a receiver that never
/// answers holds at most these, and every other receiver's deliveries go on beside it.
pub(crate) const MAX_DELIVERIES_PER_RECEIVER: usize = 8;

/// The push sender of an engine or of a serverless host's passes: what it delivers from (the
/// store, under its name in the configs' leases), how (the settings), and its state — started once,
/// woken when a config is set here or a task with one commits here, its deliveries in flight.
pub(crate) struct Pusher {
    started: AtomicBool,
    watch: Arc<Watch>,
    client: OnceLock<reqwest::Client>,
    /// Permits for deliveries in flight ([`MAX_DELIVERIES_IN_FLIGHT`]).
    pub(crate) deliveries: Arc<tokio::sync::Semaphore>,
    /// Deliveries in flight: the configs (task id, config id), and how many per receiver.
    pub(crate) in_flight: Mutex<InFlight>,
    store: Arc<dyn Store>,
    settings: PushSettings,
    /// Its name in the configs' leases.
    owner: String,
    /// The store's only user: a lease an earlier process left is void.
    exclusive: bool,
    /// The engine's halt: a halted sender posts nothing more.
    halted: Arc<AtomicBool>,
}

impl Pusher {
    /// A sender over `store`'s configs, leasing them as `owner` (`exclusive`: the store's only
    /// user), posting with `settings`, stopping when `halted` is set.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        settings: PushSettings,
        owner: String,
        exclusive: bool,
        halted: Arc<AtomicBool>,
    ) -> Self {
        Pusher {
            started: AtomicBool::new(false),
            watch: Arc::default(),
            client: OnceLock::new(),
            deliveries: Arc::new(tokio::sync::Semaphore::new(MAX_DELIVERIES_IN_FLIGHT)),
            in_flight: Mutex::default(),
            store,
            settings,
            owner,
            exclusive,
            halted,
        }
    }

    /// Deliver, in this future, what is due now — of `task_id` only, or of every task — until
    /// nothing is left or `deadline` comes: the delivery of a serverless pass and of a sweep, after
    /// which nothing runs (see [`deliver::until`]). How many deliveries ran.
    pub(crate) async fn deliver_until(
        self: &Arc<Self>,
        task_id: Option<&str>,
        deadline: std::time::Instant,
    ) -> usize {
        deliver::until(self, task_id, deadline).await
    }
}

/// The configs being delivered by this engine, and how many deliveries each receiver has.
#[derive(Default)]
pub(crate) struct InFlight {
    configs: HashSet<(String, String)>,
    receivers: std::collections::HashMap<String, usize>,
}

/// Why a claimed config is not delivered now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Busy {
    /// This engine delivers it already (its claim ran out while a post was in flight): the
    /// delivery in flight gives the claim back.
    Config,
    /// Its receiver has [`MAX_DELIVERIES_PER_RECEIVER`] deliveries in flight.
    Receiver,
}

impl InFlight {
    /// Start delivering `config` of `task_id` to `receiver`, unless that config is in flight here
    /// already or the receiver has its share.
    pub(crate) fn begin(
        &mut self,
        task_id: &str,
        config: &str,
        receiver: &str,
    ) -> Result<(), Busy> {
        let key = (task_id.to_owned(), config.to_owned());
        if self.configs.contains(&key) {
            return Err(Busy::Config);
        }
        let count = self.receivers.entry(receiver.to_owned()).or_default();
        if *count >= MAX_DELIVERIES_PER_RECEIVER {
            return Err(Busy::Receiver);
        }
        *count += 1;
        self.configs.insert(key);
        Ok(())
    }

    /// The delivery [`InFlight::begin`] started ended.
    pub(crate) fn end(&mut self, task_id: &str, config: &str, receiver: &str) {
        self.configs
            .remove(&(task_id.to_owned(), config.to_owned()));
        if let Some(count) = self.receivers.get_mut(receiver) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.receivers.remove(receiver);
            }
        }
    }
}

/// The receiver a webhook URL names, for [`MAX_DELIVERIES_PER_RECEIVER`]: its host and port.
pub(crate) fn receiver_of(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => format!(
            "{}:{}",
            u.host_str().unwrap_or_default(),
            u.port_or_known_default().unwrap_or_default()
        ),
        Err(_) => url.to_owned(),
    }
}

/// The tasks this engine knows to have webhooks still to serve, and the sender's wake-up: a run
/// that commits records of one of them wakes the sender at once (it polls for the rest: configs
/// set on other engines, retries, a restart's leftovers).
#[derive(Default)]
pub(crate) struct Watch {
    tasks: Mutex<HashSet<String>>,
    wake: Notify,
}

impl Watch {
    /// `entries` of `task_id` were committed. A watched task wakes the sender; one whose `terminal`
    /// record is among them is then forgotten: nothing more will commit, and the sender reads what
    /// is left to deliver from the store, so the set holds only tasks that can still change — also
    /// when another engine delivers the end, or the task's configs were deleted. Tasks without
    /// webhooks cost one set lookup per commit.
    pub(crate) fn committed(&self, task_id: &str, entries: &[crate::journal::Entry]) {
        let mut tasks = self.lock();
        if tasks.contains(task_id) {
            self.wake.notify_one();
            if entries
                .iter()
                .any(|e| matches!(e, crate::journal::Entry::Terminal { .. }))
            {
                tasks.remove(task_id);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn watch(&self, task_id: &str) {
        self.lock().insert(task_id.to_owned());
    }

    fn forget(&self, task_id: &str) {
        self.lock().remove(task_id);
    }
}

impl Inner {
    /// What a task's run tells the sender about its commits.
    pub(crate) fn push_watch(&self) -> Arc<Watch> {
        self.pusher.watch.clone()
    }
}

impl Inner {
    /// The store's push configs.
    fn push_store(&self) -> Result<&dyn PushStore, EngineError> {
        self.store.push().ok_or(EngineError::PushNotSupported)
    }
}

fn header_safe(what: &str, value: &str) -> Result<(), EngineError> {
    HeaderValue::from_str(value).map(|_| ()).map_err(|_| {
        EngineError::InvalidInput(format!(
            "push notification `{what}` must be printable text without line breaks"
        ))
    })
}

impl Engine {
    /// True when this engine delivers push notifications: its store keeps push configs (every
    /// store of the crate does). In every mode: the long-running engine's sender follows the
    /// store, a serverless pass delivers its task's updates before it answers and a sweep the rest,
    /// and in Restate mode the server in front runs the sender over the store the workflows write.
    pub fn supports_push(&self) -> bool {
        self.inner.store.push().is_some()
    }

    /// Check a webhook config as [`Engine::set_push_config`] does — its URL, its token and its
    /// authentication — before anything is written (a send that carries one checks it before the
    /// task exists, so a bad webhook never leaves a task behind a refused request).
    pub async fn check_push_config(&self, config: &PushConfig) -> Result<(), EngineError> {
        target::check(&config.url, self.inner.config.push.allow_private).await?;
        if let Some(token) = &config.token {
            header_safe("token", token)?;
        }
        if let Some(auth) = &config.authentication {
            let scheme = auth
                .schemes
                .first()
                .filter(|s| !s.trim().is_empty())
                .ok_or_else(|| {
                    EngineError::InvalidInput(
                        "push notification `authentication` names no scheme".to_owned(),
                    )
                })?;
            header_safe("authentication scheme", scheme)?;
            if let Some(credentials) = &auth.credentials {
                header_safe("authentication credentials", credentials)?;
            }
        }
        Ok(())
    }

    /// Create or replace the webhook `config.id` of a task the caller may see (an empty id is
    /// given a new one), and return it. Its URL is checked (see [`TargetError`]). The updates after
    /// `after_seq` are delivered — after the task's last record when `None`, so a webhook set on
    /// a running task gets what happens next; a config sent with the message that creates a task
    /// passes `Some(0)` and gets every update. Setting an existing config again keeps its cursor.
    pub async fn set_push_config(
        &self,
        caller: &Caller,
        task_id: &TaskId,
        mut config: PushConfig,
        after_seq: Option<u64>,
    ) -> Result<PushConfig, EngineError> {
        let push = self.inner.push_store()?;
        let record = self.visible(caller, task_id).await?;
        self.check_push_config(&config).await?;
        if config.id.is_empty() {
            config.id = crate::model::new_id();
        }
        if push.push_config(task_id, &config.id).await?.is_none() {
            let existing = push
                .push_configs(task_id, None, MAX_CONFIGS_PER_TASK)
                .await?;
            if existing.len() >= MAX_CONFIGS_PER_TASK {
                return Err(EngineError::InvalidInput(format!(
                    "task {task_id} has {MAX_CONFIGS_PER_TASK} push notification configs already, the most it may have; delete one first"
                )));
            }
        }
        let after = after_seq.unwrap_or(record.last_seq).min(record.last_seq);
        push.put_push_config(task_id, &config, after).await?;
        if self.inner.passes.is_some() {
            // Serverless: nothing runs after this request; what the task holds for the webhook
            // (all of it for a config sent with the message that made the task) goes now.
            let deadline = super::pass::pass_deadline(self.serverless_budget());
            self.inner
                .pusher
                .deliver_until(Some(task_id.as_str()), deadline)
                .await;
            return Ok(config);
        }
        self.start_push();
        self.inner.pusher.watch.watch(task_id);
        self.inner.pusher.watch.wake.notify_one();
        Ok(config)
    }

    /// The webhook `config_id` of a task the caller may see.
    pub async fn push_config(
        &self,
        caller: &Caller,
        task_id: &TaskId,
        config_id: &str,
    ) -> Result<PushConfig, EngineError> {
        let push = self.inner.push_store()?;
        self.visible(caller, task_id).await?;
        push.push_config(task_id, config_id)
            .await?
            .ok_or_else(|| EngineError::PushConfigNotFound {
                task_id: task_id.to_string(),
                config_id: config_id.to_owned(),
            })
    }

    /// The webhooks of a task the caller may see, in id order after `after`, at most `limit`.
    pub async fn push_configs(
        &self,
        caller: &Caller,
        task_id: &TaskId,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PushConfig>, EngineError> {
        let push = self.inner.push_store()?;
        self.visible(caller, task_id).await?;
        Ok(push.push_configs(task_id, after, limit).await?)
    }

    /// Delete the webhook `config_id` of a task the caller may see; deleting one that does not
    /// exist (or no longer does) succeeds. Nothing is posted to it afterwards, save a request
    /// already on its way.
    pub async fn delete_push_config(
        &self,
        caller: &Caller,
        task_id: &TaskId,
        config_id: &str,
    ) -> Result<(), EngineError> {
        let push = self.inner.push_store()?;
        self.visible(caller, task_id).await?;
        push.delete_push_config(task_id, config_id).await?;
        Ok(())
    }

    /// Start the push sender, once (recovery, a Restate front's start and a new config start
    /// it): it delivers what is pending, including deliveries cut off by a crash. Never in
    /// serverless mode, whose passes deliver before they return.
    pub(crate) fn start_push(&self) {
        if !self.supports_push()
            || self.inner.passes.is_some()
            || self.inner.pusher.started.swap(true, Ordering::SeqCst)
        {
            return;
        }
        deliver::spawn(&self.inner.pusher);
    }
}

#[cfg(test)]
mod watch_tests {
    use super::Watch;
    use crate::journal::Entry;
    use crate::model::TaskState;

    #[test]
    fn a_watched_task_is_forgotten_when_its_end_commits_and_not_before() {
        let watch = Watch::default();
        let running = [Entry::StatusChanged {
            state: TaskState::Working,
        }];
        let ended = [Entry::Terminal {
            state: TaskState::Completed,
            message: None,
        }];
        watch.watch("t");
        watch.committed("t", &running);
        assert!(watch.lock().contains("t"), "a running task stays watched");
        watch.committed("other", &ended);
        assert!(watch.lock().contains("t"));
        watch.committed("t", &ended);
        assert!(watch.lock().is_empty(), "an ended task leaves the set");
    }
}
