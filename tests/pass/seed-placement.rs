// The seed's placement: metadata on the struct, a bare #[flow_skill] on the impl block.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{flow_skill, goto};

/// Doc comments become the description.
#[flow_skill(id = "seed_form", name = "Seed form")]
#[derive(Default)]
struct Seeded;

#[flow_skill]
impl Seeded {
    #[step(start)]
    async fn first(&self, msg: Content) -> StepResult {
        goto!("second", msg.joined_texts())
    }

    #[step]
    async fn second(&self, ctx: &StepCtx, text: String) -> StepResult {
        ctx.complete(text, vec![])
    }
}

fn main() {}
