//! The physical floor every bench figure is judged against, measured on the machine the bench runs
//! on, in the same process run: one durable row per step (W1, `floor-sequential`: one transaction
//! per row, each committed before the next starts) and the same rows group-committed (W2,
//! `floor-batched`: `batch` rows per transaction), with the durability the engine's store keeps —
//! SQLite in WAL mode with `synchronous=FULL` (as `Durability::Full` opens it), Postgres with each
//! transaction's commit awaited (`synchronous_commit` as the server has it). The rows are of one
//! size, about a durable step's journal (`ROW_BYTES`). What the engine adds on top — decoding,
//! folding, the step itself, its effect, its wake-ups — is the gap between a figure and its floor.

use std::time::{Duration, Instant};

#[cfg(feature = "postgres")]
use anyhow::Context;

/// Bytes in each row: about what a durable step of the bench skill journals (its visit, command,
/// receipt and transition as JSON: ~525 bytes, `bench machine`'s `journal_bytes_per_step`).
pub(crate) const ROW_BYTES: usize = 512;

/// The floor's two figures.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Floor {
    /// W1: µs per durable row, one transaction each.
    pub sequential_us: f64,
    /// W2: rows per second, `batch` per transaction.
    pub batched_steps_per_sec: f64,
    /// Rows per W2 transaction.
    pub batch: usize,
}

/// Which floor a bench line compares with.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Against {
    /// One task's steps in sequence: its µs per step over W1's (1.0: each step costs one commit;
    /// lower is not possible durably).
    Sequential,
    /// Many tasks at once: its steps per second over W2's (1.0: the engine keeps up with batched
    /// commits of its rows).
    Batched,
}

impl Floor {
    /// The ratio of a line's figure (`us_per_step`, `steps_per_sec`) to this floor.
    pub fn ratio(&self, against: Against, us_per_step: f64, steps_per_sec: f64) -> f64 {
        match against {
            Against::Sequential => us_per_step / self.sequential_us.max(1e-9),
            Against::Batched => steps_per_sec / self.batched_steps_per_sec.max(1e-9),
        }
    }

    /// The floor's fields on a bench line.
    pub fn fields(
        &self,
        against: Against,
        us_per_step: f64,
        steps_per_sec: f64,
    ) -> serde_json::Value {
        serde_json::json!({
            "floor_ratio": self.ratio(against, us_per_step, steps_per_sec),
            "floor_against": match against {
                Against::Sequential => "floor-sequential",
                Against::Batched => "floor-batched",
            },
            "floor_sequential_us_per_step": self.sequential_us,
            "floor_batched_steps_per_sec": self.batched_steps_per_sec,
        })
    }

    /// Add the floor's fields ([`Floor::fields`]) to a bench line (a JSON object).
    pub fn attach(
        &self,
        line: &mut serde_json::Value,
        against: Against,
        us_per_step: f64,
        steps_per_sec: f64,
    ) {
        if let (Some(obj), serde_json::Value::Object(more)) = (
            line.as_object_mut(),
            self.fields(against, us_per_step, steps_per_sec),
        ) {
            obj.extend(more);
        }
    }

    /// Add the floor's fields to a bench line that times one operation (`ms` milliseconds, its
    /// median, say) against one durable commit (W1): how many commits' time it takes.
    pub fn attach_latency(&self, line: &mut serde_json::Value, ms: f64) {
        self.attach(line, Against::Sequential, ms * 1e3, 1e3 / ms.max(1e-9));
    }

    /// The two lines `bench floor` prints.
    pub fn lines(&self, store: &str, rows: (u64, u64)) -> [serde_json::Value; 2] {
        let durability = match store {
            "postgres" => "synchronous_commit=on",
            _ => "FULL",
        };
        [
            serde_json::json!({
                "workload": "floor-sequential",
                "store": store,
                "steps": rows.0,
                "us_per_step": self.sequential_us,
                "steps_per_sec": 1e6 / self.sequential_us.max(1e-9),
                "row_bytes": ROW_BYTES,
                "durability": durability,
            }),
            serde_json::json!({
                "workload": "floor-batched",
                "store": store,
                "steps": rows.1,
                "steps_per_sec": self.batched_steps_per_sec,
                "us_per_step": 1e6 / self.batched_steps_per_sec.max(1e-9),
                "batch": self.batch,
                "row_bytes": ROW_BYTES,
                "durability": durability,
            }),
        ]
    }
}

/// A row's body: `ROW_BYTES` of JSON-looking text, different per row (so no page dedups it).
fn body(i: u64) -> String {
    let mut s = format!("{{\"seq\":{i},\"entry\":\"");
    while s.len() < ROW_BYTES - 2 {
        s.push(char::from(b'a' + u8::try_from(i % 26).unwrap_or(0)));
    }
    s.push_str("\"}");
    s
}

/// The floor on SQLite: a fresh file in `dir`, `sequential` rows one per transaction, then
/// `batched` rows `batch` per transaction.
pub(crate) fn sqlite(
    dir: &std::path::Path,
    sequential: u64,
    batched: u64,
    batch: usize,
) -> anyhow::Result<Floor> {
    let path = dir.join("floor.sqlite");
    let mut conn = rusqlite::Connection::open(&path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.execute_batch(CREATE)?;
    let sequential_us = rows_one_by_one(&conn, "w1", sequential)?;
    let batch = batch.max(1);
    let batched_steps_per_sec = rows_batched(&mut conn, "w2", batched, batch)?;
    Ok(Floor {
        sequential_us,
        batched_steps_per_sec,
        batch,
    })
}

/// The floor's one table: rows by task and seq, as a journal keeps them.
const CREATE: &str = "CREATE TABLE IF NOT EXISTS floor (task TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (task, seq))";

/// One row of the floor.
const INSERT: &str = "INSERT INTO floor (task, seq, body) VALUES (?1, ?2, ?3)";

/// W2 on `conn`: `rows` rows, `batch` per transaction, each row of a batch under a task of its
/// own (`{prefix}-{i}`), as the group commit of many tasks writes them; rows per second.
fn rows_batched(
    conn: &mut rusqlite::Connection,
    prefix: &str,
    rows: u64,
    batch: usize,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut written = 0u64;
    while written < rows {
        let tx = conn.transaction()?;
        for _ in 0..batch {
            let task = format!("{prefix}-{}", written % batch as u64);
            tx.prepare_cached(INSERT)?
                .execute(rusqlite::params![task, written, body(written)])?;
            written += 1;
        }
        tx.commit()?;
    }
    Ok(written as f64 / started.elapsed().as_secs_f64().max(1e-9))
}

/// W1 on `conn`: `rows` rows of `task`, one transaction each; µs per row.
fn rows_one_by_one(conn: &rusqlite::Connection, task: &str, rows: u64) -> anyhow::Result<f64> {
    let started = Instant::now();
    for i in 0..rows {
        conn.prepare_cached(INSERT)?
            .execute(rusqlite::params![task, i, body(i)])?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / rows.max(1) as f64)
}

/// W1 again on the SQLite floor's file in `dir` (made by [`sqlite`]): `rows` more rows, one
/// transaction each, under a task name of their own (`round`); µs per row. For benches that
/// alternate rounds of the floor and of their workload, so that the machine's drift within a run
/// weighs on both alike.
pub(crate) fn sqlite_sequential_round(
    dir: &std::path::Path,
    round: u64,
    rows: u64,
) -> anyhow::Result<f64> {
    let conn = rusqlite::Connection::open(dir.join("floor.sqlite"))?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    rows_one_by_one(&conn, &format!("w1-{round}"), rows)
}

/// The floor on Postgres at `url` (a scratch table in a fresh schema, dropped after).
#[cfg(feature = "postgres")]
pub(crate) async fn postgres(
    url: &str,
    sequential: u64,
    batched: u64,
    batch: usize,
) -> anyhow::Result<Floor> {
    let (schema, scoped) = super::bench_cluster::create_schema(url, "radkit_floor").await?;
    let measured = postgres_in(&scoped, sequential, batched, batch).await;
    if let Err(e) = super::bench_cluster::drop_schema(url, &schema).await {
        eprintln!("warning: floor schema {schema} not dropped: {e:#}");
    }
    measured
}

#[cfg(feature = "postgres")]
async fn postgres_in(
    url: &str,
    sequential: u64,
    batched: u64,
    batch: usize,
) -> anyhow::Result<Floor> {
    let (mut client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("connecting for the floor")?;
    let connection = tokio::spawn(connection);
    client
        .batch_execute(
            "CREATE TABLE floor (task TEXT NOT NULL, seq BIGINT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (task, seq))",
        )
        .await?;
    let insert = client
        .prepare("INSERT INTO floor (task, seq, body) VALUES ($1, $2, $3)")
        .await?;
    let started = Instant::now();
    for i in 0..sequential {
        let seq = i64::try_from(i)?;
        client.execute(&insert, &[&"w1", &seq, &body(i)]).await?;
    }
    let sequential_us = started.elapsed().as_secs_f64() * 1e6 / sequential.max(1) as f64;
    let batch = batch.max(1);
    let started = Instant::now();
    let mut written = 0u64;
    while written < batched {
        let tx = client.transaction().await?;
        let mut rows = Vec::with_capacity(batch);
        for _ in 0..batch {
            rows.push((
                format!("w2-{}", written % batch as u64),
                i64::try_from(written)?,
                body(written),
            ));
            written += 1;
        }
        // Pipelined on the one connection, as the store's group commit sends a batch.
        type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);
        let params: Vec<[Param<'_>; 3]> = rows
            .iter()
            .map(|(task, seq, body)| [task as Param<'_>, seq, body])
            .collect();
        let inserts = params.iter().map(|p| tx.execute(&insert, p));
        futures::future::try_join_all(inserts).await?;
        tx.commit().await?;
    }
    let batched_steps_per_sec = written as f64 / started.elapsed().as_secs_f64().max(1e-9);
    drop(client);
    let _ = connection.await;
    Ok(Floor {
        sequential_us,
        batched_steps_per_sec,
        batch,
    })
}

/// The floor on SQLite in a scratch directory, with the sizes every bench line uses: 500
/// sequential rows, 20,000 batched 100 at a time (about a second on this machine).
pub(crate) fn sqlite_default() -> anyhow::Result<Floor> {
    sqlite_warmed(0)
}

/// [`sqlite_default`] on a file that took `warmup` rows first (W2's way, unmeasured), as a
/// server's file is warm: its WAL grown and cycled, its pages allocated. A bench that warms its
/// own store first compares with this.
pub(crate) fn sqlite_warmed(warmup: u64) -> anyhow::Result<Floor> {
    let dir = tempfile::tempdir()?;
    if warmup > 0 {
        let mut conn = rusqlite::Connection::open(dir.path().join("floor.sqlite"))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.execute_batch(CREATE)?;
        rows_batched(&mut conn, "warm", warmup, 100)?;
    }
    sqlite(dir.path(), 500, 20_000, 100)
}

/// The CPU time (user and system) this process's threads have used.
pub(crate) fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given and reads nothing else.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}
