//! The engine's public API: sending messages, reading, following and canceling tasks, recovery.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::cluster::Ownership;
use super::replay::Wait;
use super::run::{RunState, TaskRun};
use super::{
    command, Boundary, Caller, Engine, EngineBuilder, EngineError, Request, Snapshot, Subscription,
};
use crate::flow::{ErasedSkill, PermissionMode, SkillInfo, WhileWorking};
use crate::journal::{json_depth, now_ms, Entry, JournalRecord, MAX_MESSAGE_DEPTH};
use crate::model::{new_id, Message, Role, Task, TaskId, TaskState};
use crate::store::{NewLease, Store, TaskQuery, TaskRecord, CREATION_TOKEN};

/// The namespace of task ids derived from message ids (a UUID v5 namespace of radkit's own).
const TASK_ID_NAMESPACE: uuid::Uuid =
    uuid::Uuid::from_u128(0x7261_646b_6974_2d74_6173_6b2d_6964_0001);

/// The id of the task a message starts: derived from the sender and the message's id (A2A's
/// `messageId` is unique per message), so the same message sent again — a client retrying after a
/// lost answer — names the same task instead of starting a second one. A message without an id gets
/// a fresh one.
pub(crate) fn task_id_for(caller: &Caller, message_id: &str) -> TaskId {
    if message_id.is_empty() {
        return TaskId::new();
    }
    let sender = match caller {
        Caller::Operator => "operator:".to_owned(),
        Caller::Principal(name) => format!("principal:{}:", name.len()),
    };
    let principal = caller.principal_name().unwrap_or_default();
    let name = format!("{sender}{principal}\u{0}{message_id}");
    TaskId::from(uuid::Uuid::new_v5(&TASK_ID_NAMESPACE, name.as_bytes()).to_string())
}

/// A user's message as the engine takes it, checked before anything is written: it has parts, the
/// user's role, and no deeper nesting than the journal can read back.
pub(crate) fn check_message(message: &Message) -> Result<(), EngineError> {
    if message.parts.is_empty() {
        return Err(EngineError::InvalidInput("message has no parts".to_owned()));
    }
    if message.role != Role::User {
        return Err(EngineError::InvalidInput(
            "message role must be `user`".to_owned(),
        ));
    }
    // What the journal could not read back is refused before anything is written.
    let depth = serde_json::to_value(message)
        .map(|v| json_depth(&v))
        .map_err(|e| EngineError::InvalidInput(format!("message does not serialize: {e}")))?;
    if depth > MAX_MESSAGE_DEPTH {
        return Err(EngineError::InvalidInput(format!(
            "message nests {depth} levels deep; the limit is {MAX_MESSAGE_DEPTH}"
        )));
    }
    Ok(())
}

/// How long a reply to a task whose row says it waits for input waits for a brief holder of the task
/// (its driver winding down, a load for a timer, a cancel or another reply) before it is answered
/// that the task is not waiting.
const ANSWER_PATIENCE: Duration = Duration::from_secs(2);

impl Engine {
    /// The task a message names, without sending it: its `taskId`, or the task it started when sent
    /// before (derived from the caller and its `messageId`). `None` for a message without either (it
    /// names no task until sent). For a client resuming the stream of a send it made.
    pub fn task_of_message(&self, caller: &Caller, message: &Message) -> Option<TaskId> {
        match &message.task_id {
            Some(id) => Some(TaskId::from(id.clone())),
            None if message.message_id.is_empty() => None,
            None => Some(task_id_for(caller, &message.message_id)),
        }
    }

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

    /// What `EngineBuilder::check_fold` found: each time a run's live state differed from the fold
    /// of its stored journal. Empty when the check is off or found nothing.
    #[cfg(feature = "testing")]
    pub fn fold_divergences(&self) -> Vec<String> {
        self.inner
            .divergences
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How many tasks this engine has in hand now: being driven, followed by a subscriber, or with
    /// someone at their gate. A number that only grows under steady load is a leak (`bench soak`
    /// prints it).
    pub fn tasks_in_hand(&self) -> usize {
        self.inner.live.len()
    }

    /// True once halted.
    pub fn is_halted(&self) -> bool {
        self.inner.halted.load(Ordering::SeqCst)
    }

    /// Send a user message: a message without `task_id` starts a task of the request's skill (or of
    /// the only or default skill); one with `task_id` answers a task waiting for input. Returns the
    /// task id.
    ///
    /// The send runs to its end whatever becomes of the returned future: a client that hangs up (its
    /// request's future dropped) after the task's creating append was handed to the store still gets
    /// a task that runs, and a retry with the same `messageId` finds it running.
    pub async fn send(&self, request: Request) -> Result<TaskId, EngineError> {
        // Boxed: a pass's future and a hosted send's are kilobytes, which every send's future (and
        // every request's) would otherwise make room for.
        if let Some(passes) = &self.inner.passes {
            return Box::pin(self.send_pass(passes, request)).await;
        }
        #[cfg(feature = "restate")]
        if let Some(ingress) = self.inner.restate() {
            return Box::pin(self.send_hosted(ingress, request)).await;
        }
        let engine = self.clone();
        detached(async move { engine.send_now(request, false).await })
            .await
            .map(|sent| sent.task_id)
    }

    /// [`Engine::send`], then wait until the task is input-required or finished, and return it
    /// with at most `history_length` history messages (all when `None`): a blocking send. A task
    /// the send starts in this engine is followed from its creating append on, so the wait reads
    /// nothing from the store; a reply or a retry waits as [`Engine::wait_settled_with`] does.
    pub async fn send_settled(
        &self,
        request: Request,
        history_length: Option<usize>,
    ) -> Result<Task, EngineError> {
        let caller = request.caller.clone();
        let sent = self.send_following(request).await?;
        self.settled_after(&caller, sent, history_length).await
    }

    /// [`Engine::send`] for a caller that waits for the task to settle
    /// ([`Engine::settled_after`]): a task it starts in this engine is followed from its creating
    /// append on, so that the wait needs no read of the store.
    pub(crate) async fn send_following(&self, request: Request) -> Result<Sent, EngineError> {
        if self.inner.passes.is_some() || self.inner.restate().is_some() {
            let task_id = self.send(request).await?;
            return Ok(Sent {
                task_id,
                follow: None,
            });
        }
        let engine = self.clone();
        detached(async move { engine.send_now(request, true).await }).await
    }

    /// Wait until the task `sent` started or answered is input-required or finished, and return it
    /// with at most `history_length` history messages ([`Engine::wait_settled_with`]).
    pub(crate) async fn settled_after(
        &self,
        caller: &Caller,
        sent: Sent,
        history_length: Option<usize>,
    ) -> Result<Task, EngineError> {
        let Sent { task_id, follow } = sent;
        match follow {
            Some(follow) => super::subscription::settled_followed(
                self,
                caller,
                &task_id,
                follow,
                history_length,
            )
            .await
            .map(|snapshot| snapshot.task),
            None => {
                self.wait_settled_with(caller, &task_id, history_length)
                    .await
            }
        }
    }

    /// Serverless mode: the send is one pass, run to its rest, end or deadline before it returns.
    async fn send_pass(
        &self,
        passes: &super::Passes,
        request: Request,
    ) -> Result<TaskId, EngineError> {
        let Request {
            caller,
            skill,
            mode,
            message,
        } = request;
        let task_id = message.task_id.clone();
        let event = super::PassEvent::Message {
            caller,
            message,
            skill,
            mode,
        };
        let deadline = super::pass::pass_deadline(self.serverless_budget());
        let passed = passes
            .run(event, deadline)
            .await
            .map_err(|e| e.into_engine(task_id.as_deref()))?;
        if passed.rest == super::Rest::Busy && task_id.is_some() {
            // Another invocation drives the task: this reply was not taken. (A message that
            // started the task, sent again while it runs, names it: its answer is the task.)
            return Err(EngineError::NotAwaitingInput {
                task_id: passed.task_id,
                state: TaskState::Working,
            });
        }
        Ok(TaskId::from(passed.task_id))
    }

    pub(super) fn serverless_budget(&self) -> Duration {
        self.inner
            .config
            .serverless
            .unwrap_or(Duration::from_secs(30))
    }

    /// The send; with `follow`, a task it starts here is followed from its creating append on.
    async fn send_now(&self, request: Request, follow: bool) -> Result<Sent, EngineError> {
        let Request {
            caller,
            skill,
            mode,
            message,
        } = request;
        check_message(&message)?;
        match message.task_id.clone() {
            Some(task_id) => {
                let task_id = TaskId::from(task_id);
                let follow = self.answer(&caller, &task_id, message, follow).await?;
                Ok(Sent { task_id, follow })
            }
            None => {
                // A retried message (the client lost the answer) finds the task it created: its
                // creating append is refused (the task exists), and `start_task` says so.
                let task_id = task_id_for(&caller, &message.message_id);
                let skill = self.choose_skill(skill.as_deref())?;
                let mode = mode.unwrap_or(self.inner.config.permission_mode);
                self.start_task(&caller, task_id, skill, mode, message, follow)
                    .await
            }
        }
    }

    /// A retried first message: the task its first send created, if `caller` created it and the
    /// message is the same (another message under its `messageId` is refused).
    async fn retried(
        &self,
        caller: &Caller,
        task_id: &TaskId,
        message: &Message,
    ) -> Result<bool, EngineError> {
        if !self.created(caller, task_id).await? {
            return Ok(false);
        }
        self.same_as_first(task_id, message).await?;
        Ok(true)
    }

    /// True when `task_id` (derived from a caller and a message id) exists and `caller` created it.
    pub(super) async fn created(
        &self,
        caller: &Caller,
        task_id: &TaskId,
    ) -> Result<bool, EngineError> {
        Ok(self
            .inner
            .store
            .task(task_id)
            .await?
            .is_some_and(|row| caller.can_see(row.principal.as_deref())))
    }

    pub(super) fn choose_skill(
        &self,
        skill_id: Option<&str>,
    ) -> Result<Arc<dyn ErasedSkill>, EngineError> {
        match skill_id {
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
            None => Err(EngineError::NoSkillChosen {
                skills: self.inner.order.clone(),
            }),
        }
    }

    async fn start_task(
        &self,
        caller: &Caller,
        task_id: TaskId,
        skill: Arc<dyn ErasedSkill>,
        mode: PermissionMode,
        mut message: Message,
        follow: bool,
    ) -> Result<Sent, EngineError> {
        let info = skill.info();
        // As the client sent it: a retry is compared with it.
        let first = message.clone();
        let task_id = task_id.into_string();
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
            principal: caller.principal_name().map(str::to_owned),
            state: TaskState::Submitted,
            created_at_ms: now,
            updated_at_ms: now,
            wake_at_ms: None,
            waits_on_call: false,
            last_seq: 0,
        };
        let mut state = RunState::new(initial);
        state.call_timeout = self.inner.config.call_timeout;
        super::machine::rules::create(
            &mut state,
            info,
            &context_id,
            record.principal.clone(),
            mode,
            message,
        );
        // Who follows the task subscribes before its creating append: it sees every record.
        let follow =
            follow.then(|| super::subscription::Follow::new(self, &task_id, record.clone()));
        let (tx, gate) = self.inner.live.handles(&task_id);
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
        self.inner.equip(&mut run, &skill);
        // On a shared store the task is leased to this engine when it has room; otherwise it is
        // created unleased and a worker with room claims it.
        let drive_here = !self.inner.shared() || self.inner.has_room();
        let leased = self.inner.shared() && drive_here;
        if leased {
            run.fence = Some(CREATION_TOKEN);
            run.new_lease = Mutex::new(Some(NewLease {
                owner: self.inner.config.worker_id.clone(),
                ttl_ms: i64::try_from(self.inner.config.lease_ttl.as_millis()).unwrap_or(i64::MAX),
            }));
        }
        // The lease is counted from before the append that creates it (this engine's clock is then
        // on the safe side of the store's), and held only once that append committed: a renewal
        // round that ran in between would find no row, take the lease for lost and strand the new
        // task until it expired.
        let lease_sent = std::time::Instant::now();
        let run = Arc::new(run);
        let guard = match gate.clone().try_lock_owned() {
            Ok(guard) => guard,
            Err(_) => {
                // Someone has the task in hand here: its driver (a retry of the message that
                // created it), or a send of the same message at once (then the wait below lasts
                // until that send's run lets the task go).
                let id = TaskId::from(task_id.clone());
                if self.retried(caller, &id, &first).await? {
                    return Ok(Sent {
                        task_id: id,
                        follow: None,
                    });
                }
                gate.lock_owned().await
            }
        };
        // On a store of this engine's alone the task is created by its driver's first append,
        // with what its first step does first (its first command, question or end): one commit
        // where two were. The send is acknowledged once that append is durable (or, past the
        // reply patience, once a flush of the creation alone is). A first message sent again
        // runs its first step up to that append, which the store refuses (nothing of it is
        // journaled or performed); with hooks, which that step would ask again, the creation
        // commits first. On a shared store the creating append takes the lease first.
        let flushed = if !self.inner.shared() && self.inner.config.hooks.is_empty() {
            let created = run.lock().next_seq - 1;
            self.inner.spawn_drive(run.clone(), guard);
            run.flush_through_within(created, self.inner.config.reply_patience)
                .await
        } else {
            let flushed = run.flush().await;
            if flushed.is_err() {
                self.inner.disown(&run).await;
            } else {
                if leased {
                    self.inner.hold(&task_id, CREATION_TOKEN, lease_sent);
                }
                if drive_here {
                    self.inner.spawn_drive(run.clone(), guard);
                }
            }
            flushed
        };
        let id = TaskId::from(task_id);
        if let Err(e) = flushed {
            // The task exists: a retry of the message that created it (the client lost the
            // answer), or the same message sent twice at once (the other send created it).
            if run.duplicate() && self.retried(caller, &id, &first).await? {
                return Ok(Sent {
                    task_id: id,
                    follow: None,
                });
            }
            return Err(e.into());
        }
        Ok(Sent {
            task_id: id,
            // Only a task this engine drives publishes its records here (on a shared store, until
            // another process takes it on: the wait then reads the task, `settled_followed`).
            follow: follow.filter(|_| drive_here),
        })
    }

    /// The task's row, if `caller` may see it (a task it may not see is not found, as one that does
    /// not exist).
    pub(super) async fn visible(
        &self,
        caller: &Caller,
        task_id: &str,
    ) -> Result<TaskRecord, EngineError> {
        match self.inner.store.task(task_id).await? {
            Some(t) if caller.can_see(t.principal.as_deref()) => Ok(t),
            _ => Err(EngineError::TaskNotFound(task_id.to_string())),
        }
    }

    /// A message that names an existing task by its `messageId` must be the message that created
    /// it: an identical retry (the client lost the answer) gets the task, another message under a
    /// used id is refused, never silently answered with a task that ignores it.
    pub(super) async fn same_as_first(
        &self,
        task_id: &TaskId,
        message: &Message,
    ) -> Result<(), EngineError> {
        // The first append holds `task_created` and the `message_received` that made the task.
        let first = self.inner.store.journal_page(task_id, 0, 2).await?;
        let received = first.iter().find_map(|r| match &r.entry {
            Entry::MessageReceived { message } => Some(message),
            _ => None,
        });
        match received {
            Some(first) if !same_message(first, message) => Err(reused_id(&message.message_id)),
            _ => Ok(()),
        }
    }

    /// Whether the task already received a message with this `messageId` (its history says): the
    /// same message again is a retry, answered with the task as it is now and not taken twice;
    /// another message under that id is refused. (The hosted engine's; `Engine::answer` reads the
    /// row and the history at once.)
    #[cfg(feature = "restate")]
    pub(super) async fn received_before(
        &self,
        task_id: &str,
        message: &Message,
    ) -> Result<bool, EngineError> {
        let Some(view) = self.inner.store.task_view(task_id, None).await? else {
            return Ok(false);
        };
        received_in(&view.history, message)
    }

    /// The row of the task `message` answers, if it takes a reply now; `None` when it received
    /// this very message before (a retry: nothing to do). A task that ended, or that is not
    /// waiting for input, refuses it.
    #[cfg(feature = "restate")]
    pub(super) async fn awaiting_reply(
        &self,
        caller: &Caller,
        task_id: &str,
        message: &Message,
    ) -> Result<Option<TaskRecord>, EngineError> {
        Ok(self
            .takes_message(caller, task_id, message, false)
            .await?
            .map(|view| view.record))
    }

    /// [`Engine::awaiting_reply`], also taking a message for a task that works when
    /// `keeps_while_working` (its skill keeps such messages).
    async fn takes_message(
        &self,
        caller: &Caller,
        task_id: &str,
        message: &Message,
        keeps: bool,
    ) -> Result<Option<crate::store::TaskView>, EngineError> {
        // One read for the row and the history (`visible` and `received_before` in one).
        let view = match self.inner.store.task_view(task_id, None).await? {
            Some(view) if caller.can_see(view.record.principal.as_deref()) => view,
            _ => return Err(EngineError::TaskNotFound(task_id.to_string())),
        };
        let record = &view.record;
        let keeps_while_working = keeps && self.while_working(record).is_some();
        if received_in(&view.history, message)? {
            return Ok(None);
        }
        if record.state.is_terminal() {
            return Err(EngineError::TaskFinished {
                task_id: task_id.to_string(),
                state: record.state,
            });
        }
        if record.state != TaskState::InputRequired && !keeps_while_working {
            // The row changes in the same statement as the journal: the task is not waiting (it is
            // working, or sleeping on a timer). Said at once, not after the run ends.
            return Err(EngineError::NotAwaitingInput {
                task_id: task_id.to_string(),
                state: record.state,
            });
        }
        Ok(Some(view))
    }

    /// Whether the task `first` starts on skill `skill` (the request's; `None`: the default)
    /// answers its client with a message rather than the task (the skill says:
    /// [`crate::flow::FlowSkill::answers_with_message`]). Decided from the request alone, as the
    /// send chose the skill, so a send repeated with the same message decides the same without
    /// reading the store. A reply (a message naming its task) never does.
    pub fn answers_with_message(&self, skill: Option<&str>, first: &Message) -> bool {
        first.task_id.is_none()
            && self
                .choose_skill(skill)
                .is_ok_and(|skill| skill.answers_with_message(first))
    }

    /// What the skill of task `record` does with a message sent while the task works: `None` to
    /// refuse it, else keep it (`Some(true)`: it interrupts the task). A skill not registered here
    /// refuses.
    fn while_working(&self, record: &TaskRecord) -> Option<bool> {
        let skill = self.inner.skills.get(&record.skill_id)?;
        match skill.info().while_working {
            WhileWorking::Queue => Some(false),
            WhileWorking::Interrupt => Some(true),
            _ => None,
        }
    }

    /// Take `message` as the reply of the waiting task `task_id` (or keep it for a task that
    /// works). With `follow`, a reply its resumed run will commit is followed from there: the
    /// task as it was read, folded on with every record the run publishes
    /// ([`Engine::settled_after`]).
    async fn answer(
        &self,
        caller: &Caller,
        task_id: &str,
        mut message: Message,
        follow: bool,
    ) -> Result<Option<super::subscription::Follow>, EngineError> {
        let Some(view) = self.takes_message(caller, task_id, &message, true).await? else {
            return Ok(None);
        };
        let record = view.record.clone();
        let keeps = self.while_working(&record);
        if let Some(run) = self.inner.live.running(task_id) {
            // A run is live (a slow call of the visit that asked, an effect beside a question):
            // it takes the reply into its journal itself, and re-runs the visit once it is over.
            // A message while it works is kept in its journal the same way, for the skill.
            let taken = take_reply_live(&run, &message)
                || keeps.is_some_and(|interrupt| keep_live(&run, &message, interrupt));
            if taken {
                run.flush().await?;
                self.inner.crash_at(Boundary::Resuming, &run, None, None);
                return Ok(None);
            }
        }
        let (_, gate) = self.inner.live.handles(task_id);
        // The row says the task waits: whoever holds its gate (the driver winding down after it
        // settled, a load for a timer, a cancel or another reply) lets go at once.
        let Ok(guard) = tokio::time::timeout(ANSWER_PATIENCE, gate.lock_owned()).await else {
            return Err(EngineError::NotAwaitingInput {
                task_id: task_id.to_string(),
                state: TaskState::Working,
            });
        };
        // On a shared store, the engine that just settled the task may still be giving its lease back.
        let patience = self.inner.config.lease_ttl + self.inner.config.poll * 2;
        let owner = self.inner.own(task_id, patience).await?;
        if let Ownership::Busy = owner {
            return Err(EngineError::NotAwaitingInput {
                task_id: task_id.to_string(),
                state: record.state,
            });
        }
        let (run, wait, open_visit) = self.inner.load_owned(task_id, owner.token()).await?;
        let ask = match wait {
            Wait::Input { ask, .. } => ask,
            // A question is open while an effect issued beside it is still to be performed (a crash
            // cut it off): the reply is taken, and the run performs the effect too.
            Wait::Runnable if run.lock().open_question().is_some() => {
                run.lock().open_question().cloned()
            }
            Wait::Terminal(state) => {
                self.inner.disown(&run).await;
                return Err(EngineError::TaskFinished {
                    task_id: task_id.to_string(),
                    state,
                });
            }
            // The task works (a timer, a callee, another worker's wake): its skill keeps the
            // message. An interrupting one is delivered now; a queued one waits for a question.
            _ if keeps.is_some() && !run.lock().cancel_requested() => {
                let interrupt = keeps == Some(true);
                message.context_id = Some(run.context_id.to_string());
                run.lock().queue_message(message, interrupt);
                if let Err(e) = run.flush().await {
                    self.inner.disown(&run).await;
                    return Err(e.into());
                }
                if self.inner.crash_at(Boundary::Resuming, &run, None, None) {
                    return Ok(None);
                }
                if interrupt {
                    self.inner.spawn_drive(run, guard);
                } else {
                    self.inner.disown(&run).await;
                }
                return Ok(None);
            }
            _ => {
                self.inner.disown(&run).await;
                let state = run.lock().status();
                return Err(EngineError::NotAwaitingInput {
                    task_id: task_id.to_string(),
                    state,
                });
            }
        };
        message.context_id = Some(run.context_id.to_string());
        // The view read above is the task as loaded (nothing committed since): a follower goes on
        // from it. On a shared store this engine holds the lease now; once another engine takes
        // the task on (after a timer, say), the follower reads the task (`settled_followed`).
        let follow = (follow && view.record.last_seq + 1 == run.lock().next_seq)
            .then(|| super::subscription::Follow::resumed(self, task_id, view));
        let reply_seq = {
            let mut st = run.lock();
            command::receive_reply(&mut st, message, ask, open_visit);
            st.next_seq - 1
        };
        // The reply is taken and not durable yet: a crash here loses it, and this answer is not
        // acknowledged (its sender sends it again to the task, which still waits).
        if self.inner.crash_at(Boundary::Resuming, &run, None, None) {
            return Err(EngineError::Halted);
        }
        // The driver commits the reply with the resumed step's first append; the answer is
        // acknowledged once that committed (or once a flush of its own did, past its patience).
        self.inner.spawn_drive(run.clone(), guard);
        run.flush_through_within(reply_seq, self.inner.config.reply_patience)
            .await?;
        Ok(follow)
    }

    /// The task as A2A shows it.
    pub async fn task(
        &self,
        caller: &Caller,
        task_id: &TaskId,
        history_length: Option<usize>,
    ) -> Result<Task, EngineError> {
        Ok(super::projection::project_task(
            self.visible_view(caller, task_id, history_length).await?,
        ))
    }

    /// The task's stored view (its row, status message, the newest `history_length` history
    /// messages or all, and its artifacts), if `caller` may see the task.
    pub async fn view(
        &self,
        caller: &Caller,
        task_id: &TaskId,
        history_length: Option<usize>,
    ) -> Result<crate::store::TaskView, EngineError> {
        self.visible_view(caller, task_id, history_length).await
    }

    /// The task's stored view, if `caller` may see the task (see [`Engine::visible`]).
    async fn visible_view(
        &self,
        caller: &Caller,
        task_id: &TaskId,
        history_length: Option<usize>,
    ) -> Result<crate::store::TaskView, EngineError> {
        match self.inner.store.task_view(task_id, history_length).await? {
            Some(view) if caller.can_see(view.record.principal.as_deref()) => Ok(view),
            _ => Err(EngineError::TaskNotFound(task_id.to_string())),
        }
    }

    /// The task as A2A shows it, the seq of the last journal entry it reflects, and whether the task
    /// is settled there (a subscription from that seq would have nothing to say until it is answered).
    pub async fn snapshot(
        &self,
        caller: &Caller,
        task_id: &TaskId,
        history_length: Option<usize>,
    ) -> Result<Snapshot, EngineError> {
        let view = self.visible_view(caller, task_id, history_length).await?;
        Ok(Snapshot {
            last_seq: view.record.last_seq,
            is_final: view.settled,
            task: super::projection::project_task(view),
        })
    }

    /// The task as its creating append left it (submitted, the first message in its history), and
    /// that append's last seq: where the stream of the send that created it starts, so that what
    /// its client sees never depends on how far the task ran before the stream was opened
    /// (`Engine::subscribe_from` that seq gives every later record, in order).
    pub async fn snapshot_at_start(
        &self,
        caller: &Caller,
        task_id: &TaskId,
        history_length: Option<usize>,
    ) -> Result<Snapshot, EngineError> {
        let mut record = self.visible(caller, task_id).await?;
        let mut first = self.inner.store.journal_page(task_id, 0, 1).await?;
        // The creation is `task_created` and the message that made the task; on a store of this
        // engine's alone the same append carries what the first step did first.
        if let Some(made) = first
            .iter()
            .position(|r| matches!(r.entry, Entry::MessageReceived { .. }))
        {
            first.truncate(made + 1);
        }
        let view = crate::store::view::MemView::fold(&first);
        record.last_seq = first.last().map_or(0, |r| r.seq);
        record.state = view.state;
        record.wake_at_ms = None;
        let view = view.view(record, history_length);
        Ok(Snapshot {
            last_seq: view.record.last_seq,
            is_final: view.settled,
            task: super::projection::project_task(view),
        })
    }

    /// True when the task is settled and a follower that has seen its records up to `seq` has seen
    /// the record that settled it (its question or its end): a stream resumed after `seq` has nothing
    /// more to say. Reads the journal after `seq` a page at a time, until a settling record.
    pub async fn settled_by(
        &self,
        caller: &Caller,
        task_id: &TaskId,
        seq: u64,
    ) -> Result<bool, EngineError> {
        if !self.visible_view(caller, task_id, Some(0)).await?.settled {
            return Ok(false);
        }
        let mut after = seq;
        loop {
            let page = self
                .inner
                .store
                .journal_page(task_id, after, super::subscription::PAGE_APPENDS)
                .await?;
            let Some(last) = page.last() else {
                return Ok(true);
            };
            // A question or an end the follower has not seen, or an answer committed since the
            // view was read (the task works again): more to say.
            if page.iter().any(|r| {
                matches!(
                    r.entry,
                    crate::journal::Entry::AwaitingInput { .. }
                        | crate::journal::Entry::Terminal { .. }
                ) || crate::store::view::answers(&r.entry)
            }) {
                return Ok(false);
            }
            after = last.seq;
        }
    }

    /// A page of the tasks `caller` may see that match `query` (A2A 1.0 `ListTasks`), newest status
    /// first: a principal lists its own tasks only, whatever `query.principal` says; the operator
    /// lists every task.
    pub async fn list_views(
        &self,
        caller: &Caller,
        mut query: crate::store::ViewQuery,
    ) -> Result<crate::store::ViewPage, EngineError> {
        if let Caller::Principal(name) = caller {
            query.principal = Some(name.clone());
        }
        Ok(self.inner.store.list_views(&query).await?)
    }

    /// The URL an agent that steps call (`ctx.agent(name, ..)`) was declared with
    /// ([`AgentSpec::new`](super::AgentSpec::new)); `None` for a name the engine does not know.
    pub fn agent_url(&self, name: &str) -> Option<String> {
        self.inner.agents.url(name).map(str::to_owned)
    }

    /// The ids of the tasks this engine's appends change, from now on: one per committed append, for
    /// a reader that follows many tasks (the console's task list). Tasks other engines run on a
    /// shared store are not in it; a reader of those polls the store too.
    pub fn watch_changes(&self) -> super::TaskChanges {
        self.inner.changes.watch()
    }

    /// How many of the tasks `caller` may see match `query` in each state (the state filter and
    /// the cursor aside), one pair per state that has tasks: one count in the SQL stores.
    pub async fn state_counts(
        &self,
        caller: &Caller,
        mut query: crate::store::ViewQuery,
    ) -> Result<Vec<(TaskState, u64)>, EngineError> {
        if let Caller::Principal(name) = caller {
            query.principal = Some(name.clone());
        }
        query.state = None;
        query.after = None;
        Ok(self.inner.store.state_counts(&query).await?)
    }

    /// The task's current state (from its row; cheap).
    pub async fn state(&self, caller: &Caller, task_id: &TaskId) -> Result<TaskState, EngineError> {
        Ok(self.visible(caller, task_id).await?.state)
    }

    /// The task's journal.
    pub async fn journal(
        &self,
        caller: &Caller,
        task_id: &TaskId,
    ) -> Result<Vec<JournalRecord>, EngineError> {
        self.visible(caller, task_id).await?;
        Ok(self.inner.store.journal(task_id, 0).await?)
    }

    /// Cancel a task: compensations of `Compensate` commands run newest first, then the task ends
    /// `canceled`. A finished task answers [`EngineError::TaskFinished`].
    ///
    /// Once started, the cancel is carried out whatever becomes of the returned future (a client that
    /// hangs up only stops waiting for the end).
    ///
    /// A halted engine (shut down, or stopped by a failure) refuses the cancel at once with
    /// [`EngineError::Halted`], and one that halts while the cancel is carried out stops the wait
    /// with it: the cancel is journaled or on the task's row, and whoever runs the task next
    /// finishes it.
    pub async fn cancel(&self, caller: &Caller, task_id: &TaskId) -> Result<Task, EngineError> {
        if self.is_halted() {
            return Err(EngineError::Halted);
        }
        if let Some(passes) = &self.inner.passes {
            let event = super::PassEvent::Cancel {
                caller: caller.clone(),
                task_id: task_id.to_string(),
            };
            let deadline = super::pass::pass_deadline(self.serverless_budget());
            // A task another invocation holds is canceled by whoever takes it next (the row says
            // so); the answer is the task as it stands.
            passes
                .run(event, deadline)
                .await
                .map_err(|e| e.into_engine(Some(task_id.as_str())))?;
            return self.task(caller, task_id, None).await;
        }
        #[cfg(feature = "restate")]
        if let Some(ingress) = self.inner.restate() {
            return self.cancel_hosted(ingress, caller, task_id).await;
        }
        let engine = self.clone();
        let (who, id) = (caller.clone(), task_id.clone());
        detached(async move { engine.request_cancel(&who, &id).await }).await?;
        let ended = async {
            let mut sub = self.subscribe(caller, task_id).await?;
            while let Some(update) = sub.next().await {
                update?;
            }
            Ok::<_, EngineError>(())
        };
        let halted = async {
            while !self.is_halted() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::select! {
            ended = ended => ended?,
            () = halted => return Err(EngineError::Halted),
        }
        self.task(caller, task_id, None).await
    }

    /// The part of [`Engine::cancel`] that changes anything: the request on the row and in the
    /// task's run (loading the task when nobody drives it here). Returns when the cancel is in the
    /// hands of whoever drives the task.
    async fn request_cancel(&self, caller: &Caller, task_id: &TaskId) -> Result<(), EngineError> {
        let record = self.visible(caller, task_id).await?;
        if record.state.is_terminal() {
            return Err(EngineError::TaskFinished {
                task_id: task_id.to_string(),
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
            .live
            .running(task_id)
            .is_some_and(|run| run.lock().request_cancel());
        if !marked_running {
            let (_, gate) = self.inner.live.handles(task_id);
            let guard = gate.lock_owned().await;
            let owner = self.inner.own(task_id, Duration::ZERO).await?;
            if let Ownership::Busy = owner {
                // Another engine drives it: the request on its row is where its owner (or the next
                // one) sees it.
                return Ok(());
            }
            let (run, wait, _) = self.inner.load_owned(task_id, owner.token()).await?;
            match wait {
                Wait::Terminal(state) => {
                    self.inner.disown(&run).await;
                    return Err(EngineError::TaskFinished {
                        task_id: task_id.to_string(),
                        state,
                    });
                }
                _ => {
                    run.lock().request_cancel();
                    self.inner.spawn_drive(run, guard);
                }
            }
        }
        Ok(())
    }

    /// Follow a task: its journal so far, then live records until the terminal entry.
    pub async fn subscribe(
        &self,
        caller: &Caller,
        task_id: &TaskId,
    ) -> Result<Subscription, EngineError> {
        self.subscribe_from(caller, task_id, 0).await
    }

    /// Follow a task from after `after_seq`.
    pub async fn subscribe_from(
        &self,
        caller: &Caller,
        task_id: &TaskId,
        after_seq: u64,
    ) -> Result<Subscription, EngineError> {
        let record = self.visible(caller, task_id).await?;
        let rx = self.inner.live.subscribe(task_id);
        // Read after subscribing (a run marks its task before it tells its subscribers): a run
        // that stopped on a failed append before this subscription began is known either way.
        let stalled = self.inner.stalled.is_stalled(task_id);
        let backlog = self
            .inner
            .store
            .journal_page(task_id, after_seq, super::subscription::PAGE_APPENDS)
            .await?;
        Ok(Subscription::new(
            self.clone(),
            task_id.clone(),
            record.context_id,
            backlog,
            rx,
            after_seq,
        )
        .stalled(stalled))
    }

    /// Wait until the task is input-required or finished, and return it.
    pub async fn wait_settled(
        &self,
        caller: &Caller,
        task_id: &TaskId,
    ) -> Result<Task, EngineError> {
        self.wait_settled_with(caller, task_id, None).await
    }

    /// Like [`Engine::wait_settled`], returning at most `history_length` history messages. A task
    /// settled already is read once; else the wait follows the journal from where that read left it
    /// (not from its start), and reads the task again when it settles: the cost does not grow with
    /// the journal's length.
    pub async fn wait_settled_with(
        &self,
        caller: &Caller,
        task_id: &TaskId,
        history_length: Option<usize>,
    ) -> Result<Task, EngineError> {
        Ok(self
            .snapshot_settled(caller, task_id, history_length)
            .await?
            .task)
    }

    /// [`Engine::wait_settled_with`] as a [`Snapshot`]: the settled task with the journal seq it
    /// reflects.
    pub async fn snapshot_settled(
        &self,
        caller: &Caller,
        task_id: &TaskId,
        history_length: Option<usize>,
    ) -> Result<Snapshot, EngineError> {
        // In serverless mode nothing runs after the request's pass: the task is as it left it.
        if self.inner.passes.is_some() {
            return self.snapshot(caller, task_id, history_length).await;
        }
        // Every commit of a task this engine drives is published here: wait on those (the wait
        // reads the task once it listens, and returns it at once when it is settled; on a shared
        // store it reads the task again whenever nothing was published for a while).
        if self.inner.restate().is_none() {
            return super::subscription::settled_live(self, caller, task_id, history_length).await;
        }
        let snapshot = self.snapshot(caller, task_id, history_length).await?;
        if snapshot.is_final {
            return Ok(snapshot);
        }
        let mut sub = self
            .subscribe_from(caller, task_id, snapshot.last_seq)
            .await?;
        while let Some(update) = sub.next().await {
            if update?.is_final {
                break;
            }
        }
        self.snapshot(caller, task_id, history_length).await
    }

    /// A remote agent this engine called posted an update of its task to the call webhook
    /// (`EngineBuilder::call_webhook`) for call `call` (its name in the URL) of `task_id`: with
    /// the right token, the task is woken (in the background) to ask its callees where they stand.
    /// Posts are coalesced: one that comes while a wake of the task is queued merges into it, one
    /// that comes while a wake runs owes one more after it, and a task's wakes are spaced (three
    /// at once, then one a second); a wake for a call that settled does nothing. `None`: this
    /// engine has no webhook; `Some(false)`: the token is not good for this call now.
    pub fn call_notified(&self, task_id: &str, call: &str, token: &str) -> Option<bool> {
        if !self.call_notification_valid(task_id, call, token)? {
            return Some(false);
        }
        self.inner.call_posted(task_id, call);
        Some(true)
    }

    /// Whether `token` is one this engine's call webhook gave for call `call` of `task_id` and
    /// has not expired (`None`: no webhook), without waking anything.
    pub fn call_notification_valid(&self, task_id: &str, call: &str, token: &str) -> Option<bool> {
        Some(
            self.inner
                .agents
                .webhook()?
                .verify(task_id, call, token, crate::journal::now_ms()),
        )
    }

    /// Rehydrate every non-terminal task from its journal and continue it. Returns how many.
    ///
    /// On a shared store (Postgres) this starts the worker loop instead: tasks are claimed through
    /// leases as this engine has room, and none is resumed here (returns 0).
    ///
    /// A waiting task costs nothing until an event arrives for it: one waiting for input is loaded
    /// when a reply addresses it, one with a timer (a sleep, a question's deadline) when its alarm
    /// rings — the rule a shared store's claims follow (working tasks without a timer, and due
    /// timers). Tasks that were working are loaded now, and so are tasks waiting on a call bound to
    /// its callee ([`TaskRecord::waits_on_call`]): the callee may have settled while nothing watched
    /// it, so it is asked at once rather than at the call's recheck (on a shared store, the worker
    /// asks the callees of every call waiting in the cluster once it starts). Returns how many were
    /// taken in hand (resumed or given an alarm).
    ///
    /// With [`Retention`](super::Retention) set it also starts pruning finished tasks: one batch
    /// now (an error if the store cannot prune), then a pass every
    /// [`Retention::period`](super::Retention::period).
    pub async fn recover(&self) -> Result<usize, EngineError> {
        self.inner.start_pruner().await?;
        self.start_push();
        if self.inner.shared() {
            self.inner.start_worker();
            self.inner.ask_waiting_callees();
            return Ok(0);
        }
        let tasks = self
            .inner
            .store
            .list(TaskQuery {
                non_terminal: true,
                skip_idle_input: true,
                ..TaskQuery::default()
            })
            .await?;
        let mut taken = 0;
        for task in tasks {
            match (task.state, task.wake_at_ms) {
                // The callee may have settled while this engine was down: ask it now (the call
                // waits again, on its recheck journaled before, if it still works).
                (_, Some(_)) if task.waits_on_call => {
                    if let Err(e) = self.inner.resume(&task.id, None).await {
                        tracing::error!(task = %task.id, error = %e, "task waiting on a call not resumed");
                        continue;
                    }
                }
                (_, Some(at)) => self.inner.schedule_timer(task.id, at),
                (TaskState::InputRequired, None) => continue,
                _ => {
                    if let Err(e) = self.inner.resume(&task.id, None).await {
                        tracing::error!(task = %task.id, error = %e, "task not resumed");
                        continue;
                    }
                }
            }
            taken += 1;
        }
        Ok(taken)
    }
}

/// Run `work` as a task of its own and wait for its result: dropping the returned future (a client
/// that hung up) does not cut `work` off between a write and what must follow it (spawning the
/// task's driver). A panic in `work` is an [`EngineError::Internal`], not the caller's panic.
async fn detached<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T, EngineError>> + Send + 'static,
) -> Result<T, EngineError> {
    match tokio::spawn(tracing::Instrument::in_current_span(work)).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => {
            let panic = e.into_panic();
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned());
            tracing::error!(panic = %message, "a request's work panicked");
            Err(EngineError::Internal(message))
        }
        // The runtime is shutting down.
        Err(_) => Err(EngineError::Halted),
    }
}

/// What a send did: the task it started or answered, and, for a task it started that this engine
/// drives, the task followed from its creating append on ([`Engine::send_following`]).
pub(crate) struct Sent {
    pub task_id: TaskId,
    follow: Option<super::subscription::Follow>,
}

impl From<TaskId> for Sent {
    fn from(task_id: TaskId) -> Self {
        Sent {
            task_id,
            follow: None,
        }
    }
}

/// Whether `history` holds a message with `message`'s `messageId` from the user: the same message
/// (a retry: true), or another one under that id (refused).
fn received_in(history: &[Message], message: &Message) -> Result<bool, EngineError> {
    match history
        .iter()
        .find(|m| m.role == Role::User && m.message_id == message.message_id)
    {
        Some(before) if same_message(before, message) => Ok(true),
        Some(_) => Err(reused_id(&message.message_id)),
        None => Ok(false),
    }
}

/// Give `message` to the live `run` as the reply to its open question, unless its driver stopped
/// (then the reply goes through the gate like any), the task ended or is being canceled, or no
/// question is open. Under the run's lock, so the driver either sees the work it queues before it
/// closes or has closed already.
fn take_reply_live(run: &TaskRun, message: &Message) -> bool {
    let mut st = run.lock();
    if st.closed || st.status().is_terminal() || st.cancel_requested() {
        return false;
    }
    let Some(ask) = st.open_question().cloned() else {
        return false;
    };
    let open_visit = st
        .open()
        .and_then(|open| st.visit_event.clone().filter(|(v, _)| *v == open.visit));
    let mut message = message.clone();
    message.context_id = Some(run.context_id.to_string());
    command::receive_reply(&mut st, message, Some(ask), open_visit);
    true
}

/// Keep `message`, sent while the task works, in the live run's journal (see
/// [`WhileWorking`]); false when the run cannot take it (its driver stopped, the task ended or is
/// canceling, or it waits for input: then the message is a reply).
fn keep_live(run: &TaskRun, message: &Message, interrupt: bool) -> bool {
    let mut st = run.lock();
    if st.closed
        || st.status().is_terminal()
        || st.cancel_requested()
        || st.status() == TaskState::InputRequired
    {
        return false;
    }
    let mut message = message.clone();
    message.context_id = Some(run.context_id.to_string());
    st.queue_message(message, interrupt);
    true
}

/// Two messages say the same thing: the same parts, metadata, extensions and referenced tasks (the
/// ids a server fills in, `taskId` and `contextId`, aside).
pub(crate) fn same_message(a: &Message, b: &Message) -> bool {
    a.role == b.role
        && a.parts == b.parts
        && a.metadata == b.metadata
        && a.extensions == b.extensions
        && a.reference_task_ids == b.reference_task_ids
}

pub(crate) fn reused_id(message_id: &str) -> EngineError {
    EngineError::InvalidInput(format!(
        "messageId `{message_id}` was already used for a different message; send each new message with a new messageId"
    ))
}
