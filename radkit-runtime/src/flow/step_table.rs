//! The step-table authoring surface: plain functions in a `static` table, no macros. This module owns
//! the table's rules (checked once, by [`StepTable::new`]) and the routing of a step's transition to the
//! next row; it never touches the journal or the engine.
//!
//! ```
//! # use futures::future::BoxFuture;
//! # use radkit_runtime::flow::step_table::{await_input, goto, Step, StepInput, StepTable};
//! # use radkit_runtime::flow::{FlowSkill, SkillInfo, StepCtx, StepResult};
//! # struct Research;
//! # fn research<'a>(_: &'a Research, _: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
//! #     Box::pin(async { goto("critique", "a draft") })
//! # }
//! # fn critique<'a>(_: &'a Research, _: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
//! #     Box::pin(async { await_input("verdict", "Good enough?", "a draft") })
//! # }
//! # fn human_input<'a>(_: &'a Research, _: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
//! #     Box::pin(async { goto("research", ()) })
//! # }
//! static STEPS: &[Step<Research>] = &[
//!     Step::new("research", research).start().takes_user_message().goes_to(&["critique"]),
//!     Step::new("critique", critique).goes_to(&["research"]),
//!     Step::new("human_input", human_input).resume_from("critique").goes_to(&["research"]),
//! ];
//!
//! let skill = StepTable::new(SkillInfo::new("research", "Research"), Research, STEPS)?;
//! assert_eq!(skill.info().steps[1].gotos, ["research"]);
//! # Ok::<(), radkit_runtime::flow::step_table::StepTableError>(())
//! ```
//!
//! # Edges are declared, and the declaration is enforced
//!
//! A row names the steps it may go to with [`Step::goes_to`]; those are the `goto` edges `radkit graph`
//! draws and the skill version hashes. The declaration is checked twice, always:
//!
//! * [`StepTable::new`] refuses a table whose edges name no step of the table, or name a resume step (a
//!   resume step runs on the user's reply to the step it resumes from, so nothing can go to it directly;
//!   the same rule `goto!` has in the macro form). It applies the macro form's other rules too: one start
//!   step, unique names, known and unique `resume_from` targets. Every problem found is reported at once
//!   in a [`StepTableError`].
//! * At run time, a step whose transition (`goto`, or `Transition::to`) names a step its row does not
//!   declare — itself included — fails its task with [`UndeclaredGoto`], naming the skill, the step, the
//!   target and the declared edges.
//!
//! Undeclared edges are an error rather than a warning so that the drawn graph never lies: what
//! `radkit graph` shows for a step table is exactly what its tasks can do, as it is for the macros (whose
//! edges are read from the `goto!` calls at compile time). `await_input` needs no declaration: its edge is
//! the `resume_from` of the step that answers it.

use async_trait::async_trait;
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{
    Event, FlowSkill, Next, SkillInfo, StepCtx, StepError, StepInfo, StepResult, StepState,
    Transition,
};
use crate::model::Content;

mod check;
pub use check::{StepTableError, TableProblem};

/// A step function: `fn(&skill, &ctx, input) -> BoxFuture<StepResult>`.
pub type StepFn<S> = for<'a> fn(&'a S, &'a StepCtx, StepInput) -> BoxFuture<'a, StepResult>;

/// One row of a step table.
pub struct Step<S: 'static> {
    name: &'static str,
    run: StepFn<S>,
    start: bool,
    takes_user_message: bool,
    resume_from: Option<&'static str>,
    interrupt: bool,
    goes_to: &'static [&'static str],
}

impl<S: 'static> Step<S> {
    /// A step named `name` running `run`.
    pub const fn new(name: &'static str, run: StepFn<S>) -> Self {
        Step {
            name,
            run,
            start: false,
            takes_user_message: false,
            resume_from: None,
            interrupt: false,
            goes_to: &[],
        }
    }

    /// The step the first user message runs.
    pub const fn start(mut self) -> Self {
        self.start = true;
        self
    }

    /// The step receives the user message in [`StepInput::message`].
    pub const fn takes_user_message(mut self) -> Self {
        self.takes_user_message = true;
        self
    }

    /// The step answers `await_input` issued in step `step` (and receives the user's reply).
    pub const fn resume_from(mut self, step: &'static str) -> Self {
        self.resume_from = Some(step);
        self.takes_user_message = true;
        self
    }

    /// The step a message sent while the task works runs: the skill is interrupted by such
    /// messages ([`WhileWorking::Interrupt`](crate::flow::WhileWorking), set by [`StepTable::new`]).
    /// The step receives the message in [`StepInput::message`] and a null payload (as the start step
    /// does), whatever state the task was in.
    pub const fn interrupt(mut self) -> Self {
        self.interrupt = true;
        self.takes_user_message = true;
        self
    }

    /// The steps this step may go to (with `goto`, or `Transition::to`), itself included if it loops:
    /// its edges in `radkit graph` and in the skill version. [`StepTable::new`] checks that each names a
    /// step of the table that is not a resume step; at run time, going anywhere else fails the task with
    /// [`UndeclaredGoto`]. Calling it again replaces the list.
    pub const fn goes_to(mut self, steps: &'static [&'static str]) -> Self {
        self.goes_to = steps;
        self
    }
}

/// What a step-table step receives.
#[derive(Debug, Clone)]
pub struct StepInput {
    /// The payload `goto` or `await_input` carried (null for the start step).
    pub payload: serde_json::Value,
    /// The user message, for steps that take one.
    pub message: Option<Content>,
}

impl StepInput {
    /// The payload decoded as `T`; a missing payload (the start step) is `T::default()`.
    pub fn payload<T: DeserializeOwned + Default>(&self) -> Result<T, StepError> {
        if self.payload.is_null() {
            return Ok(T::default());
        }
        serde_json::from_value(self.payload.clone()).map_err(StepError::from)
    }

    /// The user message, or empty content.
    pub fn message(&self) -> Content {
        self.message.clone().unwrap_or_default()
    }
}

/// Go to `step` with `payload`.
pub fn goto(step: &str, payload: impl Serialize) -> StepResult {
    Ok(Transition::goto(StepState::new(step, payload)?))
}

/// Wait for user input; the reply runs the step declared `resume_from` the current step, with `carry`.
pub fn await_input(slot: &str, message: &str, carry: impl Serialize) -> StepResult {
    Ok(Transition::await_input(
        StepState::new("", carry)?,
        slot,
        message,
    ))
}

/// A step went to a step its row does not declare with [`Step::goes_to`]. The task fails with this
/// message (as [`StepError::Failed`]): an undeclared edge is never taken, so the drawn graph stays true.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "step `{step}` of skill `{skill}` goes to `{target}`, an edge it does not declare ({}); declare it with `Step::new(\"{step}\", ..).goes_to(&[{}])`",
    declared_phrase(declared),
    quoted_list(declared, target)
)]
pub struct UndeclaredGoto {
    /// Skill id.
    pub skill: String,
    /// The step that returned the transition.
    pub step: String,
    /// Where it went.
    pub target: String,
    /// What its row declares.
    pub declared: Vec<String>,
}

impl From<UndeclaredGoto> for StepError {
    fn from(error: UndeclaredGoto) -> Self {
        StepError::Failed(error.to_string())
    }
}

fn declared_phrase(declared: &[String]) -> String {
    if declared.is_empty() {
        "it declares none".to_owned()
    } else {
        format!("it declares {}", check::step_list(declared))
    }
}

/// `"a", "b", "target"` for the suggested `.goes_to(&[..])`.
fn quoted_list(declared: &[String], target: &str) -> String {
    declared
        .iter()
        .map(String::as_str)
        .chain([target])
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A skill made of a step table.
pub struct StepTable<S: 'static> {
    info: SkillInfo,
    skill: S,
    steps: &'static [Step<S>],
    start: usize,
}

impl<S: Send + Sync + 'static> StepTable<S> {
    /// Check the table and build the skill. The rules are the macro form's: one start step, unique
    /// names, known and unique `resume_from` targets, and `goes_to` edges that name steps of the table
    /// other than resume steps; every broken rule is listed in the [`StepTableError`]. The step graph,
    /// with the declared edges, becomes `info.steps`; the version is derived from it unless `info` sets
    /// one other than `"1"`.
    pub fn new(
        mut info: SkillInfo,
        skill: S,
        steps: &'static [Step<S>],
    ) -> Result<Self, StepTableError> {
        let problems = check::problems(steps);
        let start = steps.iter().position(|s| s.start);
        let start = match start {
            Some(start) if problems.is_empty() => start,
            _ => {
                return Err(StepTableError {
                    skill: info.id,
                    problems,
                })
            }
        };
        info.steps = steps
            .iter()
            .map(|s| {
                let mut gotos: Vec<String> = Vec::new();
                for &target in s.goes_to {
                    if !gotos.iter().any(|g| g == target) {
                        gotos.push(target.to_owned());
                    }
                }
                StepInfo {
                    name: s.name.to_owned(),
                    start: s.start,
                    resume_from: s.resume_from.map(str::to_owned),
                    gotos,
                    payload: String::new(),
                }
            })
            .collect();
        info.steps_declared = false;
        if steps.iter().any(|s| s.interrupt) {
            info.while_working = crate::flow::WhileWorking::Interrupt;
        }
        if info.version == "1" {
            info.version = SkillInfo::graph_version(&info.steps);
        }
        Ok(StepTable {
            info,
            skill,
            steps,
            start,
        })
    }

    fn find(&self, name: &str) -> Option<&Step<S>> {
        self.steps.iter().find(|s| s.name == name)
    }
}

#[async_trait]
impl<S: Send + Sync + 'static> FlowSkill for StepTable<S> {
    type State = StepState;

    fn info(&self) -> SkillInfo {
        self.info.clone()
    }

    fn initial_state(&self) -> StepState {
        StepState {
            step: self.steps[self.start].name.to_owned(),
            payload: serde_json::Value::Null,
        }
    }

    fn step_name(&self, state: &StepState) -> String {
        state.step.clone()
    }

    async fn on_event(&self, state: StepState, event: Event, ctx: &StepCtx) -> StepResult {
        if let Event::Interrupted { message } = event {
            // The interrupt step runs whatever the task was doing, with a null payload.
            let Some(step) = self.steps.iter().find(|s| s.interrupt) else {
                return Ok(Transition::ignore());
            };
            let state = StepState {
                step: step.name.to_owned(),
                payload: serde_json::Value::Null,
            };
            return self
                .on_event(state, Event::UserMessage { message }, ctx)
                .await;
        }
        let step = self.find(&state.step).ok_or_else(|| {
            StepError::msg(format!(
                "skill `{}` has no step `{}`",
                self.info.id, state.step
            ))
        })?;
        let message = match event {
            Event::UserMessage { message } if step.takes_user_message => {
                Some(Content::from(message))
            }
            Event::Enter => None,
            _ => return Ok(Transition::ignore()),
        };
        let mut transition = (step.run)(
            &self.skill,
            ctx,
            StepInput {
                payload: state.payload,
                message,
            },
        )
        .await?;
        match &mut transition.next {
            Next::AwaitInput { state, .. } => {
                let resume = self
                    .steps
                    .iter()
                    .find(|s| s.resume_from == Some(step.name))
                    .ok_or_else(|| {
                        StepError::msg(format!(
                            "step `{}` of skill `{}` awaits input but no step declares `.resume_from(\"{}\")`",
                            step.name, self.info.id, step.name
                        ))
                    })?;
                state.step = resume.name.to_owned();
            }
            // The declared edges were checked against the table in `new`, so a declared target
            // exists and is not a resume step.
            Next::Goto(target) | Next::To(target)
                if !step.goes_to.contains(&target.step.as_str()) =>
            {
                return Err(UndeclaredGoto {
                    skill: self.info.id.clone(),
                    step: step.name.to_owned(),
                    target: target.step.clone(),
                    declared: step.goes_to.iter().map(|s| (*s).to_owned()).collect(),
                }
                .into());
            }
            _ => {}
        }
        Ok(transition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct T;

    fn run<'a>(_: &'a T, _: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
        Box::pin(async { goto("b", ()) })
    }

    fn info() -> SkillInfo {
        SkillInfo::new("t", "T")
    }

    fn problems_of(steps: &'static [Step<T>]) -> Vec<String> {
        match StepTable::new(info(), T, steps) {
            Ok(_) => Vec::new(),
            Err(e) => {
                assert_eq!(e.skill, "t");
                e.problems.iter().map(ToString::to_string).collect()
            }
        }
    }

    #[test]
    fn declared_edges_become_the_graph_and_the_version() {
        static STEPS: &[Step<T>] = &[
            Step::new("a", run).start().goes_to(&["b", "a", "b"]),
            Step::new("b", run),
            Step::new("c", run).resume_from("a").goes_to(&["b"]),
        ];
        static WITHOUT_EDGES: &[Step<T>] = &[
            Step::new("a", run).start(),
            Step::new("b", run),
            Step::new("c", run).resume_from("a"),
        ];
        let table = StepTable::new(info(), T, STEPS).unwrap();
        let info = FlowSkill::info(&table);
        let gotos: Vec<Vec<String>> = info.steps.iter().map(|s| s.gotos.clone()).collect();
        assert_eq!(gotos, [vec!["b", "a"], vec![], vec!["b"]]);
        assert!(!info.steps_declared);
        let bare = StepTable::new(SkillInfo::new("t", "T"), T, WITHOUT_EDGES).unwrap();
        assert_ne!(
            info.version,
            FlowSkill::info(&bare).version,
            "edges are part of the version"
        );
    }

    #[test]
    fn goto_to_an_unknown_step_is_refused_with_a_suggestion() {
        static STEPS: &[Step<T>] = &[
            Step::new("research", run).start().goes_to(&["critque"]),
            Step::new("critique", run).goes_to(&["zzz"]),
        ];
        let err = StepTable::new(info(), T, STEPS).err().unwrap();
        assert_eq!(
            err.problems[0],
            TableProblem::UnknownGotoTarget {
                step: "research".into(),
                target: "critque".into(),
                steps: vec!["research".into(), "critique".into()],
            }
        );
        assert_eq!(
            err.to_string(),
            "invalid step table of skill `t` (2 problems)\n  \
             - `.goes_to(..)` on `research` names `critque`: no step named `critque` in this table; steps are `research`, `critique`; did you mean `critique`?\n  \
             - `.goes_to(..)` on `critique` names `zzz`: no step named `zzz` in this table; steps are `research`, `critique`"
        );
    }

    #[test]
    fn goto_to_a_resume_step_is_refused() {
        static STEPS: &[Step<T>] = &[
            Step::new("ask", run).start().goes_to(&["answer"]),
            Step::new("answer", run).resume_from("ask"),
        ];
        assert_eq!(
            problems_of(STEPS),
            ["`.goes_to(..)` on `ask` names `answer`, which runs on the user's reply to `ask`; go to a step that runs now, or `await_input` in `ask`"]
        );
    }

    #[test]
    fn the_macro_forms_rules_hold_and_every_problem_is_reported() {
        static EMPTY: &[Step<T>] = &[];
        assert_eq!(
            problems_of(EMPTY),
            ["the table has no steps; add at least `Step::new(\"..\", f).start()`"]
        );
        static DUPLICATES: &[Step<T>] = &[
            Step::new("a", run).start(),
            Step::new("a", run),
            Step::new("a", run),
        ];
        assert_eq!(
            problems_of(DUPLICATES),
            ["duplicate step `a`; rename one of the two rows (step names are state names in the journal)"]
        );
        static NO_START: &[Step<T>] = &[Step::new("a", run), Step::new("b", run)];
        assert_eq!(
            problems_of(NO_START),
            ["no start step; mark the step that receives the first message with `.start()` (steps are `a`, `b`)"]
        );
        static BAD: &[Step<T>] = &[
            Step::new("ask", run).start(),
            Step::new("other", run).start(),
            Step::new("__start", run),
            Step::new("b", run).resume_from("aks"),
            Step::new("c", run).resume_from("c"),
            Step::new("d", run).start().resume_from("ask"),
            Step::new("e", run).resume_from("ask"),
        ];
        assert_eq!(
            problems_of(BAD),
            [
                "`__start` is reserved for the state before the first message; rename the step",
                "multiple start steps; `ask` is already the start step, so remove `.start()` from `other`",
                "multiple start steps; `ask` is already the start step, so remove `.start()` from `d`",
                "`.resume_from(\"aks\")` on `b`: no step named `aks` in this table; steps are `ask`, `other`, `__start`, `b`, `c`, `d`, `e`; did you mean `ask`?",
                "`c` cannot resume from itself; name the step whose `await_input` it answers",
                "`d` cannot be both the start step and a resume step; remove `.start()` or `.resume_from(..)`",
                "two steps resume from `ask`; `d` already does, so remove `.resume_from(\"ask\")` from `e`",
            ]
        );
    }

    #[test]
    fn undeclared_goto_names_skill_step_target_and_declared_edges() {
        let none = UndeclaredGoto {
            skill: "research_table".into(),
            step: "critique".into(),
            target: "research".into(),
            declared: vec![],
        };
        assert_eq!(
            none.to_string(),
            "step `critique` of skill `research_table` goes to `research`, an edge it does not declare (it declares none); declare it with `Step::new(\"critique\", ..).goes_to(&[\"research\"])`"
        );
        let some = UndeclaredGoto {
            declared: vec!["draft".into()],
            ..none
        };
        assert_eq!(
            StepError::from(some).to_string(),
            "step `critique` of skill `research_table` goes to `research`, an edge it does not declare (it declares `draft`); declare it with `Step::new(\"critique\", ..).goes_to(&[\"draft\", \"research\"])`"
        );
    }
}
