//! `bench machine`: the task machine without I/O, alone. One task of N durable steps (the `bench`
//! skill: each step one idempotent no-op tool call, then a `goto`) is run by a `TaskMachine` on
//! this thread: its appends are taken and dropped, its effects answered at once in memory. That
//! is the engine's own cost per step with the store, the runtime and the effects removed. The same
//! task then runs on the long-running engine over SQLite (FULL durability), in the same process
//! run, and the line prints both and their ratio.

use std::time::{Duration, Instant};

use anyhow::bail;

use crate::effects::Performed;
use crate::flow::CmdKind;
use crate::machine::{MachineConfig, MachineSkill, NewTask, Output};
use crate::model::{Message, TaskState};
use crate::store::{Durability, SqliteStore, Store};

/// What one machine run measured.
struct MachineRun {
    elapsed: Duration,
    allocations: Option<u64>,
    appends: u64,
    entries: u64,
}

fn run_machine(skill: &MachineSkill, steps: u64) -> anyhow::Result<MachineRun> {
    let now = crate::journal::now_ms();
    let before = super::alloc_count::thread_allocations();
    let started = Instant::now();
    let task = NewTask::new("bench", Message::user_text(steps.to_string()));
    let mut m = skill.start(task, now)?;
    let (mut appends, mut entries) = (0, 0);
    loop {
        match m.poll(now) {
            Output::Persist(append) => {
                appends += 1;
                entries += append.entries.len() as u64;
            }
            Output::Perform(effects) => {
                for effect in effects {
                    // The `noop` tool returns its argument.
                    let value = match &effect.cmd.kind {
                        CmdKind::Tool { args, .. } => args.clone(),
                        other => bail!("the bench skill asked for {}", other.fingerprint()),
                    };
                    m.complete(&effect.id, Ok(Performed { value, usage: None }), now)?;
                }
            }
            Output::Ended(TaskState::Completed) => break,
            other => bail!("the bench task stopped at {other:?}"),
        }
    }
    let elapsed = started.elapsed();
    let allocations = super::alloc_count::thread_allocations()
        .zip(before)
        .map(|(after, before)| after - before);
    Ok(MachineRun {
        elapsed,
        allocations,
        appends,
        entries,
    })
}

/// Run `bench machine` over `steps` steps, the machine run repeated `rounds` times (the fastest
/// counts: the machine shares the machine with nothing but the noise).
pub(crate) async fn machine(steps: u64, rounds: u64) -> anyhow::Result<()> {
    let (skill, effects) = super::bench::engine_parts()?;
    let config = MachineConfig {
        max_steps: steps + 10,
        ..MachineConfig::default()
    };
    let machine_skill = MachineSkill::with(crate::flow::erase(skill), effects, config);
    let floor = super::bench_floor::sqlite_default()?;
    let mut best: Option<(MachineRun, Duration)> = None;
    for _ in 0..rounds.max(1) {
        let cpu = super::bench_floor::cpu_time();
        let run = run_machine(&machine_skill, steps)?;
        let cpu = super::bench_floor::cpu_time().saturating_sub(cpu);
        if best.as_ref().is_none_or(|(b, _)| run.elapsed < b.elapsed) {
            best = Some((run, cpu));
        }
    }
    let Some((run, cpu)) = best else {
        bail!("no round ran")
    };
    // The durable figure, in the same process run.
    let (_dir, path) = super::bench::fresh_db()?;
    let (skill, effects) = super::bench::engine_parts()?;
    let store = SqliteStore::open(&path, Durability::Full)?;
    let engine = super::bench::bench_builder(store.clone(), skill)
        .effects(effects)
        .max_steps(steps + 10)
        .start()
        .await?;
    let started = Instant::now();
    super::bench::run_tasks(&engine, 1, steps).await?;
    let durable = started.elapsed();
    // What a durable step journals, as JSON: what the floor's rows stand for.
    let mut journal_bytes = 0u64;
    for task in store.list(crate::store::TaskQuery::default()).await? {
        for record in store.journal(&task.id, 0).await? {
            journal_bytes += serde_json::to_vec(&record.entry)?.len() as u64;
        }
    }
    let per_step = |d: Duration| d.as_secs_f64() * 1e6 / steps.max(1) as f64;
    let (machine_us, durable_us) = (per_step(run.elapsed), per_step(durable));
    let extra = serde_json::json!({
        "allocs_per_step": run.allocations.map(|a| a as f64 / steps.max(1) as f64),
        "appends_per_step": run.appends as f64 / steps.max(1) as f64,
        "entries_per_step": run.entries as f64 / steps.max(1) as f64,
        "journal_bytes_per_step": journal_bytes as f64 / steps.max(1) as f64,
        "durable_us_per_step": durable_us,
        "durable_over_machine": durable_us / machine_us.max(1e-9),
        "durability": "none (machine); FULL (durable)",
    });
    let measured = super::bench::Measured {
        elapsed: run.elapsed,
        cpu: Some(cpu),
    };
    let against = super::bench_floor::Against::Sequential;
    super::bench::report("machine", steps, &measured, (&floor, against), extra);
    Ok(())
}
