//! `bench concurrent --telemetry`: the concurrent workload with telemetry off (no counters
//! recorded, no subscriber), with the engine's counters, and (with the `otel` feature) with the
//! counters and every span exported over OTLP/HTTP to a receiver on loopback that answers each
//! export; then as `radkit serve` runs it: its log subscriber (`info`, to stderr) and the
//! counters, without and with the OTLP layer (`--otlp-endpoint`). The throughputs, the CPU time
//! per step and the costs are printed: each against the pass off, and switching OTLP on in a
//! server that logs against that server without it. The target is a cost under 5%.
//!
//! Each pass runs in a process of its own (this binary, `bench concurrent --telemetry-pass …`):
//! a process's tracing subscriber is set once, and a fresh process starts every pass from the same
//! state (allocator, threads, files), so the passes can alternate — off, metrics, OTLP, off, … —
//! and the machine's drift falls on all of them alike. The OTLP receiver runs in this process,
//! which waits while a pass runs: it stands for a collector elsewhere, so its work is not the
//! pass's. A pass reports its wall time and its process's CPU time (user and system, every thread);
//! the costs are of CPU time per step, which the disk's latency and the machine's other load
//! barely move, while wall-time throughput on this shared machine drifts by tens of percent.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::store::{Durability, SqliteStore};

/// What one pass records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Pass {
    /// No counters, no subscriber.
    Off,
    /// The engine's counters.
    Metrics,
    /// The counters, and every span at `info` exported over OTLP (the `otel` feature).
    Otlp,
    /// `radkit serve`'s subscriber without `--otlp-endpoint` (its logs at `info`), and the counters.
    Logs,
    /// `radkit serve`'s subscriber with `--otlp-endpoint`: its logs, the counters and OTLP.
    LogsOtlp,
}

impl Pass {
    fn name(self) -> &'static str {
        match self {
            Pass::Off => "off",
            Pass::Metrics => "metrics",
            Pass::Otlp => "otlp",
            Pass::Logs => "logs",
            Pass::LogsOtlp => "logs-otlp",
        }
    }
}

/// Rounds of one pass of each kind, alternating, each round starting with another kind; the best
/// throughput and CPU time of each kind (the machine's other load only slows a pass), printed as
/// one JSON line with the costs against the best pass off.
pub(crate) async fn compare(flows: u64, steps: u64) -> anyhow::Result<()> {
    const ROUNDS: usize = 6;
    let passes: &[Pass] = if cfg!(feature = "otel") {
        &[
            Pass::Off,
            Pass::Metrics,
            Pass::Otlp,
            Pass::Logs,
            Pass::LogsOtlp,
        ]
    } else {
        &[Pass::Off, Pass::Metrics, Pass::Logs]
    };
    #[cfg(feature = "otel")]
    let collector = Some(receiver().await?);
    #[cfg(not(feature = "otel"))]
    let collector: Option<String> = None;
    let (mut wall, mut cpu) = (
        vec![Duration::MAX; passes.len()],
        vec![Duration::MAX; passes.len()],
    );
    // The slowest pass off: how far identical passes drift apart on this machine in this run.
    let mut cpu_off_worst = Duration::ZERO;
    for round in 0..ROUNDS {
        // Each round starts with the next kind of pass, so that no kind always runs first or
        // right after another (a process that follows another on this machine runs measurably
        // faster or slower than the one before it).
        for k in 0..passes.len() {
            let i = (round + k) % passes.len();
            let (w, c) = in_child(passes[i], flows, steps, collector.as_deref()).await?;
            wall[i] = wall[i].min(w);
            cpu[i] = cpu[i].min(c);
            if i == 0 {
                cpu_off_worst = cpu_off_worst.max(c);
            }
        }
    }
    let total = (flows * steps).max(1) as f64;
    let rate = |elapsed: Duration| total / elapsed.as_secs_f64().max(1e-9);
    let per_step = |cpu: Duration| cpu.as_secs_f64() * 1e6 / total;
    let cost_over = |i: usize, base: usize| per_step(cpu[i]) / per_step(cpu[base]).max(1e-9) - 1.0;
    let cost = |i: usize| cost_over(i, 0);
    let at = |pass: Pass| passes.iter().position(|p| *p == pass);
    let mut line = serde_json::json!({
        "workload": "concurrent_telemetry",
        "flows": flows,
        "steps": flows * steps,
        "rounds": ROUNDS,
        "steps_per_sec_off": rate(wall[0]),
        "steps_per_sec_metrics": rate(wall[1]),
        "cpu_us_per_step_off": per_step(cpu[0]),
        // Identical passes off: the slowest against the best, the noise the costs sit in.
        "cpu_spread_off": per_step(cpu_off_worst) / per_step(cpu[0]).max(1e-9) - 1.0,
        "cpu_us_per_step_metrics": per_step(cpu[1]),
        "cost_metrics": cost(1),
    });
    if let Some(i) = at(Pass::Otlp) {
        line["steps_per_sec_metrics_and_otlp"] = rate(wall[i]).into();
        line["cpu_us_per_step_metrics_and_otlp"] = per_step(cpu[i]).into();
        line["cost_metrics_and_otlp"] = cost(i).into();
    }
    if let Some(logs) = at(Pass::Logs) {
        line["cpu_us_per_step_serve_logs"] = per_step(cpu[logs]).into();
        line["cost_serve_logs"] = cost(logs).into();
        if let Some(i) = at(Pass::LogsOtlp) {
            line["cpu_us_per_step_serve_logs_and_otlp"] = per_step(cpu[i]).into();
            // What `--otlp-endpoint` costs a server that logs: telemetry switched on.
            line["cost_otlp_in_serve"] = cost_over(i, logs).into();
        }
    }
    println!("{line}");
    Ok(())
}

/// Run `pass` in a fresh process of this binary, exporting to `collector` for an OTLP pass: its
/// wall time and its CPU time.
async fn in_child(
    pass: Pass,
    flows: u64,
    steps: u64,
    collector: Option<&str>,
) -> anyhow::Result<(Duration, Duration)> {
    let exe = std::env::current_exe()?;
    let mut command = tokio::process::Command::new(exe);
    command
        .args(["bench", "concurrent", "--telemetry-pass", pass.name()])
        .args(["--flows", &flows.to_string(), "--steps", &steps.to_string()]);
    if let (Pass::Otlp | Pass::LogsOtlp, Some(url)) = (pass, collector) {
        command.args(["--telemetry-collector", url]);
    }
    let out = command.output().await?;
    if !out.status.success() {
        bail!(
            "the {} pass failed: {}",
            pass.name(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let line: serde_json::Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("the {} pass printed no JSON line", pass.name()))?;
    let nanos = |key: &str| {
        line[key]
            .as_u64()
            .map(Duration::from_nanos)
            .with_context(|| format!("the {} pass printed no {key}: {line}", pass.name()))
    };
    Ok((nanos("elapsed_ns")?, nanos("cpu_ns")?))
}

/// One pass in this process (`--telemetry-pass`), an OTLP pass exporting to `collector`: prints
/// `{"elapsed_ns": …, "cpu_ns": …}`.
pub(crate) async fn child(
    pass: Pass,
    flows: u64,
    steps: u64,
    collector: Option<String>,
) -> anyhow::Result<()> {
    #[cfg(feature = "otel")]
    let otlp = match pass {
        Pass::Otlp => {
            use tracing_subscriber::layer::SubscriberExt;
            let url = collector.context("an OTLP pass needs --telemetry-collector")?;
            let otlp = crate::telemetry::otlp(&url, "radkit-bench")?;
            // At `info`, as `radkit serve` logs by default: the engine's spans, not its debug
            // events. The process's subscriber: the bench's spans are made on every runtime thread.
            let subscriber = tracing_subscriber::registry()
                .with(tracing_subscriber::filter::LevelFilter::INFO)
                .with(otlp.layer());
            tracing::subscriber::set_global_default(subscriber)
                .map_err(|_| anyhow::anyhow!("a tracing subscriber is set already"))?;
            Some(otlp)
        }
        Pass::LogsOtlp => {
            let url = collector.context("an OTLP pass needs --telemetry-collector")?;
            let otlp = crate::telemetry::otlp(&url, "radkit-bench")?;
            super::telemetry::init_tracing(Some(&otlp));
            Some(otlp)
        }
        Pass::Logs => {
            super::telemetry::init_tracing(None);
            None
        }
        _ => None,
    };
    #[cfg(not(feature = "otel"))]
    match pass {
        Pass::Otlp | Pass::LogsOtlp => bail!("the OTLP passes need the `otel` feature"),
        Pass::Logs => super::telemetry::init_tracing(None),
        _ if collector.is_some() => bail!("the OTLP passes need the `otel` feature"),
        _ => {}
    }
    let (elapsed, cpu) = run(flows, steps, pass != Pass::Off).await?;
    #[cfg(feature = "otel")]
    if let Some(otlp) = otlp {
        tokio::task::spawn_blocking(move || otlp.flush()).await??;
    }
    println!(
        "{}",
        serde_json::json!({
            "elapsed_ns": u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
            "cpu_ns": u64::try_from(cpu.as_nanos()).unwrap_or(u64::MAX),
        })
    );
    Ok(())
}

/// One run of the concurrent workload on a fresh SQLite file: its wall time and the CPU time the
/// process used meanwhile.
async fn run(flows: u64, steps: u64, counters: bool) -> anyhow::Result<(Duration, Duration)> {
    let (_dir, path) = super::bench::fresh_db()?;
    let (skill, effects) = super::bench::engine_parts()?;
    let store = SqliteStore::open(&path, Durability::Full)?;
    let engine = super::bench::bench_builder(store, skill)
        .effects(effects)
        .record_metrics(counters)
        .start()
        .await?;
    let (started, cpu) = (Instant::now(), super::bench_floor::cpu_time());
    super::bench::run_tasks(&engine, flows, steps).await?;
    let (elapsed, cpu) = (
        started.elapsed(),
        super::bench_floor::cpu_time().saturating_sub(cpu),
    );
    engine.halt();
    Ok((elapsed, cpu))
}

/// An OTLP/HTTP receiver on loopback that answers every export with an empty success: its URL.
#[cfg(feature = "otel")]
async fn receiver() -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(|_: hyper::Request<hyper::body::Incoming>| async {
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(String::new()))
                    });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    Ok(url)
}
