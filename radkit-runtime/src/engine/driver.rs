//! The driver: the long-running engine's host of a task's [`TaskMachine`]. It turns the machine
//! over the task's run until the task finishes or waits (input, a timer, a callee). The machine
//! decides — the queue, each visit's result, each call's lookup, hooks, gate and issue, transition
//! commands, cancels, compensations, the end; the driver supplies what only a process with a
//! runtime has: each step polled in its span and scope, its calls' effects performed inside the
//! step's future (`invoke.rs`: flushed through the run's group commit, performed with retries and
//! receipted), transition commands and compensations performed, the hooks asked, timers set,
//! callees canceled and the run flushed when the machine asks. It is the only writer of its task
//! while it runs.

use std::sync::Arc;
use std::task::Poll;

use futures::FutureExt;

use super::call::CallStep;
use super::fault::Boundary;
use super::invoke::{EngineCalls, VISIT};
use super::machine::visit::VisitStop;
use super::machine::{
    Action, CallHost, Effect, Host, MachineConfig, MachineSkill, StepFuture, TaskMachine, Turn,
    VisitKey,
};
use super::run::TaskRun;
use super::Inner;
use crate::effects::Performed;
use crate::flow::{ErasedSkill, StepError, Transition};
use crate::journal::TransitionKind;
use crate::model::TaskState;

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
        let turned = tracing::Instrument::instrument(self.turn_machine(run.clone()), span.clone());
        crate::telemetry::in_task_trace(&span, &run.unsampled, turned).await
    }

    /// The task's machine over `run`, its visits opened by this engine.
    fn machine(self: &Arc<Self>, run: &Arc<TaskRun>, skill: Arc<dyn ErasedSkill>) -> TaskMachine {
        let config = MachineConfig {
            max_steps: self.config.max_steps,
            checkpoint_every: self.config.checkpoint_every,
            call_timeout: self.config.call_timeout,
            hooks: !self.config.hooks.is_empty(),
        };
        let host = Arc::new(Visits {
            engine: self.clone(),
            run: run.clone(),
        });
        MachineSkill::shared(skill, self.effects.clone(), config).hosted(
            run.task_id.clone(),
            run.context_id.clone(),
            run.mode,
            run.shared_state(),
            host,
        )
    }

    async fn turn_machine(self: &Arc<Self>, run: Arc<TaskRun>) -> Stop {
        let Some(skill) = run.skill.clone() else {
            // Every run is equipped with the skill version it runs on (`Inner::equip`).
            tracing::error!(task = %run.task_id, skill = %run.skill_id, "a run without its skill cannot be driven");
            return Stop::Halted;
        };
        let mut machine = self.machine(&run, skill);
        loop {
            if run.is_halted() {
                return Stop::Halted;
            }
            let abandoned = std::mem::take(&mut run.lock().abandoned);
            if !abandoned.is_empty() {
                // A callee working for a call an interrupt cut off works for nobody now.
                self.cancel_abandoned(&run, abandoned);
            }
            // The open visit's step is polled here: what it awaits wakes this task.
            let turn = std::future::poll_fn(|cx| match machine.turn(cx) {
                Turn::Pending => Poll::Pending,
                turn => Poll::Ready(turn),
            })
            .await;
            match turn {
                Turn::Flush => {
                    if run.flush().await.is_err() {
                        return Stop::Halted;
                    }
                }
                Turn::Perform(effects) => {
                    for effect in effects {
                        if let Err(stop) = self.carry_out(&run, &mut machine, effect).await {
                            return stop;
                        }
                    }
                }
                Turn::Hook(call) => {
                    let answer = call.ask(&self.config.hooks).await;
                    // The machine yielded this call and waits for its answer.
                    let _ = machine.hooked(answer);
                }
                Turn::Timer(at) => self.schedule_timer(run.task_id.to_string(), at),
                Turn::AwaitingInput => {
                    if self.crash_at(Boundary::AwaitingInput, &run, None, None) {
                        return Stop::Halted;
                    }
                }
                Turn::CancelCalls => self.cancel_calls(&run).await,
                Turn::Rest { .. } => {
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
                    return Stop::Idle;
                }
                Turn::Ended(state) => {
                    // One line per task at the default level only when it failed: a server under
                    // load does not log every task it completes.
                    if state == TaskState::Failed {
                        tracing::info!(task = %run.task_id, state = state.as_str(), "task finished");
                    } else {
                        tracing::debug!(task = %run.task_id, state = state.as_str(), "task finished");
                    }
                    return Stop::Idle;
                }
                Turn::Halted => return Stop::Halted,
                // Waited for above.
                Turn::Pending => {}
            }
        }
    }

    /// Perform an effect the machine yielded: a transition command (its receipt journaled by the
    /// attempts or the call, then delivered) or a compensation.
    async fn carry_out(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        machine: &mut TaskMachine,
        effect: Effect,
    ) -> Result<(), Stop> {
        let Effect {
            id, cmd, action, ..
        } = effect;
        if let Action::Compensate { output } = action {
            let outcome = self.effects.compensate(&id, &cmd.kind, output).await;
            // The machine asked for this compensation and waits for it.
            let _ = machine.completed(&id, outcome.map(|value| Performed { value, usage: None }));
            return Ok(());
        }
        let Some(rec) = run.lock().command(&id).cloned() else {
            machine.withdraw(&id);
            return Ok(());
        };
        let receipt = if rec.cmd.kind.is_call() {
            // Boxed: a call's future is 15 KB, and every drive would carry room for it otherwise.
            match Box::pin(self.call(run, &id, &rec.cmd, Some(&rec))).await {
                CallStep::Settled(receipt) => receipt,
                // The callee's answer wakes the task; a cancel is carried out by the machine next.
                CallStep::Waiting | CallStep::Canceled => {
                    machine.withdraw(&id);
                    return Ok(());
                }
                CallStep::Halted => return Err(Stop::Halted),
            }
        } else {
            let Some(receipt) = self.perform(run, &id, &rec.cmd, rec.attempts).await else {
                return Err(Stop::Halted);
            };
            receipt
        };
        machine.settled(&id, &receipt);
        Ok(())
    }
}

/// How the engine hosts a task's machine: each visit's calls performed by the engine
/// ([`EngineCalls`]), its step polled in a `step` span inside the task-local scope that names the
/// visit (a ctx call polled elsewhere was taken out of its step).
struct Visits {
    engine: Arc<Inner>,
    run: Arc<TaskRun>,
}

impl Host for Visits {
    fn calls(&self, visit: u64, step: &str, stop: &Arc<VisitStop>) -> Arc<dyn CallHost> {
        Arc::new(EngineCalls {
            engine: self.engine.clone(),
            run: self.run.clone(),
            visit,
            step: step.to_owned(),
            stop: stop.clone(),
        })
    }

    fn wrap(&self, future: StepFuture, key: VisitKey<'_>) -> StepFuture {
        let VisitKey {
            visit,
            step,
            replayed,
            cancel,
            stop,
        } = key;
        let token = stop.token();
        let run = self.run.clone();
        if cancel {
            // The visit that tells the skill of a cancel: what it returns is not applied (its
            // messages and artifacts are kept, its commands refused).
            let told = async move {
                let told = std::panic::AssertUnwindSafe(future).catch_unwind().await;
                told.unwrap_or_else(|panic| {
                    tracing::error!(task = %run.task_id, skill = %run.skill_id, visit, panic = %panic_text(&*panic), "step panicked on cancel");
                    Err(StepError::Failed("the step panicked on cancel".to_owned()))
                })
            };
            return Box::pin(VISIT.scope(token, told));
        }
        let step = step.to_owned();
        let span = crate::telemetry::engine_span!(run, "step", task = %run.task_id, skill = %run.skill_id, step = %step, visit, radkit.replayed = replayed);
        let stepped = async move {
            let result = std::panic::AssertUnwindSafe(future).catch_unwind().await;
            // A panic becomes a failure whose message names only the skill and the step (the
            // payload, which may quote data or secrets, goes to the log).
            result.unwrap_or_else(|panic| {
                tracing::error!(task = %run.task_id, skill = %run.skill_id, step = %step, visit, panic = %panic_text(&*panic), "step panicked");
                Err(StepError::Failed(format!(
                    "step `{step}` of skill `{}` panicked; see the server log",
                    run.skill_id
                )))
            })
        };
        Box::pin(VISIT.scope(token, tracing::Instrument::instrument(stepped, span)))
    }

    fn ended(&self, step: &str, result: &Result<Transition<serde_json::Value>, StepError>) {
        self.engine.metrics.step(step_outcome(result));
        if let Err(other) = result {
            if !matches!(
                other,
                StepError::Suspended
                    | StepError::Halted
                    | StepError::Canceled
                    | StepError::Rejected(_)
            ) {
                tracing::warn!(task = %self.run.task_id, step = %step, error = %other, "step failed");
            }
        }
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
