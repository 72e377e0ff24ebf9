//! `bench a2a`: blocking sends over loopback to a trivial durable skill, through one binding and
//! protocol version, against the floor measured in the same run: A2A 0.3 JSON-RPC on a server of
//! its own, same skill, same store kind, same client count, in alternating rounds (the machine's
//! drift falls on both alike). It prints one JSON line for each, with requests/s, p50 and p99 over
//! all rounds; the measured binding's line carries its ratio to the floor.
//!
//! A binding is one arm of [`Binding`] and one of [`Target::call`]: the request it sends and the
//! completed task it expects back; a binding with a client of its own (gRPC's channel) adds it to
//! [`Clients`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::bench::{bench_builder, fresh_db, peak_rss_bytes};
use crate::flow::step_table::{Step, StepInput, StepTable};
use crate::flow::{SkillInfo, StepCtx, StepResult};
use crate::store::{Durability, SqliteStore};

/// The A2A binding a benchmark speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Binding {
    /// JSON-RPC 2.0 over HTTP (`POST /`).
    Jsonrpc,
    /// HTTP+JSON (`POST /message:send`), A2A 1.0 only.
    Rest,
    /// gRPC (`lf.a2a.v1.A2AService/SendMessage`), A2A 1.0 only.
    #[cfg(feature = "grpc")]
    Grpc,
}

/// The A2A protocol version a benchmark speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Version {
    /// A2A 0.3 (`message/send`).
    #[value(name = "0.3")]
    V0_3,
    /// A2A 1.0 (`SendMessage`, `A2A-Version: 1.0`).
    #[value(name = "1.0")]
    V1_0,
}

/// The clients a benchmark's workers share (cheap to clone).
#[derive(Clone)]
struct Clients {
    /// HTTP/1.1 with a connection pool as deep as the clients: JSON-RPC and HTTP+JSON.
    http: reqwest::Client,
    /// gRPC: this worker's own HTTP/2 connection (when the target is gRPC).
    #[cfg(feature = "grpc")]
    grpc: Option<super::bench_grpc::Client>,
}

/// One binding and version, and the client that speaks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Target {
    binding: Binding,
    version: Version,
}

impl Target {
    const FLOOR: Target = Target {
        binding: Binding::Jsonrpc,
        version: Version::V0_3,
    };

    fn name(self) -> String {
        let binding = match self.binding {
            Binding::Jsonrpc => "jsonrpc",
            Binding::Rest => "rest",
            #[cfg(feature = "grpc")]
            Binding::Grpc => "grpc",
        };
        let version = match self.version {
            Version::V0_3 => "0.3",
            Version::V1_0 => "1.0",
        };
        format!("{binding}/{version}")
    }

    /// Send message `n` (blocking) to the server at `url` (with its trailing `/`) and check the
    /// task completed.
    fn call<'a>(
        self,
        clients: &'a Clients,
        url: &'a str,
        n: u64,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        let client = &clients.http;
        Box::pin(async move {
            // A message id per request: one names one task (a repeated id is a retry).
            let id = format!("ping-{n}");
            let message_v1 =
                json!({ "messageId": id, "role": "ROLE_USER", "parts": [{ "text": "ping" }] });
            let (request, state) = match (self.binding, self.version) {
                (Binding::Jsonrpc, Version::V0_3) => (
                    client.post(url).json(&json!({
                        "jsonrpc": "2.0", "id": 1, "method": "message/send",
                        "params": { "message": { "role": "user", "parts": [{ "kind": "text", "text": "ping" }], "messageId": id, "kind": "message" },
                                    "configuration": { "blocking": true } }
                    })),
                    "/result/status/state",
                ),
                (Binding::Jsonrpc, Version::V1_0) => (
                    client.post(url).header("A2A-Version", "1.0").json(&json!({
                        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                        "params": { "message": message_v1 }
                    })),
                    "/result/task/status/state",
                ),
                (Binding::Rest, Version::V1_0) => (
                    client
                        .post(format!("{url}message:send"))
                        .header("A2A-Version", "1.0")
                        .json(&json!({ "message": message_v1 })),
                    "/task/status/state",
                ),
                #[cfg(feature = "grpc")]
                (Binding::Grpc, Version::V1_0) => {
                    let Some(grpc) = &clients.grpc else {
                        bail!("no gRPC connection")
                    };
                    return super::bench_grpc::send(grpc.clone(), n).await;
                }
                // JSON-RPC's is above: the others, HTTP+JSON and gRPC.
                (_, Version::V0_3) => {
                    bail!("the HTTP+JSON and gRPC bindings speak A2A 1.0 only; use --version 1.0")
                }
            };
            let reply: Value = request.send().await?.json().await?;
            match reply.pointer(state).and_then(Value::as_str) {
                Some("completed" | "TASK_STATE_COMPLETED") => Ok(()),
                _ => bail!("unexpected reply: {reply}"),
            }
        })
    }
}

struct Echo;

fn echo<'a>(_: &'a Echo, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { ctx.complete(input.message().joined_texts(), vec![]) })
}

static ECHO_STEPS: &[Step<Echo>] = &[Step::new("echo", echo).start().takes_user_message()];

/// What the runs of one target measured, added up.
#[derive(Default)]
struct Measured {
    latencies: Vec<Duration>,
    seconds: f64,
    commits: u64,
    appends: u64,
}

impl Measured {
    fn per_sec(&self) -> f64 {
        self.latencies.len() as f64 / self.seconds.max(1e-9)
    }

    /// The `p` quantile of the latencies, in milliseconds.
    fn percentile_ms(&mut self, p: f64) -> f64 {
        self.latencies.sort_unstable();
        let n = self.latencies.len();
        self.latencies
            .get(((n as f64 * p) as usize).min(n.saturating_sub(1)))
            .map(|d| d.as_secs_f64() * 1e3)
            .unwrap_or(0.0)
    }

    fn add(&mut self, run: Measured) {
        self.latencies.extend(run.latencies);
        self.seconds += run.seconds;
        self.commits += run.commits;
        self.appends += run.appends;
    }
}

/// `bench a2a`: `rounds` alternating runs of the floor (0.3 JSON-RPC) and `binding`/`version`
/// (when it is another), each on a server of its own, so that the machine's drift falls on both
/// alike; one line each, the figures added up over the rounds.
pub async fn run(
    binding: Binding,
    version: Version,
    requests: u64,
    concurrency: u64,
    rounds: u64,
    warmup: u64,
) -> anyhow::Result<()> {
    let target = Target { binding, version };
    match (binding, version) {
        (Binding::Rest, Version::V0_3) => {
            bail!("the HTTP+JSON binding speaks A2A 1.0 only; use --version 1.0")
        }
        #[cfg(feature = "grpc")]
        (Binding::Grpc, Version::V0_3) => {
            bail!("the gRPC binding speaks A2A 1.0 only; use --version 1.0")
        }
        _ => {}
    }
    let rounds = rounds.max(1);
    let per_round = (requests / rounds).max(1);
    let (mut floor, mut measured) = (Measured::default(), Measured::default());
    for _ in 0..rounds {
        floor.add(measure(Target::FLOOR, per_round, concurrency, warmup).await?);
        if target != Target::FLOOR {
            measured.add(measure(target, per_round, concurrency, warmup).await?);
        }
    }
    let floor_per_sec = floor.per_sec();
    let store_floor = super::bench_floor::sqlite_default()?;
    let shape = Shape {
        concurrency,
        rounds,
        warmup,
    };
    report(Target::FLOOR, &shape, &mut floor, None, Some(&store_floor));
    if target != Target::FLOOR {
        report(
            target,
            &shape,
            &mut measured,
            Some(floor_per_sec),
            Some(&store_floor),
        );
    }
    Ok(())
}

/// How a run was made: clients at once, rounds, and each server's untimed requests first.
struct Shape {
    concurrency: u64,
    rounds: u64,
    warmup: u64,
}

fn report(
    target: Target,
    shape: &Shape,
    m: &mut Measured,
    floor_per_sec: Option<f64>,
    store_floor: Option<&super::bench_floor::Floor>,
) {
    let mut line = json!({
        "workload": "a2a",
        "binding": target.name(),
        "requests": m.latencies.len(),
        "concurrency": shape.concurrency,
        "rounds": shape.rounds,
        "warmup": shape.warmup,
        "seconds": m.seconds,
        "requests_per_sec": m.per_sec(),
        "p50_ms": m.percentile_ms(0.50),
        "p99_ms": m.percentile_ms(0.99),
        "commits": m.commits,
        "appends": m.appends,
        "peak_rss_bytes": peak_rss_bytes(),
        "durability": "FULL",
    });
    // Requests per second (each a durable send) against the batched floor (W2) on the same disk.
    if let Some(floor) = store_floor {
        floor.attach(
            &mut line,
            super::bench_floor::Against::Batched,
            1e6 / m.per_sec().max(1e-9),
            m.per_sec(),
        );
    }
    if let (Some(floor), Some(o)) = (floor_per_sec, line.as_object_mut()) {
        o.insert("floor".into(), Target::FLOOR.name().into());
        o.insert("floor_requests_per_sec".into(), floor.into());
        o.insert(
            "ratio_to_floor".into(),
            (m.per_sec() / floor.max(1e-9)).into(),
        );
    }
    println!("{line}");
}

/// An in-process server on loopback over a fresh SQLite file, `concurrency` clients sending:
/// `warmup` requests untimed, then `requests` timed.
async fn measure(
    target: Target,
    requests: u64,
    concurrency: u64,
    warmup: u64,
) -> anyhow::Result<Measured> {
    let (_dir, path) = fresh_db()?;
    let skill = StepTable::new(SkillInfo::new("echo", "Echo"), Echo, ECHO_STEPS)
        .map_err(anyhow::Error::msg)?;
    let store = SqliteStore::open(&path, Durability::Full)?;
    let engine = bench_builder(store.clone(), skill).start().await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    let server = tokio::spawn(crate::server::serve(
        listener,
        engine.clone(),
        crate::server::ServerConfig::new(url.clone()),
    ));
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency as usize)
        .build()?;
    let mut per_worker = Vec::new();
    for _ in 0..concurrency {
        per_worker.push(Clients {
            http: http.clone(),
            #[cfg(feature = "grpc")]
            grpc: match target.binding {
                Binding::Grpc => Some(super::bench_grpc::connect(&url).await?),
                _ => None,
            },
        });
    }
    send_all(target, &per_worker, &url, 0..warmup).await?;
    let before = store.stats();
    let started = Instant::now();
    let latencies = send_all(target, &per_worker, &url, warmup..warmup + requests).await?;
    let seconds = started.elapsed().as_secs_f64();
    server.abort();
    engine.halt();
    let stats = store.stats();
    Ok(Measured {
        latencies,
        seconds,
        commits: stats.batches - before.batches,
        appends: stats.appends - before.appends,
    })
}

/// Requests numbered `numbers`, sent by one worker per entry of `per_worker`, each taking the next
/// number when its last request is answered: each request's latency.
async fn send_all(
    target: Target,
    per_worker: &[Clients],
    url: &str,
    numbers: std::ops::Range<u64>,
) -> anyhow::Result<Vec<Duration>> {
    let next = Arc::new(AtomicU64::new(numbers.start));
    let workers = per_worker.iter().map(|clients| {
        let (clients, url, next, end) =
            (clients.clone(), url.to_owned(), next.clone(), numbers.end);
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= end {
                    break;
                }
                let t = Instant::now();
                target.call(&clients, &url, n).await?;
                latencies.push(t.elapsed());
            }
            anyhow::Ok(latencies)
        })
    });
    let mut latencies: Vec<Duration> = Vec::new();
    for worker in futures::future::join_all(workers).await {
        latencies.extend(worker??);
    }
    Ok(latencies)
}
