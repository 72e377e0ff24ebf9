//! `radkit::serverless::Passes` in this process, on SQLite: what a pass leaves when its deadline
//! comes, what a sweep picks up, a timer left in the journal, a message or a reply sent again, a
//! cancel, and the requests a pass refuses before writing anything.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use radkit::engine::{Caller, Engine, EngineError};
use radkit::journal::Entry;
use radkit::machine::MachineError;
use radkit::model::{Message, TaskState};
use radkit::prelude::*;
use radkit::serverless::{Event, PassError, Passed, Passes, Rest};
use radkit::store::{Durability, SqliteStore, Store};

use crate::support::skills::Ask;

/// Calls `fast` and `slow` together, then completes with both answers.
#[derive(Default)]
struct Pair;

#[flow_skill(id = "pair", name = "Pair", register = false)]
impl Pair {
    #[step(start)]
    async fn both(&self, ctx: &StepCtx, _: Content) -> StepResult {
        let (a, b): (Result<String, StepError>, Result<String, StepError>) = radkit::join!(
            ctx.tool("fast").call(serde_json::json!("a")),
            ctx.tool("slow").call(serde_json::json!("b"))
        );
        ctx.complete(format!("{}{}", a?, b?), vec![])
    }
}

/// Sleeps a second on a durable timer, then completes.
#[derive(Default)]
struct Blink;

#[flow_skill(id = "blink", name = "Blink", register = false)]
impl Blink {
    #[step(start)]
    async fn blink(&self, ctx: &StepCtx, _: Content) -> StepResult {
        ctx.sleep(Duration::from_millis(1_000)).await?;
        ctx.complete("awake", vec![])
    }
}

/// Naps an hour on a durable timer; a message sent meanwhile interrupts it.
#[derive(Default)]
struct Nap;

#[flow_skill(id = "nap", name = "Nap", register = false)]
impl Nap {
    #[step(start)]
    async fn nap(&self, ctx: &StepCtx, _: Content) -> StepResult {
        ctx.sleep(Duration::from_secs(3600)).await?;
        ctx.complete("slept", vec![])
    }

    #[step(interrupt)]
    async fn woken(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        ctx.complete(format!("woken by {}", msg.joined_texts()), vec![])
    }
}

/// Blinks, then asks; a message sent while it blinked is the answer.
#[derive(Default)]
struct Patient;

#[flow_skill(
    id = "patient",
    name = "Patient",
    while_working = "queue",
    register = false
)]
impl Patient {
    #[step(start)]
    async fn blink(&self, ctx: &StepCtx, _: Content) -> StepResult {
        ctx.sleep(Duration::from_millis(1_000)).await?;
        await_input!(slot = "more", message = "More?")
    }

    #[step(resume_from = "blink")]
    async fn more(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        ctx.complete(format!("also {}", msg.joined_texts()), vec![])
    }
}

/// Calls the skill its message names as a child task.
#[derive(Default)]
struct Parent;

#[flow_skill(id = "parent", name = "Parent", register = false)]
impl Parent {
    #[step(start)]
    async fn call(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let answer = ctx.skill(msg.joined_texts()).send("hello").await?;
        ctx.complete(format!("parent got: {}", answer.text()), vec![])
    }
}

struct World {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    /// How often `slow` ran; its first run outlasts any pass's deadline.
    slow_runs: Arc<AtomicU32>,
    fast_runs: Arc<AtomicU32>,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.path().join("pass.sqlite"), Durability::Full).unwrap());
    World {
        _dir: dir,
        store,
        slow_runs: Arc::default(),
        fast_runs: Arc::default(),
    }
}

impl World {
    /// Tools `fast` and `slow` (whose first run never returns), each counting its runs.
    fn effects(&self) -> Effects {
        let (slow_runs, fast_runs) = (self.slow_runs.clone(), self.fast_runs.clone());
        Effects::new()
            .tool(
                "fast",
                FnTool::new(EffectPolicy::Idempotent, move |args, _| {
                    fast_runs.fetch_add(1, Ordering::SeqCst);
                    async move { Ok(args) }
                }),
            )
            .tool(
                "slow",
                FnTool::new(EffectPolicy::Idempotent, move |args, _| {
                    let first = slow_runs.fetch_add(1, Ordering::SeqCst) == 0;
                    async move {
                        if first {
                            std::future::pending::<()>().await;
                        }
                        Ok(args)
                    }
                }),
            )
    }

    fn passes(&self) -> Passes {
        self.passes_keeping(radkit::engine::Retention::FOREVER)
    }

    fn passes_keeping(&self, retention: radkit::engine::Retention) -> Passes {
        let builder = Engine::builder_arc(self.store.clone())
            .retention(retention)
            .without_registered_skills()
            .skill(Pair)
            .skill(Blink)
            .skill(Ask)
            .skill(Parent)
            .skill(Nap)
            .skill(Patient)
            .default_skill("ask")
            .effects(self.effects());
        Passes::from_builder(builder).unwrap()
    }
}

fn soon(ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(ms)
}

fn message(text: &str, id: &str, skill: Option<&str>) -> Event {
    let mut message = Message::user_text(text);
    message.message_id = id.to_owned();
    Event::Message {
        caller: Caller::Operator,
        message,
        skill: skill.map(str::to_owned),
        mode: None,
    }
}

fn reply(task: &str, text: &str, id: &str) -> Event {
    let mut message = Message::user_text(text);
    message.message_id = id.to_owned();
    message.task_id = Some(task.to_owned());
    Event::Message {
        caller: Caller::Operator,
        message,
        skill: None,
        mode: None,
    }
}

async fn receipts(store: &dyn Store, task: &str) -> Vec<String> {
    store
        .journal(task, 0)
        .await
        .unwrap()
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::ReceiptRecorded { receipt } => Some(receipt.id.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
async fn a_pass_cut_off_by_its_deadline_keeps_the_receipts_that_returned_and_a_sweep_finishes_the_task(
) {
    let w = world();
    let passes = w.passes();
    let first = passes
        .run(message("go", "m1", Some("pair")), soon(500))
        .await
        .unwrap();
    assert_eq!(first.rest, Rest::Unfinished, "{first:?}");
    let kept = receipts(w.store.as_ref(), &first.task_id).await;
    assert_eq!(
        kept,
        vec![format!("{}:1:0", first.task_id)],
        "the fast call's receipt is kept"
    );
    // A scheduled sweep, in another invocation (a fresh host over the same store).
    let swept = w.passes().sweep(soon(10_000), 16).await.unwrap();
    let [Passed { rest, .. }] = swept.as_slice() else {
        panic!("one task to sweep: {swept:?}");
    };
    assert_eq!(*rest, Rest::Ended(TaskState::Completed));
    assert_eq!(
        w.fast_runs.load(Ordering::SeqCst),
        1,
        "a call with a receipt is not run again"
    );
    assert_eq!(
        w.slow_runs.load(Ordering::SeqCst),
        2,
        "the cut-off call was asked again"
    );
    let again = w.passes().sweep(soon(1_000), 16).await.unwrap();
    assert!(again.is_empty(), "nothing left to sweep: {again:?}");
}

/// Nothing runs between invocations: the scheduled sweep is where a serverless deployment prunes.
#[test]
async fn a_sweep_with_a_retention_deletes_the_tasks_that_finished_and_keeps_waiting_ones() {
    let w = world();
    let done = w
        .passes()
        .run(message("go", "m1", Some("pair")), soon(500))
        .await
        .unwrap();
    // Its slow call outlasts the first pass: a sweep finishes it.
    w.passes().sweep(soon(10_000), 16).await.unwrap();
    let row = w
        .store
        .task(&done.task_id)
        .await
        .unwrap()
        .expect("the task");
    assert_eq!(row.state, TaskState::Completed);
    let asks = w
        .passes()
        .run(message("hello", "m2", Some("ask")), soon(5_000))
        .await
        .unwrap();
    // A sweep that keeps everything prunes nothing; one that keeps finished tasks no time at all
    // deletes the finished one and leaves the one waiting for input.
    w.passes().sweep(soon(5_000), 16).await.unwrap();
    assert!(w.store.task(&done.task_id).await.unwrap().is_some());
    let keep_nothing = radkit::engine::Retention {
        journal: None,
        task: Some(Duration::ZERO),
    };
    w.passes_keeping(keep_nothing)
        .sweep(soon(5_000), 16)
        .await
        .unwrap();
    assert!(
        w.store.task(&done.task_id).await.unwrap().is_none(),
        "deleted"
    );
    let waiting = w.store.task(&asks.task_id).await.unwrap().expect("kept");
    assert_eq!(waiting.state, TaskState::InputRequired);
}

#[test]
async fn a_timer_rests_in_the_journal_until_a_sweep_finds_it_due() {
    let w = world();
    let passes = w.passes();
    let started = radkit::journal::now_ms();
    let first = passes
        .run(message("go", "m1", Some("blink")), soon(5_000))
        .await
        .unwrap();
    let Rest::Waiting {
        input: false,
        wake_at_ms: Some(at),
    } = first.rest
    else {
        panic!("the timer: {first:?}");
    };
    assert!(at >= started + 1_000);
    let record = w.store.task(&first.task_id).await.unwrap().unwrap();
    assert_eq!(record.wake_at_ms, Some(at), "the row holds the wake time");
    // Sweep until it is due (each sweep a new invocation); none runs the task before.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let swept = w.passes().sweep(soon(5_000), 16).await.unwrap();
        if let [done] = swept.as_slice() {
            assert!(radkit::journal::now_ms() >= at, "not before it is due");
            assert_eq!(done.rest, Rest::Ended(TaskState::Completed));
            break;
        }
        assert!(swept.is_empty(), "{swept:?}");
        assert!(Instant::now() < deadline, "the timer never came due");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
async fn a_message_or_a_reply_sent_again_goes_on_with_its_task_and_is_never_taken_twice() {
    let w = world();
    let passes = w.passes();
    let asked = passes
        .run(message("hi", "m1", None), soon(5_000))
        .await
        .unwrap();
    assert_eq!(
        asked.rest,
        Rest::Waiting {
            input: true,
            wake_at_ms: None
        }
    );
    let again = passes
        .run(message("hi", "m1", None), soon(5_000))
        .await
        .unwrap();
    assert_eq!(
        again.task_id, asked.task_id,
        "the same message names the same task"
    );
    assert_eq!(again.appends, 0, "and writes nothing");
    let other = passes.run(message("bye", "m1", None), soon(5_000)).await;
    assert!(
        matches!(other, Err(PassError::Invalid(EngineError::InvalidInput(_)))),
        "another message under a used id: {other:?}"
    );
    let done = passes
        .run(reply(&asked.task_id, "yes", "r1"), soon(5_000))
        .await
        .unwrap();
    assert_eq!(done.rest, Rest::Ended(TaskState::Completed));
    let again = passes
        .run(reply(&asked.task_id, "yes", "r1"), soon(5_000))
        .await
        .unwrap();
    assert_eq!(
        again.rest,
        Rest::Ended(TaskState::Completed),
        "the reply sent again"
    );
    let late = passes
        .run(reply(&asked.task_id, "no", "r2"), soon(5_000))
        .await;
    assert!(
        matches!(
            late,
            Err(PassError::Machine(MachineError::Finished(
                TaskState::Completed
            )))
        ),
        "{late:?}"
    );
    let journal = w.store.journal(&asked.task_id, 0).await.unwrap();
    let replies = journal
        .iter()
        .filter(|r| matches!(&r.entry, Entry::MessageReceived { message } if message.message_id == "r1"))
        .count();
    assert_eq!(replies, 1);
}

#[test]
async fn a_cancel_pass_ends_a_waiting_task_canceled() {
    let w = world();
    let passes = w.passes();
    let asked = passes
        .run(message("hi", "m1", None), soon(5_000))
        .await
        .unwrap();
    let event = Event::Cancel {
        caller: Caller::Operator,
        task_id: asked.task_id.clone(),
    };
    let canceled = passes.run(event.clone(), soon(5_000)).await.unwrap();
    assert_eq!(canceled.rest, Rest::Ended(TaskState::Canceled));
    let again = passes.run(event, soon(5_000)).await;
    assert!(
        matches!(
            again,
            Err(PassError::Machine(MachineError::Finished(
                TaskState::Canceled
            )))
        ),
        "{again:?}"
    );
}

#[test]
async fn what_a_pass_refuses_it_refuses_before_writing_anything() {
    let w = world();
    let passes = w.passes();
    let mut empty = Message::user_text("x");
    empty.parts.clear();
    let no_parts = Event::Message {
        caller: Caller::Operator,
        message: empty,
        skill: None,
        mode: None,
    };
    assert!(matches!(
        passes.run(no_parts, soon(1_000)).await,
        Err(PassError::Invalid(EngineError::InvalidInput(_)))
    ));
    assert!(matches!(
        passes
            .run(message("x", "m1", Some("nope")), soon(1_000))
            .await,
        Err(PassError::Invalid(EngineError::UnknownSkill(_)))
    ));
    assert!(matches!(
        passes
            .run(reply("no-such-task", "x", "r1"), soon(1_000))
            .await,
        Err(PassError::NotFound(_))
    ));
    let stranger = Event::Cancel {
        caller: Caller::Principal("mallory".into()),
        task_id: "no-such-task".into(),
    };
    assert!(matches!(
        passes.run(stranger, soon(1_000)).await,
        Err(PassError::NotFound(_))
    ));
    let tasks = w.store.list(Default::default()).await.unwrap();
    assert!(tasks.is_empty(), "{tasks:?}");
    let working = passes
        .run(message("go", "m2", Some("blink")), soon(5_000))
        .await
        .unwrap();
    let not_waiting = passes
        .run(reply(&working.task_id, "x", "r1"), soon(1_000))
        .await;
    assert!(
        matches!(
            not_waiting,
            Err(PassError::Machine(MachineError::NotAwaitingInput(_)))
        ),
        "{not_waiting:?}"
    );
}

#[test]
async fn a_child_skill_that_settles_at_once_answers_its_parent_in_the_same_pass() {
    let w = world();
    let passed = w
        .passes()
        .run(message("ask", "m1", Some("parent")), soon(5_000))
        .await
        .unwrap();
    assert_eq!(passed.rest, Rest::Ended(TaskState::Completed));
    let journal = w.store.journal(&passed.task_id, 0).await.unwrap();
    let Some(Entry::Terminal {
        message: Some(message),
        ..
    }) = journal.last().map(|r| &r.entry)
    else {
        panic!("a terminal entry");
    };
    // The child asked a question: that is its answer to the call.
    assert_eq!(message.joined_texts(), "parent got: Your answer?");
    let children: Vec<_> = w
        .store
        .list(Default::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.skill_id == "ask")
        .collect();
    assert_eq!(children.len(), 1, "one child task");
    assert_eq!(children[0].state, TaskState::InputRequired);
    assert!(journal.iter().any(
        |r| matches!(&r.entry, Entry::CallStarted { task_id, .. } if *task_id == children[0].id)
    ));
}

/// A `parent` task calling the `blink` skill, left by its first pass waiting on its sleeping child
/// (a recheck due): its id.
async fn parent_waiting_on_blink(passes: &Passes) -> String {
    let passed = passes
        .run(message("blink", "m1", Some("parent")), soon(5_000))
        .await
        .unwrap();
    let Rest::Waiting {
        input: false,
        wake_at_ms: Some(_),
    } = passed.rest
    else {
        panic!("the parent waits on its child: {passed:?}");
    };
    passed.task_id
}

#[test]
async fn a_child_skill_on_a_timer_is_run_by_sweeps_and_its_parent_asks_again_at_its_recheck() {
    let w = world();
    let passes = w.passes();
    let parent = parent_waiting_on_blink(&passes).await;
    // Sweeps run the child when its timer is due and the parent at its recheck (5 s, the
    // default): nothing runs between them.
    let started = Instant::now();
    loop {
        let swept = passes.sweep(soon(10_000), 8).await.unwrap();
        if swept
            .iter()
            .any(|p| p.task_id == parent && p.rest == Rest::Ended(TaskState::Completed))
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the parent never ended: {swept:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let tasks = w.store.list(Default::default()).await.unwrap();
    let child = tasks.iter().find(|t| t.skill_id == "blink").unwrap();
    assert_eq!(child.state, TaskState::Completed);
    assert_eq!(tasks.len(), 2, "one child task");
    let journal = w.store.journal(&parent, 0).await.unwrap();
    let started_calls = journal
        .iter()
        .filter(|r| matches!(r.entry, Entry::CallStarted { .. }))
        .count();
    assert_eq!(started_calls, 1, "the child was started once");
    let Some(Entry::Terminal {
        message: Some(message),
        ..
    }) = journal.last().map(|r| &r.entry)
    else {
        panic!("a terminal entry");
    };
    assert_eq!(message.joined_texts(), "parent got: awake");
}

#[test]
async fn a_canceled_parent_cancels_its_child_skills_task_in_the_same_pass() {
    let w = world();
    let passes = w.passes();
    let parent = parent_waiting_on_blink(&passes).await;
    let child = w
        .store
        .list(Default::default())
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.skill_id == "blink")
        .expect("the child task");
    assert!(!child.state.is_terminal(), "the child sleeps: {child:?}");

    let cancel = Event::Cancel {
        caller: Caller::Operator,
        task_id: parent.clone(),
    };
    let canceled = passes.run(cancel, soon(5_000)).await.unwrap();
    assert_eq!(canceled.rest, Rest::Ended(TaskState::Canceled));
    // No work goes on for a canceled task: its child was canceled by the same pass, and a sweep
    // after the child's timer finds nothing to run.
    let child_now = w.store.task(&child.id).await.unwrap().expect("the child");
    assert_eq!(child_now.state, TaskState::Canceled, "{child_now:?}");
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let swept = passes.sweep(soon(5_000), 8).await.unwrap();
    assert!(swept.is_empty(), "{swept:?}");
}

/// `radkit pass` and `radkit executor` as processes: one invocation each, one JSON line per pass,
/// and what they refuse said on stderr with a failing status.
#[test]
fn radkit_pass_runs_one_event_per_process_and_says_what_it_refuses() {
    use crate::support::common::output_within;
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_radkit"));
        cmd.arg("pass").arg("--data-dir").arg(dir.path()).args(args);
        output_within(cmd, Duration::from_secs(120), "radkit pass")
    };
    let asked = run(&[
        "message",
        "--text",
        "Durable execution",
        "--message-id",
        "m1",
    ]);
    assert!(
        asked.status.success(),
        "{}",
        String::from_utf8_lossy(&asked.stderr)
    );
    let line: serde_json::Value = serde_json::from_slice(&asked.stdout).unwrap();
    assert_eq!(line["rest"], "waiting", "{line}");
    assert_eq!(line["input"], true, "{line}");
    let task = line["task_id"].as_str().unwrap().to_owned();
    let done = run(&["message", "--text", "Make it friendlier.", "--task", &task]);
    let line: serde_json::Value = serde_json::from_slice(&done.stdout).unwrap();
    assert_eq!(
        (line["rest"].as_str(), line["state"].as_str()),
        (Some("ended"), Some("completed")),
        "{line}"
    );
    let missing = run(&["wake", "--task", "no-such-task"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("not found"));
    let mut executor = std::process::Command::new(env!("CARGO_BIN_EXE_radkit"));
    executor.args(["executor", "--once", "--store", "sqlite:///nowhere.sqlite"]);
    let refused = output_within(executor, Duration::from_secs(60), "radkit executor");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("postgres://"));
}

/// A hook that allows everything.
struct Allow;

#[async_trait::async_trait]
impl radkit::engine::Hook for Allow {}

#[test]
fn every_host_takes_a_builder_with_hooks() {
    let w = world();
    let builder = || {
        Engine::builder_arc(w.store.clone())
            .without_registered_skills()
            .skill(Ask)
            .hook(Allow)
    };
    assert!(Passes::from_builder(builder()).is_ok());
    assert!(builder().serverless(Duration::from_secs(5)).build().is_ok());
    assert!(radkit::restate::RestateHost::from_builder(builder()).is_ok());
    assert!(builder().restate("http://127.0.0.1:1").build().is_ok());
    assert!(builder().build().is_ok());
}

/// A message sent while a task rests on a timer, in its own pass: an interrupting skill runs its
/// interrupt step in that pass; a queueing one keeps it, and the question the task asks after its
/// timer (a sweep's pass) takes it at once.
#[test]
async fn a_pass_takes_a_message_while_the_task_works_as_its_skill_declares() {
    let w = world();
    let napping = w
        .passes()
        .run(message("go", "n1", Some("nap")), soon(5_000))
        .await
        .unwrap();
    assert!(
        matches!(napping.rest, Rest::Waiting { input: false, .. }),
        "{napping:?}"
    );
    let woken = w
        .passes()
        .run(reply(&napping.task_id, "the bell", "n2"), soon(5_000))
        .await
        .unwrap();
    assert_eq!(woken.rest, Rest::Ended(TaskState::Completed));
    let task = w
        .store
        .task_view(&napping.task_id, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        task.status_message.map(|m| m.joined_texts()).as_deref(),
        Some("woken by the bell")
    );

    let blinking = w
        .passes()
        .run(message("go", "p1", Some("patient")), soon(5_000))
        .await
        .unwrap();
    let kept = w
        .passes()
        .run(reply(&blinking.task_id, "a footnote", "p2"), soon(5_000))
        .await
        .unwrap();
    assert!(
        matches!(kept.rest, Rest::Waiting { input: false, .. }),
        "still blinking: {kept:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let swept = w.passes().sweep(soon(5_000), 16).await.unwrap();
        if let Some(done) = swept.iter().find(|p| p.task_id == blinking.task_id) {
            assert_eq!(done.rest, Rest::Ended(TaskState::Completed), "{done:?}");
            break;
        }
        assert!(Instant::now() < deadline, "the timer never came due");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let journal = w.store.journal(&blinking.task_id, 0).await.unwrap();
    assert!(journal
        .iter()
        .any(|r| matches!(&r.entry, Entry::QueuedDelivered { .. })));
    assert!(!journal.iter().any(|r| matches!(
        &r.entry,
        Entry::StatusChanged {
            state: TaskState::InputRequired
        }
    )));
}

/// Calls tool `fast` with 1 and tool `slow` with 2, and completes with what came back.
#[derive(Default)]
struct Tooler;

#[flow_skill(id = "tooler", name = "Tooler", register = false)]
impl Tooler {
    #[step(start)]
    async fn work(&self, ctx: &StepCtx, _: Content) -> StepResult {
        let fast: serde_json::Value = ctx.tool("fast").call(serde_json::json!(1)).await?;
        let slow = match ctx
            .tool("slow")
            .call::<_, serde_json::Value>(serde_json::json!(2))
            .await
        {
            Ok(value) => format!("{value}"),
            Err(e) => format!("refused ({e})"),
        };
        ctx.complete(format!("fast {fast}, slow {slow}"), vec![])
    }
}

/// Notes every call, doubles `fast`'s argument and refuses `slow`.
struct Gatekeeper(Arc<std::sync::Mutex<Vec<String>>>);

#[async_trait::async_trait]
impl radkit::engine::Hook for Gatekeeper {
    async fn before_step(&self, ctx: &radkit::engine::HookContext) -> radkit::engine::HookDecision {
        self.0.lock().unwrap().push(format!("before {}", ctx.step));
        radkit::engine::HookDecision::Continue
    }

    async fn after_step(&self, ctx: &radkit::engine::HookContext, outcome: &str) {
        self.0
            .lock()
            .unwrap()
            .push(format!("after {}: {outcome}", ctx.step));
    }

    async fn before_command(
        &self,
        _: &radkit::engine::HookContext,
        cmd: &mut radkit::flow::Cmd,
    ) -> radkit::engine::HookDecision {
        self.0
            .lock()
            .unwrap()
            .push(format!("before {}", cmd.kind.fingerprint()));
        match &mut cmd.kind {
            radkit::flow::CmdKind::Tool { tool, args } if tool == "fast" => {
                *args = serde_json::json!(args.as_i64().unwrap_or(0) * 2);
                radkit::engine::HookDecision::Continue
            }
            radkit::flow::CmdKind::Tool { tool, .. } if tool == "slow" => {
                radkit::engine::HookDecision::Deny("slow tools are off".into())
            }
            _ => radkit::engine::HookDecision::Continue,
        }
    }

    async fn after_command(
        &self,
        _: &radkit::engine::HookContext,
        cmd: &radkit::flow::Cmd,
        _: &radkit::flow::Receipt,
    ) {
        self.0
            .lock()
            .unwrap()
            .push(format!("after {}", cmd.kind.fingerprint()));
    }
}

#[test]
async fn a_pass_puts_each_visit_and_command_to_the_hooks_which_may_change_or_refuse_a_command() {
    let w = world();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let builder = Engine::builder_arc(w.store.clone())
        .without_registered_skills()
        .skill(Tooler)
        .effects(w.effects())
        .hook(Gatekeeper(seen.clone()));
    let passes = Passes::from_builder(builder).unwrap();
    let passed = passes
        .run(message("go", "m-hooks", None), soon(10_000))
        .await
        .unwrap();
    assert_eq!(passed.rest, Rest::Ended(TaskState::Completed), "{passed:?}");
    let view = w
        .store
        .task_view(&passed.task_id, None)
        .await
        .unwrap()
        .unwrap();
    let task = radkit::engine::project_task(view);
    let said = format!("{:?}", task.status.message);
    assert!(
        said.contains("fast 2"),
        "the hook doubled fast's argument: {said}"
    );
    assert!(
        said.contains("denied by a hook: slow tools are off"),
        "{said}"
    );
    assert_eq!(w.fast_runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        w.slow_runs.load(Ordering::SeqCst),
        0,
        "a refused tool never runs"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "before work",
            "before tool `fast`",
            "after tool `fast`",
            "before tool `slow`",
            "after work: complete",
        ],
        "each visit and each new command, in order"
    );
}
