// `crate = ".."` points the expansion at a re-export of radkit.
mod reexport {
    pub use radkit as rk;
}

use reexport::rk::flow::{StepCtx, StepResult};
use reexport::rk::model::Content;
use reexport::rk::{flow_skill, goto};

#[derive(Default)]
struct Renamed;

#[flow_skill(id = "renamed", name = "Renamed", crate = "crate::reexport::rk")]
impl Renamed {
    #[step(start)]
    async fn a(&self, msg: Content) -> StepResult {
        goto!("b", msg.joined_texts())
    }

    #[step]
    async fn b(&self, ctx: &StepCtx, text: String) -> StepResult {
        ctx.complete(text, vec![])
    }
}

fn main() {}
