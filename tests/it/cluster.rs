//! Many engines on one Postgres store: leases, takeover, fencing, and any engine answering for any
//! task. In-process engines first, then real `radkit worker` processes killed with `kill -9` and paused
//! with SIGSTOP. The server is `RADKIT_TEST_POSTGRES_URL`, else the local one (see `services`); when
//! it does not answer these tests are reported ignored. Each test works in a fresh schema.

use radkit::engine::{Caller, Request};
use radkit::model::TaskId;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use radkit::engine::Engine;
use radkit::journal::{Entry, JournalRecord};
use radkit::model::{Message, TaskState};
use radkit::store::{Append, Leases, PostgresStore, Store, StoreError, TaskQuery, TaskRecord};
use serde_json::json;
use tokio::sync::Notify;

#[allow(dead_code)] // each test uses part of the demo
use crate::support::demo;

use crate::support::common;
use crate::support::services;
use common::{within, PATIENCE};

/// A URL whose search path is a fresh schema on the test server.
async fn fresh_schema() -> String {
    let (_, scoped) =
        radkit::store::PostgresStore::create_schema(&services::postgres_url(), "radkit_cluster")
            .await
            .expect("create a test schema");
    scoped
}

async fn engine(url: &str, name: &str, ttl_ms: u64) -> Engine {
    let store = PostgresStore::connect(url)
        .await
        .expect("connect the store");
    demo::engine(Engine::builder(store))
        .worker_id(name)
        .lease_ttl(Duration::from_millis(ttl_ms))
        .poll_interval(Duration::from_millis(20))
        .start()
        .await
        .expect("start the engine")
}

/// An engine that creates tasks and leaves them to the workers.
async fn submitter(url: &str) -> Engine {
    let store = PostgresStore::connect(url)
        .await
        .expect("connect the store");
    demo::engine(Engine::builder(store))
        .worker_id("submitter")
        .max_active_tasks(0)
        .build()
        .expect("build the engine")
}

async fn send(engine: &Engine, skill: &str, text: &str) -> TaskId {
    engine
        .send(Request::operator(Message::user_text(text)).skill(skill))
        .await
        .expect("send")
}

/// Every journal is gap-free, every command has exactly one receipt, and the task completed.
fn check_journal(task_id: &str, journal: &[JournalRecord]) {
    let seqs: Vec<u64> = journal.iter().map(|r| r.seq).collect();
    let expected: Vec<u64> = (1..=journal.len() as u64).collect();
    assert_eq!(
        seqs, expected,
        "task {task_id}: journal has a gap or a duplicate"
    );
    let mut receipts: HashMap<String, usize> = HashMap::new();
    let mut issued = HashSet::new();
    for record in journal {
        match &record.entry {
            Entry::CommandIssued { id, .. } => {
                assert!(
                    issued.insert(id.as_str().to_owned()),
                    "task {task_id}: command {id} issued twice"
                );
            }
            Entry::ReceiptRecorded { receipt } => {
                *receipts.entry(receipt.id.as_str().to_owned()).or_default() += 1;
            }
            _ => {}
        }
    }
    for id in &issued {
        assert_eq!(
            receipts.get(id).copied(),
            Some(1),
            "task {task_id}: command {id} must have exactly one receipt"
        );
    }
}

/// Wait until `task` has journaled more than `seq` entries, following it as `engine` sees it.
async fn journaled_past(engine: &Engine, task: &TaskId, seq: u64) {
    let mut sub = engine.subscribe(&Caller::Operator, task).await.unwrap();
    within(
        PATIENCE,
        &format!("task {task} to journal past seq {seq}"),
        async {
            while let Some(update) = sub.next().await {
                if update.expect("follow the task").seq() > seq {
                    return;
                }
            }
            panic!("task {task} ended before seq {seq}");
        },
    )
    .await
}

/// Wait until `task` has journaled a few ticks.
async fn ticked(engine: &Engine, task: &TaskId) {
    journaled_past(engine, task, 10).await
}

/// The task once it waits for input or has finished, as `engine` sees it.
async fn settled(engine: &Engine, task: &TaskId) -> radkit::model::Task {
    within(
        PATIENCE,
        &format!("task {task} to settle"),
        engine.wait_settled(&Caller::Operator, task),
    )
    .await
    .unwrap_or_else(|e| panic!("waiting for task {task}: {e}"))
}

/// The task once it waits for input or has finished, through an outage of the store: while a run
/// of the task stopped on a failed write and no claim has resumed it yet, following it answers
/// `StorageUnavailable` at once (what a client retries on), which is waited out here.
async fn settled_through_outage(engine: &Engine, task: &TaskId) -> radkit::model::Task {
    within(PATIENCE, &format!("task {task} to settle"), async {
        loop {
            match engine.wait_settled(&Caller::Operator, task).await {
                Ok(done) => return done,
                Err(radkit::engine::EngineError::StorageUnavailable { .. }) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("waiting for task {task}: {e}"),
            }
        }
    })
    .await
}

/// Poll `check` until it holds, failing after `timeout`. Only for what no event announces: the state
/// of other processes (worker processes, their log file) or of rows no subscription covers (leases).
async fn wait_for(what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait for a child process to exit, failing after `timeout` (polled: a child's exit is no event an
/// async test can await without a thread).
fn exited(child: &mut Child, what: &str, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what} to exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test(multi_thread, needs = Postgres)]
async fn any_engine_answers_streams_and_continues_any_task() {
    let url = fresh_schema().await;
    let a = engine(&url, "engine-a", 2_000).await;
    let b = engine(&url, "engine-b", 2_000).await;
    let task = send(&a, "research_loop_v2", "durable execution").await;
    // B follows a task A runs: its subscription reads what A commits.
    let waiting = settled(&b, &task).await;
    assert_eq!(waiting.status.state, TaskState::InputRequired);
    // B takes the answer: it acquires the lease A gave back when the task began to wait.
    let mut reply = Message::user_text("Yes, the tone is right.");
    reply.task_id = Some(task.to_string());
    within(
        PATIENCE,
        "b to take the answer",
        b.send(Request::operator(reply)),
    )
    .await
    .unwrap();
    let done = settled(&a, &task).await;
    assert_eq!(done.status.state, TaskState::Completed);
    check_journal(&task, &a.journal(&Caller::Operator, &task).await.unwrap());
    assert_eq!(
        a.task(&Caller::Operator, &task, None).await.unwrap(),
        b.task(&Caller::Operator, &task, None).await.unwrap(),
        "both engines show the same task"
    );
}

#[test(multi_thread, needs = Postgres)]
async fn cancel_on_one_engine_stops_a_task_running_on_another() {
    let url = fresh_schema().await;
    let a = engine(&url, "engine-a", 2_000).await;
    let b = engine(&url, "engine-b", 2_000).await;
    let task = send(&a, "ticker", "9999 5").await;
    ticked(&a, &task).await;
    let canceled = within(
        PATIENCE,
        "the cancel from b",
        b.cancel(&Caller::Operator, &task),
    )
    .await
    .unwrap();
    assert_eq!(canceled.status.state, TaskState::Canceled);
    check_journal(&task, &b.journal(&Caller::Operator, &task).await.unwrap());
}

#[test(multi_thread, needs = Postgres)]
async fn a_halted_engines_task_is_taken_over_when_its_lease_expires() {
    let url = fresh_schema().await;
    let a = engine(&url, "engine-a", 400).await;
    let task = send(&a, "ticker", "60 5").await;
    ticked(&a, &task).await;
    a.halt(); // a crash: the lease is not given back
              // Nothing announces that a lease ran out: poll the row until it has, then check that it ran out
              // still held by A (a release would have cleared the owner; nobody else could have taken it).
    wait_for("a's lease to expire", Duration::from_secs(30), async || {
        lease(&url, &task).await.1.is_some_and(|at| at < now_ms())
    })
    .await;
    assert_eq!(lease_owner(&url, &task).await.as_deref(), Some("engine-a"));
    drop(a);
    let b = engine(&url, "engine-b", 400).await;
    let done = settled(&b, &task).await;
    assert_eq!(done.status.state, TaskState::Completed);
    check_journal(&task, &b.journal(&Caller::Operator, &task).await.unwrap());
}

/// A connection of the test's own to the database (for what the store's API does not show).
async fn sql(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// Who holds the task's lease, read straight from its row.
async fn lease_owner(url: &str, task_id: &str) -> Option<String> {
    lease(url, task_id).await.0
}

/// The task's lease owner and expiry, read straight from its row.
async fn lease(url: &str, task_id: &str) -> (Option<String>, Option<i64>) {
    let row = sql(url)
        .await
        .query_one(
            "SELECT lease_owner, lease_expires_ms FROM radkit_tasks WHERE id = $1",
            &[&task_id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

fn now_ms() -> i64 {
    radkit::journal::now_ms()
}

#[test(multi_thread, needs = Postgres)]
async fn shutdown_gives_the_leases_back_for_another_engine_to_continue() {
    let url = fresh_schema().await;
    // Leases long enough that only a release lets B continue within the test's lifetime.
    let a = engine(&url, "engine-a", 600_000).await;
    let task = send(&a, "ticker", "60 5").await;
    ticked(&a, &task).await;
    assert_eq!(lease_owner(&url, &task).await.as_deref(), Some("engine-a"));
    within(PATIENCE, "a to shut down", a.shutdown()).await;
    assert_eq!(
        lease_owner(&url, &task).await,
        None,
        "shutdown released the lease"
    );
    drop(a);
    let b = engine(&url, "engine-b", 600_000).await;
    let done = settled(&b, &task).await;
    assert_eq!(done.status.state, TaskState::Completed);
    check_journal(&task, &b.journal(&Caller::Operator, &task).await.unwrap());
}

#[test(multi_thread, needs = Postgres)]
async fn a_durable_timer_fires_on_whichever_worker_is_free() {
    let url = fresh_schema().await;
    let a = engine(&url, "engine-a", 2_000).await;
    let task = send(&a, "report", "timers").await;
    // The report pauses on a durable timer; A gives the lease back while it waits, then dies.
    let mut sub = a.subscribe(&Caller::Operator, &task).await.unwrap();
    within(PATIENCE, "the report's durable pause", async {
        while let Some(update) = sub.next().await {
            let update = update.expect("follow the task");
            if matches!(update.record.entry, Entry::TimerSet { .. }) {
                return;
            }
        }
        panic!("the report ended without pausing");
    })
    .await;
    drop(sub);
    wait_for(
        "the lease to be given back",
        Duration::from_secs(30),
        async || lease_owner(&url, &task).await.is_none(),
    )
    .await;
    a.halt();
    drop(a);
    let b = engine(&url, "engine-b", 2_000).await;
    let done = settled(&b, &task).await;
    assert_eq!(done.status.state, TaskState::Completed);
    check_journal(&task, &b.journal(&Caller::Operator, &task).await.unwrap());
}

/// A blocking send follows the records its engine publishes; when another engine finishes the task
/// (here: it was given back at a durable timer, and engine A's alarm found its lease taken), nothing
/// more is published in A, and A's wait, quiet for a poll, reads the task from the store.
#[test(multi_thread, needs = Postgres)]
async fn a_blocking_send_returns_its_task_when_another_engine_finishes_it() {
    let url = fresh_schema().await;
    // A claims only what Postgres announces (a lease running out is not): B takes the task.
    let a = rare_poller(&url, "engine-a", 256).await;
    let b = engine(&url, "engine-b", 2_000).await;
    let sent = {
        let a = a.clone();
        tokio::spawn(async move {
            a.send_settled(
                Request::operator(Message::user_text("timers")).skill("report"),
                None,
            )
            .await
        })
    };
    // The report pauses on a 1.5 s durable timer, and A gives its lease back meanwhile.
    let store = PostgresStore::connect(&url).await.expect("connect");
    let mut waiting = None;
    wait_for("the report's durable pause", PATIENCE, async || {
        let tasks = store.list(TaskQuery::default()).await.unwrap();
        waiting = tasks.into_iter().find(|t| t.wake_at_ms.is_some());
        match &waiting {
            Some(t) => lease_owner(&url, &t.id).await.is_none(),
            None => false,
        }
    })
    .await;
    let waiting = waiting.expect("the waiting task");
    // Hold its lease past the timer, so that A's alarm cannot take it; once it runs out, B's poll
    // claims the task.
    let hold_ms = waiting.wake_at_ms.unwrap() - now_ms() + 1_000;
    store
        .leases()
        .unwrap()
        .acquire("thief", &waiting.id, hold_ms)
        .await
        .unwrap()
        .expect("the lease was free");
    let done = within(PATIENCE, "the blocking send", sent)
        .await
        .expect("the send's task")
        .expect("the blocking send");
    assert_eq!(done.status.state, TaskState::Completed);
    let log = store
        .leases()
        .unwrap()
        .lease_log(&waiting.id, 10)
        .await
        .unwrap();
    assert_eq!(
        log.last().map(|c| c.owner.as_str()),
        Some("engine-b"),
        "B finished the task: {log:?}"
    );
    let task = TaskId::from(done.id.clone());
    check_journal(&task, &b.journal(&Caller::Operator, &task).await.unwrap());
}

#[test(multi_thread, needs = Postgres)]
async fn tasks_finish_when_the_database_drops_every_connection_mid_run() {
    let url = fresh_schema().await;
    let name = format!("radkit-{}", &radkit::model::new_id()[..8]);
    let tagged = format!("{url}&application_name={name}");
    let a = engine(&tagged, "engine-a", 1_000).await;
    let tasks = [
        send(&a, "ticker", "150 2").await,
        send(&a, "ticker", "150 2").await,
    ];
    journaled_past(&a, &tasks[0], 20).await;
    // What a database restart or failover does to the engine's sessions.
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let killed: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
            &[&name],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        killed >= 2,
        "the writer and reader sessions were cut ({killed})"
    );
    for task in &tasks {
        let done = settled_through_outage(&a, task).await;
        assert_eq!(done.status.state, TaskState::Completed);
        check_journal(task, &a.journal(&Caller::Operator, task).await.unwrap());
    }
}

#[test(multi_thread, needs = Postgres)]
async fn a_submit_only_engine_leaves_its_tasks_to_the_workers() {
    let url = fresh_schema().await;
    let submit = submitter(&url).await;
    let mut tasks = Vec::new();
    for _ in 0..20 {
        tasks.push(send(&submit, "ticker", "5").await);
    }
    for task in &tasks {
        let row = submit.store().task(task).await.unwrap().unwrap();
        assert_eq!(row.state, TaskState::Submitted, "the submitter ran nothing");
        assert_eq!(lease_owner(&url, task).await, None, "and leased nothing");
    }
    let w1 = engine(&url, "w1", 2_000).await;
    let w2 = engine(&url, "w2", 2_000).await;
    for task in &tasks {
        let done = settled(&submit, task).await;
        assert_eq!(done.status.state, TaskState::Completed);
        check_journal(
            task,
            &submit.journal(&Caller::Operator, task).await.unwrap(),
        );
    }
    drop((w1, w2));
    // `radkit tasks` reads the same database.
    let mut show = Command::new(env!("CARGO_BIN_EXE_radkit"));
    show.args(["tasks", "show", &tasks[0], "--store", &url]);
    let shown = common::output_within(show, PATIENCE, "radkit tasks show");
    let timeline = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    assert!(
        timeline.contains("skill `ticker`") && timeline.contains("completed: 5 ticks"),
        "{timeline}"
    );
}

/// A worker that polls once in ten minutes (its leases last 40, since a poll is at most a fourth of
/// a lease): it claims only what the store announces.
async fn rare_poller(url: &str, name: &str, max_tasks: usize) -> Engine {
    let store = PostgresStore::connect(url)
        .await
        .expect("connect the store");
    demo::engine(Engine::builder(store))
        .worker_id(name)
        .lease_ttl(Duration::from_secs(2_400))
        .poll_interval(Duration::from_secs(600))
        .max_active_tasks(max_tasks)
        .start()
        .await
        .expect("start the engine")
}

#[test(multi_thread, needs = Postgres)]
async fn a_worker_that_polls_rarely_claims_submitted_tasks_as_postgres_announces_them() {
    let url = fresh_schema().await;
    let submit = submitter(&url).await;
    let _worker = rare_poller(&url, "rare", 256).await;
    // The worker claims nothing before it listens; so once it finished the first task, the
    // second can reach it only through the announcement of its creation.
    for _ in 0..2 {
        let task = send(&submit, "ticker", "3").await;
        let done = settled(&submit, &task).await;
        assert_eq!(done.status.state, TaskState::Completed);
        check_journal(
            &task,
            &submit.journal(&Caller::Operator, &task).await.unwrap(),
        );
    }
}

#[test(multi_thread, needs = Postgres)]
async fn a_worker_that_polls_rarely_at_capacity_claims_the_next_task_when_one_ends() {
    let url = fresh_schema().await;
    let submit = submitter(&url).await;
    let _worker = rare_poller(&url, "rare", 1).await;
    let first = send(&submit, "ticker", "1").await;
    settled(&submit, &first).await;
    // Announced while the worker's one slot is taken: each is claimed when the one before ends.
    let mut tasks = Vec::new();
    for _ in 0..4 {
        tasks.push(send(&submit, "ticker", "3 20").await);
    }
    for task in &tasks {
        let done = settled(&submit, task).await;
        assert_eq!(done.status.state, TaskState::Completed);
    }
}

/// The append that finishes a task gives its lease back in the same statement: as soon as anyone
/// sees the task finished, its row holds no lease and the lease log shows it given back (the
/// worker sends no `release` after it).
#[test(multi_thread, needs = Postgres)]
async fn a_finished_task_holds_no_lease_from_the_moment_it_is_seen_finished() {
    let url = fresh_schema().await;
    let submit = submitter(&url).await;
    let _worker = engine(&url, "finisher", 10_000).await;
    for _ in 0..3 {
        let task = send(&submit, "ticker", "2").await;
        let done = settled(&submit, &task).await;
        assert_eq!(done.status.state, TaskState::Completed);
        assert_eq!(lease(&url, &task).await, (None, None), "{task}");
        let store = PostgresStore::connect(&url).await.unwrap();
        let log = store.leases().unwrap().lease_log(&task, 10).await.unwrap();
        let last = log.last().expect("the worker's lease");
        assert_eq!(last.owner, "finisher", "{log:?}");
        assert!(last.released_at_ms.is_some(), "{log:?}");
    }
}

#[test(multi_thread, needs = Postgres)]
async fn a_cancel_reaches_a_worker_that_polls_rarely_at_once() {
    let url = fresh_schema().await;
    let submit = submitter(&url).await;
    let _worker = rare_poller(&url, "rare", 256).await;
    let task = send(&submit, "ticker", "9999 5").await;
    ticked(&submit, &task).await;
    let canceled = within(
        PATIENCE,
        "the cancel from the submitter",
        submit.cancel(&Caller::Operator, &task),
    )
    .await
    .unwrap();
    assert_eq!(canceled.status.state, TaskState::Canceled);
    check_journal(
        &task,
        &submit.journal(&Caller::Operator, &task).await.unwrap(),
    );
}

// ---- real processes ------------------------------------------------------------------------------

/// A `radkit worker` child, killed when dropped.
struct Worker {
    child: Child,
}

impl Worker {
    fn start(
        url: &str,
        name: &str,
        log: &Path,
        stderr: &Path,
        lease_ms: u64,
        max_tasks: usize,
    ) -> Worker {
        Worker::start_with(url, name, log, stderr, lease_ms, max_tasks, &[])
    }

    /// [`Worker::start`] with more environment variables.
    fn start_with(
        url: &str,
        name: &str,
        log: &Path,
        stderr: &Path,
        lease_ms: u64,
        max_tasks: usize,
        env: &[(&str, &str)],
    ) -> Worker {
        let child = Command::new(env!("CARGO_BIN_EXE_radkit"))
            .args([
                "worker",
                "--store",
                url,
                "--worker-id",
                name,
                "--lease-ms",
                &lease_ms.to_string(),
                "--poll-ms",
                "25",
                "--max-tasks",
                &max_tasks.to_string(),
            ])
            .env("RADKIT_TICK_LOG", log)
            .env("RUST_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(stderr).expect("stderr file"))
            .spawn()
            .expect("start radkit worker");
        Worker { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} failed");
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Prints the workers' logs (`*.err` in the directory) if the test fails.
struct ShowLogsOnFailure<'a>(&'a Path);

impl Drop for ShowLogsOnFailure<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for entry in std::fs::read_dir(self.0).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "err") {
                eprintln!("---- {} ----", path.display());
                eprintln!("{}", std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
}

/// `invocation id -> pids that executed it`, from the tick log.
fn executions(log: &Path) -> BTreeMap<String, Vec<u32>> {
    let mut map: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        if let Some((id, pid)) = line.split_once(' ') {
            map.entry(id.to_owned())
                .or_default()
                .push(pid.trim().parse().expect("pid"));
        }
    }
    map
}

async fn completed(store: &std::sync::Arc<dyn Store>) -> usize {
    store
        .list(TaskQuery::default())
        .await
        .unwrap()
        .iter()
        .filter(|t| t.state == TaskState::Completed)
        .count()
}

/// True once every thread of process `pid` is stopped (SIGSTOP delivered): from then on it changes
/// nothing, neither the tick log nor the database.
fn stopped(pid: u32) -> bool {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    threads.flatten().all(|thread| {
        let stat = std::fs::read_to_string(thread.path().join("stat")).unwrap_or_default();
        // `pid (comm) state …`: the state follows the last `)`.
        let state = stat.rsplit(')').next().unwrap_or("").trim_start();
        state.starts_with('T') || state.starts_with('t')
    })
}

/// Freeze `worker` (SIGSTOP) at a moment when it holds tasks it has ticked but not finished, and
/// return those tasks; it stays frozen. Retried while the frozen worker holds no such task (between
/// two waves of tasks, say): resumed, and frozen again a little later, by polling, since what another
/// process is doing is announced by no event.
/// Those of `tasks` that have not ended.
async fn still_running(url: &str, tasks: &HashSet<String>) -> HashSet<String> {
    let terminal: Vec<&str> = TaskState::TERMINAL.iter().map(|s| s.as_str()).collect();
    let ids: Vec<&str> = tasks.iter().map(String::as_str).collect();
    sql(url)
        .await
        .query(
            "SELECT id FROM radkit_tasks WHERE id = ANY($1) AND NOT (state = ANY($2))",
            &[&ids, &terminal],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

async fn freeze_mid_task(worker: &Worker, name: &str, url: &str, log: &Path) -> HashSet<String> {
    let client = sql(url).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        worker.signal("-STOP");
        let frozen = Instant::now() + Duration::from_secs(10);
        while !stopped(worker.pid()) {
            assert!(Instant::now() < frozen, "{name} did not stop");
            std::thread::sleep(Duration::from_millis(1));
        }
        let terminal: Vec<&str> = TaskState::TERMINAL.iter().map(|s| s.as_str()).collect();
        let held: HashSet<String> = client
            .query(
                "SELECT id FROM radkit_tasks WHERE lease_owner = $1 AND NOT (state = ANY($2))",
                &[&name, &terminal],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        let ticks = executions(log);
        let mid_task: HashSet<String> = held
            .into_iter()
            .filter(|task| {
                ticks.iter().any(|(id, pids)| {
                    id.starts_with(&format!("{task}:")) && pids.contains(&worker.pid())
                })
            })
            .collect();
        if !mid_task.is_empty() {
            return mid_task;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {name} to be in the middle of a task"
        );
        worker.signal("-CONT");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test(multi_thread, needs = Postgres)]
async fn three_workers_share_300_tasks_and_one_killed_with_kill_9_loses_nothing() {
    let url = fresh_schema().await;
    let dir = tempfile::tempdir().unwrap();
    let _logs = ShowLogsOnFailure(dir.path());
    let log = dir.path().join("ticks.log");
    let submit = submitter(&url).await;
    let mut tasks = Vec::new();
    for _ in 0..300 {
        tasks.push(send(&submit, "ticker", "8 10").await);
    }
    let workers: Vec<Worker> = (0..3)
        .map(|i| {
            Worker::start(
                &url,
                &format!("worker-{i}"),
                &log,
                &dir.path().join(format!("worker-{i}.err")),
                5_000,
                40,
            )
        })
        .collect();
    let store = submit.store().clone();
    wait_for("the first 60 tasks", Duration::from_secs(120), async || {
        completed(&store).await >= 60
    })
    .await;
    // Kill the victim while it is provably in the middle of tasks: the moment 60 tasks are done says
    // nothing about the victim (it may have just finished a wave and claimed tasks it has not ticked).
    let victim = workers[0].pid();
    let frozen = freeze_mid_task(&workers[0], "worker-0", &url, &log).await;
    workers[0].signal("-KILL");
    // An append the victim had sent before it froze may still commit at the server: a task it
    // finished that way was not interrupted. Its lease outlives this pause, so nobody else has taken
    // any of these tasks yet.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let interrupted = still_running(&url, &frozen).await;
    wait_for("all 300 tasks", Duration::from_secs(240), async || {
        completed(&store).await == 300
    })
    .await;

    let ticks = executions(&log);
    let mut receipts = 0;
    for task in &tasks {
        let journal = store.journal(task, 0).await.unwrap();
        check_journal(task, &journal);
        for record in &journal {
            if let Entry::ReceiptRecorded { receipt } = &record.entry {
                receipts += 1;
                let pids = ticks
                    .get(receipt.id.as_str())
                    .unwrap_or_else(|| panic!("tick {} has a receipt but never ran", receipt.id));
                // An Idempotent effect runs again only when the worker that ran it died before its
                // receipt was committed; no two live workers ever run the same InvocationId.
                let by_survivors = pids.iter().filter(|p| **p != victim).count();
                assert!(
                    by_survivors <= 1,
                    "tick {} ran {} times on live workers: {pids:?}",
                    receipt.id,
                    by_survivors
                );
            }
        }
    }
    assert_eq!(receipts, 300 * 8);
    // Every task the victim was in the middle of when it died was finished by the others.
    for task in &interrupted {
        let pids: HashSet<u32> = ticks
            .iter()
            .filter(|(id, _)| id.starts_with(&format!("{task}:")))
            .flat_map(|(_, p)| p.iter().copied())
            .collect();
        assert!(
            pids.contains(&victim) && pids.len() > 1,
            "task {task}, interrupted by the kill, was ticked by {pids:?} (victim {victim})"
        );
    }
}

/// No fault at all: two workers with 2 s leases (renewed every 0.7 s) share 300 tasks of 100 ticks.
/// Lease renewal and the group-commit append both lock many task rows; they must lock them in one
/// order, else Postgres breaks the deadlock after a second by aborting one of them, a renewal that
/// fails so costs leases, and the other worker re-runs effects. (Before the fix about half the runs of
/// 60 ticks failed; 100 ticks give the deadlock more chances.)
#[test(multi_thread, needs = Postgres)]
async fn two_workers_with_short_leases_and_no_faults_run_every_effect_once() {
    two_workers_run_every_effect_once(NoFaultLoad {
        tasks: 300,
        ticks: 100,
        tick_ms: 10,
        lease_ms: 2_000,
        env: &[],
        patience: Duration::from_secs(180),
        symptoms: &[
            "deadlock",
            "lease renewal failed",
            "fenced off",
            "append failed",
        ],
    })
    .await
}

/// Each tick blocks its worker thread for 10 ms (`RADKIT_TICK_BUSY`), and each worker takes up to
/// 256 tasks: the workers' runtimes are saturated by their own tasks for the whole run. Their leases
/// must still be renewed on time (renewal has its own thread, runtime and connection), so no task is
/// taken over and no effect runs twice.
#[test(multi_thread, needs = Postgres)]
async fn workers_whose_steps_block_their_runtime_keep_their_leases_and_run_every_effect_once() {
    two_workers_run_every_effect_once(NoFaultLoad {
        tasks: 200,
        ticks: 15,
        tick_ms: 10,
        lease_ms: 1_500,
        env: &[("RADKIT_TICK_BUSY", "1")],
        patience: Duration::from_secs(300),
        symptoms: &["lease lost", "fenced off", "append failed"],
    })
    .await
}

/// A load for two workers (256 tasks each at most) with nothing injected.
struct NoFaultLoad {
    /// `ticker` tasks, each of `ticks` ticks of `tick_ms`.
    tasks: usize,
    ticks: usize,
    tick_ms: u64,
    /// The workers' leases.
    lease_ms: u64,
    /// The workers' extra environment.
    env: &'static [(&'static str, &'static str)],
    /// How long all the tasks may take.
    patience: Duration,
    /// What the workers' logs must not say.
    symptoms: &'static [&'static str],
}

/// Two workers run `load` to its end: every tick runs exactly once, every journal is whole, and
/// neither worker's log shows a symptom of a lease kept badly.
async fn two_workers_run_every_effect_once(load: NoFaultLoad) {
    let url = fresh_schema().await;
    let dir = tempfile::tempdir().unwrap();
    let _logs = ShowLogsOnFailure(dir.path());
    let log = dir.path().join("ticks.log");
    let submit = submitter(&url).await;
    let mut tasks = Vec::new();
    let message = format!("{} {}", load.ticks, load.tick_ms);
    for _ in 0..load.tasks {
        tasks.push(send(&submit, "ticker", &message).await);
    }
    let errs: Vec<_> = (0..2)
        .map(|i| dir.path().join(format!("worker-{i}.err")))
        .collect();
    let _workers: Vec<Worker> = (0..2)
        .map(|i| {
            Worker::start_with(
                &url,
                &format!("worker-{i}"),
                &log,
                &errs[i],
                load.lease_ms,
                256,
                load.env,
            )
        })
        .collect();
    let store = submit.store().clone();
    let all = format!("all {} tasks", load.tasks);
    wait_for(&all, load.patience, async || {
        completed(&store).await == load.tasks
    })
    .await;
    let ticks = executions(&log);
    let twice: Vec<_> = ticks.iter().filter(|(_, pids)| pids.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "{} effects ran more than once with no fault injected: {:?}",
        twice.len(),
        twice.iter().take(5).collect::<Vec<_>>()
    );
    assert_eq!(ticks.len(), load.tasks * load.ticks, "every tick ran");
    for task in &tasks {
        check_journal(task, &store.journal(task, 0).await.unwrap());
    }
    for err in &errs {
        let text = std::fs::read_to_string(err).unwrap_or_default();
        for symptom in load.symptoms {
            assert!(
                !text.contains(symptom),
                "{}: `{symptom}` with no fault injected:\n{text}",
                err.display()
            );
        }
    }
}

#[test(multi_thread, needs = Postgres)]
async fn a_worker_paused_past_its_lease_is_fenced_off() {
    let url = fresh_schema().await;
    let dir = tempfile::tempdir().unwrap();
    let _logs = ShowLogsOnFailure(dir.path());
    let log = dir.path().join("ticks.log");
    let submit = submitter(&url).await;
    let task = send(&submit, "ticker", "60 20").await;
    let a_err = dir.path().join("a.err");
    let a = Worker::start(&url, "worker-a", &log, &a_err, 600, 8);
    wait_for("worker a to tick", Duration::from_secs(60), async || {
        executions(&log).values().flatten().any(|p| *p == a.pid())
    })
    .await;
    a.signal("-STOP");
    let b = Worker::start(&url, "worker-b", &log, &dir.path().join("b.err"), 600, 8);
    wait_for(
        "worker b to take over",
        Duration::from_secs(60),
        async || executions(&log).values().flatten().any(|p| *p == b.pid()),
    )
    .await;
    a.signal("-CONT");
    let done = settled(&submit, &task).await;
    assert_eq!(done.status.state, TaskState::Completed);
    check_journal(
        &task,
        &submit.journal(&Caller::Operator, &task).await.unwrap(),
    );
    wait_for("worker a to notice", Duration::from_secs(30), async || {
        std::fs::read_to_string(&a_err)
            .unwrap_or_default()
            .contains("fenced off")
    })
    .await;
    // Every tick a ran after b took over was refused: each InvocationId has one receipt (checked
    // above), and a ran at most the tick it was in when it was paused a second time.
    let twice: Vec<_> = executions(&log)
        .into_iter()
        .filter(|(_, pids)| pids.len() > 1)
        .collect();
    assert!(
        twice.len() <= 1,
        "more than the in-flight tick ran twice: {twice:?}"
    );
}

// ---- fencing end to end ------------------------------------------------------------------------

/// How the store answered one append.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Committed,
    Fenced,
    Conflict,
    Failed(String),
}

/// One append an engine made, and the store's answer.
#[derive(Debug, Clone)]
struct Attempt {
    first_seq: u64,
    last_seq: u64,
    fence: Option<u64>,
    outcome: Outcome,
}

/// The Postgres store, recording every append of the engine that uses it with the store's answer.
struct Recording {
    inner: PostgresStore,
    appends: Arc<Mutex<Vec<Attempt>>>,
    answered: Arc<Notify>,
}

#[async_trait::async_trait]
impl Store for Recording {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
        let (first_seq, fence) = (append.first_seq, append.fence);
        let last_seq = (first_seq + append.entries.len() as u64).saturating_sub(1);
        let result = self.inner.append(append).await;
        let outcome = match &result {
            Ok(()) => Outcome::Committed,
            Err(StoreError::Fenced { .. }) => Outcome::Fenced,
            Err(StoreError::Conflict { .. }) => Outcome::Conflict,
            Err(e) => Outcome::Failed(e.to_string()),
        };
        self.appends.lock().unwrap().push(Attempt {
            first_seq,
            last_seq,
            fence,
            outcome,
        });
        self.answered.notify_one();
        result
    }

    async fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        self.inner.task(task_id).await
    }

    async fn journal(
        &self,
        task_id: &str,
        after_seq: u64,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        self.inner.journal(task_id, after_seq).await
    }

    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        self.inner.list(query).await
    }

    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        self.inner.journal_for_replay(task_id).await
    }

    fn leases(&self) -> Option<&dyn Leases> {
        self.inner.leases()
    }
}

/// A `tick` tool that records every call's InvocationId and holds the first tick with `done == at`
/// until released.
struct TickGate {
    at: u64,
    armed: AtomicBool,
    started: Notify,
    release: Notify,
    calls: Mutex<Vec<String>>,
}

impl TickGate {
    fn new(at: u64) -> Arc<TickGate> {
        Arc::new(TickGate {
            at,
            armed: AtomicBool::new(true),
            started: Notify::new(),
            release: Notify::new(),
            calls: Mutex::new(Vec::new()),
        })
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn tool(self: &Arc<Self>) -> radkit::tools::FnTool {
        let gate = self.clone();
        radkit::tools::FnTool::typed(
            radkit::flow::EffectPolicy::Idempotent,
            move |count: demo::ticker::Count, key| {
                let gate = gate.clone();
                async move {
                    gate.calls.lock().unwrap().push(key.as_str().to_owned());
                    if count.done == gate.at && gate.armed.swap(false, Ordering::SeqCst) {
                        gate.started.notify_one();
                        gate.release.notified().await;
                    }
                    Ok::<u64, radkit::flow::EffectError>(count.done + 1)
                }
            },
        )
    }
}

/// An engine whose `tick` is `gate`'s, with leases long enough that it renews none during the test.
async fn gated_engine(store: impl Store, name: &str, gate: &Arc<TickGate>) -> Engine {
    let tick = gate.tool();
    demo::engine(Engine::builder(store))
        .map_effects(|effects| effects.tool("tick", tick))
        .worker_id(name)
        .lease_ttl(Duration::from_secs(60))
        .poll_interval(Duration::from_millis(20))
        .start()
        .await
        .expect("start the engine")
}

/// The task's `(last_seq, fence, lease owner)`, read straight from its row.
async fn position(client: &tokio_postgres::Client, task: &str) -> (u64, u64, Option<String>) {
    let row = client
        .query_one(
            "SELECT last_seq, fence, lease_owner FROM radkit_tasks WHERE id = $1",
            &[&task.to_string()],
        )
        .await
        .unwrap();
    (
        row.get::<_, i64>(0) as u64,
        row.get::<_, i64>(1) as u64,
        row.get(2),
    )
}

#[test(multi_thread, needs = Postgres)]
async fn a_stale_worker_appending_at_exactly_the_next_seq_is_refused_by_fencing() {
    let url = fresh_schema().await;
    let client = sql(&url).await;
    let appends = Arc::new(Mutex::new(Vec::<Attempt>::new()));
    let answered = Arc::new(Notify::new());
    let recording = Recording {
        inner: PostgresStore::connect(&url).await.unwrap(),
        appends: appends.clone(),
        answered: answered.clone(),
    };
    let gate_a = TickGate::new(2);
    let a = gated_engine(recording, "engine-a", &gate_a).await;
    let task = send(&a, "ticker", "5").await;
    within(
        PATIENCE,
        "a's third tick to start",
        gate_a.started.notified(),
    )
    .await;
    let (seq, fence_a, owner) = position(&client, &task).await;
    assert_eq!(owner.as_deref(), Some("engine-a"));

    // A stalls inside the tick (a GC pause, a frozen VM) past its lease. All the others can see of
    // that is a lease that ran out, which is what this writes.
    client
        .execute(
            "UPDATE radkit_tasks SET lease_expires_ms = 0 WHERE id = $1",
            &[&task.to_string()],
        )
        .await
        .unwrap();
    let gate_b = TickGate::new(2);
    let b = gated_engine(
        PostgresStore::connect(&url).await.unwrap(),
        "engine-b",
        &gate_b,
    )
    .await;
    within(
        PATIENCE,
        "b to take the task over and run the third tick again",
        gate_b.started.notified(),
    )
    .await;
    let (seq_b, fence_b, owner) = position(&client, &task).await;
    assert_eq!(owner.as_deref(), Some("engine-b"));
    assert!(fence_b > fence_a, "the takeover took a new fencing token");
    assert_eq!(
        seq_b, seq,
        "b has written nothing yet, so a's next append is at exactly the next seq"
    );

    // A wakes up, finishes its tick and appends with its stale token.
    let before = appends.lock().unwrap().len();
    gate_a.release.notify_one();
    let refused = within(PATIENCE, "a's next append to be answered", async {
        loop {
            if let Some(attempt) = appends.lock().unwrap().get(before).cloned() {
                return attempt;
            }
            answered.notified().await;
        }
    })
    .await;
    assert_eq!(
        (refused.first_seq, refused.fence),
        (seq + 1, Some(fence_a)),
        "a appended at exactly the next seq (the seq check alone would take it), with its token"
    );
    assert_eq!(refused.outcome, Outcome::Fenced, "{refused:?}");
    assert_eq!(
        position(&client, &task).await.0,
        seq,
        "nothing of a's append was written"
    );

    gate_b.release.notify_one();
    let done = settled(&b, &task).await;
    assert_eq!(done.status.state, TaskState::Completed);
    check_journal(&task, &b.journal(&Caller::Operator, &task).await.unwrap());
    let by_a = appends.lock().unwrap().clone();
    assert!(
        by_a.iter()
            .filter(|x| x.outcome == Outcome::Committed)
            .all(|x| x.last_seq <= seq),
        "every entry after the takeover is b's: a's appends were {by_a:?}"
    );
    let (a_ticks, b_ticks) = (gate_a.calls(), gate_b.calls());
    assert_eq!(a_ticks.len(), 3, "a stopped at the refusal: {a_ticks:?}");
    assert_eq!(
        b_ticks.first(),
        a_ticks.last(),
        "b re-ran the interrupted tick under its InvocationId"
    );
    assert_eq!(b_ticks.len(), 3, "b ran the third, fourth and fifth ticks");
    drop(a);
}

/// A lease renewal round that runs while a send is creating its task (the round starts before the
/// task's row exists) must not count the new task's lease as lost: the engine that created the task
/// runs it under the lease it created it with, and no worker has to wait the lease out and claim it
/// again (which took a whole lease TTL, and on a busy machine happened to tasks sent right after
/// their engine started).
#[test(multi_thread, needs = Postgres)]
async fn a_renewal_during_a_tasks_creation_does_not_strand_the_new_task_until_its_lease_expires() {
    let url = fresh_schema().await;
    let client = sql(&url).await;
    let store = Gated {
        creation_waits_for_renewal: true,
        ..Gated::new(PostgresStore::connect(&url).await.unwrap())
    };
    // Renewal rounds every second; a stranded lease would be claimed again after three.
    let a = demo::engine(Engine::builder(store))
        .worker_id("engine-a")
        .lease_ttl(Duration::from_secs(3))
        .poll_interval(Duration::from_millis(20))
        .start()
        .await
        .expect("start engine a");
    let task = send(&a, "ticker", "3").await;
    let done = settled(&a, &task).await;
    assert_eq!(done.status.state, TaskState::Completed);
    let (_, fence, _) = position(&client, &task).await;
    assert_eq!(
        fence,
        radkit::store::CREATION_TOKEN,
        "the task ran under the lease it was created with, never claimed again"
    );
}

/// The Postgres store of an engine, with windows the tests stretch:
/// - the journal write of its `at`th command is held, once committed, until the test lets it return
///   (the window between journaling a command and starting its effect), and every lease check the
///   engine makes is announced to the waiters of `checked`;
/// - with `creation_waits_for_renewal`, an append creating a task waits, before it is written, for a
///   lease renewal round that starts after it (the window between the engine taking the new task's
///   lease and its row existing, stretched over a renewal).
struct Gated {
    inner: PostgresStore,
    at: usize,
    commands: Mutex<usize>,
    held: Notify,
    go: Notify,
    checked: Notify,
    creation_waits_for_renewal: bool,
    renewals: std::sync::atomic::AtomicUsize,
    renewed: Notify,
}

impl Gated {
    /// A store with no window stretched.
    fn new(inner: PostgresStore) -> Self {
        Gated {
            inner,
            at: usize::MAX,
            commands: Mutex::new(0),
            held: Notify::new(),
            go: Notify::new(),
            checked: Notify::new(),
            creation_waits_for_renewal: false,
            renewals: std::sync::atomic::AtomicUsize::new(0),
            renewed: Notify::new(),
        }
    }
}

#[async_trait::async_trait]
impl Store for Gated {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
        if self.creation_waits_for_renewal && append.create.is_some() {
            let before = self.renewals.load(Ordering::SeqCst);
            within(PATIENCE, "a renewal round during the creation", async {
                loop {
                    let renewed = self.renewed.notified();
                    if self.renewals.load(Ordering::SeqCst) > before + 1 {
                        return;
                    }
                    renewed.await;
                }
            })
            .await;
        }
        let issued = append
            .entries
            .iter()
            .filter(|e| matches!(e, Entry::CommandIssued { .. }))
            .count();
        self.inner.append(append).await?;
        let reached = {
            let mut commands = self.commands.lock().unwrap();
            let before = *commands;
            *commands += issued;
            before < self.at && *commands >= self.at
        };
        if reached {
            self.held.notify_one();
            self.go.notified().await;
        }
        Ok(())
    }
    async fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        self.inner.task(task_id).await
    }
    async fn journal(&self, task_id: &str, after: u64) -> Result<Vec<JournalRecord>, StoreError> {
        self.inner.journal(task_id, after).await
    }
    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        self.inner.list(query).await
    }
    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        self.inner.journal_for_replay(task_id).await
    }
    fn leases(&self) -> Option<&dyn Leases> {
        Some(self)
    }
}

#[async_trait::async_trait]
impl Leases for Gated {
    async fn claim(
        &self,
        owner: &str,
        skills: &[(String, String)],
        held: &[String],
        ttl_ms: i64,
        limit: usize,
    ) -> Result<Vec<radkit::store::Lease>, StoreError> {
        self.inner.claim(owner, skills, held, ttl_ms, limit).await
    }
    async fn acquire(
        &self,
        owner: &str,
        task_id: &str,
        ttl_ms: i64,
    ) -> Result<Option<radkit::store::Lease>, StoreError> {
        self.inner.acquire(owner, task_id, ttl_ms).await
    }
    async fn renew(
        &self,
        owner: &str,
        held: &[(String, u64)],
        ttl_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        let renewed = self.inner.renew(owner, held, ttl_ms).await;
        self.renewals.fetch_add(1, Ordering::SeqCst);
        self.renewed.notify_waiters();
        renewed
    }
    async fn holds(&self, owner: &str, task_id: &str, token: u64) -> Result<bool, StoreError> {
        let held = self.inner.holds(owner, task_id, token).await;
        self.checked.notify_waiters();
        held
    }
    async fn release(&self, owner: &str, task_id: &str, token: u64) -> Result<(), StoreError> {
        self.inner.release(owner, task_id, token).await
    }
    async fn request_cancel(&self, task_id: &str) -> Result<(), StoreError> {
        self.inner.request_cancel(task_id).await
    }
    async fn cancel_requests(&self, owner: &str) -> Result<Vec<String>, StoreError> {
        self.inner.cancel_requests(owner).await
    }

    async fn holder(
        &self,
        task_id: &str,
    ) -> Result<Option<radkit::store::LeaseHolder>, StoreError> {
        self.inner.holder(task_id).await
    }
}

/// An `AtMostOnce` `tick` tool recording each call's InvocationId, announcing each call to the
/// waiters of `called`.
fn at_most_once_tick(calls: Arc<Mutex<Vec<String>>>, called: Arc<Notify>) -> radkit::tools::FnTool {
    radkit::tools::FnTool::typed(
        radkit::flow::EffectPolicy::AtMostOnce,
        move |count: demo::ticker::Count, key| {
            calls.lock().unwrap().push(key.as_str().to_owned());
            called.notify_waiters();
            async move { Ok::<u64, radkit::flow::EffectError>(count.done + 1) }
        },
    )
}

/// A worker paused between journaling an `AtMostOnce` command and starting its effect, while its
/// lease is taken over, must not start the effect: it checks the lease right before (fencing alone
/// refuses only the receipt, after the effect happened). The next owner reports the outcome unknown.
#[test(multi_thread, needs = Postgres)]
async fn an_at_most_once_effect_never_starts_after_the_lease_was_taken() {
    let url = fresh_schema().await;
    let client = sql(&url).await;
    let store = Arc::new(Gated {
        at: 3,
        ..Gated::new(PostgresStore::connect(&url).await.unwrap())
    });
    let (calls_a, called_a) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Notify::new()));
    let tick = at_most_once_tick(calls_a.clone(), called_a.clone());
    let a = demo::engine(Engine::builder_arc(store.clone()))
        .map_effects(|effects| effects.tool("tick", tick))
        .worker_id("engine-a")
        .lease_ttl(Duration::from_secs(60))
        .poll_interval(Duration::from_millis(20))
        .start()
        .await
        .expect("start engine a");
    let task = send(&a, "ticker", "5").await;
    within(
        PATIENCE,
        "a to journal its third tick",
        store.held.notified(),
    )
    .await;
    assert_eq!(calls_a.lock().unwrap().len(), 2, "two ticks ran");
    // Another worker took the task over meanwhile (what a pause past the lease looks like).
    client
        .execute(
            "UPDATE radkit_tasks SET lease_owner = 'engine-b', fence = fence + 1,
                lease_expires_ms = $2 WHERE id = $1",
            &[&task.to_string(), &(now_ms() + 60_000)],
        )
        .await
        .unwrap();
    // Wait for whichever comes first once a goes on: its lease check or the tick (announced to
    // waiters registered now, so nothing from the earlier ticks counts).
    let (checked, called) = (store.checked.notified(), called_a.notified());
    tokio::pin!(checked, called);
    checked.as_mut().enable();
    called.as_mut().enable();
    store.go.notify_one();
    within(PATIENCE, "a to check its lease or run the tick", async {
        tokio::select! {
            _ = checked => {}
            _ = called => {}
        }
    })
    .await;
    let ran = calls_a.lock().unwrap().clone();
    assert_eq!(
        ran.len(),
        2,
        "a started the at-most-once tick after its lease was taken: {ran:?}"
    );

    // The next owner finds the third tick journaled without a receipt: its outcome is unknown.
    client
        .execute(
            "UPDATE radkit_tasks SET lease_expires_ms = 0 WHERE id = $1",
            &[&task.to_string()],
        )
        .await
        .unwrap();
    let (calls_b, called_b) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Notify::new()));
    let tick = at_most_once_tick(calls_b.clone(), called_b);
    let b = demo::engine(Engine::builder(PostgresStore::connect(&url).await.unwrap()))
        .map_effects(|effects| effects.tool("tick", tick))
        .worker_id("engine-b")
        .lease_ttl(Duration::from_secs(60))
        .poll_interval(Duration::from_millis(20))
        .start()
        .await
        .expect("start engine b");
    let done = settled(&b, &task).await;
    assert_eq!(done.status.state, TaskState::Failed, "{:?}", done.status);
    assert!(calls_b.lock().unwrap().is_empty(), "b ran no tick");
    assert_eq!(calls_a.lock().unwrap().len(), 2, "a ran no more");
    drop(a);
}

#[test(multi_thread, needs = Postgres)]
async fn a_task_started_on_a_killed_server_is_streamed_and_finished_by_another() {
    let url = fresh_schema().await;
    let lease = [
        "--store",
        url.as_str(),
        "--lease-ms",
        "1500",
        "--poll-ms",
        "25",
    ];
    let mut a = common::serve(&lease);
    let b = common::serve(&lease);
    let client = reqwest::Client::new();
    let mut message = common::user("40 20");
    message["metadata"] = json!({ "skillId": "ticker" });
    let sent = common::rpc(
        &client,
        &a.url,
        None,
        "message/send",
        json!({ "message": message, "configuration": { "blocking": false } }),
    )
    .await;
    let task_id = sent["result"]["id"].as_str().expect("a task").to_owned();
    // B follows the task over A2A while A runs it.
    let stream = within(
        PATIENCE,
        "b's resubscription to open",
        client
            .post(format!("{}/", b.url))
            .json(&json!({ "jsonrpc": "2.0", "id": 9, "method": "tasks/resubscribe", "params": { "id": task_id } }))
            .send(),
    )
    .await
    .unwrap();
    let store = PostgresStore::connect(&url).await.unwrap();
    wait_for("a few ticks on A", Duration::from_secs(60), async || {
        store
            .task(&task_id)
            .await
            .unwrap()
            .is_some_and(|t| t.last_seq > 10)
    })
    .await;
    a.child.kill().unwrap();
    exited(&mut a.child, "the killed server", Duration::from_secs(10));
    // B takes the task over when A's lease expires; its stream ends with the completed status.
    let events = common::read_events(stream, |_| false).await;
    assert!(
        events.iter().all(|e| e["id"] == 9),
        "every event answers the request"
    );
    let last = events.last().expect("events");
    assert_eq!(last["result"]["final"], true);
    assert_eq!(last["result"]["status"]["state"], "completed");
    let got = common::rpc(&client, &b.url, None, "tasks/get", json!({ "id": task_id })).await;
    assert_eq!(got["result"]["status"]["state"], "completed");
    check_journal(&task_id, &store.journal(&task_id, 0).await.unwrap());
}

#[test(multi_thread, needs = Postgres)]
async fn a_1_0_stream_cut_with_its_killed_server_resumes_from_last_event_id_on_another() {
    let url = fresh_schema().await;
    let lease = [
        "--store",
        url.as_str(),
        "--lease-ms",
        "1500",
        "--poll-ms",
        "25",
    ];
    let mut a = common::serve(&lease);
    let b = common::serve(&lease);
    let client = reqwest::Client::new();
    let message = json!({
        "messageId": format!("cluster-v1-{}", common::uuid()),
        "role": "ROLE_USER",
        "parts": [{ "text": "Durable execution" }],
        "metadata": { "skillId": "report" },
    });
    let resp = within(
        PATIENCE,
        "a's 1.0 stream to open",
        client
            .post(format!("{}/", a.url))
            .header("A2A-Version", "1.0")
            .json(&json!({ "jsonrpc": "2.0", "id": "s", "method": "SendStreamingMessage", "params": { "message": message } }))
            .send(),
    )
    .await
    .unwrap();
    let before = common::read_sse(resp, |events| common::v1_chunk_texts(events).len() >= 2).await;
    let task_id = before[0].1["result"]["task"]["id"]
        .as_str()
        .expect("the stream opens with the task")
        .to_owned();
    let seen = before.last().unwrap().0.expect("every 1.0 event has an id");
    a.child.kill().unwrap(); // SIGKILL, mid-stream and mid-task
    exited(&mut a.child, "the killed server", Duration::from_secs(10));

    // B, sharing the store, continues the stream after the last event seen (REST this time) and
    // takes the task over when A's lease expires: the rest of the story, nothing of it twice.
    let resp = within(
        PATIENCE,
        "b's resumed subscription",
        client
            .get(format!("{}/tasks/{task_id}:subscribe", b.url))
            .header("A2A-Version", "1.0")
            .header("last-event-id", seen.to_string())
            .send(),
    )
    .await
    .unwrap();
    let after = common::read_sse(resp, |_| false).await;
    assert!(
        after.iter().all(|(id, _)| id.is_some_and(|id| id > seen)),
        "only events after {seen}: {after:?}"
    );
    let mut story = common::v1_chunk_texts(&before);
    story.extend(common::v1_chunk_texts(&after));
    assert_eq!(
        story,
        vec![
            "# Durable execution\n",
            "Durable steps journal every effect before it runs.\n",
            "A crash replays receipts instead of repeating effects.\n",
            "Waiting for a human costs nothing.\n"
        ],
        "every chunk once, in order, across the kill and the other server"
    );
    let last = &after.last().expect("events after the cut").1;
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{last}"
    );
}

#[test(multi_thread, needs = Postgres)]
async fn sigterm_stops_a_worker_and_gives_its_leases_back() {
    let url = fresh_schema().await;
    let dir = tempfile::tempdir().unwrap();
    let _logs = ShowLogsOnFailure(dir.path());
    let log = dir.path().join("ticks.log");
    let submit = submitter(&url).await;
    let task = send(&submit, "ticker", "500 20").await;
    let mut worker = Worker::start(
        &url,
        "worker-t",
        &log,
        &dir.path().join("t.err"),
        600_000,
        8,
    );
    wait_for("the worker to tick", Duration::from_secs(60), async || {
        !executions(&log).is_empty()
    })
    .await;
    assert_eq!(lease_owner(&url, &task).await.as_deref(), Some("worker-t"));
    worker.signal("-TERM");
    let status = exited(
        &mut worker.child,
        "the worker stopped by SIGTERM",
        Duration::from_secs(30),
    );
    assert!(
        status.success(),
        "a worker stopped by SIGTERM exits cleanly: {status}"
    );
    assert_eq!(
        lease_owner(&url, &task).await,
        None,
        "its lease was given back (not left to expire in 10 minutes)"
    );
}
