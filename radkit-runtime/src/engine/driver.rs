//! The driver: runs one task's queued work — step visits and transition commands — until the task
//! finishes or waits (input, timer). It is the only writer of its task while it runs.

use std::sync::Arc;

use futures::FutureExt;

use super::call::CallStep;
use super::invoke::{StepInvoker, VISIT};
use super::machine::rules::{self, After, AfterVisit, Execute, VisitResult};
use super::machine::visit::VisitStop;
use super::run::{TaskRun, Work};
use super::Inner;
use crate::flow::{ErasedSkill, Event, InvocationId, StepCtx, StepError, Transition};
use crate::journal::{Entry, TransitionKind};
use crate::model::{Message, TaskState};

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
            let (work, cancel, abandoned) = {
                let mut st = run.lock();
                let cancel = !st.status().is_terminal() && st.cancel_requested();
                let work = if cancel {
                    None
                } else {
                    rules::next_work(&mut st)
                };
                (work, cancel, std::mem::take(&mut st.abandoned))
            };
            if !abandoned.is_empty() {
                // A callee working for a call an interrupt cut off works for nobody now.
                self.cancel_abandoned(&run, abandoned);
            }
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
                    if !st.status().is_terminal()
                        && (st.cancel_requested() || !st.queue.is_empty() || st.interrupt_pending())
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
        let stuck = rules::stuck(&run.lock());
        if stuck {
            return self.finish_failed(run, rules::STUCK.to_owned()).await;
        }
        match run.flush().await {
            Ok(()) => Stop::Idle,
            Err(_) => Stop::Halted,
        }
    }

    /// Perform (or deliver) a command a transition issued.
    async fn execute(self: &Arc<Self>, run: &Arc<TaskRun>, id: InvocationId) -> Result<(), Stop> {
        let executed = rules::execute(&mut run.lock(), &id);
        let rec = match executed {
            Execute::Done | Execute::Wait => return Ok(()),
            Execute::Timer(at) => {
                self.schedule_timer(run.task_id.to_string(), at);
                return Ok(());
            }
            Execute::Unknown(err) => return Err(self.finish_failed(run, err.to_string()).await),
            Execute::Perform(rec) => rec,
        };
        if run.flush().await.is_err() {
            return Err(Stop::Halted);
        }
        let receipt = if rec.cmd.kind.is_call() {
            match self.call(run, &id, &rec.cmd, Some(&rec)).await {
                CallStep::Settled(receipt) => receipt,
                // A cancel is carried out by the driver's loop, which sees it next.
                CallStep::Waiting | CallStep::Canceled => return Ok(()),
                CallStep::Halted => return Err(Stop::Halted),
            }
        } else {
            let Some(receipt) = self.perform(run, &id, &rec.cmd, rec.attempts).await else {
                return Err(Stop::Halted);
            };
            receipt
        };
        rules::deliver(&mut run.lock(), &id, &rec.cmd, &receipt);
        Ok(())
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
                self.run_step(run, &*skill, state, event, &ctx, (visit, rerun.is_some())),
            )
            .await;
        let alive = ctx.calls_alive();
        if alive > 0 && !matches!(result, Err(StepError::Halted)) {
            // The step's locals are gone: a call still alive was moved out of the step (a spawned
            // task): its effect would run, or its outcome arrive, with no step to journal it for.
            stop.fail(rules::outlived(&step, alive));
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
        self.metrics.step(step_outcome(&result));
        if !self.config.hooks.is_empty() {
            let outcome = match &result {
                Ok(t) => TransitionKind::from(&t.next).to_string(),
                Err(e) => e.to_string(),
            };
            for hook in &self.config.hooks {
                hook.after_step(&hook_ctx, &outcome).await;
            }
        }
        let after = {
            let mut st = run.lock();
            let visit_result = VisitResult {
                task_id: &run.task_id,
                skill_id: &run.skill_id,
                visit,
                step: &step,
                ordinal: ctx.positions_taken(),
                effects: &self.effects,
                checkpoint_every: self.config.checkpoint_every,
            };
            if let Err(other) = &result {
                if !matches!(
                    other,
                    StepError::Suspended
                        | StepError::Halted
                        | StepError::Canceled
                        | StepError::Rejected(_)
                ) {
                    tracing::warn!(task = %run.task_id, step = %step, error = %other, "step failed");
                }
            }
            rules::after_visit(&mut st, visit_result, result)
        };
        match after {
            AfterVisit::Then(after) => self.follow(run, after).await,
            AfterVisit::Suspended => match run.flush().await {
                Ok(()) => Ok(()),
                Err(_) => Err(Stop::Halted),
            },
            AfterVisit::Halted => Err(Stop::Halted),
            AfterVisit::Canceled => Err(self.finish_canceled(run).await),
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
        let Some(skill) = run.skill.clone() else {
            let reason = format!("skill `{}` is not registered", run.skill_id);
            return Err(self.finish_failed(run, reason).await);
        };
        let begun = rules::begin_visit(
            &mut run.lock(),
            &*skill,
            event,
            rerun,
            self.config.max_steps,
        );
        match begun {
            Ok(v) => Ok((v.visit, v.state, skill, v.step)),
            Err(reason) => Err(self.finish_failed(run, reason).await),
        }
    }

    /// Run the skill's step in a `step` span; a panic becomes a failure whose message names only the
    /// skill and the step (the payload, which may quote data or secrets, goes to the log). A visit
    /// run again (`replayed`: after a crash, a reply or a wake, its calls with receipts answered from
    /// the journal) is marked `radkit.replayed` on its span.
    async fn run_step(
        &self,
        run: &TaskRun,
        skill: &dyn ErasedSkill,
        state: serde_json::Value,
        event: Event,
        ctx: &StepCtx,
        (visit, replayed): (u64, bool),
    ) -> Result<Transition<serde_json::Value>, StepError> {
        let step = ctx.step();
        let span = tracing::info_span!("step", task = %run.task_id, skill = %run.skill_id, step = %step, visit, radkit.replayed = replayed);
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

    /// What follows a journaled transition: wait for input, end the task, or go on.
    async fn follow(self: &Arc<Self>, run: &Arc<TaskRun>, after: After) -> Result<(), Stop> {
        match after {
            After::AwaitInput => {
                if run.flush().await.is_err() {
                    return Err(Stop::Halted);
                }
                if self.crash_at(super::fault::Boundary::AwaitingInput, run, None, None) {
                    return Err(Stop::Halted);
                }
                Ok(())
            }
            After::End(state, message) => Err(self.finish(run, state, message).await),
            After::Fail(reason) => Err(self.finish_failed(run, reason).await),
            After::Continue => Ok(()),
        }
    }

    /// End the task in `state`.
    pub(crate) async fn finish(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        state: TaskState,
        message: Option<Message>,
    ) -> Stop {
        rules::end(&mut run.lock(), state, message);
        // One line per task at the default level only when it failed: a server under load does
        // not log every task it completes.
        if state == TaskState::Failed {
            tracing::info!(task = %run.task_id, state = state.as_str(), "task finished");
        } else {
            tracing::debug!(task = %run.task_id, state = state.as_str(), "task finished");
        }
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
        self.finish(run, TaskState::Failed, Some(rules::failure_message(reason)))
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
            Some(rules::status_message("Task canceled.")),
        )
        .await
    }

    /// Tell the skill (`Event::Cancel`) so it can say goodbye: its messages and artifacts are kept;
    /// its commands are refused (the task is canceling) and its next state is ignored.
    async fn deliver_cancel(self: &Arc<Self>, run: &Arc<TaskRun>) {
        let Some(skill) = run.skill.clone() else {
            return;
        };
        let rules::Visit { visit, state, step } =
            rules::begin_cancel_visit(&mut run.lock(), &*skill);
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
        rules::end_cancel_visit(&mut run.lock(), visit, result.ok().and_then(Result::ok));
    }

    /// Run the compensations of successful `Compensate` commands, newest first, each journaled.
    async fn compensate(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
    ) -> Result<(), super::run::FlushError> {
        let todo = rules::compensations_owed(&run.lock());
        for (id, cmd, value) in todo {
            run.flush().await?;
            let outcome = self.effects.compensate(&id, &cmd.kind, value).await;
            run.lock().push(Entry::Compensated { id, outcome });
        }
        Ok(())
    }
}

/// The metrics label of a step visit's end: its transition's kind, or why it made none.
fn step_outcome<S>(result: &Result<Transition<S>, StepError>) -> &'static str {
    match result {
        Ok(t) => TransitionKind::from(&t.next).as_str(),
        Err(StepError::Suspended) => "suspended",
        Err(StepError::Halted) => "halted",
        Err(StepError::Canceled) => "canceled",
        Err(StepError::Interrupted) => "interrupted",
        Err(StepError::Rejected(_)) => "rejected",
        Err(_) => "failed",
    }
}
