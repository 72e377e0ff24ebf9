//! One pass per invocation: the task machine hosted by a function that lives for one event.
//!
//! A [`Passes`] holds no task between invocations. For each event (a user's message, a wake for
//! a due timer or work an earlier pass left, a cancel) it
//!
//! 1. takes the task's lease on a shared store (Postgres), so two invocations never drive one
//!    task at once and a stale one is fenced off (an append with an old token is refused);
//! 2. loads the task's journal (`Store::journal_for_replay`) and resumes a
//!    [`TaskMachine`](crate::machine::TaskMachine) from it at the invocation's time;
//! 3. applies the event (a reply, a cancel) and runs the machine: each append it yields goes to
//!    the store, each effect it asks for runs in this process if it can start before the deadline;
//! 4. when the task rests (input, a timer) or ends, or the deadline comes, persists what is
//!    buffered, gives the lease back and returns.
//!
//! What is left is in the journal: a timer is the row's wake time (a scheduled [`Passes::sweep`]
//! finds it due), an effect cut off by the deadline is a command without a receipt (the next pass
//! reissues it with the same InvocationId, or fails the task with its outcome unknown if its
//! policy forbids reissue, exactly as after a crash), and a task left runnable is claimed by the
//! next sweep. Tools declared dispatched (`EngineBuilder::dispatch`) are handed to executors
//! ([`Executor`](super::Executor)) instead of run here. A call to another agent (`ctx.agent`) or
//! to a child skill (`ctx.skill`) is stepped once per pass (`engine/call/pass.rs`): started and
//! journaled with its callee's task, then asked again by that id at each recheck until its callee
//! settles or its deadline passes. A child's task is created by a pass of its own, run from inside
//! its parent's, and run on by sweeps like any task.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;

use super::machine::{
    Action, Effect, MachineConfig, MachineError, MachineSkill, NewTask, Output, TaskMachine,
};
use super::{Caller, EngineBuilder, EngineError};
use crate::effects::Performed;
use crate::flow::{EffectError, PermissionMode};
use crate::journal::{now_ms, Entry};
use crate::model::{Message, TaskState};
use crate::store::{NewLease, Store, StoreError, TaskQuery, TaskRecord, CREATION_TOKEN};

/// What reaches a pass.
#[derive(Debug, Clone)]
pub enum Event {
    /// A user's message: without a task id it starts a task (of `skill`, else the default or the
    /// only one); with one it answers the task waiting for input.
    Message {
        /// Who sent it (a principal sees and answers only its own tasks).
        caller: Caller,
        /// The message.
        message: Message,
        /// The skill a new task runs.
        skill: Option<String>,
        /// A new task's permission mode.
        mode: Option<PermissionMode>,
    },
    /// Run whatever the task has to do now: a due timer, work an earlier pass left.
    Wake {
        /// The task.
        task_id: String,
    },
    /// Cancel the task.
    Cancel {
        /// Who asks.
        caller: Caller,
        /// The task.
        task_id: String,
    },
}

/// How a pass left its task.
#[derive(Debug, Clone, PartialEq)]
pub enum Rest {
    /// It ended.
    Ended(TaskState),
    /// It waits for a reply (`input`) and/or until `wake_at_ms`.
    Waiting {
        /// A reply is awaited.
        input: bool,
        /// Its earliest timer.
        wake_at_ms: Option<i64>,
    },
    /// The deadline came first: the task is runnable, and the next sweep (or event) goes on.
    Unfinished,
    /// Another invocation holds the task's lease.
    Busy,
}

/// What one pass did.
#[derive(Debug, Clone, PartialEq)]
pub struct Passed {
    /// The task.
    pub task_id: String,
    /// How the pass left it.
    pub rest: Rest,
    /// Appends it made.
    pub appends: u32,
    /// Effects it performed (attempts, compensations included).
    pub effects: u32,
}

/// Why a pass refused or stopped.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// The request is wrong (no parts, a reused `messageId`, no such skill ...): nothing was written.
    #[error(transparent)]
    Invalid(#[from] EngineError),
    /// No task with this id is visible to the caller.
    #[error("task `{0}` not found")]
    NotFound(String),
    /// The machine refused the event (the task ended, or does not wait for input).
    #[error(transparent)]
    Machine(#[from] MachineError),
    /// The store failed; what was appended before stays, and the next pass resumes from it.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The host of one pass per invocation. Cheap to clone.
#[derive(Clone)]
pub struct Passes {
    store: Arc<dyn Store>,
    /// Each skill's newest version: new tasks, and tasks of versions not served (which move to it
    /// when they can).
    skills: Arc<HashMap<String, MachineSkill>>,
    /// The older versions served beside them, by skill and version: a task of one runs on it.
    older: Arc<HashMap<(String, String), MachineSkill>>,
    default_skill: Option<String>,
    owner: String,
    lease_margin: Duration,
    /// Tools whose calls go to executors (`EngineBuilder::dispatch`).
    dispatched_tools: Arc<std::collections::BTreeSet<String>>,
    /// The agents steps may call (`ctx.agent`), each connected on first use.
    agents: Arc<super::call::Agents>,
    /// A call's first recheck (`EngineBuilder::call_recheck`).
    call_recheck: Duration,
    /// The hooks each step visit and each new command is put to (`EngineBuilder::hook`).
    hooks: Arc<[Arc<dyn super::Hook>]>,
    /// The webhooks' sender: a pass delivers what its task committed, a sweep what is due.
    pusher: Arc<super::push::Pusher>,
    /// How long finished tasks are kept: a sweep prunes what is due (`EngineBuilder::retention`).
    retention: super::Retention,
}

/// What an effect a pass ran came back with.
enum Done {
    /// A model, tool or compensation, performed.
    Performed(Effect, Result<Performed, EffectError>),
    /// One step of a call (to an agent or a child skill).
    Call(Effect, super::call::pass::PassCall),
}

/// `skills` as the task machine runs them, by id, with `effects` and the limits of `config`.
pub(crate) fn machine_skills(
    skills: Vec<Arc<dyn crate::flow::ErasedSkill>>,
    effects: &crate::effects::Effects,
    config: &super::EngineConfig,
) -> HashMap<String, MachineSkill> {
    skills
        .into_iter()
        .map(|skill| {
            (
                skill.info().id.clone(),
                machine_skill(skill, effects, config),
            )
        })
        .collect()
}

/// `skill` hosted by task machines, with `effects` and the limits of `config`.
fn machine_skill(
    skill: Arc<dyn crate::flow::ErasedSkill>,
    effects: &crate::effects::Effects,
    config: &super::EngineConfig,
) -> MachineSkill {
    let limits = MachineConfig {
        max_steps: config.max_steps,
        checkpoint_every: config.checkpoint_every,
        call_timeout: config.call_timeout,
        hooks: !config.hooks.is_empty(),
    };
    MachineSkill::with(skill, effects.clone(), limits)
}

/// When a task resting on a dispatched command is woken to look again if no executor recorded its
/// receipt by then (the receipt wakes it at once). A command of policy `AtMostOnce` still without a
/// receipt then fails its task with its outcome unknown, as after a crash.
pub const DISPATCH_RECHECK: Duration = Duration::from_secs(24 * 60 * 60);

/// How much longer than its deadline a pass's lease lasts by default (see [`Passes::lease_margin`]).
pub const DEFAULT_LEASE_MARGIN: Duration = Duration::from_secs(30);

impl Passes {
    /// The skills, effects, limits, default skill and store of `builder`, hosted one pass per
    /// invocation.
    pub fn from_builder(builder: EngineBuilder) -> Result<Self, EngineError> {
        let parts = builder.into_parts()?;
        super::builder::check_dispatch(&parts.config, parts.store.as_ref())?;
        Ok(Self::new(
            parts.store,
            parts.skills,
            parts.older,
            &parts.effects,
            &parts.config,
            parts.default_skill,
            Arc::default(),
        ))
    }

    /// Passes over `store` for `skills`, with `effects` and the limits of `config`.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        skills: Vec<Arc<dyn crate::flow::ErasedSkill>>,
        older: Vec<Arc<dyn crate::flow::ErasedSkill>>,
        effects: &crate::effects::Effects,
        config: &super::EngineConfig,
        default_skill: Option<String>,
        halted: Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        let older = older
            .into_iter()
            .map(|s| {
                let key = (s.info().id.clone(), s.info().version.clone());
                (key, machine_skill(s, effects, config))
            })
            .collect();
        let skills = machine_skills(skills, effects, config);
        let owner = format!("pass-{}", crate::model::new_id());
        let pusher = super::push::Pusher::new(
            store.clone(),
            config.push.clone(),
            owner.clone(),
            false,
            halted,
        );
        Passes {
            store,
            skills: Arc::new(skills),
            older: Arc::new(older),
            default_skill,
            owner,
            lease_margin: DEFAULT_LEASE_MARGIN,
            dispatched_tools: Arc::new(config.dispatched_tools.clone()),
            agents: Arc::new(super::call::Agents::new(config.agents.clone(), None)),
            call_recheck: config.call_recheck,
            hooks: config.hooks.iter().cloned().collect(),
            pusher: Arc::new(pusher),
            retention: config.retention,
        }
    }

    /// How much longer than its deadline a pass holds its task's lease on a shared store (default
    /// [`DEFAULT_LEASE_MARGIN`]): the time an effect started just before the deadline has to
    /// return. An invocation killed mid-pass leaves its task to the next one this long after its
    /// deadline.
    pub fn lease_margin(mut self, margin: Duration) -> Self {
        self.lease_margin = margin;
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The webhooks' sender.
    pub(crate) fn pusher(&self) -> &Arc<super::push::Pusher> {
        &self.pusher
    }

    /// [`Passes::run`], boxed: a child skill's call runs its child's first pass from inside its
    /// parent's, and a future cannot contain itself.
    pub(crate) fn run_boxed(
        &self,
        event: Event,
        deadline: Instant,
    ) -> BoxFuture<'static, Result<Passed, PassError>> {
        let passes = self.clone();
        Box::pin(async move { passes.run(event, deadline).await })
    }

    /// True when these passes run skill `id`.
    pub(crate) fn serves(&self, id: &str) -> bool {
        self.skills.contains_key(id)
    }

    /// Task `task_id` as `caller` may see it, as A2A shows it.
    pub(crate) async fn task_for(
        &self,
        caller: &Caller,
        task_id: &str,
    ) -> Result<crate::model::Task, PassError> {
        // One read: the view carries the row whose principal says who may see it.
        let view = self
            .store
            .task_view(task_id, None)
            .await?
            .filter(|view| caller.can_see(view.record.principal.as_deref()))
            .ok_or_else(|| PassError::NotFound(task_id.to_owned()))?;
        Ok(super::projection::project_task(view))
    }

    /// Run one pass for `event`, starting no effect after `deadline`, then deliver what the task
    /// holds for its webhooks (push notifications) until the deadline: nothing runs after the
    /// invocation, and what is not acknowledged by then is the next sweep's.
    pub async fn run(&self, event: Event, deadline: Instant) -> Result<Passed, PassError> {
        let passed = self.run_event(event, deadline).await?;
        if passed.rest != Rest::Busy {
            // A task another invocation holds is that invocation's to deliver.
            self.pusher
                .deliver_until(Some(&passed.task_id), deadline)
                .await;
        }
        Ok(passed)
    }

    async fn run_event(&self, event: Event, deadline: Instant) -> Result<Passed, PassError> {
        match event {
            Event::Message {
                caller,
                message,
                skill,
                mode,
            } => match message.task_id.clone() {
                Some(task_id) => {
                    super::check_message(&message)?;
                    self.visible(&caller, &task_id).await?;
                    if self.received_before(&task_id, &message).await? {
                        // A reply sent again (its invocation was cut off after the reply was
                        // journaled): go on with the task, never take it twice.
                        return self.pass(&task_id, deadline, |_| Ok(())).await;
                    }
                    self.pass(&task_id, deadline, |m| m.reply(message)).await
                }
                None => self.start(caller, message, skill, mode, deadline).await,
            },
            Event::Wake { task_id } => self.pass(&task_id, deadline, |_| Ok(())).await,
            Event::Cancel { caller, task_id } => {
                let record = self.visible(&caller, &task_id).await?;
                if record.state.is_terminal() {
                    return Err(MachineError::Finished(record.state).into());
                }
                if let Some(leases) = self.store.leases() {
                    // Whoever holds the task (or claims it next) carries the cancel out.
                    leases.request_cancel(&task_id).await?;
                }
                let now = now_ms();
                self.pass(&task_id, deadline, move |m| {
                    m.cancel(now);
                    Ok(())
                })
                .await
            }
        }
    }

    /// Run the tasks that have work now, one pass each, until `limit` passes ran or the deadline
    /// came: on a shared store those it claims (runnable, due, asked to cancel, lease free or
    /// expired), else the unfinished tasks that are working or whose timer is due. A task whose
    /// pass fails is logged and left for a later sweep; `Err` only when the store cannot be asked
    /// what has work. Then, until the deadline, the push notifications that are due: updates the
    /// passes committed, deliveries an earlier invocation left, retries whose backoff is over.
    pub async fn sweep(&self, deadline: Instant, limit: usize) -> Result<Vec<Passed>, PassError> {
        let passed = self.sweep_tasks(deadline, limit).await?;
        let delivered = self.pusher.deliver_until(None, deadline).await;
        if delivered > 0 {
            tracing::debug!(delivered, "a sweep delivered push notifications");
        }
        self.prune_until(deadline).await;
        Ok(passed)
    }

    /// With a retention set, prune what is due until nothing is or `deadline` passes: nothing runs
    /// between invocations, so the scheduled sweep is where a serverless deployment prunes. A store
    /// that cannot prune, or fails to, is logged: the sweep's own work is done by then.
    async fn prune_until(&self, deadline: Instant) {
        if self.retention.keeps_everything() {
            return;
        }
        let go_on = |_| Instant::now() < deadline;
        match super::retention::prune_pass(self.store.as_ref(), &self.retention, go_on, |_| {})
            .await
        {
            Ok(pruned) if pruned.compacted + pruned.deleted > 0 => {
                tracing::debug!(
                    journals = pruned.compacted,
                    tasks = pruned.deleted,
                    "a sweep pruned finished tasks"
                );
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "a sweep could not prune finished tasks"),
        }
    }

    async fn sweep_tasks(&self, deadline: Instant, limit: usize) -> Result<Vec<Passed>, PassError> {
        let mut passed = Vec::new();
        if let Some(leases) = self.store.leases() {
            let skills: Vec<(String, String)> = self
                .skills
                .values()
                .map(|s| {
                    (
                        s.skill().info().id.clone(),
                        s.skill().info().version.clone(),
                    )
                })
                .collect();
            let claimed = leases
                .claim(
                    &self.owner,
                    &skills,
                    &[],
                    self.lease_ttl_ms(deadline),
                    limit,
                )
                .await?;
            for lease in claimed {
                let held = Held {
                    fence: Some(lease.token),
                    new_lease: None,
                };
                let cancel = lease.cancel_requested;
                let result = self
                    .load_and_drive(&lease.task_id, held, deadline, |m| {
                        if cancel {
                            m.cancel(now_ms());
                        }
                        Ok(())
                    })
                    .await;
                self.release(&lease.task_id, Some(lease.token)).await;
                Self::swept(&mut passed, &lease.task_id, result);
            }
            return Ok(passed);
        }
        let now = now_ms();
        let tasks = self
            .store
            .list(TaskQuery {
                non_terminal: true,
                skip_idle_input: true,
                ..TaskQuery::default()
            })
            .await?;
        for task in tasks {
            if passed.len() >= limit || Instant::now() >= deadline {
                break;
            }
            let runnable = matches!(task.state, TaskState::Submitted | TaskState::Working)
                && task.wake_at_ms.is_none();
            let due = task.wake_at_ms.is_some_and(|at| at <= now);
            if runnable || due {
                let result = self.pass(&task.id, deadline, |_| Ok(())).await;
                Self::swept(&mut passed, &task.id, result);
            }
        }
        Ok(passed)
    }

    /// A sweep goes on past a task whose pass failed (a store error mid-pass, a journal that does
    /// not replay): the others still run, and the failed one is taken up again by a later sweep.
    fn swept(passed: &mut Vec<Passed>, task_id: &str, result: Result<Passed, PassError>) {
        match result {
            Ok(p) => passed.push(p),
            Err(e) => {
                tracing::warn!(task = %task_id, error = %e, "a sweep's pass failed; the task is left for a later sweep")
            }
        }
    }

    /// The task as `caller` may see it.
    async fn visible(&self, caller: &Caller, task_id: &str) -> Result<TaskRecord, PassError> {
        let record = self
            .store
            .task(task_id)
            .await?
            .filter(|r| caller.can_see(r.principal.as_deref()))
            .ok_or_else(|| PassError::NotFound(task_id.to_owned()))?;
        Ok(record)
    }

    /// Start a task with `message` (or, for a message sent again, go on with the task it started).
    async fn start(
        &self,
        caller: Caller,
        message: Message,
        skill: Option<String>,
        mode: Option<PermissionMode>,
        deadline: Instant,
    ) -> Result<Passed, PassError> {
        super::check_message(&message)?;
        let task_id = super::task_id_for(&caller, &message.message_id).into_string();
        if self.store.task(&task_id).await?.is_some() {
            return self.again(&caller, &task_id, &message, deadline).await;
        }
        let skill = self.choose(skill.as_deref())?;
        let principal = caller.principal_name().map(str::to_owned);
        let task = NewTask {
            task_id: task_id.clone(),
            context_id: message.context_id.clone(),
            principal,
            mode: mode.unwrap_or_default(),
            message: message.clone(),
        };
        let mut m = skill.start(task, now_ms())?;
        let shared = self.store.leases().is_some();
        let held = Held {
            fence: shared.then_some(CREATION_TOKEN),
            new_lease: shared.then(|| NewLease {
                owner: self.owner.clone(),
                ttl_ms: self.lease_ttl_ms(deadline),
            }),
        };
        let driven = self.drive(&skill, &mut m, held, deadline).await;
        self.release(&task_id, shared.then_some(CREATION_TOKEN))
            .await;
        match driven {
            // Two invocations with the same message at once: the other one created the task.
            Err(PassError::Store(StoreError::Conflict { .. }))
                if self.store.task(&task_id).await?.is_some() =>
            {
                self.again(&caller, &task_id, &message, deadline).await
            }
            other => other,
        }
    }

    /// A message that started a task before: the same message sent again goes on with the task
    /// (an invocation retried after it was cut off); another message under its id is refused.
    async fn again(
        &self,
        caller: &Caller,
        task_id: &str,
        message: &Message,
        deadline: Instant,
    ) -> Result<Passed, PassError> {
        self.visible(caller, task_id).await?;
        let first = self.store.journal_page(task_id, 0, 2).await?;
        let same = first.iter().any(|r| match &r.entry {
            Entry::MessageReceived { message: before } => super::same_message(before, message),
            _ => false,
        });
        if !same {
            return Err(super::reused_id(&message.message_id).into());
        }
        self.pass(task_id, deadline, |_| Ok(())).await
    }

    /// True when the task received `message`'s id before: with the same content it is the reply
    /// sent again; another message under that id is refused.
    async fn received_before(&self, task_id: &str, message: &Message) -> Result<bool, PassError> {
        if message.message_id.is_empty() {
            return Ok(false);
        }
        let journal = self.store.journal(task_id, 0).await?;
        let before = journal.iter().find_map(|r| match &r.entry {
            Entry::MessageReceived { message: m } if m.message_id == message.message_id => Some(m),
            _ => None,
        });
        match before {
            Some(before) if super::same_message(before, message) => Ok(true),
            Some(_) => Err(super::reused_id(&message.message_id).into()),
            None => Ok(false),
        }
    }

    /// The skill a new task runs: the one named, else the only one, else the default (as the
    /// engine chooses).
    fn choose(&self, skill: Option<&str>) -> Result<MachineSkill, EngineError> {
        let mut ids: Vec<String> = self.skills.keys().cloned().collect();
        ids.sort();
        let id = match skill {
            Some(id) => id.to_owned(),
            None if ids.len() == 1 => ids[0].clone(),
            None => match &self.default_skill {
                Some(id) => id.clone(),
                None => return Err(EngineError::NoSkillChosen { skills: ids }),
            },
        };
        self.skills.get(&id).cloned().ok_or_else(|| {
            EngineError::UnknownSkill(format!("no skill `{id}`; skills are {}", ids.join(", ")))
        })
    }

    /// Take the task's lease (shared stores), load and resume it, apply `event`, drive it, give
    /// the lease back.
    async fn pass(
        &self,
        task_id: &str,
        deadline: Instant,
        event: impl FnOnce(&mut TaskMachine) -> Result<(), MachineError>,
    ) -> Result<Passed, PassError> {
        let mut cancel = false;
        let fence = match self.store.leases() {
            Some(leases) => {
                let Some(lease) = leases
                    .acquire(&self.owner, task_id, self.lease_ttl_ms(deadline))
                    .await?
                else {
                    // No lease for an ended task (an earlier invocation finished it, and was cut
                    // off before it could say so), or another invocation holds it.
                    let rest = match self.store.task(task_id).await? {
                        None => return Err(PassError::NotFound(task_id.to_owned())),
                        Some(record) if record.state.is_terminal() => Rest::Ended(record.state),
                        Some(_) => Rest::Busy,
                    };
                    return Ok(Passed {
                        task_id: task_id.to_owned(),
                        rest,
                        appends: 0,
                        effects: 0,
                    });
                };
                cancel = lease.cancel_requested;
                Some(lease.token)
            }
            None => None,
        };
        let held = Held {
            fence,
            new_lease: None,
        };
        let result = self
            .load_and_drive(task_id, held, deadline, |m| {
                event(m)?;
                if cancel {
                    m.cancel(now_ms());
                }
                Ok(())
            })
            .await;
        self.release(task_id, fence).await;
        result
    }

    async fn load_and_drive(
        &self,
        task_id: &str,
        held: Held,
        deadline: Instant,
        event: impl FnOnce(&mut TaskMachine) -> Result<(), MachineError>,
    ) -> Result<Passed, PassError> {
        let Some(record) = self.store.task(task_id).await? else {
            return Err(PassError::NotFound(task_id.to_owned()));
        };
        // The version it runs on when it is served beside the newest, else the newest.
        let kept = self
            .older
            .get(&(record.skill_id.clone(), record.skill_version.clone()));
        let skill = kept
            .or_else(|| self.skills.get(&record.skill_id))
            .cloned()
            .ok_or_else(|| EngineError::SkillNotServed {
                task_id: task_id.to_owned(),
                skill_id: record.skill_id.clone(),
            })?;
        let records = self.store.journal_for_replay(task_id).await?;
        let mut m = skill.resume(task_id, &records, now_ms())?;
        event(&mut m)?;
        self.drive(&skill, &mut m, held, deadline).await
    }

    /// Give the lease back (best effort: an expired lease is as good).
    async fn release(&self, task_id: &str, token: Option<u64>) {
        if let (Some(leases), Some(token)) = (self.store.leases(), token) {
            if let Err(e) = leases.release(&self.owner, task_id, token).await {
                tracing::debug!(task = %task_id, error = %e, "a pass's lease was not given back; it expires");
            }
        }
    }

    /// Run the machine: append what it yields, perform the effects that can start before the
    /// deadline, until the task rests, ends or the deadline comes.
    async fn drive(
        &self,
        skill: &MachineSkill,
        m: &mut TaskMachine,
        mut held: Held,
        deadline: Instant,
    ) -> Result<Passed, PassError> {
        let mut running: FuturesUnordered<BoxFuture<'static, Done>> = FuturesUnordered::new();
        let (mut appends, mut effects) = (0, 0);
        let task_id = m.task_id().to_owned();
        let passed = |rest, appends, effects| Passed {
            task_id: task_id.clone(),
            rest,
            appends,
            effects,
        };
        loop {
            let now = now_ms();
            match m.poll(now) {
                Output::Hook(call) => {
                    let answer = call.ask(&self.hooks).await;
                    m.hooked(answer)?;
                }
                Output::Persist(mut append) => {
                    append.fence = held.fence;
                    if append.create.is_some() {
                        append.lease = held.new_lease.take();
                    }
                    self.store.append(*append).await?;
                    appends += 1;
                }
                Output::Perform(asked) => {
                    for effect in asked {
                        if self.is_dispatched(&effect) {
                            if let Some(dispatch) = self.store.dispatch() {
                                dispatch.dispatch(&task_id, &effect.id, &effect.cmd).await?;
                                let recheck = super::run::after_ms(
                                    now,
                                    u64::try_from(DISPATCH_RECHECK.as_millis()).unwrap_or(u64::MAX),
                                );
                                m.dispatched(&effect.id, recheck)?;
                                continue;
                            }
                        }
                        let wait = effect
                            .not_before_ms
                            .map(|at| Duration::from_millis(u64::try_from(at - now).unwrap_or(0)))
                            .unwrap_or_default();
                        if Instant::now() + wait >= deadline {
                            // Not started: the next pass asks for it again.
                            continue;
                        }
                        if !effect.cmd.policy.reissue_allowed()
                            && !self.still_holds(&held, &task_id).await?
                        {
                            return Ok(passed(Rest::Busy, appends, effects));
                        }
                        effects += 1;
                        if effect.cmd.kind.is_call() && effect.action == Action::Perform {
                            let passes = self.clone();
                            let parent = super::call::pass::Parent {
                                principal: m.principal(),
                                context_id: m.context_id().to_owned(),
                                mode: m.mode(),
                            };
                            running.push(
                                async move {
                                    tokio::time::sleep(wait).await;
                                    let step = super::call::pass::step(
                                        &passes.agents,
                                        super::call::pass::Children::Passes(
                                            &passes, parent, deadline,
                                        ),
                                        &effect,
                                        passes.call_recheck,
                                    )
                                    .await;
                                    Done::Call(effect, step)
                                }
                                .boxed(),
                            );
                            continue;
                        }
                        let effects_of = skill.shared_effects();
                        running.push(
                            async move {
                                tokio::time::sleep(wait).await;
                                let outcome = effect.run(&effects_of).await;
                                Done::Performed(effect, outcome)
                            }
                            .boxed(),
                        );
                    }
                }
                Output::Awaiting => {
                    let next = tokio::time::timeout_at(deadline.into(), running.next()).await;
                    match next {
                        Ok(Some(Done::Performed(effect, outcome))) => {
                            m.complete(&effect.id, outcome, now_ms())?
                        }
                        Ok(Some(Done::Call(effect, call))) => Self::called(m, &effect, call)?,
                        // Nothing in flight (what is left could not start before the deadline), or
                        // the deadline came: keep every receipt that returned, leave the rest.
                        Ok(None) | Err(_) => {
                            if let Some(mut append) = m.persist(now_ms()) {
                                append.fence = held.fence;
                                self.store.append(append).await?;
                                appends += 1;
                            }
                            return Ok(passed(Rest::Unfinished, appends, effects));
                        }
                    }
                }
                Output::Waiting { input, wake_at_ms } => {
                    return Ok(passed(
                        Rest::Waiting { input, wake_at_ms },
                        appends,
                        effects,
                    ))
                }
                Output::Ended(state) => {
                    if matches!(state, TaskState::Canceled | TaskState::Failed) {
                        let parent = super::call::pass::Parent {
                            principal: m.principal(),
                            context_id: m.context_id().to_owned(),
                            mode: m.mode(),
                        };
                        let open = m.open_calls();
                        super::call::pass::cancel_callees(
                            &self.agents,
                            Some((self, parent, deadline)),
                            open,
                        )
                        .await;
                    }
                    return Ok(passed(Rest::Ended(state), appends, effects));
                }
            }
        }
    }

    /// Hand a call's step to the machine: the callee it started (journaled first), then the
    /// call's receipt or its recheck.
    fn called(
        m: &mut TaskMachine,
        effect: &Effect,
        call: super::call::pass::PassCall,
    ) -> Result<(), MachineError> {
        use super::call::pass::PassCallStep;
        if let Some((task, context)) = call.started {
            m.call_started(&effect.id, task, context)?;
        }
        match call.then {
            PassCallStep::Settled(outcome) => {
                let outcome = outcome.map(|value| Performed { value, usage: None });
                m.complete(&effect.id, outcome, now_ms())
            }
            PassCallStep::Recheck(at) => m.call_waiting(&effect.id, at),
        }
    }

    /// A pass's lease lasts until its deadline and the margin.
    fn lease_ttl_ms(&self, deadline: Instant) -> i64 {
        let left = deadline.saturating_duration_since(Instant::now()) + self.lease_margin;
        i64::try_from(left.as_millis()).unwrap_or(i64::MAX)
    }

    /// True for a tool call this pass hands to executors.
    fn is_dispatched(&self, effect: &Effect) -> bool {
        match (&effect.action, &effect.cmd.kind) {
            (Action::Perform, crate::flow::CmdKind::Tool { tool, .. }) => {
                self.dispatched_tools.contains(tool)
            }
            _ => false,
        }
    }

    /// True while this pass still holds the task's lease (asked before an `AtMostOnce` effect
    /// starts; a store without leases is this pass's alone).
    async fn still_holds(&self, held: &Held, task_id: &str) -> Result<bool, StoreError> {
        match (self.store.leases(), held.fence) {
            (Some(leases), Some(token)) if held.new_lease.is_none() => {
                leases.holds(&self.owner, task_id, token).await
            }
            _ => Ok(true),
        }
    }
}

tokio::task_local! {
    /// The deadline of the invocation the current task serves (set by its host).
    static DEADLINE: Instant;
}

/// Run `fut` as the work of an invocation that must end by `deadline` (a function platform's:
/// the Lambda adapter sets it from the invocation's context): a serverless engine's passes started
/// inside it start no effect after it.
pub async fn with_deadline<F: std::future::Future>(deadline: Instant, fut: F) -> F::Output {
    DEADLINE.scope(deadline, fut).await
}

/// The deadline of a pass started now with `budget`: the invocation's, when its host set an
/// earlier one.
pub(crate) fn pass_deadline(budget: Duration) -> Instant {
    let own = Instant::now() + budget;
    DEADLINE.try_with(|d| (*d).min(own)).unwrap_or(own)
}

impl PassError {
    /// The engine's error for this pass's (over task `task_id`, when known).
    pub(crate) fn into_engine(self, task_id: Option<&str>) -> EngineError {
        let task_id = task_id.unwrap_or_default().to_owned();
        match self {
            PassError::Invalid(e) => e,
            PassError::NotFound(id) => EngineError::TaskNotFound(id),
            PassError::Store(e) => EngineError::Store(e),
            PassError::Machine(MachineError::Finished(state)) => {
                EngineError::TaskFinished { task_id, state }
            }
            PassError::Machine(MachineError::NotAwaitingInput(state)) => {
                EngineError::NotAwaitingInput { task_id, state }
            }
            PassError::Machine(MachineError::VersionMismatch {
                skill_id,
                recorded,
                running,
                reason,
            }) => EngineError::VersionMismatch {
                task_id,
                skill_id,
                recorded,
                running,
                reason,
            },
            PassError::Machine(other) => EngineError::Internal(other.to_string()),
        }
    }
}

/// The lease a pass holds: its fencing token, and the lease to take with a new task's row.
struct Held {
    fence: Option<u64>,
    new_lease: Option<NewLease>,
}
