// Rule: all steps of a skill are in one #[flow_skill] impl block.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{flow_skill, goto};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn ask(&self, msg: Content) -> StepResult {
        goto!("greet", msg.joined_texts())
    }
}

#[flow_skill]
impl S {
    #[step]
    async fn greet(&self, ctx: &StepCtx, name: String) -> StepResult {
        ctx.complete(format!("Hello, {name}!"), vec![])
    }
}

fn main() {}
