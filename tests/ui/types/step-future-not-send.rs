// Rule: a step's future is Send (tasks move between threads); the error points at the step.
use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;
use std::rc::Rc;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx, _: radkit::model::Content) -> StepResult {
        let count = Rc::new(1);
        ctx.progress("thinking").await?;
        ctx.complete(format!("{count}"), vec![])
    }
}

fn main() {}
