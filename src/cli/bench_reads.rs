//! `bench read`: `tasks/get` of a task with a long journal against the floor of the same read of a
//! short task, over loopback HTTP in one run. A read answers from the task's view, which the store
//! keeps current with each append, so the ratio stays near 1 whatever the long journal's length.

use std::time::{Duration, Instant};

use serde_json::json;

use super::bench_streams::{chatter_engine, long_task};
use crate::model::TaskId;

/// Median and 99th percentile of `samples`, in ms.
pub(crate) fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |p: f64| {
        samples
            .get(((samples.len() as f64 * p) as usize).min(samples.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    (at(0.50), at(0.99))
}

/// `reads` sequential `tasks/get` of `task` (history window 10, as clients ask), each timed.
async fn time_gets(
    client: &reqwest::Client,
    url: &str,
    task: &TaskId,
    reads: u64,
) -> anyhow::Result<Vec<Duration>> {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tasks/get",
        "params": { "id": task, "historyLength": 10 }
    });
    let mut samples = Vec::new();
    for _ in 0..reads {
        let t = Instant::now();
        let reply: serde_json::Value = client.post(url).json(&body).send().await?.json().await?;
        samples.push(t.elapsed());
        anyhow::ensure!(
            reply["result"]["status"]["state"] == "completed",
            "unexpected reply: {reply}"
        );
    }
    Ok(samples)
}

/// Run `bench read`.
pub async fn read(entries: u64, reads: u64) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let engine = chatter_engine(dir.path(), entries).await?;
    let (long, long_entries) = long_task(&engine, entries).await?;
    let (short, short_entries) = long_task(&engine, 1).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    let server = tokio::spawn(crate::server::serve(
        listener,
        engine,
        crate::server::ServerConfig::new(url.clone()),
    ));
    let client = reqwest::Client::new();
    // Warm both (connection, page cache), then alternate rounds so that drift hits both alike.
    time_gets(&client, &url, &short, 20).await?;
    time_gets(&client, &url, &long, 20).await?;
    let (mut short_samples, mut long_samples) = (Vec::new(), Vec::new());
    let rounds = 10;
    for _ in 0..rounds {
        short_samples.extend(time_gets(&client, &url, &short, reads.div_ceil(rounds)).await?);
        long_samples.extend(time_gets(&client, &url, &long, reads.div_ceil(rounds)).await?);
    }
    server.abort();
    let (short_p50, short_p99) = percentiles(short_samples);
    let (long_p50, long_p99) = percentiles(long_samples);
    // A read of the long task against one durable commit on the same disk (W1): what an O(1)
    // read costs beside the write every step pays.
    let floor = super::bench_floor::sqlite_default()?;
    let mut line = json!({
        "workload": "read",
        "long_journal_entries": long_entries,
        "short_journal_entries": short_entries,
        "reads_each": reads.div_ceil(rounds) * rounds,
        "short_p50_ms": short_p50,
        "short_p99_ms": short_p99,
        "long_p50_ms": long_p50,
        "long_p99_ms": long_p99,
        "p50_ratio_long_to_short": long_p50 / short_p50.max(1e-9),
    });
    floor.attach_latency(&mut line, long_p50);
    println!("{line}");
    Ok(())
}
