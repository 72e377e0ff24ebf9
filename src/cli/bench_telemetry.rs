//! `bench concurrent --telemetry`: the concurrent workload run in one process with telemetry off (no
//! counters recorded, no subscriber), with the engine's counters, and (with the `otel` feature) with
//! the counters and every span exported over OTLP/HTTP to a receiver on loopback that answers each
//! export; the throughputs and the costs printed. The target is a cost under 5%.

use std::time::{Duration, Instant};

use crate::store::{Durability, SqliteStore};

/// Alternating passes off and with the counters, then (with the `otel` feature) passes that also
/// export every span; the best throughput of each kind (the machine's other load only slows a
/// pass), printed as one JSON line with the costs against the best pass off.
pub(crate) async fn compare(flows: u64, steps: u64) -> anyhow::Result<()> {
    const ROUNDS: usize = 3;
    let (mut off, mut counted) = (Duration::MAX, Duration::MAX);
    for _ in 0..ROUNDS {
        off = off.min(pass(flows, steps, false).await?);
        counted = counted.min(pass(flows, steps, true).await?);
    }
    let rate = |elapsed: Duration| (flows * steps) as f64 / elapsed.as_secs_f64().max(1e-9);
    let mut line = serde_json::json!({
        "workload": "concurrent_telemetry",
        "flows": flows,
        "steps": flows * steps,
        "rounds": ROUNDS,
        "steps_per_sec_off": rate(off),
        "steps_per_sec_metrics": rate(counted),
        "cost_metrics": 1.0 - rate(counted) / rate(off),
    });
    #[cfg(feature = "otel")]
    {
        use tracing_subscriber::layer::SubscriberExt;
        let url = receiver().await?;
        let otlp = crate::telemetry::otlp(&url, "radkit-bench")?;
        // At `info`, as `radkit serve` logs by default: the engine's spans, not its debug events.
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::filter::LevelFilter::INFO)
            .with(otlp.layer());
        // The bench's spans are made on every runtime thread: the exporter's layer must be the
        // process's subscriber (a bench process sets none of its own), so these passes come last.
        tracing::subscriber::set_global_default(subscriber)
            .map_err(|_| anyhow::anyhow!("a tracing subscriber is set already"))?;
        let mut traced = Duration::MAX;
        for _ in 0..ROUNDS {
            traced = traced.min(pass(flows, steps, true).await?);
        }
        tokio::task::spawn_blocking(move || otlp.flush()).await??;
        line["steps_per_sec_metrics_and_otlp"] = rate(traced).into();
        line["cost_metrics_and_otlp"] = (1.0 - rate(traced) / rate(off)).into();
    }
    println!("{line}");
    Ok(())
}

/// One run of the concurrent workload on a fresh SQLite file: its wall time.
async fn pass(flows: u64, steps: u64, telemetry: bool) -> anyhow::Result<Duration> {
    let (_dir, path) = super::bench::fresh_db()?;
    let (skill, effects) = super::bench::engine_parts()?;
    let store = SqliteStore::open(&path, Durability::Full)?;
    let engine = super::bench::bench_builder(store, skill)
        .effects(effects)
        .record_metrics(telemetry)
        .start()
        .await?;
    let started = Instant::now();
    super::bench::run_tasks(&engine, flows, steps).await?;
    let elapsed = started.elapsed();
    engine.halt();
    Ok(elapsed)
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
