// Rule: `?` in a step needs an error that converts to `StepError` (rustc lists the conversions).
use radkit::prelude::*;

#[derive(Default)]
struct Reader;

#[flow_skill(id = "reader", name = "Reader")]
impl Reader {
    #[step(start)]
    async fn read(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let text = std::fs::read_to_string(msg.joined_texts())?;
        ctx.complete(text, vec![])
    }
}

fn main() {}
