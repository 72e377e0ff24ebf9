//! The driver: runs one task's queued work — step visits and transition commands — until the task
//! finishes or waits (input, timer). It is the only writer of its task while it runs.

use std::sync::Arc;

use futures::FutureExt;

use super::call::CallStep;
use super::command::{self, Issued, Outstanding};
use super::invoke::{StepInvoker, VisitStop, VISIT};
use super::run::{RunState, TaskRun, Work};
use super::Inner;
use crate::flow::{
    Cmd, ErasedSkill, Event, InvocationId, Next, Receipt, StepCtx, StepError, Transition,
};
use crate::journal::{now_ms, Compensable, Entry, TransitionKind};
use crate::model::{Message, Part, TaskState};

/// How a drive ended.
pub(crate) enum Stop {
    /// Finished or waiting; nothing more to do now.
    Idle,
    /// The engine halted.
    Halted,
}

/// The text a panic was raised with, for the log.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

fn status_message(text: &str) -> Message {
    Message::agent_text(text)
}

impl Inner {
    /// Run the task's queue to exhaustion, in a `task` span (the parent of its step and command spans).
    pub(crate) async fn drive(self: &Arc<Self>, run: Arc<TaskRun>) -> Stop {
        let span = tracing::info_span!("task", task = %run.task_id, skill = %run.skill_id, mode = ?run.mode);
        tracing::Instrument::instrument(self.drive_queue(run), span).await
    }

    async fn drive_queue(self: &Arc<Self>, run: Arc<TaskRun>) -> Stop {
        loop {
            if run.is_halted() {
                return Stop::Halted;
            }
            let (work, cancel) = {
                let mut st = run.lock();
                if st.status().is_terminal() {
                    (None, false)
                } else {
                    let cancel = st.cancel_requested();
                    let mut work = st.queue.pop_front();
                    while let Some(Work::Activate {
                        rerun: Some(visit), ..
                    }) = &work
                    {
                        if !st.rerun_is_stale(*visit) {
                            break;
                        }
                        work = st.queue.pop_front();
                    }
                    (work, cancel)
                }
            };
            if cancel {
                return self.finish_canceled(&run).await;
            }
            let Some(work) = work else {
                let stop = self.settle(&run).await;
                if let Stop::Idle = stop {
                    // A cancel asked while the task settled (during its last flush) is carried out
                    // now; from the close on, a cancel no longer reaches this run (see `closed`).
                    let mut st = run.lock();
                    // A cancel, or a reply taken while the task settled (during its last flush),
                    // is carried out now; from the close on, neither reaches this run (see
                    // `closed`).
                    if !st.status().is_terminal() && (st.cancel_requested() || !st.queue.is_empty())
                    {
                        continue;
                    }
                    st.close();
                }
                return stop;
            };
            let step = match work {
                Work::Execute(id) => self.execute(&run, id).await,
                Work::Activate { event, rerun } => self.activate(&run, event, rerun).await,
            };
            if let Err(stop) = step {
                return stop;
            }
        }
    }

    /// The queue is empty: flush, and fail the task if nothing can ever wake it.
    async fn settle(self: &Arc<Self>, run: &Arc<TaskRun>) -> Stop {
        let stuck = {
            let st = run.lock();
            let waiting = st.status().is_terminal()
                || st.status() == TaskState::InputRequired
                || st.has_outstanding_wake();
            !waiting
        };
        if stuck {
            let reason = "the skill moved to a state that waits for an event, but no command, timer or input is outstanding";
            return self.finish_failed(run, reason.to_owned()).await;
        }
        match run.flush().await {
            Ok(()) => Stop::Idle,
            Err(_) => Stop::Halted,
        }
    }

    /// Perform (or deliver) a command a transition issued.
    async fn execute(self: &Arc<Self>, run: &Arc<TaskRun>, id: InvocationId) -> Result<(), Stop> {
        let (rec, recovered) = {
            let st = run.lock();
            let Some(rec) = st.command(&id).cloned() else {
                return Ok(());
            };
            let recovered = st.recovered(&rec);
            (rec, recovered)
        };
        let deliver = |receipt: &Receipt| Work::Activate {
            event: command::result_event(id.clone(), &rec.cmd, receipt),
            rerun: None,
        };
        if let Some(receipt) = &rec.receipt {
            run.lock().queue.push_front(deliver(receipt));
            return Ok(());
        }
        match command::outstanding(&rec, recovered, now_ms()) {
            // A timer that fired, or a question answered by nobody by its deadline (answered ones
            // get their receipt through `Engine::send`): it takes its default, as in a step.
            Outstanding::Due => {
                let mut st = run.lock();
                command::settle_due(&mut st, &id, &rec.cmd);
                let receipt = st.command(&id).and_then(|r| r.receipt.clone());
                if let Some(receipt) = receipt {
                    st.queue.push_front(deliver(&receipt));
                }
                Ok(())
            }
            Outstanding::Timer(at) | Outstanding::Question(Some(at)) => {
                self.schedule_timer(run.task_id.to_string(), at);
                Ok(())
            }
            Outstanding::Question(None) => Ok(()),
            Outstanding::Unknown => {
                let err = StepError::OutcomeUnknown {
                    what: rec.cmd.kind.fingerprint(),
                    id,
                };
                Err(self.finish_failed(run, err.to_string()).await)
            }
            Outstanding::Perform if rec.cmd.kind.is_call() => {
                if run.flush().await.is_err() {
                    return Err(Stop::Halted);
                }
                match self.call(run, &id, &rec.cmd, Some(&rec)).await {
                    CallStep::Settled(receipt) => {
                        run.lock().queue.push_front(deliver(&receipt));
                        Ok(())
                    }
                    // A cancel is carried out by the driver's loop, which sees it next.
                    CallStep::Waiting | CallStep::Canceled => Ok(()),
                    CallStep::Halted => Err(Stop::Halted),
                }
            }
            Outstanding::Perform => {
                if run.flush().await.is_err() {
                    return Err(Stop::Halted);
                }
                let Some(receipt) = self.perform(run, &id, &rec.cmd, rec.attempts).await else {
                    return Err(Stop::Halted);
                };
                run.lock().queue.push_front(deliver(&receipt));
                Ok(())
            }
        }
    }

    /// One step visit: deliver `event` to the current state and apply the transition.
    async fn activate(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        event: Event,
        rerun: Option<u64>,
    ) -> Result<(), Stop> {
        let (visit, state, skill, step) = self.begin_visit(run, &event, rerun).await?;
        let stop = Arc::new(VisitStop::default());
        let invoker = StepInvoker {
            engine: self.clone(),
            run: run.clone(),
            visit,
            step: step.clone(),
            stop: stop.clone(),
            batch: Default::default(),
        };
        let ctx = StepCtx::new(
            run.task_id.clone(),
            run.context_id.clone(),
            step.clone(),
            Arc::new(invoker),
        );
        let hook_ctx = super::HookContext {
            task_id: run.task_id.to_string(),
            skill_id: run.skill_id.clone(),
            step: step.clone(),
            visit,
            mode: run.mode,
        };
        for hook in &self.config.hooks {
            if let super::HookDecision::Deny(reason) = hook.before_step(&hook_ctx).await {
                return Err(self
                    .finish_failed(run, format!("step `{step}` denied by a hook: {reason}"))
                    .await);
            }
        }
        let mut result = VISIT
            .scope(
                stop.token(),
                self.run_step(run, &*skill, state, event, &ctx, visit),
            )
            .await;
        let alive = ctx.calls_alive();
        if alive > 0 && !matches!(result, Err(StepError::Halted)) {
            // The step's locals are gone: a call still alive was moved out of the step (a spawned
            // task): its effect would run, or its outcome arrive, with no step to journal it for.
            stop.fail(format!(
                "step `{step}` returned while {alive} ctx call(s) it made were still pending outside it (in a spawned task, or stored away): await every ctx call inside the step before it returns; run calls together with `ctx.all` or `ctx.race`"
            ));
        }
        if let Some(stop) = stop.error() {
            // A call of this visit suspended it (or the engine halted, or the task is canceling):
            // what the step made of that error does not count.
            if !matches!(&result, Err(e) if std::mem::discriminant(e) == std::mem::discriminant(&stop))
            {
                tracing::debug!(task = %run.task_id, step = %step, stop = %stop, "the step went on after a call stopped its visit; its result is ignored");
            }
            result = Err(stop);
        }
        if !self.config.hooks.is_empty() {
            let outcome = match &result {
                Ok(t) => TransitionKind::from(&t.next).to_string(),
                Err(e) => e.to_string(),
            };
            for hook in &self.config.hooks {
                hook.after_step(&hook_ctx, &outcome).await;
            }
        }
        match result {
            Err(StepError::Rejected(reason)) => Err(self
                .finish(run, TaskState::Rejected, Some(status_message(&reason)))
                .await),
            Ok(transition) => {
                let taken = ctx.positions_taken();
                self.apply(run, visit, &step, transition, taken).await
            }
            Err(StepError::Suspended) => match run.flush().await {
                Ok(()) => Ok(()),
                Err(_) => Err(Stop::Halted),
            },
            Err(StepError::Halted) => Err(Stop::Halted),
            Err(StepError::Canceled) => Err(self.finish_canceled(run).await),
            Err(other) => {
                tracing::warn!(task = %run.task_id, step = %step, error = %other, "step failed");
                Err(self.finish_failed(run, other.to_string()).await)
            }
        }
    }

    /// The visit's number, state, skill and step; a new visit (not a `rerun`) is journaled. A task
    /// past `max_steps`, or whose skill is gone, fails instead.
    async fn begin_visit(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        event: &Event,
        rerun: Option<u64>,
    ) -> Result<(u64, serde_json::Value, Arc<dyn ErasedSkill>, String), Stop> {
        let (visit, state) = {
            let st = run.lock();
            (rerun.unwrap_or(st.visit() + 1), st.state().clone())
        };
        if visit > self.config.max_steps {
            let reason = format!("max_steps exceeded: the task ran {} step visits (limit {}); a loop that never ends?", visit - 1, self.config.max_steps);
            return Err(self.finish_failed(run, reason).await);
        }
        let Some(skill) = self.skills.get(&run.skill_id).cloned() else {
            let reason = format!("skill `{}` is not registered", run.skill_id);
            return Err(self.finish_failed(run, reason).await);
        };
        let step = skill.step_name(&state);
        run.lock().visit_event = Some((visit, event.clone()));
        if rerun.is_none() {
            let mut st = run.lock();
            if matches!(event, Event::UserMessage { .. }) {
                st.set_status(TaskState::Working);
            }
            st.push(Entry::Activated {
                visit,
                step: step.clone(),
                state: state.clone(),
                event: event.clone(),
            });
        }
        Ok((visit, state, skill, step))
    }

    /// Run the skill's step in a `step` span; a panic becomes a failure whose message names only the
    /// skill and the step (the payload, which may quote data or secrets, goes to the log).
    async fn run_step(
        &self,
        run: &TaskRun,
        skill: &dyn ErasedSkill,
        state: serde_json::Value,
        event: Event,
        ctx: &StepCtx,
        visit: u64,
    ) -> Result<Transition<serde_json::Value>, StepError> {
        let step = ctx.step();
        let span = tracing::info_span!("step", task = %run.task_id, skill = %run.skill_id, step = %step, visit);
        let result = tracing::Instrument::instrument(
            std::panic::AssertUnwindSafe(skill.activate(state, event, ctx)).catch_unwind(),
            span,
        )
        .await;
        result.unwrap_or_else(|panic| {
            tracing::error!(task = %run.task_id, skill = %run.skill_id, step = %step, visit, panic = %panic_text(&*panic), "step panicked");
            Err(StepError::Failed(format!(
                "step `{step}` of skill `{}` panicked; see the server log",
                run.skill_id
            )))
        })
    }

    /// Every `checkpoint_every` visits, after a `goto` that leaves nothing outstanding, journal a
    /// checkpoint (replay restarts from it) and forget the commands only replay needed.
    fn checkpoint(&self, st: &mut RunState, visit: u64) {
        let every = self.config.checkpoint_every;
        if every == 0 || !visit.is_multiple_of(every) || st.cancel_requested() {
            return;
        }
        let quiet = st.queue.len() == 1 && st.commands().values().all(|c| c.receipt.is_some());
        if !quiet {
            return;
        }
        let compensable: Vec<Compensable> = st
            .compensable()
            .iter()
            .filter_map(|id| {
                let rec = st.command(id)?;
                Some(Compensable {
                    id: id.clone(),
                    cmd: rec.cmd.clone(),
                    receipt: rec.receipt.clone()?,
                })
            })
            .collect();
        let entry = Entry::Checkpoint {
            visit,
            state: st.state().clone(),
            status: st.status(),
            compensable,
        };
        // The fold forgets what only replay needed (closed visits' commands).
        st.push(entry);
    }

    /// Journal a transition and queue what follows it.
    async fn apply(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        visit: u64,
        step: &str,
        t: Transition<serde_json::Value>,
        ordinal: u32,
    ) -> Result<(), Stop> {
        let Transition {
            next,
            cmds,
            messages,
            artifacts,
        } = t;
        let effects_only = cmds.iter().all(|c| c.kind.is_journal_effect());
        if !effects_only && !matches!(next, Next::To(_) | Next::Goto(_)) {
            let reason = format!("step `{step}` returned a final or waiting transition with commands; only `to` and `goto` transitions may carry commands (messages and artifacts are fine)");
            return Err(self.finish_failed(run, reason).await);
        }
        let kind = TransitionKind::from(&next);
        // A re-run of a visit whose final transition was journaled before a crash (see replay): the
        // transition, its messages and artifacts are durable already; only the ending is left to do.
        let recorded = {
            let mut st = run.lock();
            st.journaled_end
                .take_if(|(v, _)| *v == visit)
                .map(|(_, recorded)| recorded)
        };
        match recorded {
            Some(recorded) if recorded != kind => {
                let reason = format!("step `{step}` of skill `{}` ended the task with `{recorded}` before a restart and returned `{kind}` when re-run; a step must return the same transition given the same receipts", run.skill_id);
                return Err(self.finish_failed(run, reason).await);
            }
            Some(_) => {}
            None => {
                let mut st = run.lock();
                for message in messages {
                    st.push(Entry::MessageEmitted { message });
                }
                for artifact in artifacts {
                    st.push(Entry::ArtifactEmitted {
                        artifact,
                        append: false,
                        last_chunk: true,
                    });
                }
                self.journal_transition(&mut st, &run.task_id, visit, &next, cmds, ordinal);
            }
        }
        self.follow(run, next).await
    }

    /// Journal the transition `next` of `visit` and its commands, and queue what follows: the next
    /// visit after a `goto`, each command to perform or wait for.
    fn journal_transition(
        &self,
        st: &mut RunState,
        task_id: &str,
        visit: u64,
        next: &Next<serde_json::Value>,
        cmds: Vec<Cmd>,
        mut ordinal: u32,
    ) {
        let plain_goto = matches!(next, Next::Goto(_)) && cmds.is_empty();
        // The state moves into the journal entry (the fold reads it from there).
        let state = match next {
            Next::To(s) | Next::Goto(s) | Next::AwaitInput { state: s, .. } => Some(s.clone()),
            _ => None,
        };
        st.push(Entry::Transitioned {
            visit,
            next: TransitionKind::from(next),
            state,
        });
        if let Next::Goto(_) = next {
            st.queue.push_back(Work::Activate {
                event: Event::Enter,
                rerun: None,
            });
        }
        let now = now_ms();
        for mut cmd in cmds {
            let id = InvocationId::derive(task_id, visit, ordinal);
            ordinal += 1;
            cmd.policy = self.effects.policy_for(&cmd.kind, cmd.policy);
            if command::issue(st, &id, cmd, true, now) != Issued::Journaled {
                st.queue.push_back(Work::Execute(id));
            }
        }
        if plain_goto {
            self.checkpoint(st, visit);
        }
    }

    /// What follows a journaled transition: wait for input, end the task, or go on.
    async fn follow(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        next: Next<serde_json::Value>,
    ) -> Result<(), Stop> {
        match next {
            Next::AwaitInput {
                slot,
                message,
                state,
            } => {
                {
                    let mut st = run.lock();
                    st.push(Entry::AwaitingInput {
                        slot,
                        message,
                        resume: Some(state),
                        ask: None,
                    });
                    st.set_status(TaskState::InputRequired);
                }
                if run.flush().await.is_err() {
                    return Err(Stop::Halted);
                }
                if self.crash_at(super::fault::Boundary::AwaitingInput, run, None, None) {
                    return Err(Stop::Halted);
                }
                Ok(())
            }
            Next::Complete { message } => {
                Err(self.finish(run, TaskState::Completed, message).await)
            }
            Next::Fail { reason } => Err(self.finish_failed(run, reason).await),
            Next::Reject { reason } => Err(self
                .finish(run, TaskState::Rejected, Some(status_message(&reason)))
                .await),
            Next::To(_) | Next::Goto(_) | Next::Ignore => Ok(()),
        }
    }

    /// End the task in `state`.
    pub(crate) async fn finish(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        state: TaskState,
        message: Option<Message>,
    ) -> Stop {
        {
            let mut st = run.lock();
            st.set_wake(None);
            st.queue.clear();
            st.push(Entry::Terminal { state, message });
        }
        tracing::info!(task = %run.task_id, state = state.as_str(), "task finished");
        match run.flush().await {
            Ok(()) => Stop::Idle,
            Err(_) => Stop::Halted,
        }
    }

    /// Compensate, then end the task as failed.
    pub(crate) async fn finish_failed(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        reason: String,
    ) -> Stop {
        if self.compensate(run).await.is_err() {
            return Stop::Halted;
        }
        self.cancel_calls(run).await;
        self.finish(
            run,
            TaskState::Failed,
            Some(Message::new(
                crate::model::Role::Agent,
                vec![Part::text(reason)],
            )),
        )
        .await
    }

    /// Compensate, then end the task as canceled.
    pub(crate) async fn finish_canceled(self: &Arc<Self>, run: &Arc<TaskRun>) -> Stop {
        // A run recovered after a crash during the cancel's compensations told the skill already.
        let delivered = run.lock().cancel_delivered();
        if !delivered {
            self.deliver_cancel(run).await;
        }
        if self.compensate(run).await.is_err() {
            return Stop::Halted;
        }
        self.cancel_calls(run).await;
        self.finish(
            run,
            TaskState::Canceled,
            Some(status_message("Task canceled.")),
        )
        .await
    }

    /// Tell the skill (`Event::Cancel`) so it can say goodbye: its messages and artifacts are kept;
    /// its commands are refused (the task is canceling) and its next state is ignored.
    async fn deliver_cancel(self: &Arc<Self>, run: &Arc<TaskRun>) {
        let Some(skill) = self.skills.get(&run.skill_id).cloned() else {
            return;
        };
        let (visit, state) = {
            let st = run.lock();
            (st.visit() + 1, st.state().clone())
        };
        let step = skill.step_name(&state);
        run.lock().push(Entry::Activated {
            visit,
            step: step.clone(),
            state: state.clone(),
            event: Event::Cancel,
        });
        let stop = Arc::new(VisitStop::default());
        let invoker = StepInvoker {
            engine: self.clone(),
            run: run.clone(),
            visit,
            step: step.clone(),
            stop: stop.clone(),
            batch: Default::default(),
        };
        let ctx = StepCtx::new(
            run.task_id.clone(),
            run.context_id.clone(),
            step,
            Arc::new(invoker),
        );
        let result = VISIT
            .scope(
                stop.token(),
                std::panic::AssertUnwindSafe(skill.activate(state, Event::Cancel, &ctx))
                    .catch_unwind(),
            )
            .await;
        if let Err(panic) = &result {
            tracing::error!(task = %run.task_id, skill = %run.skill_id, visit, panic = %panic_text(&**panic), "step panicked on cancel");
        }
        let mut st = run.lock();
        if let Ok(Ok(t)) = result {
            for message in t.messages {
                st.push(Entry::MessageEmitted { message });
            }
            for artifact in t.artifacts {
                st.push(Entry::ArtifactEmitted {
                    artifact,
                    append: false,
                    last_chunk: true,
                });
            }
        }
        st.push(Entry::Transitioned {
            visit,
            next: TransitionKind::Cancel,
            state: None,
        });
    }

    /// Run the compensations of successful `Compensate` commands, newest first, each journaled.
    async fn compensate(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
    ) -> Result<(), super::run::FlushError> {
        let todo: Vec<(InvocationId, Cmd, serde_json::Value)> = {
            let st = run.lock();
            st.compensable()
                .iter()
                .rev()
                .filter_map(|id| {
                    let rec = st.command(id)?;
                    let value = rec.receipt.as_ref()?.outcome.clone().ok()?;
                    Some((id.clone(), rec.cmd.clone(), value))
                })
                .collect()
        };
        for (id, cmd, value) in todo {
            run.flush().await?;
            let outcome = self.effects.compensate(&id, &cmd.kind, value).await;
            run.lock().push(Entry::Compensated { id, outcome });
        }
        Ok(())
    }
}
