//! A step table's declared edges at run time: a step that goes where its row declares runs on; a step
//! that goes anywhere else fails its task with the undeclared-edge error, and the target never runs.

use crate::support::common;

use common::*;
use futures::future::BoxFuture;
use radkit_runtime::engine::Engine;
use radkit_runtime::engine::Request;
use radkit_runtime::flow::step_table::{goto, Step, StepInput, StepTable};
use radkit_runtime::flow::{SkillInfo, StepCtx, StepResult, Transition};
use radkit_runtime::model::TaskState;
use radkit_runtime::store::MemoryStore;

struct Loop;

/// Goes to the step the user names: `critique` (declared), `polish` (a step, not declared), or
/// `wait:polish` (`Transition::to`, not declared).
fn research<'a>(_: &'a Loop, _: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let text = input.message().joined_texts();
        match text.strip_prefix("wait:") {
            Some(target) => Ok(Transition::to(radkit_runtime::flow::StepState::new(
                target,
                (),
            )?)),
            None => goto(&text, ()),
        }
    })
}

fn reached<'a>(_: &'a Loop, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { ctx.complete(format!("reached {}", ctx.step()), vec![]) })
}

static STEPS: &[Step<Loop>] = &[
    Step::new("research", research)
        .start()
        .takes_user_message()
        .goes_to(&["critique"]),
    Step::new("critique", reached),
    Step::new("polish", reached),
];

async fn run(text: &str) -> radkit_runtime::model::Task {
    let skill = StepTable::new(SkillInfo::new("research_table", "Research"), Loop, STEPS).unwrap();
    let engine = Engine::builder(MemoryStore::new())
        .skill(skill)
        .start()
        .await
        .unwrap();
    let id = engine.send(Request::operator(user(text))).await.unwrap();
    settled(&engine, &id).await
}

#[test]
async fn goto_along_a_declared_edge_runs_the_target() {
    let task = run("critique").await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    assert_eq!(status_text(&task), "reached critique");
}

#[test]
async fn goto_along_an_undeclared_edge_fails_the_task_naming_the_edge() {
    let task = run("polish").await;
    assert_eq!(
        task.status.state,
        TaskState::Failed,
        "{}",
        status_text(&task)
    );
    assert_eq!(
        status_text(&task),
        "step `research` of skill `research_table` goes to `polish`, an edge it does not declare (it declares `critique`); declare it with `Step::new(\"research\", ..).goes_to(&[\"critique\", \"polish\"])`"
    );
}

#[test]
async fn goto_to_a_step_that_does_not_exist_is_an_undeclared_edge_too() {
    let task = run("nowhere").await;
    assert_eq!(
        task.status.state,
        TaskState::Failed,
        "{}",
        status_text(&task)
    );
    assert!(
        status_text(&task).contains("goes to `nowhere`, an edge it does not declare"),
        "{}",
        status_text(&task)
    );
}

#[test]
async fn transition_to_an_undeclared_step_fails_the_task_like_goto() {
    let task = run("wait:polish").await;
    assert_eq!(
        task.status.state,
        TaskState::Failed,
        "{}",
        status_text(&task)
    );
    assert!(
        status_text(&task).contains("goes to `polish`, an edge it does not declare"),
        "{}",
        status_text(&task)
    );
}
