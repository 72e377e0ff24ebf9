//! One pass per invocation, every invocation a fresh process (this test binary run again through
//! the ignored entry point `child_process_runs_one_pass`), on Postgres: the payment flow (with its
//! compensation-free charge, receipt and email, and an approval), the research loop and the delegate
//! example's coordinator (two calls to remote agents at once, rechecked across passes), each event
//! delivered to a new process, some processes SIGKILLed — right after a payment tool applied its
//! effect (before its receipt), or at a random moment. The parent delivers each event until a pass
//! takes it (a message sent again with its `messageId` finds its task; a killed pass's lease runs
//! out). The journals, and what the payment world saw, are compared with the long-lived engine's
//! on the same inputs.
#![cfg(unix)]

use crate::support::common::within;
use crate::support::services;

#[allow(dead_code)] // each test uses part of the demo
use crate::support::demo;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::delegate_kill9::delegate::coordinator::{Coordinator, SPECIALISTS};
use crate::delegate_kill9::serve_specialists as specialists;
use crate::payments::skill::{read_lines, PaymentWorld, Payments};
use radkit::engine::AgentSpec;
use radkit::engine::{Caller, Engine, Request};
use radkit::journal::{Entry, JournalRecord};
use radkit::model::Message;
use radkit::serverless::{Event, Passes};
use radkit::store::{MemoryStore, PostgresStore, Store};
use serde_json::{json, Value};

/// A pass's budget in the child, and its lease's margin: a killed pass leaves its task to the
/// next one this long after it started.
const BUDGET: Duration = Duration::from_secs(4);
const MARGIN: Duration = Duration::from_secs(1);

/// A URL whose search path is a fresh schema on the test server.
async fn fresh_schema() -> String {
    let (_, scoped) = PostgresStore::create_schema(&services::postgres_url(), "radkit_pass")
        .await
        .expect("create a test schema");
    scoped
}

fn builder(
    skill_name: &str,
    store: Arc<dyn Store>,
    world: &Path,
    pause: Option<&str>,
) -> radkit::engine::EngineBuilder {
    let builder = Engine::builder_arc(store).without_registered_skills();
    if let Some(specialists) = skill_name.strip_prefix("delegate ") {
        // The coordinator, its specialists served at the URL after the name.
        return builder
            .skill(Coordinator)
            .agent(SPECIALISTS[0], AgentSpec::new(specialists))
            .agent(SPECIALISTS[1], AgentSpec::new(specialists))
            .call_recheck(Duration::from_millis(200));
    }
    match skill_name {
        "payments" => {
            let mut world = PaymentWorld::new(world);
            if let Some(tool) = pause {
                world = world.pause_after(tool);
            }
            builder.skill(Payments::default()).effects(world.effects())
        }
        _ => builder
            .skill(demo::macro_form::ResearchLoop)
            .effects(demo::shared::scripted_effects()),
    }
}

#[test(multi_thread)]
#[ignore = "entry point of the child processes of the tests below"]
async fn child_process_runs_one_pass() {
    let env = |name: &str| std::env::var(name).expect("run by a parent test");
    let store: Arc<dyn Store> = Arc::new(
        PostgresStore::connect(&env("RADKIT_PASS_URL"))
            .await
            .unwrap(),
    );
    let pause = std::env::var("RADKIT_PASS_PAUSE").ok();
    let world = env("RADKIT_PASS_WORLD");
    let passes = Passes::from_builder(builder(
        &env("RADKIT_PASS_SKILL"),
        store,
        Path::new(&world),
        pause.as_deref(),
    ))
    .unwrap()
    .lease_margin(MARGIN);
    let event: Value = serde_json::from_str(&env("RADKIT_PASS_EVENT")).unwrap();
    let event = match event["kind"].as_str() {
        Some("message") => {
            let mut message = Message::user_text(event["text"].as_str().unwrap());
            message.message_id = event["message_id"].as_str().unwrap().to_owned();
            message.task_id = event["task"].as_str().map(str::to_owned);
            Event::Message {
                caller: Caller::Operator,
                message,
                skill: None,
                mode: None,
            }
        }
        _ => Event::Wake {
            task_id: event["task"].as_str().unwrap().to_owned(),
        },
    };
    let passed = passes.run(event, Instant::now() + BUDGET).await.unwrap();
    let rest = match passed.rest {
        radkit::serverless::Rest::Ended(state) => json!({"ended": state.as_str()}),
        radkit::serverless::Rest::Waiting { input, .. } => json!({"waiting": input}),
        radkit::serverless::Rest::Unfinished => json!("unfinished"),
        radkit::serverless::Rest::Busy => json!("busy"),
    };
    println!("{}", json!({"task": passed.task_id, "rest": rest}));
}

/// A child process, killed with SIGKILL when dropped: a failing test leaves no process behind.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How one invocation goes.
#[derive(Clone, Copy, Debug)]
enum Fate {
    /// It runs its pass to the end.
    Lives,
    /// SIGKILL right after this payment tool applied its effect, before its receipt.
    KilledAfter(&'static str),
    /// SIGKILL at this fraction of the time the last invocation that finished took (a process
    /// starts, connects and runs its pass in some tens of milliseconds on an idle machine).
    KilledAt(f64),
}

struct Run<'a> {
    url: &'a str,
    skill: &'a str,
    world: &'a Path,
    /// Invocations killed before they printed their line.
    killed: std::cell::Cell<u32>,
    /// How long the last invocation that finished took.
    last: std::cell::Cell<Duration>,
}

impl Run<'_> {
    fn spawn(&self, event: &Value, pause: Option<&str>) -> Child {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "serverless_pass::child_process_runs_one_pass",
            "--ignored",
            "--nocapture",
        ])
        .env("RADKIT_PASS_URL", self.url)
        .env("RADKIT_PASS_SKILL", self.skill)
        .env("RADKIT_PASS_WORLD", self.world)
        .env("RADKIT_PASS_EVENT", event.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        if let Some(tool) = pause {
            cmd.env("RADKIT_PASS_PAUSE", tool);
        }
        Child(cmd.spawn().unwrap())
    }

    /// One invocation with `fate`: the pass's line, or `None` when it was killed.
    fn invoke(&self, event: &Value, fate: Fate) -> Option<Value> {
        let pause = match fate {
            Fate::KilledAfter(tool) => Some(tool),
            _ => None,
        };
        let mut child = self.spawn(event, pause);
        let started = Instant::now();
        match fate {
            Fate::KilledAfter(tool) => {
                let paused = self.world.join(format!("paused-{tool}"));
                while !paused.exists() {
                    assert!(
                        started.elapsed() < Duration::from_secs(60),
                        "no pause after {tool}"
                    );
                    if child.0.try_wait().unwrap().is_some() {
                        // The pass never reached the tool (the task was past it): nothing to kill.
                        return read_line(child);
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                child.0.kill().unwrap();
                child.0.wait().unwrap();
                std::fs::remove_file(paused).unwrap();
                self.killed.set(self.killed.get() + 1);
                None
            }
            Fate::KilledAt(fraction) => {
                let after = self.last.get().mul_f64(fraction);
                while started.elapsed() < after {
                    if child.0.try_wait().unwrap().is_some() {
                        self.last.set(started.elapsed());
                        return read_line(child);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                child.0.kill().unwrap();
                child.0.wait().unwrap();
                self.killed.set(self.killed.get() + 1);
                None
            }
            Fate::Lives => {
                let line = read_line(child);
                self.last.set(started.elapsed());
                line
            }
        }
    }

    /// Deliver `event` until a pass takes it; the first invocation meets `fate`, the next ones
    /// live. A message is sent again as it was (its `messageId` finds what the killed one did).
    fn deliver(&self, event: &Value, fate: Fate) -> Value {
        let mut fate = fate;
        let started = Instant::now();
        loop {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "event {event} never taken"
            );
            if let Some(line) = self.invoke(event, fate) {
                if line["rest"] != "busy" && line["rest"] != "unfinished" {
                    return line;
                }
                // A killed pass still holds the lease (until its deadline and margin), or the
                // pass ran out of time: wake the task again.
                std::thread::sleep(Duration::from_millis(200));
            }
            fate = Fate::Lives;
        }
    }
}

fn read_line(child: Child) -> Option<Value> {
    let mut child = child;
    let out = child.0.stdout.take().map(|mut s| {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut s, &mut text).unwrap();
        text
    });
    let status = child.0.wait().unwrap();
    let text = out.unwrap_or_default();
    assert!(status.success(), "a pass failed: {text}");
    let line = text
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no line from the pass: {text}"));
    Some(serde_json::from_str(line).unwrap())
}

/// A journal without what a run chooses (ids, times): each entry's kind, what each command
/// called and what each receipt returned (ids relative to the task).
fn shape(journal: &[JournalRecord], task_id: &str) -> Vec<String> {
    journal
        .iter()
        .map(|r| match &r.entry {
            Entry::CommandIssued { id, cmd, .. } => format!(
                "command_issued {} {}",
                id.as_str().replacen(task_id, "T", 1),
                cmd.kind.fingerprint()
            ),
            Entry::ReceiptRecorded { receipt } => format!(
                "receipt {} {}",
                receipt.id.as_str().replacen(task_id, "T", 1),
                receipt.outcome.is_ok()
            ),
            Entry::StatusChanged { state } | Entry::Terminal { state, .. } => {
                format!("{} {}", r.entry.kind_name(), state.as_str())
            }
            other => other.kind_name().to_owned(),
        })
        .collect()
}

/// The requests of the payment flow, each with the replies it needs.
const PAYMENTS: &[(&str, &[&str])] = &[
    ("charge 4200 alice", &[]),
    ("refund 50 alice", &[]),
    ("refund 9900 bob", &["approve, checked with finance"]),
];

/// The long-lived engine's journals for `requests` (with their replies), and its world.
async fn on_the_engine(
    skill_name: &str,
    world: &Path,
    requests: &[(&str, &[&str])],
) -> Vec<Vec<String>> {
    let engine = builder(skill_name, Arc::new(MemoryStore::new()), world, None)
        .start()
        .await
        .unwrap();
    let mut shapes = Vec::new();
    for (request, replies) in requests {
        let id = engine
            .send(Request::operator(Message::user_text(*request)))
            .await
            .unwrap();
        engine.wait_settled(&Caller::Operator, &id).await.unwrap();
        for reply in *replies {
            let mut m = Message::user_text(*reply);
            m.task_id = Some(id.to_string());
            engine.send(Request::operator(m)).await.unwrap();
            engine.wait_settled(&Caller::Operator, &id).await.unwrap();
        }
        let journal = engine.journal(&Caller::Operator, &id).await.unwrap();
        shapes.push(shape(&journal, id.as_str()));
    }
    shapes
}

/// The same through fresh processes, the invocations of the `n`-th event meeting `fates(n)`.
async fn by_passes(
    run: &Run<'_>,
    store: &PostgresStore,
    requests: &[(&str, &[&str])],
    mut fates: impl FnMut(usize) -> Fate,
) -> Vec<Vec<String>> {
    let mut shapes = Vec::new();
    let mut n = 0;
    for (request, replies) in requests {
        let event =
            json!({"kind": "message", "text": request, "message_id": format!("m-{request}")});
        let line = run.deliver(&event, fates(n));
        n += 1;
        let task = line["task"].as_str().unwrap().to_owned();
        for (i, reply) in replies.iter().enumerate() {
            assert_eq!(line["rest"], json!({"waiting": true}), "{request}: {line}");
            let event = json!({"kind": "message", "text": reply, "task": task, "message_id": format!("r{i}-{request}")});
            let answered = run.deliver(&event, fates(n));
            n += 1;
            assert!(
                answered["rest"].get("ended").is_some(),
                "{request}: {answered}"
            );
        }
        let journal = within(
            Duration::from_secs(30),
            "read the journal",
            store.journal(&task, 0),
        )
        .await
        .unwrap();
        let last = journal.last().map(|r| &r.entry);
        assert!(
            matches!(last, Some(Entry::Terminal { .. })),
            "{request} ended"
        );
        shapes.push(shape(&journal, &task));
    }
    shapes
}

#[test(multi_thread, needs = Postgres)]
async fn payments_one_process_per_event_killed_after_each_effect_journal_what_the_engine_does() {
    let url = fresh_schema().await;
    let store = PostgresStore::connect(&url).await.unwrap();
    let (engine_world, pass_world) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let expected = on_the_engine("payments", engine_world.path(), PAYMENTS).await;
    let run = Run {
        url: &url,
        skill: "payments",
        world: pass_world.path(),
        killed: Default::default(),
        last: std::cell::Cell::new(Duration::from_millis(30)),
    };
    // The charge of the first request and the receipt of the second are cut off after their
    // effect; the refund's reply is delivered to a process that lives.
    let fates = [
        Fate::KilledAfter("charge_card"),
        Fate::KilledAfter("write_receipt"),
        Fate::Lives,
        Fate::KilledAfter("charge_card"),
    ];
    let shapes = by_passes(&run, &store, PAYMENTS, |n| {
        fates.get(n).copied().unwrap_or(Fate::Lives)
    })
    .await;
    assert_eq!(
        shapes, expected,
        "the passes journal what the engine journals"
    );
    let (engine_world, pass_world) = (
        PaymentWorld::new(engine_world.path()),
        PaymentWorld::new(pass_world.path()),
    );
    for file in ["ledger.jsonl", "outbox.jsonl"] {
        assert_eq!(
            read_lines(&pass_world.file(file)).len(),
            read_lines(&engine_world.file(file)).len(),
            "{file}: one charge and one email per payment, whatever was killed"
        );
    }
    let calls = |world: &PaymentWorld, tool: &str| {
        read_lines(&world.file("calls.jsonl"))
            .iter()
            .filter(|c| c["tool"] == tool)
            .count()
    };
    assert_eq!(
        calls(&pass_world, "charge_card"),
        calls(&engine_world, "charge_card") + 2,
        "the two charges cut off before their receipt were asked again with the same key"
    );
    assert_eq!(
        read_lines(&pass_world.file("receipts.jsonl")).len(),
        read_lines(&engine_world.file("receipts.jsonl")).len() + 1,
        "the receipt cut off was written again (at least once)"
    );
}

#[test(multi_thread, needs = Postgres)]
async fn the_research_loop_one_process_per_event_killed_at_random_moments_journals_what_the_engine_does(
) {
    let url = fresh_schema().await;
    let store = PostgresStore::connect(&url).await.unwrap();
    let world = tempfile::tempdir().unwrap();
    let requests: &[(&str, &[&str])] =
        &[("Durable execution for agents", &["Make it friendlier."])];
    let expected = on_the_engine("research", world.path(), requests).await;
    let seed = std::env::var("RADKIT_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("serverless_pass: RADKIT_TEST_SEED={seed}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let run = Run {
        url: &url,
        skill: "research",
        world: world.path(),
        killed: Default::default(),
        last: std::cell::Cell::new(Duration::from_millis(30)),
    };
    // Each event's first invocation is killed at a random moment of its life: starting,
    // connecting, loading, appending, or with a model call in flight.
    let shapes = by_passes(&run, &store, requests, |_| {
        Fate::KilledAt(0.05 + rng.f64() * 0.9)
    })
    .await;
    eprintln!(
        "serverless_pass: {} invocations killed before they finished",
        run.killed.get()
    );
    assert_eq!(
        shapes, expected,
        "seed {seed}: the passes journal what the engine journals"
    );
    assert!(
        run.killed.get() > 0,
        "seed {seed}: no invocation was killed before it finished"
    );
}

/// Calls `hold`, which returns only when the test lets it, then completes.
#[derive(Default)]
struct Held;

#[radkit::flow_skill(id = "held", name = "Held", register = false)]
impl Held {
    #[step(start)]
    async fn hold(
        &self,
        ctx: &radkit::flow::StepCtx,
        _: radkit::model::Content,
    ) -> radkit::flow::StepResult {
        let _: Value = ctx.tool("hold").call(json!({})).await?;
        ctx.complete("released", vec![])
    }
}

#[test(multi_thread, needs = Postgres)]
async fn two_passes_at_once_never_both_drive_a_task_on_postgres() {
    use radkit::effects::Effects;
    use radkit::flow::EffectPolicy;
    use radkit::serverless::Rest;
    use radkit::tools::FnTool;
    use std::sync::atomic::{AtomicU32, Ordering};

    let url = fresh_schema().await;
    let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url).await.unwrap());
    let release = Arc::new(tokio::sync::Notify::new());
    let runs = Arc::new(AtomicU32::new(0));
    let tool = {
        let (release, runs) = (release.clone(), runs.clone());
        FnTool::new(EffectPolicy::Idempotent, move |args, _| {
            runs.fetch_add(1, Ordering::SeqCst);
            let release = release.clone();
            async move {
                release.notified().await;
                Ok(args)
            }
        })
    };
    let passes = Passes::from_builder(
        Engine::builder_arc(store.clone())
            .without_registered_skills()
            .skill(Held)
            .effects(Effects::new().tool("hold", tool)),
    )
    .unwrap();
    let mut message = Message::user_text("go");
    message.message_id = "m1".into();
    let first = {
        let passes = passes.clone();
        tokio::spawn(async move {
            let event = Event::Message {
                caller: Caller::Operator,
                message,
                skill: None,
                mode: None,
            };
            passes
                .run(event, Instant::now() + Duration::from_secs(30))
                .await
        })
    };
    // The first pass holds the task's lease while its tool runs.
    within(Duration::from_secs(30), "the tool to start", async {
        while runs.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let tasks = store.list(Default::default()).await.unwrap();
    let task_id = tasks[0].id.clone();
    // Another invocation for the same task (a sweep's, a wake's) finds it held.
    let other = Passes::from_builder(
        Engine::builder_arc(store.clone())
            .without_registered_skills()
            .skill(Held),
    )
    .unwrap();
    let busy = other
        .run(
            Event::Wake {
                task_id: task_id.clone(),
            },
            Instant::now() + Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert_eq!(busy.rest, Rest::Busy);
    let swept = other
        .sweep(Instant::now() + Duration::from_secs(5), 8)
        .await
        .unwrap();
    assert!(swept.is_empty(), "a held task is not claimed: {swept:?}");
    release.notify_one();
    let done = within(Duration::from_secs(30), "the first pass", first)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.rest, Rest::Ended(radkit::model::TaskState::Completed));
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the tool ran once");
}

/// How many tasks the specialists hold.
async fn held(specialists: &Engine) -> usize {
    specialists
        .store()
        .list(Default::default())
        .await
        .unwrap()
        .len()
}

/// A journal's shape without the call rechecks (their number follows how long the pessimist took
/// against each host's clock), as a sorted list: the two calls of one batch settle in either order.
fn call_shape(journal: &[JournalRecord], task_id: &str) -> Vec<String> {
    let mut shape: Vec<String> = shape(journal, task_id)
        .into_iter()
        .filter(|kind| kind != "timer_set")
        .collect();
    shape.sort();
    shape
}

#[test(multi_thread, needs = Postgres)]
async fn the_delegate_coordinator_one_process_per_event_calls_each_specialist_once_and_journals_what_the_engine_does(
) {
    const QUESTION: &str = "Should we ship the tested release?";
    // The long-lived engine, with specialists of its own.
    let (url, reference_specialists) = specialists().await;
    let engine = builder(
        &format!("delegate {url}"),
        Arc::new(MemoryStore::new()),
        Path::new("."),
        None,
    )
    .start()
    .await
    .unwrap();
    let id = engine
        .send(Request::operator(Message::user_text(QUESTION)))
        .await
        .unwrap();
    let expected_task = within(
        Duration::from_secs(120),
        "the engine's coordinator",
        engine.wait_settled(&Caller::Operator, &id),
    )
    .await
    .unwrap();
    let expected = engine.journal(&Caller::Operator, &id).await.unwrap();
    engine.shutdown().await;
    assert_eq!(held(&reference_specialists).await, 2);

    // One process per event, on Postgres, some killed at random moments.
    let (url, pass_specialists) = specialists().await;
    let schema = fresh_schema().await;
    let store = PostgresStore::connect(&schema).await.unwrap();
    let world = tempfile::tempdir().unwrap();
    let seed = std::env::var("RADKIT_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("serverless_pass: RADKIT_TEST_SEED={seed}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let skill = format!("delegate {url}");
    let run = Run {
        url: &schema,
        skill: &skill,
        world: world.path(),
        killed: Default::default(),
        last: std::cell::Cell::new(Duration::from_millis(30)),
    };
    let event = json!({"kind": "message", "text": QUESTION, "message_id": "m-delegate"});
    let mut fate = || match rng.u8(0..3) {
        0 => Fate::KilledAt(0.05 + rng.f64() * 0.9),
        _ => Fate::Lives,
    };
    let mut line = run.deliver(&event, fate());
    let task = line["task"].as_str().unwrap().to_owned();
    let started = Instant::now();
    // The task rests on the pessimist (its recheck in the row); each wake is one more process.
    while line["rest"].get("ended").is_none() {
        assert_eq!(
            line["rest"],
            json!({"waiting": false}),
            "seed {seed}: {line}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "seed {seed}: the coordinator never ended"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        line = run.deliver(&json!({"kind": "wake", "task": task}), fate());
    }
    assert_eq!(line["rest"], json!({"ended": "completed"}), "seed {seed}");
    let journal = store.journal(&task, 0).await.unwrap();
    assert!(
        journal
            .iter()
            .any(|r| matches!(r.entry, Entry::TimerSet { .. })),
        "seed {seed}: the pessimist's call waited across passes"
    );
    assert_eq!(
        call_shape(&journal, &task),
        call_shape(&expected, id.as_str()),
        "seed {seed}: the passes journal what the engine journals"
    );
    let text = |entry: Option<&Entry>| match entry {
        Some(Entry::Terminal { message, .. }) => message.as_ref().map(Message::joined_texts),
        _ => None,
    };
    assert_eq!(
        text(journal.last().map(|r| &r.entry)),
        expected_task
            .status
            .message
            .as_ref()
            .map(Message::joined_texts),
        "seed {seed}"
    );
    assert_eq!(
        held(&pass_specialists).await,
        2,
        "seed {seed}: one task per specialist, whatever was killed ({} killed)",
        run.killed.get()
    );
}
