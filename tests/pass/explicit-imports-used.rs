// Importing `step`, `goto` and `await_input` explicitly is fine too: no import is reported unused.
#![deny(warnings)]
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{await_input, flow_skill, goto, step};

#[derive(Default)]
struct S;

#[flow_skill(id = "explicit_imports", name = "Explicit imports")]
impl S {
    #[step(start)]
    async fn ask(&self, msg: Content) -> StepResult {
        await_input!(slot = "name", message = "Name?", carry = msg.joined_texts())
    }

    #[step(resume_from = "ask")]
    async fn answer(&self, topic: String, reply: Content) -> StepResult {
        goto!("done", format!("{topic}: {}", reply.joined_texts()))
    }

    #[step]
    async fn done(&self, ctx: &StepCtx, text: String) -> StepResult {
        ctx.complete(text, vec![])
    }
}

fn main() {}
