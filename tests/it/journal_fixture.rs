//! Journals written by an earlier version open and resume under this one. `tests/fixtures/` holds a
//! SQLite file and a PostgreSQL dump written by radkit at commit d9e11e9 (before the engine's
//! one-fold renovation changed how entries are typed and stored): tasks waiting for a reply (after
//! `await_input!` and inside a step), asleep on a durable timer, cut off by a crash after an
//! at-least-once and an at-most-once command was journaled, halfway through a checkpointed loop, holding
//! a compensable reservation, and finished. Each test opens a copy, lets today's engine recover it, and
//! drives every task to the end its promise names.
//!
//! `RADKIT_WRITE_FIXTURE=1 cargo test --test it -- journal_fixture::write_fixture` writes new
//! fixtures with the code at hand (`fixture.sqlite` and the Postgres schema `radkit_fixture_v0`,
//! dumped with `pg_dump --inserts -n radkit_fixture_v0`); the checked-in ones must stay those of the
//! old version.

use crate::support::services;

use radkit::engine::{Caller, Request};
use radkit::model::TaskId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use radkit::effects::Effects;
use radkit::engine::{Engine, EngineBuilder};
use radkit::flow::{EffectError, EffectPolicy, StepCtx, StepResult};
use radkit::model::{Content, Message, TaskState};
use radkit::store::{Durability, PostgresStore, SqliteStore, Store, TaskQuery};
use radkit::tools::FnTool;
use radkit::{await_input, flow_skill, goto};
use serde_json::{json, Value};

/// The Postgres schema the fixture's dump creates (renamed when loaded).
const FIXTURE_SCHEMA: &str = "radkit_fixture_v0";
/// How many visits between checkpoints, in the fixture and now.
const CHECKPOINT_EVERY: u64 = 4;
/// The loop's length.
const TICKS: u32 = 12;

/// One skill whose first message picks what the task does.
#[derive(Default)]
struct Errand;

/// Waits, asks, sleeps, charges, notifies, loops or reserves, as the first message says.
#[flow_skill(id = "fixture_errand", name = "Fixture errand", register = false)]
impl Errand {
    #[step(start)]
    async fn start(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let text = msg.joined_texts();
        match text.as_str() {
            "done" => ctx.complete("done", vec![]),
            "wait" => await_input!(slot = "note", message = "a note?", carry = text),
            "ask" => {
                let reply = ctx.ask("answer", "a question?").await?;
                ctx.complete(format!("asked: {}", reply.joined_texts()), vec![])
            }
            "sleep" => {
                ctx.sleep(Duration::from_millis(200)).await?;
                ctx.complete("slept", vec![])
            }
            "charge" => {
                let charged: Value = ctx.tool("charge").call(json!({ "cents": 500 })).await?;
                ctx.complete(format!("charged {charged}"), vec![])
            }
            "once" => {
                let _: Value = ctx.tool("notify").call(json!({ "to": "ops" })).await?;
                ctx.complete("notified", vec![])
            }
            "loop" => goto!("tick", 1u32),
            "reserve" => {
                let _: Value = ctx.tool("reserve").call(json!({ "seat": "12A" })).await?;
                await_input!(slot = "confirm", message = "confirm?", carry = text)
            }
            other => ctx.reject(format!("unknown errand `{other}`")),
        }
    }

    #[step]
    async fn tick(&self, ctx: &StepCtx, n: u32) -> StepResult {
        let _: Value = ctx.tool("tick").call(json!({ "n": n })).await?;
        if n < TICKS {
            goto!("tick", n + 1)
        } else {
            ctx.complete(format!("ticked {n}"), vec![])
        }
    }

    #[step(resume_from = "start")]
    async fn replied(&self, carry: String, msg: Content) -> StepResult {
        Ok(radkit::flow::Transition::complete(format!(
            "{carry}: {}",
            msg.joined_texts()
        )))
    }
}

/// Every tool call, by tool, with its arguments and idempotency key.
#[derive(Clone, Default)]
struct World {
    calls: Arc<Mutex<Vec<(String, Value, String)>>>,
    undone: Arc<Mutex<Vec<String>>>,
}

impl World {
    fn of(&self, tool: &str) -> Vec<(Value, String)> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _, _)| t == tool)
            .map(|(_, args, key)| (args.clone(), key.clone()))
            .collect()
    }

    fn tool(&self, name: &'static str, policy: EffectPolicy) -> FnTool {
        let calls = self.calls.clone();
        let tool = FnTool::new(policy, move |args, key| {
            let calls = calls.clone();
            async move {
                calls
                    .lock()
                    .unwrap()
                    .push((name.to_owned(), args.clone(), key.to_string()));
                Ok::<_, EffectError>(json!({ "ok": name, "args": args }))
            }
        });
        if policy != EffectPolicy::Compensate {
            return tool;
        }
        let undone = self.undone.clone();
        tool.compensate_with(move |_, _, key| {
            let undone = undone.clone();
            async move {
                undone.lock().unwrap().push(key.to_string());
                Ok(Value::Null)
            }
        })
    }

    fn effects(&self) -> Effects {
        Effects::new()
            .tool("charge", self.tool("charge", EffectPolicy::AtLeastOnce))
            .tool("notify", self.tool("notify", EffectPolicy::AtMostOnce))
            .tool("tick", self.tool("tick", EffectPolicy::Idempotent))
            .tool("reserve", self.tool("reserve", EffectPolicy::Compensate))
    }
}

fn engine(store: Arc<dyn Store>, world: &World) -> EngineBuilder {
    Engine::builder_arc(store)
        .without_registered_skills()
        .skill(Errand)
        .effects(world.effects())
        .checkpoint_every(CHECKPOINT_EVERY)
        .lease_ttl(Duration::from_millis(500))
        .poll_interval(Duration::from_millis(20))
}

fn user(text: &str) -> Message {
    Message::user_text(text)
}

/// The first user message's text of each task, mapped to its id.
async fn tasks_by_errand(store: &Arc<dyn Store>) -> HashMap<String, TaskId> {
    let mut by_errand = HashMap::new();
    for task in store.list(TaskQuery::default()).await.expect("list tasks") {
        let journal = store.journal(&task.id, 0).await.expect("read a journal");
        let first = journal.iter().find_map(|r| match &r.entry {
            radkit::journal::Entry::MessageReceived { message } => {
                Some(Content::from(message.clone()).joined_texts())
            }
            _ => None,
        });
        by_errand.insert(first.expect("a first message"), TaskId::from(task.id));
    }
    by_errand
}

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    crate::support::common::within(Duration::from_secs(30), what, fut).await
}

/// Recover the old store with today's engine and drive each task to its promised end.
async fn resume_and_finish(store: Arc<dyn Store>) {
    let world = World::default();
    let tasks = tasks_by_errand(&store).await;
    assert_eq!(tasks.len(), 8, "the fixture's tasks: {tasks:?}");
    // The schema migration filled each task's view (what reads show) from its journal.
    for (errand, id) in &tasks {
        let view = store
            .task_view(id, None)
            .await
            .expect("read a view")
            .expect("the task has a view");
        let journal = store.journal(id, 0).await.expect("read a journal");
        assert_eq!(
            view,
            radkit::store::TaskView::from_journal(view.record.clone(), &journal, None),
            "the `{errand}` task's view after the migration is its journal's fold"
        );
        assert!(
            !view.history.is_empty(),
            "`{errand}`: its history was filled"
        );
    }
    let engine = engine(store.clone(), &world)
        .worker_id("today")
        .start()
        .await
        .expect("today's engine opens the old store");
    let settled = |errand: &str| {
        let engine = engine.clone();
        let id = tasks[errand].clone();
        let what = format!("the `{errand}` task to settle");
        async move {
            within(&what, engine.wait_settled(&Caller::Operator, &id))
                .await
                .unwrap()
        }
    };
    let text = |task: &radkit::model::Task| {
        task.status
            .message
            .as_ref()
            .map(|m| Content::from(m.clone()).joined_texts())
            .unwrap_or_default()
    };

    let done = settled("done").await;
    assert_eq!(
        (done.status.state, text(&done)),
        (TaskState::Completed, "done".into())
    );

    // A reply to `await_input!` reaches the resume step with the carry.
    let waiting = settled("wait").await;
    assert_eq!(waiting.status.state, TaskState::InputRequired);
    let mut reply = user("a reply");
    reply.task_id = Some(tasks["wait"].to_string());
    engine
        .send(Request::operator(reply))
        .await
        .expect("answer the old task");
    let waited = settled("wait").await;
    assert_eq!(text(&waited), "wait: a reply");

    // A question asked inside a step gets its answer.
    let mut answer = user("forty-two");
    answer.task_id = Some(tasks["ask"].to_string());
    engine
        .send(Request::operator(answer))
        .await
        .expect("answer the old question");
    let asked = settled("ask").await;
    assert_eq!(
        (asked.status.state, text(&asked)),
        (TaskState::Completed, "asked: forty-two".into())
    );

    // The timer set before the crash fires.
    let slept = settled("sleep").await;
    assert_eq!(
        (slept.status.state, text(&slept)),
        (TaskState::Completed, "slept".into())
    );

    // The at-least-once charge journaled before the crash is reissued once, under its old key.
    let charged = settled("charge").await;
    assert_eq!(
        charged.status.state,
        TaskState::Completed,
        "{}",
        text(&charged)
    );
    let charges = world.of("charge");
    assert_eq!(charges.len(), 1, "{charges:?}");
    let journal = store.journal(&tasks["charge"], 0).await.unwrap();
    let issued_key = journal.iter().find_map(|r| match &r.entry {
        radkit::journal::Entry::CommandIssued { id, .. } => Some(id.to_string()),
        _ => None,
    });
    assert_eq!(Some(charges[0].1.clone()), issued_key);

    // The at-most-once notification is not sent again: its outcome is unknown.
    let once = settled("once").await;
    assert_eq!(once.status.state, TaskState::Failed);
    assert!(text(&once).contains("outcome"), "{}", text(&once));
    assert!(world.of("notify").is_empty());

    // The loop resumes from its last checkpoint and finishes without repeating a finished tick.
    let looped = settled("loop").await;
    assert_eq!(
        (looped.status.state, text(&looped)),
        (TaskState::Completed, format!("ticked {TICKS}"))
    );
    let ticks: Vec<u64> = world
        .of("tick")
        .iter()
        .map(|(args, _)| args["n"].as_u64().unwrap())
        .collect();
    assert_eq!(
        ticks.first(),
        Some(&7),
        "the tick cut off by the crash runs again: {ticks:?}"
    );
    assert_eq!(ticks.last(), Some(&u64::from(TICKS)));
    let mut unique = ticks.clone();
    unique.dedup();
    assert_eq!(unique, ticks, "no tick runs twice");

    // A cancel undoes the reservation made by the old version.
    let canceled = within(
        "the cancel of the old reservation",
        engine.cancel(&Caller::Operator, &tasks["reserve"]),
    )
    .await
    .expect("cancel the old task");
    assert_eq!(canceled.status.state, TaskState::Canceled);
    assert_eq!(world.undone.lock().unwrap().len(), 1);

    engine.shutdown().await;
}

#[test(multi_thread)]
async fn sqlite_journal_of_the_previous_version_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.sqlite");
    std::fs::copy(fixture("fixture.sqlite"), &path).expect("copy the fixture");
    let store = SqliteStore::open(&path, Durability::Full).expect("open the old SQLite file");
    resume_and_finish(Arc::new(store)).await;
}

#[test(multi_thread, needs = Postgres)]
async fn postgres_journal_of_the_previous_version_resumes() {
    let url = services::postgres_url();
    let (schema, scoped) = radkit::store::PostgresStore::create_schema(&url, "radkit_fixture")
        .await
        .expect("a schema for the fixture");
    let dump = std::fs::read_to_string(fixture("fixture.postgres.sql")).expect("the dump");
    let sql: String = dump
        .lines()
        // psql meta-commands (`\restrict`) and the schema's own creation (it exists, renamed).
        .filter(|l| !l.starts_with('\\') && !l.starts_with("CREATE SCHEMA"))
        .filter(|l| !l.starts_with("ALTER SCHEMA") && !l.contains("OWNER TO"))
        .map(|l| l.replace(FIXTURE_SCHEMA, &schema) + "\n")
        .collect();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client.batch_execute(&sql).await.expect("load the dump");
    let store = PostgresStore::connect(&scoped)
        .await
        .expect("open the old Postgres schema");
    resume_and_finish(Arc::new(store)).await;
    radkit::store::PostgresStore::drop_schema(&url, &schema)
        .await
        .ok();
}

/// radkit's task model keeps the journal's on-disk shape: every message an earlier version journaled
/// (received, asked, answered, carried in a step's event) reads as `model::Message` and writes back as
/// the same JSON, and every state it stored reads as a `TaskState`.
#[test]
fn every_message_and_state_an_earlier_version_journaled_reads_and_writes_back_unchanged() {
    let db = rusqlite::Connection::open_with_flags(
        fixture("fixture.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open the fixture");
    let mut bodies = db.prepare("SELECT body FROM journal").unwrap();
    let bodies: Vec<String> = bodies
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let (mut messages, mut states) = (0, 0);
    let mut stack: Vec<Value> = bodies
        .iter()
        .map(|body| serde_json::from_str(body).expect("a body is JSON"))
        .collect();
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(object) => {
                if object.contains_key("messageId") {
                    let stored = Value::Object(object.clone());
                    let message: Message = serde_json::from_value(stored.clone())
                        .unwrap_or_else(|e| panic!("{stored} does not read as a Message: {e}"));
                    assert_eq!(serde_json::to_value(&message).unwrap(), stored);
                    messages += 1;
                }
                if let Some(Value::String(state)) = object.get("state") {
                    assert!(TaskState::parse(state).is_some(), "state `{state}`");
                    states += 1;
                }
                stack.extend(object.into_iter().map(|(_, v)| v));
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    assert!(
        messages >= 20 && states >= 10,
        "{messages} messages, {states} states"
    );
}

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

// Not a test: listed only when asked for, so that it never counts as one that passed.
inventory::submit! {
    crate::support::harness::Suite { module: module_path!(), tests: fixture_writer }
}

/// `write_fixture` when `RADKIT_WRITE_FIXTURE` is set, else nothing.
fn fixture_writer() -> Vec<services::Test> {
    if std::env::var_os("RADKIT_WRITE_FIXTURE").is_none() {
        return Vec::new();
    }
    vec![services::multi_thread(
        "write_fixture",
        services::Needs::Postgres,
        write_fixture,
    )]
}

/// Write the fixture's tasks with the code at hand (see the module docs).
async fn write_fixture() {
    let dir = std::env::temp_dir().join("radkit-fixture");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("fixture.sqlite");
    let sqlite = || -> Arc<dyn Store> {
        Arc::new(SqliteStore::open(&path, Durability::Full).expect("open"))
    };
    write_tasks(sqlite).await;
    let url = services::postgres_url();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {FIXTURE_SCHEMA} CASCADE; CREATE SCHEMA {FIXTURE_SCHEMA}"
        ))
        .await
        .unwrap();
    let scoped = format!("{url}?options=-csearch_path%3D{FIXTURE_SCHEMA}");
    let mut stores = Vec::new();
    for _ in 0..6 {
        stores.push(Arc::new(PostgresStore::connect(&scoped).await.unwrap()) as Arc<dyn Store>);
    }
    let stores = Mutex::new(stores);
    write_tasks(|| stores.lock().unwrap().pop().unwrap()).await;
    println!("wrote {} and schema {FIXTURE_SCHEMA}", path.display());
}

/// The fixture's eight tasks, each engine halted (as by a crash) where its task should stop.
async fn write_tasks(open: impl Fn() -> Arc<dyn Store>) {
    let world = World::default();
    let send = |engine: &Engine, text: &str| {
        let engine = engine.clone();
        let message = user(text);
        async move { engine.send(Request::operator(message)).await.unwrap() }
    };
    // Finished and waiting tasks: a clean engine.
    let calm = engine(open(), &world).worker_id("calm").build().unwrap();
    for errand in ["done", "wait", "ask", "reserve"] {
        let id = send(&calm, errand).await;
        within(errand, calm.wait_settled(&Caller::Operator, &id))
            .await
            .unwrap();
    }
    calm.halt();
    // Crashes: each its own engine, halted at its boundary.
    let crash = |boundary: radkit::engine::Boundary, what: &'static str, nth: u32| {
        let seen = AtomicU32::new(0);
        move |fault: &radkit::engine::Fault| {
            fault.boundary == boundary
                && fault.what.as_deref().is_some_and(|w| w.contains(what))
                && seen.fetch_add(1, Ordering::SeqCst) + 1 == nth
        }
    };
    use radkit::engine::Boundary::{CommandJournaled, TimerWait};
    for (errand, boundary, what, nth) in [
        ("charge", CommandJournaled, "charge", 1),
        ("once", CommandJournaled, "notify", 1),
        ("loop", CommandJournaled, "tick", 7),
        ("sleep", TimerWait, "", 0),
    ] {
        let hook: Box<dyn Fn(&radkit::engine::Fault) -> bool + Send + Sync> = if nth == 0 {
            Box::new(move |f: &radkit::engine::Fault| f.boundary == boundary)
        } else {
            Box::new(crash(boundary, what, nth))
        };
        let engine = engine(open(), &world)
            .worker_id(errand)
            .fault_hook(hook)
            .build()
            .unwrap();
        send(&engine, errand).await;
        within("the injected crash", async {
            while !engine.is_halted() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
