// Every allowed step signature and transition form compiles (see docs/macros.md).
use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::{await_input, flow_skill, goto};

macro_rules! either {
    ($cond:expr, $a:expr, $b:expr) => {
        if $cond {
            $a
        } else {
            $b
        }
    };
}

#[derive(Default)]
struct Forms {
    limit: usize,
}

#[flow_skill(id = "forms", name = "Forms", description = "Explicit.", version = "7")]
impl Forms {
    /// Start without `ctx`, `Content` last, a `mut` parameter.
    #[step(start)]
    async fn begin(&self, mut count: u32, msg: Content) -> StepResult {
        count += 1;
        if msg.is_empty() {
            return goto!("loop");
        }
        either!(
            count > 3,
            goto!("unit"),
            goto!("pair", (msg.joined_texts(), count))
        )
    }

    /// No payload at all, full path to `StepResult`.
    #[step]
    async fn unit(&self, ctx: &StepCtx) -> radkit::flow::StepResult {
        ctx.complete("done", vec![])
    }

    /// A raw identifier is the step `loop`.
    #[step]
    async fn r#loop(&self, ctx: &StepCtx) -> StepResult {
        ctx.progress("looping").await?;
        goto!("unit")
    }

    #[step]
    async fn pair(&self, _: String, count: u32) -> radkit::flow::StepResult {
        let _ = self.helper();
        if count as usize > self.limit {
            await_input!(message = "More?", slot = "more")
        } else {
            goto!("begin", (count, Content::from_text("again")))
        }
    }

    /// A resume step that ignores the reply, carry `()`.
    #[step(resume_from = "pair")]
    async fn more(&self, ctx: &StepCtx) -> StepResult {
        ctx.fail("no more")
    }

    fn helper(&self) -> usize {
        self.limit
    }
}

fn main() {}
