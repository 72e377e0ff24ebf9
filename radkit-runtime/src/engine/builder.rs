//! Building an [`Engine`]: its settings and the skills it serves. By default an engine serves every
//! skill registered with `#[flow_skill]` (see [`crate::registry`]) plus the ones added with
//! [`EngineBuilder::skill`]; [`EngineBuilder::only_skills`] and
//! [`EngineBuilder::without_registered_skills`] choose a subset. Two served skills with one id are
//! an error naming both origins; an id that is empty or contains whitespace is an error naming the
//! skill. This module never touches the store.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::cluster;
use super::fault::FaultHook;
use super::{Engine, EngineError, Hook, Inner};
use crate::effects::Effects;
use crate::flow::{erase, ErasedSkill, FlowSkill, PermissionMode};
use crate::registry::{DuplicateSkill, SkillOrigin};
use crate::store::Store;

/// Engine settings.
#[derive(Clone)]
pub struct EngineConfig {
    /// Step visits a task may make before it is failed as a runaway loop.
    pub max_steps: u64,
    /// Crash injection: set by `EngineBuilder::fault_hook` (the `testing` feature) only.
    pub(crate) fault: Option<FaultHook>,
    /// Hooks, called in order.
    pub hooks: Vec<Arc<dyn Hook>>,
    /// The permission mode of a task whose `Request` names no mode (the server sets one from `permissionMode` metadata).
    pub permission_mode: PermissionMode,
    /// This engine's name in leases (shared stores only).
    pub worker_id: String,
    /// How long a lease lasts without renewal; a dead worker's tasks are taken over after it.
    pub lease_ttl: Duration,
    /// How often a worker claims runnable tasks and polls a shared store for news.
    pub poll: Duration,
    /// Tasks a worker drives at once (shared stores only); `0` makes an engine that only submits.
    pub max_active_tasks: usize,
    /// Visits between journal checkpoints (`0`: never). Reloading a task replays its journal from
    /// the last checkpoint only.
    pub checkpoint_every: u64,
    /// After every append, compare the run's live fold with the fold of the stored journal and keep
    /// what differs (set by `EngineBuilder::check_fold`, the `testing` feature).
    pub(crate) check_fold: bool,
    /// How push notifications are delivered (webhook targets, retries, timeouts).
    pub push: super::PushSettings,
    /// Effects (model and tool calls) one task performs at once: the bound on a step's parallel
    /// calls (`ctx.all`, `join!`); the others wait for a slot. At least 1.
    pub max_parallel_effects: usize,
    /// The A2A agents steps may call by name (`ctx.agent(name)`).
    pub agents: std::collections::BTreeMap<String, super::AgentSpec>,
    /// The public URL of this agent's A2A server: remote agents that push notifications post
    /// their tasks' updates to `{url}/radkit/calls/{task}/{call}`, which wakes the calling task.
    pub call_webhook: Option<String>,
    /// The secret the call webhook's tokens are made from; `None`: a random one per engine (a
    /// restart then refuses the posts for earlier calls, which their recheck finds instead).
    pub call_webhook_secret: Option<Vec<u8>>,
    /// How long a call webhook token is good for after the call starts; posts with an expired
    /// token are refused (the call is then found by its recheck).
    pub call_webhook_ttl: Duration,
    /// How long a call waits before it first asks its callee again without being woken (then
    /// twice as long each time, up to 2 min or this, whichever is longer).
    pub call_recheck: Duration,
    /// How long a call may wait for its callee when the step sets no `.timeout(..)`; at its
    /// deadline the step gets an error and the callee's task is canceled. `Duration::MAX`: no
    /// deadline.
    pub call_timeout: Duration,
    /// Serverless mode ([`EngineBuilder::serverless`]): each send, reply and cancel runs as one
    /// pass of at most this long, and nothing runs between requests.
    pub serverless: Option<Duration>,
    /// Tools whose calls a serverless pass hands to executors instead of performing them
    /// ([`EngineBuilder::dispatch`]).
    pub dispatched_tools: std::collections::BTreeSet<String>,
    /// Restate mode ([`EngineBuilder::restate`]): the ingress of the Restate server whose
    /// workflows run this engine's tasks.
    #[cfg(feature = "restate")]
    pub restate: Option<super::hosted::Ingress>,
    /// How long finished tasks are kept ([`EngineBuilder::retention`]); by default forever.
    pub retention: super::Retention,
    /// How long a reply to a waiting task is left to the driver of the step it resumes, to be
    /// committed with that step's first append ([`EngineBuilder::reply_patience`]).
    pub reply_patience: Duration,
}

/// The default of [`EngineConfig::call_timeout`]: a day. Long enough for a callee that asks a
/// human and waits overnight; short enough that a callee that never ends does not hold its caller
/// (and its own resources) forever.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// The default of [`EngineConfig::call_webhook_ttl`]: a day.
pub const DEFAULT_CALL_WEBHOOK_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The default of [`EngineConfig::max_parallel_effects`].
pub const DEFAULT_MAX_PARALLEL_EFFECTS: usize = 16;

/// The default of [`EngineConfig::reply_patience`]: 20 ms. A step's code between two effects runs
/// in microseconds; one that awaits something that is not an effect (or a slow hook) holds a
/// reply's acknowledgement back by this much at most.
pub const DEFAULT_REPLY_PATIENCE: Duration = Duration::from_millis(20);

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_steps: 10_000,
            fault: None,
            hooks: Vec::new(),
            permission_mode: PermissionMode::Default,
            worker_id: cluster::default_worker_id(),
            lease_ttl: Duration::from_secs(10),
            poll: Duration::from_millis(100),
            max_active_tasks: 256,
            checkpoint_every: 64,
            check_fold: false,
            push: super::PushSettings::default(),
            max_parallel_effects: DEFAULT_MAX_PARALLEL_EFFECTS,
            agents: Default::default(),
            call_webhook: None,
            call_webhook_secret: None,
            call_webhook_ttl: DEFAULT_CALL_WEBHOOK_TTL,
            call_recheck: Duration::from_secs(5),
            call_timeout: DEFAULT_CALL_TIMEOUT,
            serverless: None,
            dispatched_tools: Default::default(),
            #[cfg(feature = "restate")]
            restate: None,
            retention: super::Retention::FOREVER,
            reply_patience: DEFAULT_REPLY_PATIENCE,
        }
    }
}

/// What [`EngineBuilder::into_parts`] gives another host.
pub(crate) struct BuilderParts {
    pub store: Arc<dyn Store>,
    /// Each skill's newest version.
    pub skills: Vec<Arc<dyn ErasedSkill>>,
    /// The older versions served beside them.
    pub older: Vec<Arc<dyn ErasedSkill>>,
    pub effects: Effects,
    pub config: EngineConfig,
    pub default_skill: Option<String>,
}

/// Builds an [`Engine`].
pub struct EngineBuilder {
    store: Arc<dyn Store>,
    /// Skills added with [`EngineBuilder::skill`], in order.
    added: Vec<Arc<dyn ErasedSkill>>,
    /// Serve the skills registered with `#[flow_skill]` too.
    registered: bool,
    /// Refuse to start while unfinished tasks need a skill version this engine does not serve.
    refuse_stranded: bool,
    /// Serve only these ids (of the registered and the added skills).
    only: Option<Vec<String>>,
    effects: Effects,
    config: EngineConfig,
    default_skill: Option<String>,
    /// MCP servers connected by [`EngineBuilder::start`], their tools offered to the steps.
    #[cfg(feature = "mcp")]
    mcp: Vec<crate::tools::mcp::McpServer>,
    /// Count steps, commands, retries, receipt commits and leases for `/metrics`.
    record_metrics: bool,
}

impl EngineBuilder {
    pub(super) fn new(store: Arc<dyn Store>) -> Self {
        EngineBuilder {
            store,
            added: Vec::new(),
            registered: true,
            refuse_stranded: false,
            only: None,
            effects: Effects::new(),
            config: EngineConfig::default(),
            record_metrics: true,
            default_skill: None,
            #[cfg(feature = "mcp")]
            mcp: Vec::new(),
        }
    }

    /// Connect to `server` when the engine starts ([`EngineBuilder::start`]) and offer its tools
    /// to the steps (`ctx.tool("<server>.<tool>")`, and models' tool calling). A server that cannot
    /// be reached makes `start` fail with [`EngineError::Config`] naming it; `build` refuses an
    /// engine with MCP servers (connecting needs `start`'s await).
    #[cfg(feature = "mcp")]
    #[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
    pub fn mcp_server(mut self, server: crate::tools::mcp::McpServer) -> Self {
        self.mcp.push(server);
        self
    }

    /// What a host other than the long-running engine needs of this builder: the store, the skills
    /// (as [`skills`](Self::skills) computes them), the effects, the limits and the default skill.
    pub(crate) fn into_parts(self) -> Result<BuilderParts, EngineError> {
        let all = self.skills()?;
        let older = super::versions::Versions::new(&all).older();
        let skills = super::versions::newest_only(all);
        Ok(BuilderParts {
            older,
            store: self.store,
            skills,
            effects: self.effects,
            config: self.config,
            default_skill: self.default_skill,
        })
    }

    /// The skill a new task runs when the message names none and several skills are served.
    pub fn default_skill(mut self, id: impl Into<String>) -> Self {
        self.default_skill = Some(id.into());
        self
    }

    /// Serve `skill` too (a step table, a reducer, a macro skill declared `register = false`, or one
    /// that needs constructor arguments). Its id must differ from every other served skill's.
    pub fn skill(self, skill: impl FlowSkill) -> Self {
        self.erased_skill(erase(skill))
    }

    /// Serve an already erased skill (what the registry hands out).
    pub fn erased_skill(mut self, skill: Arc<dyn ErasedSkill>) -> Self {
        self.added.push(skill);
        self
    }

    /// Serve only the skills with these ids, taken from the registered skills and those added with
    /// [`EngineBuilder::skill`]. An id that is neither is an error when the engine is built.
    pub fn only_skills<I>(mut self, ids: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.only = Some(ids.into_iter().map(Into::into).collect());
        self
    }

    /// Make [`start`](Self::start) refuse ([`EngineError::Stranded`], listing them) while unfinished
    /// tasks run on a skill version this engine does not serve and cannot move to the one it
    /// serves ([`Engine::stranded`]): a deploy that dropped a version some tasks still need stops
    /// before it serves anything. `radkit serve` and `radkit worker` ask for it unless told
    /// `--allow-stranded`. It reads every unfinished task's row (and the journal of each whose
    /// version is not served) before the engine starts.
    pub fn refuse_stranded(mut self) -> Self {
        self.refuse_stranded = true;
        self
    }

    /// Do not serve the skills registered with `#[flow_skill]`; only those added with
    /// [`EngineBuilder::skill`].
    pub fn without_registered_skills(mut self) -> Self {
        self.registered = false;
        self
    }

    /// The skills this builder would serve, in order (registered ones by id, then the added ones in
    /// the order they were added), or the error [`EngineBuilder::build`] would return for them.
    pub fn skills(&self) -> Result<Vec<Arc<dyn ErasedSkill>>, EngineError> {
        let mut candidates: Vec<(Arc<dyn ErasedSkill>, SkillOrigin)> = Vec::new();
        if self.registered {
            for registration in crate::registry::skills() {
                let wanted = self
                    .only
                    .as_ref()
                    .is_none_or(|only| only.iter().any(|id| id == registration.id));
                if wanted {
                    candidates.push((registration.build(), SkillOrigin::registered(registration)));
                }
            }
        }
        for skill in &self.added {
            let wanted = self
                .only
                .as_ref()
                .is_none_or(|only| only.contains(&skill.info().id));
            if wanted {
                candidates.push((skill.clone(), SkillOrigin::Added));
            }
        }
        // Each id once, or as versions side by side: each numbered, no number twice.
        let mut seen: HashMap<String, Vec<(Option<u64>, SkillOrigin)>> = HashMap::new();
        for (skill, origin) in &candidates {
            let info = skill.info();
            crate::registry::check_id(&info.id, &info.name, origin)?;
            let versions = seen.entry(info.id.clone()).or_default();
            let number = info.version_number();
            let clash = versions
                .iter()
                .find(|(other, _)| number.is_none() || other.is_none() || *other == number);
            if let Some((_, first)) = clash {
                return Err(EngineError::DuplicateSkill(DuplicateSkill {
                    id: info.id.clone(),
                    first: first.to_string(),
                    second: origin.to_string(),
                }));
            }
            versions.push((number, origin.clone()));
        }
        if let Some(only) = &self.only {
            if let Some(missing) = only.iter().find(|id| !seen.contains_key(*id)) {
                let mut available: Vec<String> = Vec::new();
                if self.registered {
                    available.extend(crate::registry::skills().iter().map(|r| r.id.to_owned()));
                }
                available.extend(self.added.iter().map(|s| s.info().id.clone()));
                return Err(EngineError::Config(format!(
                    "only_skills names `{missing}`, which is not available; available skills are {}",
                    list_or_none(&available)
                )));
            }
        }
        Ok(candidates.into_iter().map(|(skill, _)| skill).collect())
    }

    /// Perform commands with these models and tools.
    pub fn effects(mut self, effects: Effects) -> Self {
        self.effects = effects;
        self
    }

    /// The names of the models registered so far (`Effects::model_names`).
    pub fn model_names(&self) -> Vec<String> {
        self.effects.model_names().map(str::to_owned).collect()
    }

    /// Change the effects set so far (e.g. swap the models, keep the tools).
    pub fn map_effects(mut self, f: impl FnOnce(Effects) -> Effects) -> Self {
        self.effects = f(self.effects);
        self
    }

    /// Whether the engine counts steps, commands, retries, receipt commits and lease changes for
    /// `/metrics` (default: yes; the counters exist with the `metrics` feature only). The task and
    /// store gauges are read at scrape time either way.
    pub fn record_metrics(mut self, record: bool) -> Self {
        self.record_metrics = record;
        self
    }

    /// Limit step visits per task.
    pub fn max_steps(mut self, max_steps: u64) -> Self {
        self.config.max_steps = max_steps;
        self
    }

    /// Add a hook (observe, modify or deny steps and commands).
    pub fn hook(mut self, hook: impl Hook) -> Self {
        self.config.hooks.push(Arc::new(hook));
        self
    }

    /// The permission mode of tasks that do not choose one (default: `Default`).
    pub fn permission_mode(mut self, mode: PermissionMode) -> Self {
        self.config.permission_mode = mode;
        self
    }

    /// This engine's name in leases (default: host, pid and a random suffix).
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.config.worker_id = id.into();
        self
    }

    /// How long a lease lasts without renewal (default 10 s). Leases are renewed every third of it.
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.config.lease_ttl = ttl;
        self
    }

    /// How often a worker claims runnable tasks and polls for news (default 100 ms).
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.config.poll = every;
        self
    }

    /// Tasks driven at once on a shared store (default 256); `0` only submits, for other workers.
    pub fn max_active_tasks(mut self, n: usize) -> Self {
        self.config.max_active_tasks = n;
        self
    }

    /// Journal a checkpoint every `visits` step visits (default 64; `0` never): reloading a task
    /// replays only what follows its last checkpoint.
    pub fn checkpoint_every(mut self, visits: u64) -> Self {
        self.config.checkpoint_every = visits;
        self
    }

    /// Effects one task performs at once (default 16; `0` counts as 1). A step's parallel calls
    /// (`ctx.all`, `join!` over `ctx` calls) are all journaled at once, in one append, whatever the
    /// bound; past it, the effects wait for a slot, in no promised order. Each attempt holds a slot;
    /// a call waiting out its retry backoff does not.
    pub fn max_parallel_effects(mut self, n: usize) -> Self {
        self.config.max_parallel_effects = n;
        self
    }

    /// How long a reply to a task waiting for input is left to the step it resumes (default
    /// [`DEFAULT_REPLY_PATIENCE`]). The reply is acknowledged once durable either way; within this
    /// time it is committed with the resumed step's first append (its first command, its next
    /// question or its end), one commit per answer instead of two; past it, on its own.
    /// `Duration::ZERO` does not wait: the answer commits the reply itself at once.
    pub fn reply_patience(mut self, patience: Duration) -> Self {
        self.config.reply_patience = patience;
        self
    }

    /// Crash at the boundaries where `hook` says so (tests; the `testing` feature).
    #[cfg(feature = "testing")]
    pub fn fault_hook(
        mut self,
        hook: impl Fn(&super::Fault) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.config.fault = Some(Arc::new(hook));
        self
    }

    /// After every append, fold the task's stored journal (from its last checkpoint, as a restart
    /// would) and compare it with the state the run holds; a difference is kept for
    /// `Engine::fold_divergences` and halts the engine. For tests (the `testing` feature): it reads
    /// the journal back after every write.
    #[cfg(feature = "testing")]
    pub fn check_fold(mut self, check: bool) -> Self {
        self.config.check_fold = check;
        self
    }

    /// Allow push-notification webhooks on private, loopback and link-local addresses (refused by
    /// default, spec 1.0 §13.2). For tests and trusted networks.
    pub fn push_allow_private(mut self, allow: bool) -> Self {
        self.config.push.allow_private = allow;
        self
    }

    /// Push-notification delivery settings (retries, timeouts, polling; see [`super::PushSettings`]).
    pub fn push_settings(mut self, settings: super::PushSettings) -> Self {
        self.config.push = settings;
        self
    }

    /// Declare an A2A agent that steps call as `ctx.agent(name)`: its card (A2A 1.0 or 0.3, the
    /// card says which) and credentials. Declaring a name twice keeps the last.
    pub fn agent(mut self, name: impl Into<String>, spec: super::AgentSpec) -> Self {
        self.config.agents.insert(name.into(), spec);
        self
    }

    /// The public URL of this agent's A2A server (what `radkit serve` gets from its `--url`):
    /// remote agents whose cards say they push notifications are asked to post their tasks'
    /// updates to `{url}/radkit/calls/{task}/{call}` (served by `server::router`) with a token good
    /// for that call only, which wakes the waiting caller with nothing following the callee
    /// meanwhile.
    pub fn call_webhook(mut self, url: impl Into<String>) -> Self {
        self.config.call_webhook = Some(url.into());
        self
    }

    /// The secret the call webhook's tokens are made from (keep it across restarts so that the
    /// callees' posts for calls made before a restart still wake their callers).
    pub fn call_webhook_secret(mut self, secret: impl Into<Vec<u8>>) -> Self {
        self.config.call_webhook_secret = Some(secret.into());
        self
    }

    /// How long the call webhook's tokens are good for after a call starts (default a day). A
    /// callee that posts after that is refused, and its caller finds the answer at a recheck (at
    /// most 2 min late); a shorter life leaves a leaked token less time.
    pub fn call_webhook_ttl(mut self, ttl: Duration) -> Self {
        self.config.call_webhook_ttl = ttl;
        self
    }

    /// How long a waiting call goes before it asks its callee again unprompted (default 5 s,
    /// doubling to 2 min).
    pub fn call_recheck(mut self, first: Duration) -> Self {
        self.config.call_recheck = first.max(Duration::from_millis(100));
        self
    }

    /// How long a call (`ctx.agent(..)`, `ctx.skill(..)`) may wait for its callee when the step
    /// sets no `.timeout(..)` (default a day, [`DEFAULT_CALL_TIMEOUT`]; `Duration::MAX`: no
    /// deadline). The deadline is fixed when a call is issued: changing this affects later calls,
    /// not those already journaled.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.config.call_timeout = timeout;
        self
    }

    /// Serverless mode, for a process that lives for one request (a function platform's
    /// invocation): a send, a reply or a cancel runs the task as one pass ([`Passes`](super::Passes))
    /// of at most `budget` (or until the invocation's deadline, when its host sets one with
    /// [`with_deadline`](super::with_deadline)) and returns; a blocking send answers with the task as
    /// the pass left it; a stream ends once it has sent what is in the journal (a client resumes it
    /// with `Last-Event-ID` in a later invocation); nothing runs between requests: `start` recovers
    /// nothing, and due timers and unfinished tasks wait for [`Passes::sweep`](super::Passes::sweep).
    /// Push notifications: a request delivers what its task committed for the task's webhooks
    /// before it answers (within its deadline), and a sweep what is left (retries, deliveries cut
    /// off). Hooks run in each pass (`Output::Hook` of the task machine).
    pub fn serverless(mut self, budget: Duration) -> Self {
        self.config.serverless = Some(budget);
        self
    }

    /// Restate mode, for the A2A server in front of skills hosted by Restate
    /// ([`RestateHost`](crate::restate::RestateHost)) over the same store: a send starts the task's
    /// workflow through Restate's ingress at `ingress` and answers once the task is in the store,
    /// a reply and a cancel resolve the workflow's promises, and every read (tasks, history,
    /// streams, blocking sends) follows the store, which the workflows write. No task runs here:
    /// `start` recovers nothing, and starts the push sender, which delivers the webhooks of the
    /// tasks the workflows write. Hooks run in the workflows (`RestateHost`), not here.
    #[cfg(feature = "restate")]
    #[cfg_attr(docsrs, doc(cfg(feature = "restate")))]
    pub fn restate(mut self, ingress: impl Into<String>) -> Self {
        self.config.restate = Some(super::hosted::Ingress::new(ingress));
        self
    }

    /// Hand the calls of these tools to executors (`radkit executor`, or a Lambda function running
    /// [`Executor`](super::Executor)) instead of performing them in a serverless pass: the command
    /// is journaled and recorded in the store's dispatch list, the task rests, an executor performs
    /// it under its InvocationId and journals its receipt, and the next pass goes on. For effects
    /// longer than an invocation, or that need what a function does not have. Needs a store with a
    /// dispatch list (Postgres, or the memory store in one process); the long-running engine performs
    /// these tools itself.
    pub fn dispatch<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.config
            .dispatched_tools
            .extend(tools.into_iter().map(Into::into));
        self
    }

    /// Build the engine without recovering tasks. On a shared store (Postgres) it then neither
    /// claims tasks nor renews the leases it holds: a send beyond the tasks it has room for
    /// (`EngineBuilder::max_active_tasks`) creates the task unleased, for a worker's claims. An
    /// engine that takes part in the work is started ([`start`](Self::start), or
    /// [`Engine::recover`] after `build`).
    pub fn build(mut self) -> Result<Engine, EngineError> {
        #[cfg(feature = "mcp")]
        if !self.mcp.is_empty() {
            return Err(EngineError::Config(
                "MCP servers are connected when the engine starts: use `start().await`, not `build()`"
                    .to_owned(),
            ));
        }
        if self.config.lease_ttl < Duration::from_millis(100) {
            return Err(EngineError::Config(format!(
                "lease ttl {:?} is too short; use at least 100 ms",
                self.config.lease_ttl
            )));
        }
        // Claims run on the poll tick: a tick slower than the lease would leave expired work idle.
        self.config.poll = self
            .config
            .poll
            .clamp(Duration::from_millis(1), self.config.lease_ttl / 4);
        let skills = self.skills()?;
        if self.config.serverless.is_some() {
            check_dispatch(&self.config, self.store.as_ref())?;
        }
        if skills.is_empty() {
            return Err(EngineError::Config(
                "no skill to serve: register one with #[flow_skill], or add one with EngineBuilder::skill"
                    .to_owned(),
            ));
        }
        let versions = super::versions::Versions::new(&skills);
        let skills = super::versions::newest_only(skills);
        let order: Vec<String> = skills.iter().map(|s| s.info().id.clone()).collect();
        if let Some(id) = self.default_skill.as_ref().filter(|id| !order.contains(id)) {
            return Err(EngineError::Config(format!(
                "default skill `{id}` is not served; skills are {}",
                order.join(", ")
            )));
        }
        let skills: HashMap<String, Arc<dyn ErasedSkill>> = skills
            .into_iter()
            .map(|s| (s.info().id.clone(), s))
            .collect();
        let webhook = match &self.config.call_webhook {
            Some(url) => Some(
                super::call::webhook::CallWebhook::new(
                    url,
                    self.config.call_webhook_secret.as_deref(),
                    self.config.call_webhook_ttl,
                )
                .map_err(|_| {
                    EngineError::Config("no randomness for the call webhook's key".to_owned())
                })?,
            ),
            None => None,
        };
        let agents = super::call::Agents::new(self.config.agents.clone(), webhook);
        let halted = Arc::new(AtomicBool::new(false));
        let passes = self.config.serverless.map(|_| {
            super::Passes::new(
                self.store.clone(),
                order.iter().map(|id| skills[id].clone()).collect(),
                versions.older(),
                &self.effects,
                &self.config,
                self.default_skill.clone(),
                halted.clone(),
            )
        });
        // A serverless engine's requests deliver through its passes' sender.
        let pusher = match &passes {
            Some(passes) => passes.pusher().clone(),
            None => Arc::new(super::push::Pusher::new(
                self.store.clone(),
                self.config.push.clone(),
                self.config.worker_id.clone(),
                self.store.leases().is_none(),
                halted.clone(),
            )),
        };
        let inner = Inner {
            store: self.store,
            skills,
            versions,
            order,
            default_skill: self.default_skill,
            effects: Arc::new(self.effects),
            config: self.config,
            halted,
            live: Default::default(),
            changes: Default::default(),
            leases: Default::default(),
            reloads: Default::default(),
            stalled: Default::default(),
            divergences: Arc::default(),
            pusher,
            agents,
            watchers: Default::default(),
            posts: Default::default(),
            alarms: Default::default(),
            metrics: match self.record_metrics {
                true => crate::telemetry::Metrics::recording(),
                false => crate::telemetry::Metrics::default(),
            },
            passes,
            pruner_started: AtomicBool::new(false),
        };
        Ok(Engine {
            inner: Arc::new(inner),
        })
    }

    /// How long finished tasks are kept ([`Retention`](super::Retention)): their journals
    /// compacted after `retention.journal`, the tasks deleted after `retention.task`, both counted
    /// from when each finished. The engine prunes from its start (`start`, `Engine::recover`) on,
    /// a pass every [`Retention::period`](super::Retention::period); its store must support it
    /// (`Store::prune`: the memory, SQLite and Postgres stores do), or the start fails.
    pub fn retention(mut self, retention: super::Retention) -> Self {
        self.config.retention = retention;
        self
    }

    /// Build the engine and recover every non-terminal task.
    pub async fn start(#[allow(unused_mut)] mut self) -> Result<Engine, EngineError> {
        #[cfg(feature = "mcp")]
        for server in std::mem::take(&mut self.mcp) {
            let tools = server
                .connect()
                .await
                .map_err(|e| EngineError::Config(format!("MCP server: {e}")))?;
            self.effects = std::mem::take(&mut self.effects).tools_from(tools);
        }
        let refuse_stranded = self.refuse_stranded;
        let engine = self.build()?;
        if refuse_stranded {
            let stranded = engine.stranded().await?;
            if !stranded.is_empty() {
                return Err(EngineError::Stranded(stranded));
            }
        }
        // In serverless mode nothing is recovered: the sweep's pass finds what has work. In
        // Restate mode Restate drives every task, and this engine, in front, delivers their
        // webhooks.
        if !engine.inner.hosted_elsewhere() {
            engine.recover().await?;
        } else {
            engine.start_push();
        }
        Ok(engine)
    }
}

/// Dispatched tools need a store executors can share.
pub(crate) fn check_dispatch(config: &EngineConfig, store: &dyn Store) -> Result<(), EngineError> {
    if !config.dispatched_tools.is_empty() && store.dispatch().is_none() {
        let tools: Vec<&str> = config.dispatched_tools.iter().map(String::as_str).collect();
        return Err(EngineError::Config(format!(
            "tools {} are dispatched to executors, but this store keeps no dispatch list; use Postgres",
            tools.join(", ")
        )));
    }
    Ok(())
}

fn list_or_none(ids: &[String]) -> String {
    if ids.is_empty() {
        "none".to_owned()
    } else {
        ids.join(", ")
    }
}
