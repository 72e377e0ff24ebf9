// Rule: goto! works in #[step] methods only, not in other methods of the impl.
use radkit::flow::{StepCtx, StepResult};
use radkit::{flow_skill, goto};

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx, _: radkit::model::Content) -> StepResult {
        ctx.complete("x", vec![])
    }

    fn helper(&self) -> StepResult {
        goto!("a")
    }
}

fn main() {}
