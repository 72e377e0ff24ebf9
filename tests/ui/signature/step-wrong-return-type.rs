// Rule: steps return StepResult.
use radkit::flow::StepCtx;
use radkit::flow_skill;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx) -> Result<(), String> {
        let _ = ctx;
        Ok(())
    }
}

fn main() {}
