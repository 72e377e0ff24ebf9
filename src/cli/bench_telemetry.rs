//! `bench concurrent --telemetry`: the concurrent workload with telemetry off (no counters
//! recorded, no subscriber), with the engine's counters, and (with the `otel` feature) with the
//! counters and every span exported over OTLP/HTTP to a receiver on loopback that answers each
//! export; then as `radkit serve` runs it: its log subscriber (`info`, to stderr) and the
//! counters, without and with the OTLP layer (`--otlp-endpoint`). The throughputs, the CPU time
//! per step and the costs are printed: each against the pass off, and switching OTLP on in a
//! server that logs against that server without it (`cost_otlp_in_serve`), each with its 95%
//! confidence interval. The target is a cost under 5%.
//!
//! Each pass runs in a process of its own (this binary, `bench concurrent --telemetry-pass …`):
//! a process's tracing subscriber is set once, and a fresh process starts every pass from the same
//! state (allocator, threads, files), so the passes can alternate — off, metrics, OTLP, off, … —
//! and the machine's drift falls on all of them alike. The OTLP receiver runs in this process,
//! which waits while a pass runs: it stands for a collector elsewhere, so its work is not the
//! pass's. A pass reports its wall time and its process's CPU time (user and system, every thread);
//! the costs are of CPU time per step, which the machine's other load moves less than wall time.
//! Still, identical passes differ by ±10% (a group commit's size follows the disk's latency, and
//! the CPU per step follows the commit's size), far more than the costs measured: one pair says
//! nothing, the mean of many says how much, and its interval says how surely.

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

/// `rounds` rounds of one pass of each kind, each round starting with another kind, printed as
/// one JSON line: each kind's median CPU time per step and throughput, its CPU time per step in
/// each round (`cpu_us_per_step_by_round`), and each cost as the mean,
/// over the rounds, of a pass's CPU time per step against the pass it is compared with in the same
/// round, with its 95% confidence interval (`cost_…_ci95`: the mean ± that much). Passes of one
/// round run one after the other, so the machine's drift over the run falls on both halves of each
/// pair alike, and what is left (identical passes differ by ±10% here) shrinks with the rounds.
pub(crate) async fn compare(flows: u64, steps: u64, rounds: u64) -> anyhow::Result<()> {
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
    if rounds < 2 {
        bail!("--telemetry-rounds must be at least 2: a cost's interval needs two rounds");
    }
    #[cfg(feature = "otel")]
    let collector = Some(receiver().await?);
    #[cfg(not(feature = "otel"))]
    let collector: Option<String> = None;
    let total = (flows * steps).max(1) as f64;
    // Per kind, per round: steps per second and CPU microseconds per step.
    let mut rate = vec![Vec::new(); passes.len()];
    let mut cpu = vec![Vec::new(); passes.len()];
    for round in 0..rounds as usize {
        // Each round starts with the next kind of pass, so that no kind always runs first or
        // right after another (a process that follows another on this machine runs measurably
        // faster or slower than the one before it).
        for k in 0..passes.len() {
            let i = (round + k) % passes.len();
            let (w, c) = in_child(passes[i], flows, steps, collector.as_deref()).await?;
            rate[i].push(total / w.as_secs_f64().max(1e-9));
            cpu[i].push(c.as_secs_f64() * 1e6 / total);
        }
    }
    let at = |pass: Pass| passes.iter().position(|p| *p == pass);
    let off = &cpu[0];
    let (off_best, off_worst) = (
        off.iter().copied().fold(f64::INFINITY, f64::min),
        off.iter().copied().fold(0.0, f64::max),
    );
    let mut line = serde_json::json!({
        "workload": "concurrent_telemetry",
        "flows": flows,
        "steps": flows * steps,
        "rounds": rounds,
        "steps_per_sec_off": median(&rate[0]),
        "cpu_us_per_step_off": median(off),
        // Identical passes off: the slowest against the best, the noise one pair sits in.
        "cpu_spread_off": off_worst / off_best.max(1e-9) - 1.0,
    });
    line["cpu_us_per_step_by_round"] = serde_json::json!({ "off": off });
    // A kind's figures, and its cost (`cost`) against the pass `base`.
    let mut put = |name: &str, i: usize, cost: &str, base: usize| {
        line[format!("steps_per_sec_{name}")] = median(&rate[i]).into();
        line[format!("cpu_us_per_step_{name}")] = median(&cpu[i]).into();
        line["cpu_us_per_step_by_round"][name] = cpu[i].clone().into();
        let (mean, ci95) = paired_cost(&cpu[i], &cpu[base]);
        line[format!("{cost}_ci95")] = ci95.into();
        line[cost] = mean.into();
    };
    put("metrics", 1, "cost_metrics", 0);
    if let Some(i) = at(Pass::Otlp) {
        put("metrics_and_otlp", i, "cost_metrics_and_otlp", 0);
    }
    if let Some(logs) = at(Pass::Logs) {
        put("serve_logs", logs, "cost_serve_logs", 0);
        if let Some(i) = at(Pass::LogsOtlp) {
            // What `--otlp-endpoint` costs a server that logs: telemetry switched on.
            put("serve_logs_and_otlp", i, "cost_otlp_in_serve", logs);
        }
    }
    println!("{line}");
    Ok(())
}

/// The middle of `values` (the mean of the middle two of an even count).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The mean relative cost of `with` against `without`, pass by pass of the same rounds, and the
/// half-width of its 95% confidence interval (Student's t over the rounds' costs).
fn paired_cost(with: &[f64], without: &[f64]) -> (f64, f64) {
    let costs: Vec<f64> = with
        .iter()
        .zip(without)
        .map(|(w, o)| w / o.max(1e-9) - 1.0)
        .collect();
    let n = costs.len() as f64;
    let mean = costs.iter().sum::<f64>() / n;
    let variance = costs.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (
        mean,
        t_975(costs.len().saturating_sub(1)) * (variance / n).sqrt(),
    )
}

/// Student's t distribution's 97.5th percentile for `df` degrees of freedom: a two-sided 95%
/// interval is the mean ± this many standard errors.
fn t_975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[df - 1],
        31..=60 => 2.040 - (df - 30) as f64 * 0.00133,
        _ => 1.98,
    }
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
