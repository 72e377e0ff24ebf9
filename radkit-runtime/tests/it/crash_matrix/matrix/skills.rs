//! The matrix's skill in every issue form. Each issues one command, `effect`, then does what the
//! cell's tail says: complete, ask for a note and complete with it, sleep on a durable timer and
//! complete, or fail (so the effect is compensated). The in-step form is a step table calling
//! `ctx.tool(..)`; the parallel form is the same step table calling `sibling` and `effect` in one
//! `join!`; the transition form is an explicit reducer returning `Transition::to(..).cmd(..)`.
//! Both pass the probe's spots, where a cell may pause to crash the engine from outside.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use radkit_runtime::flow::step_table::{await_input, Step, StepInput, StepTable};
use radkit_runtime::flow::{
    erase, Cmd, ErasedSkill, Event, FlowSkill, SkillInfo, StepCtx, StepError, StepResult,
    Transition,
};
use serde::{Deserialize, Serialize};

use super::probe::{Probe, Spot, EFFECT, FAST_RETRY, SIBLING};
use super::{Form, Tail};

/// The completion message without a note.
pub const DONE: &str = "effect done";
/// The completion message after the timer.
pub const WOKE: &str = "effect done; woke up";
/// The reason a `Fail` tail gives.
pub const REFUSED: &str = "the order was refused after the effect";
/// The durable timer of a `Sleep` tail: long enough that halting the engine once the `timer_set`
/// entry is committed always happens before it fires.
pub const TIMER: Duration = Duration::from_millis(400);

/// The skill of `form` over `probe`.
pub fn skill(form: Form, probe: &Arc<Probe>) -> Arc<dyn ErasedSkill> {
    match form {
        Form::Ctx => erase(in_step(probe.clone(), false)),
        Form::Parallel => erase(in_step(probe.clone(), true)),
        Form::Transition => erase(Reducer(probe.clone())),
    }
}

fn args() -> serde_json::Value {
    serde_json::json!({ "order": 7 })
}

/// The in-step form; the parallel form when its flag is set.
pub struct InStep(Arc<Probe>, bool);

static STEPS: &[Step<InStep>] = &[
    Step::new("act", act).start().takes_user_message(),
    Step::new("answered", answered).resume_from("act"),
];

fn in_step(probe: Arc<Probe>, parallel: bool) -> StepTable<InStep> {
    let info = match parallel {
        false => SkillInfo::new("matrix_ctx", "Matrix (in-step)"),
        true => SkillInfo::new("matrix_parallel", "Matrix (in a parallel batch)"),
    };
    StepTable::new(info, InStep(probe, parallel), STEPS).expect("a valid step table")
}

fn act<'a>(skill: &'a InStep, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let probe = &skill.0;
        probe.spot(Spot::BeforeIssue).await;
        let effect = ctx.tool(EFFECT).retry(FAST_RETRY).call(args());
        let _: serde_json::Value = if skill.1 {
            let sibling = ctx.tool(SIBLING).call(args());
            let (sibling, effect) = futures::join!(sibling, effect);
            let _: serde_json::Value = sibling?;
            effect?
        } else {
            effect.await?
        };
        probe.spot(Spot::ResultArrived).await;
        match probe.tail {
            Tail::Complete => ctx.complete(DONE, vec![]),
            Tail::Ask => await_input("note", "Any note?", ()),
            Tail::Sleep => {
                ctx.sleep(TIMER).await?;
                ctx.complete(WOKE, vec![])
            }
            Tail::Fail => ctx.fail(REFUSED),
        }
    })
}

fn answered<'a>(_: &'a InStep, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { ctx.complete(noted(&input.message().joined_texts()), vec![]) })
}

/// The completion message after a note.
pub fn noted(note: &str) -> String {
    format!("{DONE}; note: {note}")
}

/// The transition form's states.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum State {
    Start,
    Acting,
    Asked,
    Sleeping,
}

/// The transition form.
pub struct Reducer(Arc<Probe>);

#[async_trait]
impl FlowSkill for Reducer {
    type State = State;

    fn info(&self) -> SkillInfo {
        SkillInfo::new("matrix_transition", "Matrix (transition commands)")
    }

    fn initial_state(&self) -> State {
        State::Start
    }

    async fn on_event(
        &self,
        state: State,
        event: Event,
        _: &StepCtx,
    ) -> Result<Transition<State>, StepError> {
        let probe = &self.0;
        Ok(match (state, event) {
            (State::Start, Event::UserMessage { .. }) => {
                probe.spot(Spot::BeforeIssue).await;
                Transition::to(State::Acting).cmd(Cmd::tool(EFFECT, args()).retry(FAST_RETRY))
            }
            (State::Acting, Event::CommandResult { outcome, .. }) => {
                probe.spot(Spot::ResultArrived).await;
                if let Err(error) = outcome {
                    return Ok(Transition::fail(format!("tool `{EFFECT}` failed: {error}")));
                }
                match probe.tail {
                    Tail::Complete => Transition::complete(DONE),
                    Tail::Ask => Transition::await_input(State::Asked, "note", "Any note?"),
                    Tail::Sleep => Transition::to(State::Sleeping).cmd(Cmd::sleep(TIMER)),
                    Tail::Fail => Transition::fail(REFUSED),
                }
            }
            (State::Sleeping, Event::TimerFired { .. }) => Transition::complete(WOKE),
            (State::Asked, Event::UserMessage { message }) => {
                Transition::complete(noted(&message.joined_texts()))
            }
            _ => Transition::ignore(),
        })
    }
}
