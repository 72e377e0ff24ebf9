// Rule: a migration reads the old version's payload, so its input deserializes.
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{await_input, flow_skill};

#[derive(Default)]
struct S;

/// The old version's payload, written without `Deserialize`.
struct OldOrder {
    item: String,
}

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

    #[migrate(from = 1, step = "confirm")]
    fn from_v1(old: OldOrder) -> Result<String, String> {
        Ok(old.item)
    }
}

fn main() {}
