//! `bench soak`: mixed load on a server for a while — sends that start tasks waiting for input,
//! answers, streams, resubscribes, cancels, reads, and slow clients that never read — with resident
//! memory, the database's size and request latency printed every few seconds, so a leak, a growing
//! file or a slowdown shows as a trend. The clients keep the newest 500 tasks waiting and cancel
//! older ones, so every other task finishes: a steady stream, which the server prunes as
//! `--retain-journals`/`--retain-tasks` say.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use crate::engine::Engine;
use crate::flow::step_table::{await_input, Step, StepInput, StepTable};
use crate::flow::{SkillInfo, StepCtx, StepResult};
use crate::store::{Durability, SqliteStore};

struct Soak;

fn ask<'a>(_: &'a Soak, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        ctx.progress("thinking").await?;
        await_input("answer", "Your answer?", ())
    })
}

fn done<'a>(_: &'a Soak, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { ctx.complete(format!("got {}", input.message().joined_texts()), vec![]) })
}

static STEPS: &[Step<Soak>] = &[
    Step::new("ask", ask).start().takes_user_message(),
    Step::new("done", done).resume_from("ask"),
];

/// Tasks waiting for an answer: the newest [`WAITING`]; an older one is canceled, so that the
/// tasks at rest stay bounded and every other task finishes (a steady stream, which retention
/// keeps to a flat file).
type Waiting = Arc<Mutex<VecDeque<String>>>;

/// Tasks the clients keep waiting for an answer at once.
const WAITING: usize = 500;

/// Remember `id` as waiting; the tasks it pushes out of the window, to cancel.
fn wait_on(waiting: &Waiting, id: String) -> Vec<String> {
    let Ok(mut w) = waiting.lock() else {
        return Vec::new();
    };
    w.push_back(id);
    let over = w.len().saturating_sub(WAITING);
    w.drain(..over).collect()
}

/// Cancel the tasks no client will answer.
async fn cancel(client: &reqwest::Client, url: &str, ids: Vec<String>) -> anyhow::Result<()> {
    for id in ids {
        rpc(client, url, "tasks/cancel", json!({ "id": id })).await?;
    }
    Ok(())
}

/// What the clients did in the current interval.
#[derive(Default)]
struct Interval {
    latencies: Mutex<Vec<Duration>>,
    errors: AtomicU64,
}

fn message(text: &str, task: Option<&str>) -> Value {
    let mut m = json!({ "role": "user", "parts": [{ "kind": "text", "text": text }],
                        "messageId": crate::model::new_id(), "kind": "message" });
    if let Some(task) = task {
        m["taskId"] = json!(task);
    }
    m
}

fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

async fn rpc(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    params: Value,
) -> anyhow::Result<Value> {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    Ok(client.post(url).json(&body).send().await?.json().await?)
}

/// Read a stream until it ends or for at most a second; the task id its first event names.
async fn drain(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    params: Value,
) -> anyhow::Result<Option<String>> {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let mut resp = client.post(url).json(&body).send().await?;
    let until = tokio::time::Instant::now() + Duration::from_secs(1);
    let mut head = Vec::new();
    while let Ok(Ok(Some(chunk))) = tokio::time::timeout_at(until, resp.chunk()).await {
        if head.len() < 64 * 1024 {
            head.extend_from_slice(&chunk);
        }
    }
    // The first event's `data:` line: the task (0.3 `message/stream` opens with it).
    let first = String::from_utf8_lossy(&head)
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .and_then(|data| serde_json::from_str::<Value>(data.trim()).ok());
    Ok(first.and_then(|event| {
        let result = &event["result"];
        result["id"]
            .as_str()
            .or_else(|| result["taskId"].as_str())
            .map(str::to_owned)
    }))
}

/// One client's action, chosen by `roll`.
async fn act(
    client: &reqwest::Client,
    url: &str,
    addr: std::net::SocketAddr,
    waiting: &Waiting,
    roll: u64,
) -> anyhow::Result<()> {
    let pick = || waiting.lock().ok().and_then(|mut w| w.pop_front());
    match roll % 100 {
        0..=29 => {
            let answer = rpc(
                client,
                url,
                "message/send",
                json!({ "message": message("go", None), "configuration": { "blocking": true } }),
            )
            .await?;
            let id = answer["result"]["id"]
                .as_str()
                .ok_or_else(|| anyhow::anyhow!("no task: {answer}"))?;
            let out = wait_on(waiting, id.to_owned());
            cancel(client, url, out).await?;
        }
        30..=49 => {
            if let Some(id) = pick() {
                rpc(client, url, "message/send",
                    json!({ "message": message("42", Some(&id)), "configuration": { "blocking": true } })).await?;
            }
        }
        50..=64 => {
            let id = drain(
                client,
                url,
                "message/stream",
                json!({ "message": message("go", None) }),
            )
            .await?;
            if let Some(id) = id {
                let out = wait_on(waiting, id);
                cancel(client, url, out).await?;
            }
        }
        65..=74 => {
            if let Some(id) = pick() {
                drain(client, url, "tasks/resubscribe", json!({ "id": id })).await?;
                waiting.lock().map(|mut w| w.push_back(id)).ok();
            }
        }
        75..=82 => {
            if let Some(id) = pick() {
                rpc(client, url, "tasks/cancel", json!({ "id": id })).await?;
            }
        }
        83..=94 => {
            if let Some(id) = pick() {
                rpc(client, url, "tasks/get", json!({ "id": id })).await?;
                waiting.lock().map(|mut w| w.push_back(id)).ok();
            }
        }
        _ => {
            // A slow client: resubscribes, never reads, goes away after a while.
            if let Some(id) = pick() {
                let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tasks/resubscribe", "params": { "id": id } }).to_string();
                let mut socket = tokio::net::TcpStream::connect(addr).await?;
                socket.write_all(format!("POST / HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len()).as_bytes()).await?;
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    drop(socket);
                });
                waiting.lock().map(|mut w| w.push_back(id)).ok();
            }
        }
    }
    Ok(())
}

/// The database's size on disk: its file and its write-ahead log, in MB.
fn db_mb(path: &std::path::Path) -> f64 {
    let size = |p: std::path::PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let bytes = size(path.to_owned()) + size(wal.into());
    (bytes as f64 / (1024.0 * 1024.0) * 10.0).round() / 10.0
}

/// Tasks in the store, by the store's own count.
async fn stored(store: &SqliteStore) -> u64 {
    use crate::store::Store;
    store
        .state_counts(&crate::store::ViewQuery::default())
        .await
        .map_or(0, |counts| counts.iter().map(|(_, n)| n).sum())
}

/// Run `bench soak`.
pub async fn soak(
    seconds: u64,
    clients: u64,
    every: Duration,
    retention: crate::engine::Retention,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("soak.sqlite");
    let store = SqliteStore::open(&path, Durability::Normal)?;
    let skill =
        StepTable::new(SkillInfo::new("soak", "Soak"), Soak, STEPS).map_err(anyhow::Error::msg)?;
    let engine = Engine::builder(store.clone())
        .without_registered_skills()
        .skill(skill)
        .retention(retention)
        .start()
        .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let url = format!("http://{addr}/");
    let server = tokio::spawn(crate::server::serve(
        listener,
        engine.clone(),
        crate::server::ServerConfig::new(url.clone()),
    ));
    super::memory::spawn_trimmer();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let waiting: Waiting = Arc::default();
    let interval = Arc::new(Interval::default());
    let total = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let workers: Vec<_> = (0..clients)
        .map(|seed| {
            let (client, url, waiting, interval, total) = (
                client.clone(),
                url.clone(),
                waiting.clone(),
                interval.clone(),
                total.clone(),
            );
            tokio::spawn(async move {
                // xorshift64, seeded per client: which action comes next.
                let mut state =
                    0x9E37_79B9_7F4A_7C15u64 ^ (seed + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                while Instant::now() < deadline {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let t = Instant::now();
                    match act(&client, &url, addr, &waiting, state).await {
                        Ok(()) => {
                            if let Ok(mut l) = interval.latencies.lock() {
                                l.push(t.elapsed());
                            }
                        }
                        Err(_) => {
                            interval.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    total.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let (mut rss_first, mut rss_max, mut rss_last) = (None, 0.0f64, 0.0);
    let (mut db_first, mut db_max, mut db_last) = (None, 0.0f64, 0.0);
    while Instant::now() < deadline {
        tokio::time::sleep(every.min(deadline.saturating_duration_since(Instant::now()))).await;
        let mut latencies = std::mem::take(
            &mut *interval
                .latencies
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?,
        );
        latencies.sort();
        let pct = |p: f64| {
            latencies
                .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
                .map_or(0.0, |d| d.as_secs_f64() * 1e3)
        };
        let rss = rss_mb();
        rss_first.get_or_insert(rss);
        rss_max = rss_max.max(rss);
        rss_last = rss;
        let db = db_mb(&path);
        db_first.get_or_insert(db);
        db_max = db_max.max(db);
        db_last = db;
        let memory = super::memory::memory_use();
        let mb = |bytes: u64| (bytes as f64 / (1024.0 * 1024.0) * 10.0).round() / 10.0;
        println!(
            "{}",
            json!({
                "seconds": started.elapsed().as_secs(),
                "rss_mb": rss,
                "heap_in_use_mb": memory.heap_in_use.map(mb),
                "heap_held_mb": memory.heap_held.map(mb),
                "sqlite_mb": mb(memory.sqlite),
                "db_mb": db,
                "tasks_stored": stored(&store).await,
                "tasks_in_hand": engine.tasks_in_hand(),
                "actions": latencies.len(),
                "errors": interval.errors.swap(0, Ordering::Relaxed),
                "p50_ms": pct(0.5),
                "p99_ms": pct(0.99),
            })
        );
    }
    for worker in workers {
        let _ = worker.await;
    }
    server.abort();
    let actions = total.load(Ordering::Relaxed);
    let mut line = json!({
        "workload": "soak",
        "seconds": seconds,
        "clients": clients,
        "actions": actions,
        "rss_first_mb": rss_first.unwrap_or(0.0),
        "rss_max_mb": rss_max,
        "rss_last_mb": rss_last,
        "db_first_mb": db_first.unwrap_or(0.0),
        "db_max_mb": db_max,
        "db_last_mb": db_last,
        "retain_journals_s": retention.journal.map(|d| d.as_secs_f64()),
        "retain_tasks_s": retention.task.map(|d| d.as_secs_f64()),
    });
    // Actions per second (most of them durable) against the batched floor (W2) on the same disk.
    let floor = super::bench_floor::sqlite_default()?;
    let per_sec = actions as f64 / (seconds as f64).max(1e-9);
    floor.attach(
        &mut line,
        super::bench_floor::Against::Batched,
        1e6 / per_sec.max(1e-9),
        per_sec,
    );
    println!("{line}");
    Ok(())
}
