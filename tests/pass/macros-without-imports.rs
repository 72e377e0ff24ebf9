// Inside a #[flow_skill] impl, `#[step]`, `goto!` and `await_input!` need no import.
#![deny(warnings)]

#[derive(Default)]
struct S;

#[radkit::flow_skill(id = "without_imports", name = "Without imports")]
impl S {
    #[step(start)]
    async fn ask(&self, msg: radkit::model::Content) -> radkit::flow::StepResult {
        await_input!(slot = "name", message = "Name?", carry = msg.joined_texts())
    }

    #[step(resume_from = "ask")]
    async fn answer(&self, topic: String, reply: radkit::model::Content) -> radkit::flow::StepResult {
        goto!("done", format!("{topic}: {}", reply.joined_texts()))
    }

    #[step]
    async fn done(&self, ctx: &radkit::flow::StepCtx, text: String) -> radkit::flow::StepResult {
        ctx.complete(text, vec![])
    }
}

fn main() {}
