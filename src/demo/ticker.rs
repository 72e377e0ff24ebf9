//! A counting skill for clusters and benchmarks: the message `"<steps> [<ms per step>]"` runs that many
//! durable steps, each one call of the idempotent `tick` tool. With `RADKIT_TICK_LOG=<file>` every
//! execution of the tool appends `<invocation id> <pid>` to that file, which shows which process
//! performed which effect (the multi-worker tests read it). With `RADKIT_TICK_BUSY=1` a tick's delay
//! blocks its thread instead of sleeping asynchronously: a step that computes (or calls blocking
//! code) for that long, which keeps the worker's runtime busy (the lease tests use it).

use std::io::Write;

use serde::{Deserialize, Serialize};

use radkit::effects::Effects;
use radkit::flow::{EffectError, EffectPolicy, StepCtx, StepResult};
use radkit::model::Content;
use radkit::tools::FnTool;
use radkit::{flow_skill, goto};

/// Most ticks a task may ask for: the start step and one visit per tick must fit the engine's
/// `max_steps` (10,000 by default, and what [`super::engine`] sets), so a count the engine would stop
/// part-way is refused up front instead.
pub const MAX_TICKS: u64 = 9_999;

/// The ticker skill.
#[derive(Debug, Default)]
pub struct Ticker;

/// Where the count is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Count {
    /// Ticks done.
    pub done: u64,
    /// Ticks to do.
    pub total: u64,
    /// How long each tick's effect takes, in ms.
    pub delay_ms: u64,
}

/// Counts in durable steps: one idempotent tool call per step.
#[flow_skill(
    id = "ticker",
    name = "Ticker",
    tags = ["benchmark", "cluster"],
    examples = ["20", "20 50"]
)]
impl Ticker {
    /// Read `<steps> [<ms per step>]`.
    #[step(start)]
    async fn start(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let text = msg.joined_texts();
        let mut words = text.split_whitespace().map(str::parse::<u64>);
        match (words.next(), words.next().unwrap_or(Ok(0)), words.next()) {
            (Some(Ok(total @ 1..=MAX_TICKS)), Ok(delay_ms @ 0..=60_000), None) => goto!(
                "tick",
                Count {
                    done: 0,
                    total,
                    delay_ms
                }
            ),
            _ => ctx.reject(format!(
                "expected `<steps> [<ms per step>]` (1 to {MAX_TICKS} steps, at most 60000 ms), got `{text}`"
            )),
        }
    }

    /// One tick: one durable tool call, then the next tick.
    #[step]
    async fn tick(&self, ctx: &StepCtx, count: Count) -> StepResult {
        let _: u64 = ctx.tool("tick").call(&count).await?;
        let done = count.done + 1;
        if done >= count.total {
            return ctx.complete(format!("{done} ticks"), vec![]);
        }
        goto!("tick", Count { done, ..count })
    }
}

/// `effects` plus the `tick` tool: it waits the count's delay, logs the execution when
/// `RADKIT_TICK_LOG` is set, and returns the number of ticks done.
pub fn with_tick_tool(effects: Effects) -> Effects {
    let log = std::env::var_os("RADKIT_TICK_LOG");
    let busy = std::env::var("RADKIT_TICK_BUSY").is_ok_and(|v| v == "1");
    let tick = FnTool::typed(EffectPolicy::Idempotent, move |count: Count, key| {
        let log = log.clone();
        async move {
            let delay = std::time::Duration::from_millis(count.delay_ms);
            if busy {
                std::thread::sleep(delay);
            } else if count.delay_ms > 0 {
                tokio::time::sleep(delay).await;
            }
            if let Some(path) = log {
                let line = format!("{} {}\n", key.as_str(), std::process::id());
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .and_then(|mut f| f.write_all(line.as_bytes()))
                    .map_err(|e| EffectError::transient(format!("tick log: {e}")))?;
            }
            Ok(count.done + 1)
        }
    });
    effects.tool("tick", tick)
}
