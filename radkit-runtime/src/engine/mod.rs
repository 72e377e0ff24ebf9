//! The journal-first executor. It owns task lifecycles: creating tasks, driving step visits, replaying
//! journals after a crash, waking timers, accepting input and cancels. It talks to skills through the
//! `flow` contract and to persistence through `Store`; it knows nothing of HTTP.

mod builder;
mod cluster;
mod driver;
mod error;
pub mod fault;
mod hooks;
mod invoke;
mod perform;
pub mod projection;
mod replay;
mod run;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;

pub use builder::{EngineBuilder, EngineConfig};
pub use error::EngineError;
#[cfg_attr(not(feature = "testing"), allow(unused_imports))] // public with `testing` only
pub use fault::*;
pub use hooks::{Hook, HookContext, HookDecision, PermissionMode};
pub use projection::{project, stream_event, StreamEvent};

use self::cluster::Ownership;
use self::replay::{replay, Wait};
use self::run::{RunState, TaskRun, Work};
use crate::effects::Effects;
use crate::flow::{ErasedSkill, Event, InvocationId, Receipt, SkillInfo};
use crate::journal::{now_ms, Entry, JournalRecord};
use crate::model::{new_id, Message, Role, Task, TaskState};
use crate::store::{Lease, NewLease, Store, TaskQuery, TaskRecord, CREATION_TOKEN};

/// Records buffered per live subscriber before it lags (a lagging subscriber re-reads the store).
const LIVE_CAPACITY: usize = 64;

struct Live {
    tx: broadcast::Sender<Arc<JournalRecord>>,
    gate: Arc<tokio::sync::Mutex<()>>,
    run: Option<Arc<TaskRun>>,
}

pub(crate) struct Inner {
    store: Arc<dyn Store>,
    skills: HashMap<String, Arc<dyn ErasedSkill>>,
    order: Vec<String>,
    default_skill: Option<String>,
    pub(crate) effects: Effects,
    config: EngineConfig,
    halted: Arc<AtomicBool>,
    live: Mutex<HashMap<String, Live>>,
    /// Leases held (task id -> token), shared stores only.
    held: Mutex<HashMap<String, u64>>,
    /// Runs in a row of a task that stopped on a failed append (single-engine stores), for the backoff
    /// of its reloads.
    write_failures: Mutex<HashMap<String, u32>>,
    /// Tasks whose run was asked to cancel and stopped before carrying it out (on a failed append):
    /// the reload cancels them (single-engine stores; a shared store keeps the request on the row).
    unserved_cancels: Mutex<std::collections::HashSet<String>>,
    worker_started: AtomicBool,
    /// Held while claiming, so that shutdown can wait for a claim in flight.
    claiming: tokio::sync::Mutex<()>,
}

/// The durable engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

/// A live view of one task: its journal so far, then every record as it is committed.
pub struct Subscription {
    /// Task id.
    pub task_id: String,
    /// Context id.
    pub context_id: String,
    backlog: std::collections::VecDeque<JournalRecord>,
    rx: broadcast::Receiver<Arc<JournalRecord>>,
    last_seq: u64,
    engine: Engine,
    terminal_seen: bool,
    /// Store reads in a row that found nothing new (shared stores).
    quiet_polls: u32,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.engine.inner.release_live(&self.task_id, 1);
    }
}

impl Subscription {
    /// The next record, in seq order, each exactly once; `None` after the terminal entry.
    pub async fn next(&mut self) -> Option<JournalRecord> {
        loop {
            if self.terminal_seen {
                return None;
            }
            if let Some(record) = self.backlog.pop_front() {
                if record.seq <= self.last_seq {
                    continue;
                }
                return Some(self.seen(record));
            }
            let received = if self.engine.inner.shared() {
                // Other engines commit this task's records too: read the store when it is quiet,
                // less and less often while nothing happens (a task may wait a day for a human).
                let quiet = self.engine.inner.config.poll * (1 << self.quiet_polls.min(4));
                match tokio::time::timeout(quiet.min(Duration::from_secs(2)), self.rx.recv()).await
                {
                    Ok(received) => {
                        self.quiet_polls = 0;
                        received
                    }
                    Err(_) => {
                        self.quiet_polls += 1;
                        match self
                            .engine
                            .inner
                            .store
                            .journal(&self.task_id, self.last_seq)
                            .await
                        {
                            Ok(records) => {
                                if !records.is_empty() {
                                    self.quiet_polls = 0;
                                }
                                self.backlog.extend(records)
                            }
                            // The database may be restarting: keep following, less often.
                            Err(e) => {
                                tracing::warn!(task = %self.task_id, error = %e, "subscription cannot read the store; retrying")
                            }
                        }
                        continue;
                    }
                }
            } else {
                self.rx.recv().await
            };
            match received {
                Ok(record) if record.seq <= self.last_seq => continue,
                Ok(record) if record.seq == self.last_seq + 1 => {
                    return Some(self.seen((*record).clone()))
                }
                // A gap (we lagged, or records were committed by another process): read the store.
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    match self
                        .engine
                        .inner
                        .store
                        .journal(&self.task_id, self.last_seq)
                        .await
                    {
                        Ok(records) => self.backlog.extend(records),
                        Err(_) => return None,
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    fn seen(&mut self, record: JournalRecord) -> JournalRecord {
        self.last_seq = record.seq;
        if matches!(record.entry, Entry::Terminal { .. }) {
            self.terminal_seen = true;
        }
        record
    }

    /// True when every record committed so far was returned (as far as this process knows).
    pub fn caught_up(&mut self) -> bool {
        self.drain_live();
        self.backlog.is_empty()
    }

    /// Records already committed and not yet returned (after draining the live channel).
    pub fn upcoming(&mut self) -> impl Iterator<Item = &JournalRecord> {
        self.drain_live();
        let last = self.last_seq;
        self.backlog.iter().filter(move |r| r.seq > last)
    }

    /// Move already-published live records into the backlog, dropping ones we have seen.
    fn drain_live(&mut self) {
        loop {
            match self.rx.try_recv() {
                Ok(record) => {
                    let newest = self.backlog.back().map(|r| r.seq).unwrap_or(self.last_seq);
                    if record.seq > newest {
                        self.backlog.push_back((*record).clone());
                    }
                }
                Err(broadcast::error::TryRecvError::Lagged(_)) => continue,
                Err(_) => break,
            }
        }
    }
}

impl Engine {
    /// An engine over `store`, serving every skill registered with `#[flow_skill]` (unless declared
    /// `register = false`) plus the ones added with [`EngineBuilder::skill`].
    pub fn builder(store: impl Store) -> EngineBuilder {
        Self::builder_arc(Arc::new(store))
    }

    /// An engine over a shared store.
    pub fn builder_arc(store: Arc<dyn Store>) -> EngineBuilder {
        EngineBuilder::new(store)
    }

    /// The skills served, in the order [`EngineBuilder::skills`] gives.
    pub fn skills(&self) -> Vec<SkillInfo> {
        self.inner
            .order
            .iter()
            .filter_map(|id| self.inner.skills.get(id))
            .map(|s| s.info().clone())
            .collect()
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// Stop writing at once (what a crash does). Used by tests and shutdown.
    pub fn halt(&self) {
        self.inner.halt();
    }

    /// Stop writing, then give back every lease held so other workers take the tasks over at once
    /// instead of after the lease expires. A step in flight is cut off as by a crash (its command is
    /// reissued by the next owner with the same InvocationId).
    pub async fn shutdown(&self) {
        self.inner.halt();
        self.inner.release_all().await;
    }

    /// This engine's name in leases.
    pub fn worker_id(&self) -> &str {
        &self.inner.config.worker_id
    }

    /// True once halted.
    pub fn is_halted(&self) -> bool {
        self.inner.halted.load(Ordering::SeqCst)
    }

    /// Send a user message: a message without `task_id` starts a task of `skill_id` (or of the only
    /// skill); one with `task_id` answers a task waiting for input. Returns the task id.
    pub async fn send(
        &self,
        principal: Option<&str>,
        skill_id: Option<&str>,
        message: Message,
    ) -> Result<String, EngineError> {
        if message.parts.is_empty() {
            return Err(EngineError::InvalidInput("message has no parts".to_owned()));
        }
        if message.role != Role::User {
            return Err(EngineError::InvalidInput(
                "message role must be `user`".to_owned(),
            ));
        }
        match message.task_id.clone() {
            Some(task_id) => self
                .answer(principal, &task_id, message)
                .await
                .map(|()| task_id),
            None => self.start_task(principal, skill_id, message).await,
        }
    }

    fn choose_skill(
        &self,
        skill_id: Option<&str>,
        message: &Message,
    ) -> Result<Arc<dyn ErasedSkill>, EngineError> {
        let from_meta = message
            .metadata
            .as_ref()
            .and_then(|m| m.get("skillId").or_else(|| m.get("skill_id")))
            .and_then(|v| v.as_str());
        match skill_id.or(from_meta) {
            Some(id) => self.inner.skills.get(id).cloned().ok_or_else(|| {
                EngineError::UnknownSkill(format!(
                    "no skill `{id}`; skills are {}",
                    self.inner.order.join(", ")
                ))
            }),
            None if self.inner.order.len() == 1 => {
                Ok(self.inner.skills[&self.inner.order[0]].clone())
            }
            None if self.inner.default_skill.is_some() => {
                let id = self.inner.default_skill.as_deref().unwrap_or_default();
                self.inner
                    .skills
                    .get(id)
                    .cloned()
                    .ok_or_else(|| EngineError::UnknownSkill(format!("no skill `{id}`")))
            }
            None => Err(EngineError::UnknownSkill(format!(
                "this agent has {} skills; name one in message metadata `skillId` ({})",
                self.inner.order.len(),
                self.inner.order.join(", ")
            ))),
        }
    }

    async fn start_task(
        &self,
        principal: Option<&str>,
        skill_id: Option<&str>,
        mut message: Message,
    ) -> Result<String, EngineError> {
        let skill = self.choose_skill(skill_id, &message)?;
        let info = skill.info();
        let task_id = new_id();
        let context_id = message.context_id.clone().unwrap_or_else(new_id);
        message.task_id = Some(task_id.clone());
        message.context_id = Some(context_id.clone());
        let initial = skill
            .initial_state()
            .map_err(|e| EngineError::InvalidInput(e.to_string()))?;
        let now = now_ms();
        let record = TaskRecord {
            id: task_id.clone(),
            context_id: context_id.clone(),
            skill_id: info.id.clone(),
            skill_version: info.version.clone(),
            principal: principal.map(str::to_owned),
            state: TaskState::Submitted,
            created_at_ms: now,
            updated_at_ms: now,
            wake_at_ms: None,
            last_seq: 0,
        };
        let mut state = RunState::new(1, TaskState::Submitted, initial);
        let mode = match message.metadata.as_ref().and_then(|m| m.get("permissionMode")) {
            None => self.inner.config.permission_mode,
            Some(value) => value.as_str().and_then(PermissionMode::parse).ok_or_else(|| {
                EngineError::InvalidInput(format!("unknown permissionMode {value}; expected \"plan\", \"default\", \"acceptEdits\" or \"bypass\""))
            })?,
        };
        state.push(Entry::TaskCreated {
            skill_id: info.id.clone(),
            skill_version: info.version.clone(),
            context_id: context_id.clone(),
            principal: record.principal.clone(),
            permission_mode: mode,
        });
        state.push(Entry::MessageReceived {
            message: message.clone(),
        });
        state.queue.push_back(Work::Activate {
            event: Event::UserMessage { message },
            rerun: None,
        });
        let (tx, gate) = self.inner.live_handles(&task_id);
        let mut run = TaskRun::new(
            task_id.clone().into(),
            context_id.into(),
            info.id.clone(),
            state,
            self.inner.store.clone(),
            self.inner.halted.clone(),
            tx,
        );
        run.create = Mutex::new(Some(record));
        run.mode = mode;
        // On a shared store the task is leased to this engine when it has room; otherwise it is
        // created unleased and a worker with room claims it.
        let drive_here =
            !self.inner.shared() || self.inner.held_count() < self.inner.config.max_active_tasks;
        if self.inner.shared() && drive_here {
            run.fence = Some(CREATION_TOKEN);
            run.new_lease = Mutex::new(Some(NewLease {
                owner: self.inner.config.worker_id.clone(),
                ttl_ms: i64::try_from(self.inner.config.lease_ttl.as_millis()).unwrap_or(i64::MAX),
            }));
            self.inner.hold(&task_id, CREATION_TOKEN);
        }
        let run = Arc::new(run);
        let guard = gate.lock_owned().await;
        if let Err(e) = run.flush().await {
            self.inner.disown(&run).await;
            return Err(match e {
                run::FlushError::Halted => EngineError::Halted,
                run::FlushError::Store(e) => EngineError::Store(e),
            });
        }
        if drive_here {
            self.inner.spawn_drive(run, guard);
        }
        Ok(task_id)
    }

    async fn visible(
        &self,
        principal: Option<&str>,
        task_id: &str,
    ) -> Result<TaskRecord, EngineError> {
        match self.inner.store.task(task_id).await? {
            Some(t) if principal.is_none() || t.principal.as_deref() == principal => Ok(t),
            _ => Err(EngineError::TaskNotFound(task_id.to_owned())),
        }
    }

    async fn answer(
        &self,
        principal: Option<&str>,
        task_id: &str,
        mut message: Message,
    ) -> Result<(), EngineError> {
        let record = self.visible(principal, task_id).await?;
        if record.state.is_terminal() {
            return Err(EngineError::TaskFinished {
                task_id: task_id.to_owned(),
                state: record.state,
            });
        }
        if self.inner.shared() && record.state != TaskState::InputRequired {
            // The row changes in the same statement as the journal: the task is not waiting.
            return Err(EngineError::NotAwaitingInput {
                task_id: task_id.to_owned(),
                state: record.state,
            });
        }
        let (_, gate) = self.inner.live_handles(task_id);
        let guard = gate.lock_owned().await;
        // On a shared store, the engine that just settled the task may still be giving its lease back.
        let patience = self.inner.config.lease_ttl + self.inner.config.poll * 2;
        let owner = self.inner.own(task_id, patience).await?;
        if let Ownership::Busy = owner {
            return Err(EngineError::NotAwaitingInput {
                task_id: task_id.to_owned(),
                state: record.state,
            });
        }
        let (run, wait, open_visit) = self.inner.load_owned(task_id, owner.token()).await?;
        let ask = match wait {
            Wait::Input { ask, .. } => ask,
            Wait::Terminal(state) => {
                self.inner.disown(&run).await;
                return Err(EngineError::TaskFinished {
                    task_id: task_id.to_owned(),
                    state,
                });
            }
            _ => {
                self.inner.disown(&run).await;
                let state = run.lock().status;
                return Err(EngineError::NotAwaitingInput {
                    task_id: task_id.to_owned(),
                    state,
                });
            }
        };
        message.context_id = Some(run.context_id.to_string());
        {
            let mut st = run.lock();
            st.push(Entry::MessageReceived {
                message: message.clone(),
            });
            st.set_status(TaskState::Working);
            match ask {
                Some(id) => {
                    let transition = st.commands.get(&id).map(|c| c.transition).unwrap_or(false);
                    let value = invoke::reply_value(&message);
                    st.record_receipt(Receipt {
                        id: id.clone(),
                        attempt: 1,
                        outcome: Ok(value),
                        usage: None,
                    });
                    st.set_wake(None);
                    if transition {
                        st.queue.push_front(Work::Execute(id));
                    } else if let Some((visit, event)) = open_visit {
                        st.queue.push_front(Work::Activate {
                            event,
                            rerun: Some(visit),
                        });
                    }
                }
                None => st.queue.push_back(Work::Activate {
                    event: Event::UserMessage { message },
                    rerun: None,
                }),
            }
        }
        if let Err(e) = run.flush().await {
            self.inner.disown(&run).await;
            return Err(match e {
                run::FlushError::Halted => EngineError::Halted,
                run::FlushError::Store(e) => EngineError::Store(e),
            });
        }
        if self.inner.crash_at(Boundary::Resuming, &run, None, None) {
            return Ok(());
        }
        self.inner.spawn_drive(run, guard);
        Ok(())
    }

    /// The task as A2A shows it.
    pub async fn task(
        &self,
        principal: Option<&str>,
        task_id: &str,
        history_length: Option<usize>,
    ) -> Result<Task, EngineError> {
        self.visible(principal, task_id).await?;
        let records = self.inner.store.journal(task_id, 0).await?;
        project(task_id, &records, history_length)
            .ok_or_else(|| EngineError::TaskNotFound(task_id.to_owned()))
    }

    /// The task as A2A shows it, and the seq of the last journal entry it reflects.
    pub async fn snapshot(
        &self,
        principal: Option<&str>,
        task_id: &str,
        history_length: Option<usize>,
    ) -> Result<(Task, u64), EngineError> {
        self.visible(principal, task_id).await?;
        let records = self.inner.store.journal(task_id, 0).await?;
        let last = records.last().map(|r| r.seq).unwrap_or(0);
        let task = project(task_id, &records, history_length)
            .ok_or_else(|| EngineError::TaskNotFound(task_id.to_owned()))?;
        Ok((task, last))
    }

    /// The task's current state (from its row; cheap).
    pub async fn state(
        &self,
        principal: Option<&str>,
        task_id: &str,
    ) -> Result<TaskState, EngineError> {
        Ok(self.visible(principal, task_id).await?.state)
    }

    /// The task's journal.
    pub async fn journal(
        &self,
        principal: Option<&str>,
        task_id: &str,
    ) -> Result<Vec<JournalRecord>, EngineError> {
        self.visible(principal, task_id).await?;
        Ok(self.inner.store.journal(task_id, 0).await?)
    }

    /// Cancel a task: compensations of `Compensate` commands run newest first, then the task ends
    /// `canceled`. A finished task answers [`EngineError::TaskFinished`].
    pub async fn cancel(
        &self,
        principal: Option<&str>,
        task_id: &str,
    ) -> Result<Task, EngineError> {
        let record = self.visible(principal, task_id).await?;
        if record.state.is_terminal() {
            return Err(EngineError::TaskFinished {
                task_id: task_id.to_owned(),
                state: record.state,
            });
        }
        if let Some(leases) = self.inner.store.leases() {
            // On the row before anything is journaled: the row stays claimable until the task ends,
            // so whichever engine holds or next claims the task (after a crash during the cancel's
            // compensations, too) finishes the cancel, whatever the task waited for.
            leases.request_cancel(task_id).await?;
        }
        // A running task is canceled by its driver: the request is journaled with the driver's next
        // flush, so a crash before the end keeps it. A run whose driver stopped refuses it (under the
        // lock its driver takes for its last look at it): then cancel through the gate like an idle
        // task, which waits for the driver to give the task back.
        let marked_running = self
            .inner
            .running(task_id)
            .is_some_and(|run| run.lock().request_cancel());
        if !marked_running {
            let (_, gate) = self.inner.live_handles(task_id);
            let guard = gate.lock_owned().await;
            let owner = self.inner.own(task_id, Duration::ZERO).await?;
            if let Ownership::Busy = owner {
                // Another engine drives it: the request on its row is where its owner (or the next
                // one) sees it.
                drop(guard);
                let mut sub = self.subscribe(principal, task_id).await?;
                while sub.next().await.is_some() {}
                return self.task(principal, task_id, None).await;
            }
            let (run, wait, _) = self.inner.load_owned(task_id, owner.token()).await?;
            match wait {
                Wait::Terminal(state) => {
                    self.inner.disown(&run).await;
                    return Err(EngineError::TaskFinished {
                        task_id: task_id.to_owned(),
                        state,
                    });
                }
                _ => {
                    run.lock().request_cancel();
                    self.inner.spawn_drive(run, guard);
                }
            }
        }
        let mut sub = self.subscribe(principal, task_id).await?;
        while sub.next().await.is_some() {}
        self.task(principal, task_id, None).await
    }

    /// Follow a task: its journal so far, then live records until the terminal entry.
    pub async fn subscribe(
        &self,
        principal: Option<&str>,
        task_id: &str,
    ) -> Result<Subscription, EngineError> {
        self.subscribe_from(principal, task_id, 0).await
    }

    /// Follow a task from after `after_seq`.
    pub async fn subscribe_from(
        &self,
        principal: Option<&str>,
        task_id: &str,
        after_seq: u64,
    ) -> Result<Subscription, EngineError> {
        let record = self.visible(principal, task_id).await?;
        let (tx, _) = self.inner.live_handles(task_id);
        let rx = tx.subscribe();
        let backlog = self.inner.store.journal(task_id, after_seq).await?;
        Ok(Subscription {
            task_id: task_id.to_owned(),
            context_id: record.context_id,
            backlog: backlog.into(),
            rx,
            last_seq: after_seq,
            engine: self.clone(),
            terminal_seen: false,
            quiet_polls: 0,
        })
    }

    /// Wait until the task is input-required or finished, and return it.
    pub async fn wait_settled(
        &self,
        principal: Option<&str>,
        task_id: &str,
    ) -> Result<Task, EngineError> {
        self.wait_settled_with(principal, task_id, None).await
    }

    /// Like [`Engine::wait_settled`], returning at most `history_length` history messages. The task is
    /// projected from the records the wait already read: no extra store round trip.
    pub async fn wait_settled_with(
        &self,
        principal: Option<&str>,
        task_id: &str,
        history_length: Option<usize>,
    ) -> Result<Task, EngineError> {
        let mut sub = self.subscribe(principal, task_id).await?;
        let mut records = Vec::new();
        let mut awaiting = false;
        while let Some(record) = sub.next().await {
            match record.entry {
                Entry::AwaitingInput { .. } => awaiting = true,
                Entry::MessageReceived { .. } | Entry::Activated { .. } => awaiting = false,
                _ => {}
            }
            records.push(record);
            if awaiting && sub.caught_up() {
                let row = self.inner.store.task(task_id).await?;
                if row
                    .map(|r| r.state == TaskState::InputRequired)
                    .unwrap_or(false)
                {
                    break;
                }
            }
        }
        project(task_id, &records, history_length)
            .ok_or_else(|| EngineError::TaskNotFound(task_id.to_owned()))
    }

    /// Rehydrate every non-terminal task from its journal and continue it. Returns how many.
    ///
    /// On a shared store (Postgres) this starts the worker loop instead: tasks are claimed through
    /// leases as this engine has room, and none is resumed here (returns 0).
    pub async fn recover(&self) -> Result<usize, EngineError> {
        if self.inner.shared() {
            self.inner.start_worker();
            return Ok(0);
        }
        let tasks = self
            .inner
            .store
            .list(TaskQuery {
                non_terminal: true,
                ..TaskQuery::default()
            })
            .await?;
        let mut resumed = 0;
        for task in tasks {
            match self.inner.resume(&task.id, None).await {
                Ok(()) => resumed += 1,
                Err(e) => tracing::error!(task = %task.id, error = %e, "task not resumed"),
            }
        }
        Ok(resumed)
    }
}

impl Inner {
    pub(crate) fn halt(&self) {
        self.halted.store(true, Ordering::SeqCst);
    }

    /// Ask the fault hook; no side effect.
    pub(crate) fn wants_crash(
        &self,
        boundary: Boundary,
        run: &TaskRun,
        id: Option<&InvocationId>,
        what: Option<&str>,
    ) -> bool {
        match &self.config.fault {
            Some(hook) => hook(&Fault {
                boundary,
                task_id: run.task_id.to_string(),
                command: id.cloned(),
                what: what.map(str::to_owned),
            }),
            None => false,
        }
    }

    /// Ask the fault hook and halt if it says so.
    pub(crate) fn crash_at(
        &self,
        boundary: Boundary,
        run: &TaskRun,
        id: Option<&InvocationId>,
        what: Option<&str>,
    ) -> bool {
        let crash = self.wants_crash(boundary, run, id, what);
        if crash {
            tracing::warn!(task = %run.task_id, ?boundary, "injected crash");
            self.halt();
        }
        crash
    }

    fn live_handles(
        &self,
        task_id: &str,
    ) -> (
        broadcast::Sender<Arc<JournalRecord>>,
        Arc<tokio::sync::Mutex<()>>,
    ) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let entry = live.entry(task_id.to_owned()).or_insert_with(|| Live {
            tx: broadcast::channel(LIVE_CAPACITY).0,
            gate: Arc::new(tokio::sync::Mutex::new(())),
            run: None,
        });
        (entry.tx.clone(), entry.gate.clone())
    }

    fn running(&self, task_id: &str) -> Option<Arc<TaskRun>> {
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(task_id)
            .and_then(|l| l.run.clone())
    }

    /// Load and replay a task the caller owns (it holds its gate and, on a shared store, the lease
    /// `fence`, which is given back if the task cannot be loaded).
    async fn load_owned(
        &self,
        task_id: &str,
        fence: Option<u64>,
    ) -> Result<(Arc<TaskRun>, Wait, Option<(u64, Event)>), EngineError> {
        let loaded = self.load(task_id, fence).await;
        if let (Err(_), Some(token)) = (&loaded, fence) {
            self.give_back(task_id, token, false).await;
        }
        loaded
    }

    async fn load(
        &self,
        task_id: &str,
        fence: Option<u64>,
    ) -> Result<(Arc<TaskRun>, Wait, Option<(u64, Event)>), EngineError> {
        let records = self.store.journal_for_replay(task_id).await?;
        let first_skill = records.iter().find_map(|r| match &r.entry {
            Entry::TaskCreated { skill_id, .. } => Some(skill_id.clone()),
            _ => None,
        });
        let skill = first_skill
            .as_ref()
            .and_then(|id| self.skills.get(id))
            .cloned();
        let Some(skill) = skill else {
            return Err(EngineError::UnknownSkill(format!(
                "task {task_id} belongs to skill `{}`, which this agent does not serve",
                first_skill.unwrap_or_default()
            )));
        };
        let replayed = replay(&records, || {
            skill.initial_state().unwrap_or(serde_json::Value::Null)
        })
        .map_err(|reason| {
            EngineError::Store(crate::store::StoreError::Corrupt {
                task_id: task_id.to_owned(),
                seq: 0,
                reason,
            })
        })?;
        let info = skill.info();
        if replayed.header.skill_version != info.version
            && !matches!(replayed.wait, Wait::Terminal(_))
        {
            return Err(EngineError::VersionMismatch {
                task_id: task_id.to_owned(),
                skill_id: info.id.clone(),
                recorded: replayed.header.skill_version,
                running: info.version.clone(),
            });
        }
        let (tx, _) = self.live_handles(task_id);
        let mut run = TaskRun::new(
            task_id.into(),
            replayed.header.context_id.into(),
            info.id.clone(),
            replayed.run,
            self.store.clone(),
            self.halted.clone(),
            tx,
        );
        run.mode = replayed.header.permission_mode;
        run.fence = fence;
        Ok((Arc::new(run), replayed.wait, replayed.open_visit))
    }

    /// Load a task and drive it if it has work (recovery, timers, claims). `claimed`: the lease a
    /// claim took; without it, a shared store's lease is acquired here (and nothing happens while
    /// another engine holds it).
    async fn resume(
        self: &Arc<Self>,
        task_id: &str,
        claimed: Option<Lease>,
    ) -> Result<(), EngineError> {
        let (_, gate) = self.live_handles(task_id);
        let guard = gate.lock_owned().await;
        let owner = match claimed {
            Some(lease) => Ownership::Leased(lease),
            None => self.own(task_id, Duration::ZERO).await?,
        };
        let cancel = match &owner {
            Ownership::Busy => return Ok(()),
            Ownership::Leased(lease) => lease.cancel_requested,
            Ownership::Sole => false,
        };
        let (run, wait, _) = self.load_owned(task_id, owner.token()).await?;
        // A cancel its last run was asked for and could not carry out (taken once the task is loaded,
        // so a reload that fails keeps it).
        let cancel = self
            .unserved_cancels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(task_id)
            || cancel;
        if cancel && !matches!(wait, Wait::Terminal(_)) {
            run.lock().request_cancel();
            self.spawn_drive(run, guard);
            return Ok(());
        }
        match wait {
            Wait::Runnable => {
                self.spawn_drive(run, guard);
                return Ok(());
            }
            Wait::Timer(at) => self.schedule_timer(task_id.to_owned(), at),
            Wait::Input {
                expires_at_ms: Some(at),
                ..
            } => self.schedule_timer(task_id.to_owned(), at),
            Wait::Input { .. } | Wait::Terminal(_) => {}
        }
        self.disown(&run).await;
        Ok(())
    }

    fn spawn_drive(self: &Arc<Self>, run: Arc<TaskRun>, guard: tokio::sync::OwnedMutexGuard<()>) {
        let task_id = run.task_id.to_string();
        if let Some(live) = self
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&task_id)
        {
            live.run = Some(run.clone());
        }
        let engine = self.clone();
        tokio::spawn(async move {
            let _stop = engine.drive(run.clone()).await;
            // From here on a cancel is refused by this run and goes through the gate (which this
            // task holds until the run is deregistered) or, on a shared store, the task's row.
            let unserved_cancel = run.lock().close();
            if unserved_cancel && run.write_failed() && !engine.shared() {
                engine
                    .unserved_cancels
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(task_id.clone());
            }
            engine.disown(&run).await;
            let mut live = engine.live.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(entry) = live.get_mut(&task_id) {
                entry.run = None;
            }
            drop(guard);
            drop(live);
            engine.release_live(&task_id, 0);
            if run.write_failed() {
                engine.reload_after_failed_write(task_id);
            } else {
                engine
                    .write_failures
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&task_id);
            }
        });
    }

    /// A run stopped because an append failed: reload the task from the store and drive it again (what
    /// a restart would do), after a backoff that grows while its runs keep failing. On a shared store
    /// the run gave its lease back and a worker's claim does this.
    fn reload_after_failed_write(self: &Arc<Self>, task_id: String) {
        if self.shared() {
            return;
        }
        let mut failures = {
            let mut map = self
                .write_failures
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let n = map.entry(task_id.clone()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        let engine = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                // 50 ms, doubling, at most 30 s.
                let delay = Duration::from_millis(50 << failures.clamp(1, 10).saturating_sub(1));
                tokio::time::sleep(delay.min(Duration::from_secs(30))).await;
                let Some(engine) = engine.upgrade() else {
                    return;
                };
                if engine.halted.load(Ordering::SeqCst) {
                    return;
                }
                match engine.resume(&task_id, None).await {
                    Ok(()) => return,
                    Err(EngineError::Store(e)) => {
                        tracing::warn!(task = %task_id, error = %e, "reloading the task after a failed append failed; retrying");
                        failures = failures.saturating_add(1);
                    }
                    Err(e) => {
                        tracing::error!(task = %task_id, error = %e, "task not reloaded after a failed append");
                        return;
                    }
                }
            }
        });
    }

    /// Forget a task's live entry once nothing uses it: no driver, no subscriber (other than
    /// `own_receivers` of the caller, which is going away) and nobody waiting on its gate.
    fn release_live(&self, task_id: &str, own_receivers: usize) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let unused = live.get(task_id).is_some_and(|e| {
            e.run.is_none()
                && e.tx.receiver_count() <= own_receivers
                && Arc::strong_count(&e.gate) == 1
        });
        if unused {
            live.remove(task_id);
        }
    }

    /// Wake `task_id` at `at_ms` (the timer is durable in the journal; this is only the alarm clock).
    pub(crate) fn schedule_timer(self: &Arc<Self>, task_id: String, at_ms: i64) {
        let engine = self.clone();
        tokio::spawn(async move {
            let delay = u64::try_from(at_ms.saturating_sub(now_ms())).unwrap_or(0);
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
            if engine.halted.load(Ordering::SeqCst) {
                return;
            }
            if let Err(e) = engine.resume(&task_id, None).await {
                tracing::error!(task = %task_id, error = %e, "timer wake failed");
            }
        });
    }
}
