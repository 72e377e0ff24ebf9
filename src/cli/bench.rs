//! `bench`: the engine's own benchmarks, on skills of their own (not the program's). Each workload runs on a fresh SQLite file with FULL
//! durability and prints one JSON line. Build with `--release`.

use crate::engine::Request;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::effects::Effects;
use crate::engine::{Engine, EngineBuilder};
use crate::flow::step_table::{goto, Step, StepInput, StepTable};
use crate::flow::{EffectPolicy, SkillInfo, StepCtx, StepResult};
use crate::model::{Message, TaskState};
use crate::store::{Durability, SqliteStore};
use crate::tools::FnTool;
use anyhow::{bail, Context};
use futures::future::BoxFuture;

/// Arguments of `radkit bench`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    workload: Workload,
}

#[derive(clap::Subcommand)]
enum Workload {
    /// The physical floor: one durable row per step (`floor-sequential`) and the same rows
    /// group-committed (`floor-batched`), with the store's durability. Every line that times
    /// something (`sequential`, `concurrent`, `machine`, `a2a`, `fanout`, `read`, `console`,
    /// `soak`, `resume`) carries its ratio to the floor measured in its own run (`floor_ratio`).
    Floor {
        /// `sqlite` (a fresh file, the default) or `postgres://…` (a fresh schema of that
        /// database, dropped after; with the `postgres` feature).
        #[arg(long)]
        store: Option<String>,
        /// Rows committed one per transaction.
        #[arg(long, default_value_t = 500)]
        steps: u64,
        /// Rows committed in batches.
        #[arg(long, default_value_t = 20_000)]
        batched: u64,
        /// Rows per batch (the engine's group commit writes one task's append per row).
        #[arg(long, default_value_t = 100)]
        batch: usize,
    },
    /// N tasks waiting for input: the time to create them, bytes per waiting task in the file,
    /// readiness and RSS after a restart in a fresh process, and the latency to answer a random
    /// one.
    Idle {
        /// Tasks waiting for input.
        #[arg(long, default_value_t = 100_000)]
        tasks: u64,
        /// Tasks the restarted process answers, one at a time (spread over the file).
        #[arg(long, default_value_t = 200)]
        answers: u64,
        /// Run this skill of the program, with its models and tools as `radkit serve` runs it
        /// (the `radkit` demo's research loop: `research_loop_v2`), instead of the bench's own,
        /// which asks at once. Its tasks must come to wait for input, and complete once answered.
        #[arg(long)]
        skill: Option<String>,
        /// Internal: run the restart half in this process on this file.
        #[arg(long, hide = true)]
        child: Option<std::path::PathBuf>,
    },
    /// One task, N durable steps in sequence, in alternating rounds with the floor's W1.
    Sequential {
        /// Steps, split among the rounds (a task each).
        #[arg(long, default_value_t = 1000)]
        steps: u64,
        /// Alternating rounds of W1 (as many rows as the round's steps) and of the workload; the
        /// figures are added up over the rounds, so that the machine's drift weighs on both.
        #[arg(long, default_value_t = 5)]
        rounds: u64,
        /// Before the rounds, the floor's file takes this many rows (W2, batched) and the
        /// engine's this many steps (100 tasks at once), unmeasured: both files warm, as a
        /// server's is.
        #[arg(long, default_value_t = 20_000)]
        warmup_steps: u64,
    },
    /// Many tasks at once.
    Concurrent {
        /// Tasks.
        #[arg(long, default_value_t = 100)]
        flows: u64,
        /// Steps per task.
        #[arg(long, default_value_t = 20)]
        steps: u64,
        /// Before the measured run, the engine takes this many steps (100 tasks at once),
        /// unmeasured. On SQLite the floor's file takes as many rows (W2's way): both files warm,
        /// as a server's is (its WAL grown, its compression dictionary trained). On Postgres the
        /// engine, or the workers, warm up the same way (connections open, statements prepared,
        /// the schema's first pages written). 0 measures a fresh start.
        #[arg(long, default_value_t = 20_000)]
        warmup_steps: u64,
        /// Run the workload on SQLite with telemetry off, with the engine's counters and (with the
        /// `otel` feature) with the counters and every span exported over OTLP to a receiver on
        /// loopback, and under `radkit serve`'s own subscriber (its logs) without and with OTLP,
        /// each pass in a fresh process, in alternating rounds; print the throughputs and the costs.
        #[arg(long)]
        telemetry: bool,
        /// With `--telemetry`: rounds of one pass of each kind (the costs' intervals narrow as
        /// their square root).
        #[arg(long, default_value_t = 20)]
        telemetry_rounds: u64,
        /// One pass of `--telemetry` in this process (what it runs each child with): its wall time.
        #[arg(long, value_enum, hide = true)]
        telemetry_pass: Option<super::bench_telemetry::Pass>,
        /// The OTLP receiver an OTLP `--telemetry-pass` exports to (the parent's).
        #[arg(long, hide = true)]
        telemetry_collector: Option<String>,
        /// `postgres://…` to run on PostgreSQL (in a fresh schema of that database, dropped after)
        /// instead of a fresh SQLite file.
        #[cfg(feature = "postgres")]
        #[arg(long)]
        store: Option<String>,
        /// With `--store postgres://…`: share the tasks among this many `radkit worker` processes
        /// (the `bench` skill, run by `worker --bench-skill`) instead of running them in this process.
        #[cfg(feature = "postgres")]
        #[arg(long, default_value_t = 0)]
        workers: u64,
        /// With `--workers`: the workers' lease lifetime, in ms (`worker --lease-ms`). Short leases
        /// show whether renewal keeps up under load: the line's `duplicate_executions` counts
        /// effects that ran more than once (0 when nothing failed).
        #[cfg(feature = "postgres")]
        #[arg(long, default_value_t = 10_000)]
        lease_ms: u64,
        /// With `--workers`: tasks each worker drives at once (`worker --max-tasks`).
        #[cfg(feature = "postgres")]
        #[arg(long, default_value_t = 256)]
        max_tasks: usize,
    },
    /// Blocking sends over loopback HTTP to a trivial skill, every task journaled, through one
    /// binding and version; the 0.3 JSON-RPC floor is measured in the same run and the ratio printed.
    A2a {
        /// The binding: `jsonrpc`, or `rest` or `grpc` (A2A 1.0 only; `grpc` with the `grpc`
        /// feature).
        #[arg(long, value_enum, default_value = "jsonrpc")]
        binding: super::bench_a2a::Binding,
        /// The protocol version: `0.3` or `1.0` (default: 0.3 over JSON-RPC, 1.0 over REST and gRPC).
        #[arg(long, value_enum)]
        version: Option<super::bench_a2a::Version>,
        /// Alternating rounds of the floor and the binding, the requests split among them.
        #[arg(long, default_value_t = 4)]
        rounds: u64,
        /// Requests in total.
        #[arg(long, default_value_t = 20000)]
        requests: u64,
        /// Requests in flight.
        #[arg(long, default_value_t = 32)]
        concurrency: u64,
        /// Requests each server takes first, untimed, as `concurrency` clients: its file warm
        /// (the WAL grown, the compression dictionary trained), its connections open.
        #[arg(long, default_value_t = 2000)]
        warmup: u64,
    },
    /// Mixed load (sends, answers, streams, resubscribes, cancels, reads, slow clients) for a while,
    /// with RSS, the database's size and latency printed every few seconds. Finished tasks are
    /// pruned as `radkit serve --retain-journals/--retain-tasks` would, so that a steady stream of
    /// tasks shows a flat file.
    Soak {
        /// How long, in seconds.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Clients at once.
        #[arg(long, default_value_t = 32)]
        clients: u64,
        /// Seconds between reports.
        #[arg(long, default_value_t = 10)]
        every: u64,
        /// How long a finished task keeps its whole journal.
        #[arg(long, default_value = "10s", value_parser = super::retention::duration)]
        retain_journals: Duration,
        /// How long a finished task is kept at all.
        #[arg(long, default_value = "30s", value_parser = super::retention::duration)]
        retain_tasks: Duration,
        /// Keep every task (no retention): the file grows with the tasks.
        #[arg(long)]
        keep_everything: bool,
    },
    /// Clients that resubscribe to one long task and never read: server memory before, during, after.
    Resubscribe {
        /// Journal entries of the task they follow.
        #[arg(long, default_value_t = 40_000)]
        entries: u64,
        /// Followers at once.
        #[arg(long, default_value_t = 1000)]
        clients: u64,
        /// How long they hang on, in seconds.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
    },
    /// `tasks/get` of a task with a long journal against the same read of a short task (the floor).
    Read {
        /// Journal entries of the long task.
        #[arg(long, default_value_t = 40_000)]
        entries: u64,
        /// Reads of each task.
        #[arg(long, default_value_t = 1000)]
        reads: u64,
    },
    /// One task of DEPTH steps, each making WIDTH no-op tool calls in parallel (`ctx.try_all`),
    /// against the same calls in sequence: time per effect of each, their ratio, and the ratio to
    /// one durable commit (the floor), measured in the same run.
    Fanout {
        /// Calls per step.
        #[arg(long, default_value_t = 10)]
        width: u64,
        /// Steps per task.
        #[arg(long, default_value_t = 100)]
        depth: u64,
        /// Alternating rounds of the sequential and the parallel task.
        #[arg(long, default_value_t = 2)]
        rounds: u64,
    },
    /// The web console's task list over a store of many tasks: the first page, a state and a
    /// skill filter, an id-prefix search and page 21, each timed as served over loopback HTTP,
    /// against the same page of tasks through A2A `ListTasks` (the floor) in the same run.
    #[cfg(feature = "console")]
    Console {
        /// Tasks in the store (three in ten waiting for input, the rest completed).
        #[arg(long, default_value_t = 10_000)]
        tasks: u64,
        /// Reads of each page.
        #[arg(long, default_value_t = 200)]
        reads: u64,
    },
    /// The task machine without I/O: one task of N steps, its appends dropped and its effects
    /// answered in memory (steps per second, allocations per step), beside the same task's durable
    /// figure on SQLite in the same run.
    Machine {
        /// Steps.
        #[arg(long, default_value_t = 10_000)]
        steps: u64,
        /// Machine runs (the fastest counts).
        #[arg(long, default_value_t = 3)]
        rounds: u64,
    },
    /// Reopen a task with N receipts in a fresh engine; time until its next command.
    Resume {
        /// Receipts before the reopen.
        #[arg(long, default_value_t = 1000)]
        steps: u64,
        /// Internal: run the reopen half in this process on this file.
        #[arg(long, hide = true)]
        child: Option<std::path::PathBuf>,
    },
}

pub(crate) struct Ticker;

/// Tasks at once in the warm-ups of `bench sequential` and `bench concurrent`.
pub(crate) const WARMUP_FLOWS: u64 = 100;

/// `steps` steps on `engine`'s file, [`WARMUP_FLOWS`] tasks at once, unmeasured (none for 0).
pub(crate) async fn warm_up(engine: &Engine, steps: u64) -> anyhow::Result<()> {
    if steps == 0 {
        return Ok(());
    }
    let flows = WARMUP_FLOWS.min(steps);
    run_tasks(engine, flows, steps.div_ceil(flows)).await
}

/// One durable step: one idempotent no-op command, then the next step.
fn tick<'a>(_: &'a Ticker, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let (n, total): (u64, u64) = match &input.message {
            Some(m) => (0, m.joined_texts().trim().parse().unwrap_or(1)),
            None => input.payload()?,
        };
        let _: u64 = ctx.tool("noop").call(n).await?;
        if n + 1 >= total {
            return ctx.complete(format!("{total} steps"), vec![]);
        }
        goto("tick", (n + 1, total))
    })
}

static TICK_STEPS: &[Step<Ticker>] = &[Step::new("tick", tick)
    .start()
    .takes_user_message()
    .goes_to(&["tick"])];

pub(crate) fn engine_parts() -> anyhow::Result<(StepTable<Ticker>, Effects)> {
    let (skill, noop) = bench_skill()?;
    Ok((skill, Effects::new().tool("noop", noop)))
}

/// The `bench` skill and its `noop` tool. With [`EXECUTION_LOG`] set (what `bench concurrent
/// --workers` sets for its workers), every execution of the tool appends its InvocationId to that
/// file: how the bench counts effects that ran more than once.
fn bench_skill() -> anyhow::Result<(StepTable<Ticker>, FnTool)> {
    let skill = StepTable::new(SkillInfo::new("bench", "Bench"), Ticker, TICK_STEPS)
        .map_err(anyhow::Error::msg)?;
    let log = match std::env::var_os(EXECUTION_LOG) {
        Some(path) => Some(Arc::new(Mutex::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .with_context(|| format!("opening {EXECUTION_LOG}"))?,
        ))),
        None => None,
    };
    let noop = FnTool::new(EffectPolicy::Idempotent, move |args, key| {
        let log = log.clone();
        async move {
            if let Some(log) = log {
                use std::io::Write;
                // One `write` of one line on an `O_APPEND` file: lines of several processes
                // never interleave.
                let line = format!("{}\n", key.as_str());
                log.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .write_all(line.as_bytes())
                    .map_err(|e| {
                        crate::flow::EffectError::transient(format!("execution log: {e}"))
                    })?;
            }
            Ok(args)
        }
    });
    Ok((skill, noop))
}

/// The variable naming the file where the bench's `noop` logs each execution.
pub(crate) const EXECUTION_LOG: &str = "RADKIT_BENCH_EXECUTION_LOG";

/// A `noop` that answers its first `answered` calls and never returns from the next one, after
/// noting in `reached` how long after `started` it began. Its command is durably journaled by then
/// (commands are journaled before they run) and the task writes nothing more: the journal a crash
/// right before that command's effect leaves, made without the runtime's fault injection (the
/// `testing` feature, which the CLI does not use).
fn noop_until(answered: u64, started: Instant, reached: Arc<Mutex<Option<Duration>>>) -> FnTool {
    let calls = Arc::new(AtomicU64::new(0));
    FnTool::new(EffectPolicy::Idempotent, move |args, _key| {
        let call = calls.fetch_add(1, Ordering::SeqCst);
        let reached = reached.clone();
        async move {
            if call < answered {
                return Ok(args);
            }
            reached
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(started.elapsed());
            futures::future::pending().await
        }
    })
}

/// When `reached` is set, within `limit`.
async fn wait_reached(
    reached: &Mutex<Option<Duration>>,
    limit: Duration,
) -> anyhow::Result<Duration> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(d) = *reached.lock().unwrap_or_else(|p| p.into_inner()) {
            return Ok(d);
        }
        if Instant::now() > deadline {
            bail!("the task issued no command within {limit:?}");
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

/// `builder` serving the `bench` skill too, with its `noop` tool (`worker --bench-skill`, which
/// `bench concurrent --workers N` starts).
#[cfg(feature = "postgres")]
pub(crate) fn with_bench_skill(builder: EngineBuilder) -> anyhow::Result<EngineBuilder> {
    let (skill, noop) = bench_skill()?;
    Ok(builder
        .skill(skill)
        .map_effects(|effects| effects.tool("noop", noop)))
}

/// An engine builder serving only `skill`: the program's registered skills stay out of benchmarks.
pub(crate) fn bench_builder(
    store: impl crate::store::Store,
    skill: impl crate::flow::FlowSkill,
) -> EngineBuilder {
    Engine::builder(store)
        .without_registered_skills()
        .skill(skill)
}

pub(crate) fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_owned)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

pub(crate) fn fresh_db() -> anyhow::Result<(tempfile::TempDir, std::path::PathBuf)> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bench.sqlite");
    Ok((dir, path))
}

/// What a workload took: its wall time, and the CPU time (user and system) of this process
/// meanwhile (`None` when the work ran in other processes).
pub(crate) struct Measured {
    pub elapsed: Duration,
    pub cpu: Option<Duration>,
}

impl Measured {
    /// Measure `work`.
    pub async fn of<T>(
        work: impl std::future::Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<(Measured, T)> {
        let (started, cpu) = (Instant::now(), super::bench_floor::cpu_time());
        let out = work.await?;
        let measured = Measured {
            elapsed: started.elapsed(),
            cpu: Some(super::bench_floor::cpu_time().saturating_sub(cpu)),
        };
        Ok((measured, out))
    }
}

/// Print a bench line: the figures of `steps` steps that took `measured`, its ratio to `floor`
/// (measured in this process run) and `extra`.
pub(crate) fn report(
    workload: &str,
    steps: u64,
    measured: &Measured,
    floor: (&super::bench_floor::Floor, super::bench_floor::Against),
    extra: serde_json::Value,
) {
    let seconds = measured.elapsed.as_secs_f64();
    let us_per_step = seconds * 1e6 / steps.max(1) as f64;
    let steps_per_sec = steps as f64 / seconds.max(1e-9);
    let mut line = serde_json::json!({
        "workload": workload,
        "steps": steps,
        "seconds": seconds,
        "us_per_step": us_per_step,
        "steps_per_sec": steps_per_sec,
        "cpu_us_per_step": measured.cpu.map(|c| c.as_secs_f64() * 1e6 / steps.max(1) as f64),
        "peak_rss_bytes": peak_rss_bytes(),
        "durability": "FULL",
    });
    let (floor, against) = floor;
    floor.attach(&mut line, against, us_per_step, steps_per_sec);
    if let (Some(obj), serde_json::Value::Object(more)) = (line.as_object_mut(), extra) {
        obj.extend(more);
    }
    println!("{line}");
}

/// Run `flows` tasks of `steps` steps at once, each a blocking send in a task of its own on the
/// runtime's workers, as a server runs each request: a flow is woken where the engine's runs are,
/// never on the bench's own thread.
pub(crate) async fn run_tasks(engine: &Engine, flows: u64, steps: u64) -> anyhow::Result<()> {
    let runs = (0..flows).map(|_| {
        let engine = engine.clone();
        tokio::spawn(async move {
            let task = engine
                .send_settled(
                    Request::operator(Message::user_text(steps.to_string())),
                    Some(0),
                )
                .await?;
            if task.status.state != TaskState::Completed {
                bail!("bench task ended {:?}", task.status);
            }
            Ok(())
        })
    });
    for run in futures::future::join_all(runs).await {
        run.context("a bench flow panicked")??;
    }
    Ok(())
}

/// Run `bench`.
pub async fn run(app: &super::App, args: Args) -> anyhow::Result<()> {
    match args.workload {
        #[cfg(feature = "postgres")]
        Workload::Floor {
            store: Some(url),
            steps,
            batched,
            batch,
        } if url.starts_with("postgres") => {
            let floor = super::bench_floor::postgres(&url, steps, batched, batch).await?;
            for line in floor.lines("postgres", (steps, batched)) {
                println!("{line}");
            }
        }
        Workload::Floor {
            store: Some(other), ..
        } if other != "sqlite" => {
            bail!("--store takes `sqlite` or a `postgres://…` URL (with the `postgres` feature), not `{other}`")
        }
        Workload::Floor {
            steps,
            batched,
            batch,
            ..
        } => {
            let dir = tempfile::tempdir()?;
            let floor = super::bench_floor::sqlite(dir.path(), steps, batched, batch)?;
            for line in floor.lines("sqlite", (steps, batched)) {
                println!("{line}");
            }
        }
        Workload::Idle {
            tasks,
            child: Some(path),
            skill,
            ..
        } => super::bench_idle::child(app, &path, tasks, skill.as_deref()).await?,
        Workload::Idle {
            tasks,
            answers,
            skill,
            ..
        } => super::bench_idle::idle(app, tasks, answers, skill.as_deref()).await?,
        Workload::Sequential {
            steps,
            rounds,
            warmup_steps,
        } => {
            let rounds = rounds.clamp(1, steps.max(1));
            let per_round = (steps / rounds).max(1);
            // W2 once (its figure is printed too); W1 in the rounds.
            let floor_dir = tempfile::tempdir()?;
            let warmup_steps = warmup_steps.max(1);
            let mut floor = super::bench_floor::sqlite(floor_dir.path(), 0, warmup_steps, 100)?;
            let (_dir, path) = fresh_db()?;
            let (skill, effects) = engine_parts()?;
            let engine = bench_builder(SqliteStore::open(&path, Durability::Full)?, skill)
                .effects(effects)
                .start()
                .await?;
            // Both files are warm before the rounds, as a server's is: the floor's took W2's
            // rows, the engine's takes as many steps, 100 tasks at once, unmeasured. (A fresh
            // file's WAL grows with each commit until its first checkpoint, and a sync that grows
            // a file costs more than one that rewrites it: on a fresh file the first rounds
            // measured the file's growth, which W1 on its warm file did not pay.)
            warm_up(&engine, warmup_steps).await?;
            let mut floor_us = 0.0;
            let mut measured = Measured {
                elapsed: Duration::ZERO,
                cpu: Some(Duration::ZERO),
            };
            for round in 0..rounds {
                floor_us += super::bench_floor::sqlite_sequential_round(
                    floor_dir.path(),
                    round,
                    per_round,
                )? * per_round as f64;
                let (this, ()) = Measured::of(run_tasks(&engine, 1, per_round)).await?;
                measured.elapsed += this.elapsed;
                measured.cpu = measured.cpu.zip(this.cpu).map(|(a, b)| a + b);
            }
            let steps = per_round * rounds;
            floor.sequential_us = floor_us / steps as f64;
            let against = super::bench_floor::Against::Sequential;
            report(
                "sequential",
                steps,
                &measured,
                (&floor, against),
                serde_json::json!({ "rounds": rounds, "warmup_steps": warmup_steps }),
            );
        }
        Workload::Concurrent {
            flows,
            steps,
            telemetry_pass: Some(pass),
            telemetry_collector,
            ..
        } => super::bench_telemetry::child(pass, flows, steps, telemetry_collector).await?,
        Workload::Concurrent {
            flows,
            steps,
            telemetry: true,
            telemetry_rounds,
            ..
        } => super::bench_telemetry::compare(flows, steps, telemetry_rounds).await?,
        #[cfg(feature = "postgres")]
        Workload::Concurrent {
            flows,
            steps,
            store: Some(url),
            workers,
            lease_ms,
            max_tasks,
            warmup_steps,
            ..
        } => {
            let cluster = super::bench_cluster::Cluster {
                workers,
                lease_ms,
                max_tasks,
                warmup_steps,
            };
            super::bench_cluster::concurrent(&url, flows, steps, cluster).await?
        }
        #[cfg(feature = "postgres")]
        Workload::Concurrent { workers, .. } if workers > 0 => {
            bail!("--workers needs a shared store: --store postgres://…")
        }
        Workload::Concurrent {
            flows,
            steps,
            warmup_steps,
            ..
        } => {
            let floor = super::bench_floor::sqlite_warmed(warmup_steps)?;
            let (_dir, path) = fresh_db()?;
            let (skill, effects) = engine_parts()?;
            let store = SqliteStore::open(&path, Durability::Full)?;
            let engine = bench_builder(store.clone(), skill)
                .effects(effects)
                .start()
                .await?;
            warm_up(&engine, warmup_steps).await?;
            let before = store.stats();
            let (measured, ()) = Measured::of(run_tasks(&engine, flows, steps)).await?;
            let stats = store.stats();
            let extra = serde_json::json!({
                "flows": flows,
                "commits": stats.batches - before.batches,
                "appends": stats.appends - before.appends,
                "warmup_steps": warmup_steps,
            });
            let against = super::bench_floor::Against::Batched;
            report(
                "concurrent",
                flows * steps,
                &measured,
                (&floor, against),
                extra,
            );
        }
        Workload::Resume {
            steps,
            child: Some(path),
        } => resume_child(&path, steps).await?,
        Workload::A2a {
            binding,
            version,
            requests,
            concurrency,
            rounds,
            warmup,
        } => {
            use super::bench_a2a::{Binding, Version};
            let version = version.unwrap_or(match binding {
                Binding::Jsonrpc => Version::V0_3,
                Binding::Rest => Version::V1_0,
                #[cfg(feature = "grpc")]
                Binding::Grpc => Version::V1_0,
            });
            super::bench_a2a::run(binding, version, requests, concurrency, rounds, warmup).await?
        }
        Workload::Soak {
            seconds,
            clients,
            every,
            retain_journals,
            retain_tasks,
            keep_everything,
        } => {
            let retention = match keep_everything {
                true => crate::engine::Retention::FOREVER,
                false => crate::engine::Retention {
                    journal: Some(retain_journals),
                    task: Some(retain_tasks),
                },
            };
            let every = Duration::from_secs(every.max(1));
            super::bench_soak::soak(seconds, clients, every, retention).await?
        }
        Workload::Resubscribe {
            entries,
            clients,
            seconds,
        } => {
            super::bench_streams::resubscribe(entries, clients, Duration::from_secs(seconds))
                .await?
        }
        Workload::Machine { steps, rounds } => super::bench_machine::machine(steps, rounds).await?,
        Workload::Read { entries, reads } => super::bench_reads::read(entries, reads).await?,
        #[cfg(feature = "console")]
        Workload::Console { tasks, reads } => super::bench_console::console(tasks, reads).await?,
        Workload::Fanout {
            width,
            depth,
            rounds,
        } => super::bench_fanout::fanout(width, depth, rounds).await?,
        Workload::Resume { steps, child: None } => {
            let (_dir, path) = fresh_db()?;
            // Build a task with `steps` receipts and stop the engine right before its next command.
            {
                let (skill, _) = bench_skill()?;
                let reached = Arc::new(Mutex::new(None));
                let noop = noop_until(steps, Instant::now(), reached.clone());
                let engine = bench_builder(SqliteStore::open(&path, Durability::Full)?, skill)
                    .effects(Effects::new().tool("noop", noop))
                    .build()?;
                engine
                    .send(Request::operator(Message::user_text(
                        (steps + 10).to_string(),
                    )))
                    .await?;
                wait_reached(&reached, Duration::from_secs(600)).await?;
                engine.halt();
            }
            let exe = std::env::current_exe()?;
            let started = Instant::now();
            let out = tokio::process::Command::new(exe)
                .args(["bench", "resume", "--steps", &steps.to_string(), "--child"])
                .arg(&path)
                .output()
                .await?;
            let process = started.elapsed();
            if !out.status.success() {
                bail!(
                    "resume child failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let mut line: serde_json::Value =
                serde_json::from_slice(&out.stdout).context("resume child output")?;
            if let Some(obj) = line.as_object_mut() {
                obj.insert("process_seconds".into(), process.as_secs_f64().into());
            }
            // The reopen against one durable commit: how many commits' time it takes to be back
            // at work (its `floor_ratio`).
            let floor = super::bench_floor::sqlite_default()?;
            let in_engine_ms = line["in_engine_ms"].as_f64().unwrap_or(0.0);
            floor.attach_latency(&mut line, in_engine_ms);
            println!("{line}");
        }
    }
    Ok(())
}

/// The reopen half of `bench resume`: open the file, recover, stop at the first new command.
async fn resume_child(path: &std::path::Path, steps: u64) -> anyhow::Result<()> {
    let started = Instant::now();
    let first = Arc::new(Mutex::new(None));
    // The reissued command is the first the tool sees: it notes the time and never answers.
    let (skill, _) = bench_skill()?;
    let store = SqliteStore::open(path, Durability::Full)?;
    let engine = bench_builder(store, skill)
        .effects(Effects::new().tool("noop", noop_until(0, started, first.clone())))
        .build()?;
    let resumed = engine.recover().await?;
    if resumed != 1 {
        bail!("expected one task to resume, found {resumed}");
    }
    let elapsed = wait_reached(&first, Duration::from_secs(10)).await?;
    engine.halt();
    let receipts = steps;
    let seconds = elapsed.as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "workload": "resume",
            "steps": receipts,
            "receipts": receipts,
            "seconds": seconds,
            "us_per_step": seconds * 1e6 / receipts.max(1) as f64,
            "steps_per_sec": receipts as f64 / seconds.max(1e-9),
            "in_engine_ms": seconds * 1e3,
            "peak_rss_bytes": peak_rss_bytes(),
            "durability": "FULL",
        })
    );
    Ok(())
}
