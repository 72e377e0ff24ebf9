// A transition may be built in a closure or an async block of the step (only a nested item is an
// error), and a payload need not be `Sync`: a task's state moves between threads, it is not shared.
#![deny(warnings)]
use radkit::prelude::*;
use std::cell::Cell;

#[derive(Default)]
struct Counter;

#[flow_skill(id = "counter", name = "Counter")]
impl Counter {
    #[step(start)]
    async fn count(&self, msg: Content) -> StepResult {
        let next = |n: usize| goto!("done", Cell::new(n));
        let later = async { await_input!(slot = "more", message = "More?", carry = Cell::new(0)) };
        match msg.joined_texts().len() {
            0 => later.await,
            n => next(n),
        }
    }

    #[step]
    async fn done(&self, ctx: &StepCtx, n: Cell<usize>) -> StepResult {
        ctx.complete(n.get().to_string(), vec![])
    }

    #[step(resume_from = "count")]
    async fn more(&self, n: Cell<usize>, reply: Content) -> StepResult {
        goto!("done", Cell::new(n.get() + reply.joined_texts().len()))
    }
}

fn main() {}
