// The step context under another name (`use .. as`, a `type` alias) is still the context.
use radkit::flow::StepCtx as Ctx;
use radkit::flow::StepResult;
use radkit::model::Content;
use radkit::{flow_skill, goto};

type Context = radkit::flow::StepCtx;

#[derive(Default)]
struct Aliased;

#[flow_skill(id = "aliased", name = "Aliased")]
impl Aliased {
    #[step(start)]
    async fn a(&self, ctx: &Ctx, msg: Content) -> StepResult {
        ctx.progress("reading").await?;
        goto!("b", msg.joined_texts())
    }

    #[step]
    async fn b(&self, text: String, ctx: &Context) -> StepResult {
        ctx.complete(text, vec![])
    }
}

fn main() {}
