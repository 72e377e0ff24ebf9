// Rule: steps return StepResult, not ().
use radkit::flow::StepCtx;
use radkit::flow_skill;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx) {
        let _ = ctx;
    }
}

fn main() {}
