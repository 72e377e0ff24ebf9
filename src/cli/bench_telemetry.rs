//! `bench concurrent --telemetry`: the concurrent workload run twice in one process, first with
//! telemetry off (no counters recorded, no subscriber), then on (the engine's counters and, with
//! the `otel` feature, every span exported over OTLP/HTTP to a receiver on loopback that takes each
//! export and answers it), and the throughput ratio printed. The issue's target is a cost under 5%.

use std::time::{Duration, Instant};

use crate::store::{Durability, SqliteStore};

/// Run both passes and print one JSON line: steps/s off and on, and the ratio.
pub(crate) async fn compare(flows: u64, steps: u64) -> anyhow::Result<()> {
    let off = pass(flows, steps, false).await?;
    #[cfg(feature = "otel")]
    let exporter = {
        use tracing_subscriber::layer::SubscriberExt;
        let url = receiver().await?;
        let otlp = crate::telemetry::otlp(&url, "radkit-bench")?;
        let subscriber = tracing_subscriber::registry().with(otlp.layer());
        // The bench's spans are made on every runtime thread: the exporter's layer must be the
        // process's subscriber (a bench process sets none of its own).
        tracing::subscriber::set_global_default(subscriber)
            .map_err(|_| anyhow::anyhow!("a tracing subscriber is set already"))?;
        otlp
    };
    let on = pass(flows, steps, true).await?;
    #[cfg(feature = "otel")]
    let flushed = tokio::task::spawn_blocking(move || exporter.flush()).await?;
    let rate = |elapsed: Duration| (flows * steps) as f64 / elapsed.as_secs_f64().max(1e-9);
    let line = serde_json::json!({
        "workload": "concurrent_telemetry",
        "flows": flows,
        "steps": flows * steps,
        "steps_per_sec_off": rate(off),
        "steps_per_sec_on": rate(on),
        "cost": 1.0 - rate(on) / rate(off),
        "metrics": cfg!(feature = "metrics"),
        "otlp_export": cfg!(feature = "otel"),
    });
    println!("{line}");
    #[cfg(feature = "otel")]
    flushed?;
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
