// The smallest durable skill: ask for a name, then greet.
use radkit::prelude::*;

#[derive(Default)]
pub struct Hello;

/// Asks for your name, then greets you.
#[flow_skill(id = "hello", name = "Hello")]
impl Hello {
    /// The first message (`_: Content`: its text is not needed): ask for a name. The task waits
    /// for the reply as a row in the store, not as a process; a restart in between loses nothing.
    #[step(start)]
    async fn ask(&self, _: Content) -> StepResult {
        await_input!(slot = "name", message = "What is your name?")
    }

    /// The reply: greet.
    #[step(resume_from = "ask")]
    async fn greet(&self, ctx: &StepCtx, reply: Content) -> StepResult {
        let name = reply.joined_texts();
        ctx.complete(format!("Hello, {}!", name.trim()), vec![])
    }
}

fn main() -> std::process::ExitCode {
    // `serve`, `worker`, `tasks`, `graph`, `bench` over every skill registered in this program.
    radkit::cli::main()
}
