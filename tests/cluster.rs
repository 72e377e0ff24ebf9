//! Many engines on one Postgres store: leases, takeover, fencing, and any engine answering for any
//! task. In-process engines first, then real `radkit worker` processes killed with `kill -9` and paused
//! with SIGSTOP. The server is `RADKIT_TEST_POSTGRES_URL`, else the local one (see `services`); when
//! it does not answer these tests are reported ignored. Each test works in a fresh schema.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use radkit::journal::{Entry, JournalRecord};
use radkit::model::{Message, TaskState};
use radkit::store::{PostgresStore, Store, TaskQuery};
use radkit::Engine;
use serde_json::json;

#[allow(dead_code)] // each test uses part of the demo
#[path = "../src/demo/mod.rs"]
mod demo;

mod common;
#[macro_use]
#[path = "../radkit-runtime/tests/services/mod.rs"]
mod services;

fn main() -> ExitCode {
    services::run(trials! {
        Postgres multi_thread:
            any_engine_answers_streams_and_continues_any_task,
            cancel_on_one_engine_stops_a_task_running_on_another,
            a_halted_engines_task_is_taken_over_when_its_lease_expires,
            shutdown_gives_the_leases_back_for_another_engine_to_continue,
            a_durable_timer_fires_on_whichever_worker_is_free,
            tasks_finish_when_the_database_drops_every_connection_mid_run,
            a_submit_only_engine_leaves_its_tasks_to_the_workers,
            three_workers_share_300_tasks_and_one_killed_with_kill_9_loses_nothing,
            a_worker_paused_past_its_lease_is_fenced_off,
            a_task_started_on_a_killed_server_is_streamed_and_finished_by_another,
            sigterm_stops_a_worker_and_gives_its_leases_back;
    })
}

/// A URL whose search path is a fresh schema on the test server.
async fn fresh_schema() -> String {
    let (_, scoped) =
        radkit::store::postgres::create_schema(&services::postgres_url(), "radkit_cluster")
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

async fn send(engine: &Engine, skill: &str, text: &str) -> String {
    engine
        .send(None, Some(skill), Message::user_text(text))
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

/// Wait until `task` has journaled a few ticks.
async fn ticked(engine: &Engine, task: &str) {
    let store = engine.store().clone();
    wait_for("a few ticks", Duration::from_secs(30), async || {
        store.task(task).await.unwrap().unwrap().last_seq > 10
    })
    .await;
}

async fn wait_for(what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn any_engine_answers_streams_and_continues_any_task() {
    let url = fresh_schema().await;
    let a = engine(&url, "engine-a", 2_000).await;
    let b = engine(&url, "engine-b", 2_000).await;
    let task = send(&a, "research_loop_v2", "durable execution").await;
    // B follows a task A runs: its subscription reads what A commits.
    let waiting = b.wait_settled(None, &task).await.unwrap();
    assert_eq!(waiting.status.state, TaskState::InputRequired);
    // B takes the answer: it acquires the lease A gave back when the task began to wait.
    let mut reply = Message::user_text("Yes, the tone is right.");
    reply.task_id = Some(task.clone());
    b.send(None, None, reply).await.unwrap();
    let done = a.wait_settled(None, &task).await.unwrap();
    assert_eq!(done.status.state, TaskState::Completed);
    check_journal(&task, &a.journal(None, &task).await.unwrap());
    assert_eq!(
        a.task(None, &task, None).await.unwrap(),
        b.task(None, &task, None).await.unwrap(),
        "both engines show the same task"
    );
}

async fn cancel_on_one_engine_stops_a_task_running_on_another() {
    let url = fresh_schema().await;
    let a = engine(&url, "engine-a", 2_000).await;
    let b = engine(&url, "engine-b", 2_000).await;
    let task = send(&a, "ticker", "10000 5").await;
    ticked(&a, &task).await;
    let canceled = b.cancel(None, &task).await.unwrap();
    assert_eq!(canceled.status.state, TaskState::Canceled);
    check_journal(&task, &b.journal(None, &task).await.unwrap());
}

async fn a_halted_engines_task_is_taken_over_when_its_lease_expires() {
    let url = fresh_schema().await;
    let a = engine(&url, "engine-a", 400).await;
    let task = send(&a, "ticker", "60 5").await;
    ticked(&a, &task).await;
    a.halt(); // a crash: the lease is not given back
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(lease_owner(&url, &task).await.as_deref(), Some("engine-a"));
    let b = engine(&url, "engine-b", 400).await;
    let done = b.wait_settled(None, &task).await.unwrap();
    assert_eq!(done.status.state, TaskState::Completed);
    check_journal(&task, &b.journal(None, &task).await.unwrap());
}

/// Who holds the task's lease, read straight from its row.
async fn lease_owner(url: &str, task_id: &str) -> Option<String> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .query_one(
            "SELECT lease_owner FROM radkit_tasks WHERE id = $1",
            &[&task_id],
        )
        .await
        .unwrap()
        .get(0)
}

async fn shutdown_gives_the_leases_back_for_another_engine_to_continue() {
    let url = fresh_schema().await;
    // Leases long enough that only a release lets B continue within the test's lifetime.
    let a = engine(&url, "engine-a", 600_000).await;
    let task = send(&a, "ticker", "60 5").await;
    ticked(&a, &task).await;
    assert_eq!(lease_owner(&url, &task).await.as_deref(), Some("engine-a"));
    a.shutdown().await;
    assert_eq!(
        lease_owner(&url, &task).await,
        None,
        "shutdown released the lease"
    );
    let b = engine(&url, "engine-b", 600_000).await;
    let done = b.wait_settled(None, &task).await.unwrap();
    assert_eq!(done.status.state, TaskState::Completed);
    check_journal(&task, &b.journal(None, &task).await.unwrap());
}

async fn a_durable_timer_fires_on_whichever_worker_is_free() {
    let url = fresh_schema().await;
    let a = engine(&url, "engine-a", 2_000).await;
    let task = send(&a, "report", "timers").await;
    let store = a.store().clone();
    // The report pauses on a durable timer; A gives the lease back while it waits, then dies.
    wait_for("the pause", Duration::from_secs(30), async || {
        store
            .task(&task)
            .await
            .unwrap()
            .unwrap()
            .wake_at_ms
            .is_some()
    })
    .await;
    wait_for(
        "the lease to be given back",
        Duration::from_secs(30),
        async || lease_owner(&url, &task).await.is_none(),
    )
    .await;
    a.halt();
    let b = engine(&url, "engine-b", 2_000).await;
    let done = b.wait_settled(None, &task).await.unwrap();
    assert_eq!(done.status.state, TaskState::Completed);
    check_journal(&task, &b.journal(None, &task).await.unwrap());
}

async fn tasks_finish_when_the_database_drops_every_connection_mid_run() {
    let url = fresh_schema().await;
    let name = format!("radkit-{}", &radkit::model::new_id()[..8]);
    let tagged = format!("{url}&application_name={name}");
    let a = engine(&tagged, "engine-a", 1_000).await;
    let tasks = [
        send(&a, "ticker", "150 2").await,
        send(&a, "ticker", "150 2").await,
    ];
    let store = a.store().clone();
    wait_for("a few ticks", Duration::from_secs(30), async || {
        store.task(&tasks[0]).await.unwrap().unwrap().last_seq > 20
    })
    .await;
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
        let done = a.wait_settled(None, task).await.unwrap();
        assert_eq!(done.status.state, TaskState::Completed);
        check_journal(task, &a.journal(None, task).await.unwrap());
    }
}

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
        let done = submit.wait_settled(None, task).await.unwrap();
        assert_eq!(done.status.state, TaskState::Completed);
        check_journal(task, &submit.journal(None, task).await.unwrap());
    }
    drop((w1, w2));
    // `radkit tasks` reads the same database.
    let shown = Command::new(env!("CARGO_BIN_EXE_radkit"))
        .args(["tasks", "show", &tasks[0], "--store", &url])
        .output()
        .unwrap();
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
    let victim = workers[0].pid();
    workers[0].signal("-KILL");
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
    let taken_over = tasks.iter().filter(|t| {
        let pids: HashSet<u32> = ticks
            .iter()
            .filter(|(id, _)| id.starts_with(t.as_str()))
            .flat_map(|(_, p)| p.iter().copied())
            .collect();
        pids.contains(&victim) && pids.len() > 1
    });
    assert!(
        taken_over.count() > 0,
        "the killed worker held tasks that the others finished"
    );
}

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
    let done = submit.wait_settled(None, &task).await.unwrap();
    assert_eq!(done.status.state, TaskState::Completed);
    check_journal(&task, &submit.journal(None, &task).await.unwrap());
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
    let stream = client
        .post(format!("{}/", b.url))
        .json(&json!({ "jsonrpc": "2.0", "id": 9, "method": "tasks/resubscribe", "params": { "id": task_id } }))
        .send()
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
    let _ = a.child.wait();
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
    let status = worker.child.wait().unwrap();
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
