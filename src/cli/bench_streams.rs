//! `bench resubscribe`: hostile followers of one long task. A task with a long journal is written,
//! then `clients` connections each send `tasks/resubscribe` for it and never read the answer; the
//! server's resident memory is sampled before, while they hang on, and after they are gone. A
//! subscriber holds one page of the journal (the stream is paced by TCP), so memory stays flat
//! whatever the journal's length.

use std::time::Duration;

use anyhow::Context;
use futures::future::BoxFuture;
use tokio::io::AsyncWriteExt;

use crate::engine::Engine;
use crate::engine::{Caller, Request};
use crate::flow::step_table::{goto, Step, StepInput, StepTable};
use crate::flow::{SkillInfo, StepCtx, StepResult};
use crate::model::{Message, TaskId, TaskState};
use crate::store::{Durability, SqliteStore};

/// Entries one lap of [`lap`] journals: its visit, the progress command, the update, its receipt,
/// the transition.
const ENTRIES_PER_LAP: u64 = 5;

struct Chatter;

fn lap<'a>(_: &'a Chatter, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let (n, laps): (u64, u64) = match input.payload::<Option<(u64, u64)>>()? {
            Some(state) => state,
            None => (0, input.message().joined_texts().parse().unwrap_or(0)),
        };
        if n >= laps {
            return ctx.complete(format!("{laps} laps"), vec![]);
        }
        ctx.progress(format!("lap {n} of {laps}: some text a client would see"))
            .await?;
        goto("lap", Some((n + 1, laps)))
    })
}

static LAPS: &[Step<Chatter>] = &[Step::new("lap", lap)
    .start()
    .takes_user_message()
    .goes_to(&["lap"])];

/// The process's resident memory now (`VmRSS`), in bytes.
pub(crate) fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// An engine on a fresh SQLite file in `dir` serving the chatter skill, for tasks of up to `entries`
/// journal entries.
pub(super) async fn chatter_engine(dir: &std::path::Path, entries: u64) -> anyhow::Result<Engine> {
    let store = SqliteStore::open(dir.join("bench.sqlite"), Durability::Normal)?;
    let skill = StepTable::new(SkillInfo::new("chatter", "Chatter"), Chatter, LAPS)
        .map_err(anyhow::Error::msg)?;
    Ok(Engine::builder(store)
        .without_registered_skills()
        .skill(skill)
        .max_steps(entries.div_ceil(ENTRIES_PER_LAP) + 10)
        .start()
        .await?)
}

/// A finished task of about `entries` journal entries (a progress update every few), and its
/// journal's length.
pub(super) async fn long_task(engine: &Engine, entries: u64) -> anyhow::Result<(TaskId, usize)> {
    let laps = entries.div_ceil(ENTRIES_PER_LAP);
    let task = engine
        .send(Request::operator(Message::user_text(laps.to_string())))
        .await?;
    let done = engine.wait_settled(&Caller::Operator, &task).await?;
    anyhow::ensure!(
        done.status.state == TaskState::Completed,
        "the long task ended {:?}",
        done.status.state
    );
    let journal = engine.journal(&Caller::Operator, &task).await?.len();
    Ok((task, journal))
}

/// Run `bench resubscribe`.
pub async fn resubscribe(entries: u64, clients: u64, hold: Duration) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let engine = chatter_engine(dir.path(), entries).await?;
    let (task, journal) = long_task(&engine, entries).await?;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let mut config = crate::server::ServerConfig::new(format!("http://{addr}/"));
    config.max_history = 10;
    // Every follower is let in (the limits would answer most of them -32051 or -32052).
    let room = usize::try_from(clients)
        .unwrap_or(usize::MAX)
        .saturating_add(64);
    config.max_connections = config.max_connections.max(room);
    config.max_streams_per_principal = config.max_streams_per_principal.max(room);
    let server = tokio::spawn(crate::server::serve(listener, engine.clone(), config));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = rss_bytes();

    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tasks/resubscribe", "params": { "id": task }
    })
    .to_string();
    let request = format!(
        "POST / HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut sockets = Vec::new();
    for _ in 0..clients {
        let mut socket = tokio::net::TcpStream::connect(addr)
            .await
            .context("connect a follower")?;
        socket.write_all(request.as_bytes()).await?;
        sockets.push(socket);
    }
    // The followers never read: the server writes until their sockets are full, then waits.
    let mut during = 0;
    let started = std::time::Instant::now();
    while started.elapsed() < hold {
        tokio::time::sleep(Duration::from_millis(250)).await;
        during = during.max(rss_bytes());
    }
    drop(sockets);
    tokio::time::sleep(Duration::from_secs(2)).await;
    // What `radkit serve` does every few seconds (see `cli::memory`).
    super::memory::release_free_memory();
    let after = rss_bytes();
    server.abort();
    println!(
        "{}",
        serde_json::json!({
            "workload": "resubscribe",
            "journal_entries": journal,
            "clients": clients,
            "rss_before_mb": mb(before),
            "rss_during_max_mb": mb(during),
            "rss_after_mb": mb(after),
            "growth_per_client_kb": (during.saturating_sub(before)) as f64 / 1024.0 / clients.max(1) as f64,
        })
    );
    Ok(())
}
