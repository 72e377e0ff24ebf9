// Rule: `await_input!` is the step's own return value, not a nested impl block's method's.
use radkit::prelude::*;

#[derive(Default)]
struct S;
struct Asker;
#[flow_skill(id = "s", name = "S")]
impl S {
    #[step(start)]
    async fn a(&self, _msg: Content) -> StepResult {
        impl Asker {
            fn ask(&self) -> StepResult {
                await_input!(slot = "name", message = "Your name?")
            }
        }
        Asker.ask()
    }

    #[step(resume_from = "a")]
    async fn b(&self, ctx: &StepCtx, reply: Content) -> StepResult {
        ctx.complete(reply.joined_texts(), vec![])
    }
}

fn main() {}
