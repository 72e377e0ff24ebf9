//! `bench fanout`: the cost per effect of a step's parallel calls against the same calls made one
//! after another. One task runs `depth` durable steps, each making `width` calls of an idempotent
//! no-op tool, either in one `ctx.try_all` (journaled in one append, performed at once) or in
//! sequence (each call journaled and committed before it runs), on a fresh SQLite file with FULL
//! durability. The floor, one durable SQLite commit on the same disk, is measured in the same run;
//! the two forms alternate over the rounds so a drift of the disk touches both alike.

use std::time::{Duration, Instant};

use anyhow::bail;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::bench::{bench_builder, fresh_db, peak_rss_bytes};
use crate::effects::Effects;
use crate::engine::{Caller, Request};
use crate::flow::step_table::{goto, Step, StepInput, StepTable};
use crate::flow::{EffectPolicy, SkillInfo, StepCtx, StepResult};
use crate::model::{Message, TaskState};
use crate::store::{Durability, SqliteStore};
use crate::tools::FnTool;

/// How a step makes its calls.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Form {
    Parallel,
    #[default]
    Sequential,
}

impl Form {
    fn name(self) -> &'static str {
        match self {
            Form::Parallel => "parallel",
            Form::Sequential => "sequential",
        }
    }
}

/// What a task does: `depth` steps of `width` calls each, made in `form`.
#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize)]
struct Plan {
    form: Form,
    width: u64,
    depth: u64,
}

pub(crate) struct Fanout;

/// One durable step: `width` calls of `noop`, then the next step (the payload counts them).
fn fan<'a>(_: &'a Fanout, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let (plan, step): (Plan, u64) = match &input.message {
            Some(m) => (serde_json::from_str(&m.joined_texts())?, 0),
            None => input.payload()?,
        };
        match plan.form {
            Form::Parallel => {
                let calls = (0..plan.width).map(|i| ctx.tool("noop").call::<_, u64>(i));
                ctx.try_all(calls).await?;
            }
            Form::Sequential => {
                for i in 0..plan.width {
                    let _: u64 = ctx.tool("noop").call(i).await?;
                }
            }
        }
        if step + 1 >= plan.depth {
            return ctx.complete(format!("{} steps", plan.depth), vec![]);
        }
        goto("fan", (plan, step + 1))
    })
}

static FAN_STEPS: &[Step<Fanout>] = &[Step::new("fan", fan)
    .start()
    .takes_user_message()
    .goes_to(&["fan"])];

/// Run one task of `plan` on `engine`; its time.
async fn run_plan(engine: &crate::engine::Engine, plan: Plan) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let text = serde_json::to_string(&plan)?;
    let id = engine
        .send(Request::operator(Message::user_text(text)))
        .await?;
    let task = engine.wait_settled(&Caller::Operator, &id).await?;
    if task.status.state != TaskState::Completed {
        bail!("fanout task ({}) ended {:?}", plan.form.name(), task.status);
    }
    Ok(started.elapsed())
}

/// What one form measured over all rounds.
#[derive(Default)]
struct Measured {
    elapsed: Duration,
    commits: u64,
}

/// `bench fanout --width W --depth D`: one JSON line per form, each with its time per effect and its
/// ratio to the floor (one durable commit); the parallel line also with its ratio to the sequential.
pub async fn fanout(width: u64, depth: u64, rounds: u64) -> anyhow::Result<()> {
    if width == 0 || depth == 0 {
        bail!("--width and --depth must be at least 1");
    }
    let rounds = rounds.max(1);
    let (_dir, path) = fresh_db()?;
    let store = SqliteStore::open(&path, Durability::Full)?;
    let skill = StepTable::new(SkillInfo::new("fanout", "Fanout"), Fanout, FAN_STEPS)
        .map_err(anyhow::Error::msg)?;
    let noop = FnTool::new(
        EffectPolicy::Idempotent,
        |args, _key| async move { Ok(args) },
    );
    let engine = bench_builder(store.clone(), skill)
        .effects(Effects::new().tool("noop", noop))
        .start()
        .await?;
    let mut measured = [Measured::default(), Measured::default()];
    for _ in 0..rounds {
        for (form, m) in [Form::Sequential, Form::Parallel]
            .into_iter()
            .zip(&mut measured)
        {
            let before = store.stats().batches;
            m.elapsed += run_plan(&engine, Plan { form, width, depth }).await?;
            m.commits += store.stats().batches - before;
        }
    }
    engine.shutdown().await;
    let floor = super::bench_floor::sqlite_default()?;
    let floor_us = floor.sequential_us;
    let effects = width * depth * rounds;
    let per_effect = |m: &Measured| m.elapsed.as_secs_f64() * 1e6 / effects as f64;
    let sequential_us = per_effect(&measured[0]);
    for (form, m) in [Form::Sequential, Form::Parallel]
        .into_iter()
        .zip(&measured)
    {
        let us = per_effect(m);
        let mut line = serde_json::json!({
            "workload": format!("fanout/{}", form.name()),
            "width": width,
            "depth": depth,
            "rounds": rounds,
            "effects": effects,
            "seconds": m.elapsed.as_secs_f64(),
            "us_per_effect": us,
            "commits_per_effect": m.commits as f64 / effects as f64,
            "floor_commit_us": floor_us,
            "ratio_to_floor": us / floor_us.max(1e-9),
            "peak_rss_bytes": peak_rss_bytes(),
            "durability": "FULL",
        });
        if form == Form::Parallel {
            line["ratio_to_sequential"] = (us / sequential_us.max(1e-9)).into();
        }
        // Each effect is a durable step: its time against one commit's (W1), the same figure as
        // `ratio_to_floor` with the floor's other fields beside it.
        floor.attach(
            &mut line,
            super::bench_floor::Against::Sequential,
            us,
            1e6 / us.max(1e-9),
        );
        println!("{line}");
    }
    Ok(())
}
