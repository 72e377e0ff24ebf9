// Rule: payloads are `Send`: a task moves between threads with its state.
use radkit::prelude::*;
use std::marker::PhantomData;

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Pinned(#[serde(skip)] PhantomData<*const ()>);

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, _msg: Content) -> StepResult {
        goto!("b", Pinned::default())
    }

    #[step]
    async fn b(&self, ctx: &StepCtx, _pinned: Pinned) -> StepResult {
        ctx.complete("Done.", vec![])
    }
}

fn main() {}
