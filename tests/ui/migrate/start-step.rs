// Rule: a migration maps what a task carries while it rests; no task rests before the start step.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{await_input, flow_skill};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S", version = 2)]
impl S {
    #[step(start)]
    async fn take(&self, order: Content) -> StepResult {
        let item = order.joined_texts();
        await_input!(slot = "size", message = "Which size?", carry = item)
    }

    #[step(resume_from = "take")]
    async fn confirm(&self, ctx: &StepCtx, item: String, size: Content) -> StepResult {
        ctx.complete(format!("{item} {}", size.joined_texts()), vec![])
    }

    #[migrate(from = 1, step = "take")]
    fn from_v1(old: String) -> Result<String, String> {
        Ok(old)
    }
}

fn main() {}
