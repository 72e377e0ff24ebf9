//! Messages sent to a task while it works ("double texting"): refused unless the skill says
//! otherwise; kept for the task's next question (`WhileWorking::Queue`); or interrupting the running
//! visit at its next call, delivered to the skill's interrupt step (`WhileWorking::Interrupt`).
//! Each is journaled when it is accepted, so a crash between its journal entry and its delivery
//! loses nothing.

use crate::support::{common, services};

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{reply, settled, status_text, user, wait_halted, within, PATIENCE};
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::{Boundary, Engine, EngineBuilder, EngineError, Fault, Request};
use radkit_runtime::flow::step_table::{await_input, Step, StepInput, StepTable};
use radkit_runtime::flow::{EffectPolicy, SkillInfo, StepCtx, StepResult, WhileWorking};
use radkit_runtime::journal::{Entry, TransitionKind};
use radkit_runtime::model::{Message, TaskState};
use radkit_runtime::store::{MemoryStore, PostgresStore, Store};
use radkit_runtime::tools::FnTool;
use tokio::sync::Semaphore;

/// `work`: the slow tool, then the `after` tool, then a question answered by `answered`. `nap`: an
/// hour's durable sleep inside the step, then completes. The interrupt step `redirected` (only in
/// the interrupting table) completes with the message it got.
struct Chat;

fn start<'a>(_: &'a Chat, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        if input.message().joined_texts() == "nap" {
            ctx.sleep(Duration::from_secs(3600)).await?;
            return ctx.complete("slept", vec![]);
        }
        let _: serde_json::Value = ctx.tool("slow").call(()).await?;
        let _: serde_json::Value = ctx.tool("after").call(()).await?;
        await_input("more", "Anything else?", ())
    })
}

fn answered<'a>(_: &'a Chat, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { ctx.complete(format!("got {}", input.message().joined_texts()), vec![]) })
}

fn redirected<'a>(_: &'a Chat, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        ctx.complete(
            format!("redirected by {}", input.message().joined_texts()),
            vec![],
        )
    })
}

static QUEUEING: &[Step<Chat>] = &[
    Step::new("start", start).start().takes_user_message(),
    Step::new("answered", answered).resume_from("start"),
];

static INTERRUPTING: &[Step<Chat>] = &[
    Step::new("start", start).start().takes_user_message(),
    Step::new("answered", answered).resume_from("start"),
    Step::new("redirected", redirected).interrupt(),
];

/// The tools: `slow` says it started (`entered`) and returns once `release` has a permit; `after`
/// returns at once. Both count their calls.
#[derive(Clone)]
struct Tools {
    entered: Arc<Semaphore>,
    release: Arc<Semaphore>,
    slow_calls: Arc<AtomicU32>,
    after_calls: Arc<AtomicU32>,
}

impl Tools {
    fn new() -> Self {
        Tools {
            entered: Arc::new(Semaphore::new(0)),
            release: Arc::new(Semaphore::new(0)),
            slow_calls: Arc::default(),
            after_calls: Arc::default(),
        }
    }

    /// Tools that never block (a restarted engine's).
    fn free() -> Self {
        let tools = Tools::new();
        tools.release.add_permits(1000);
        tools
    }

    fn effects(&self) -> Effects {
        let me = self.clone();
        let slow = FnTool::new(EffectPolicy::Idempotent, move |_, _| {
            let me = me.clone();
            async move {
                me.slow_calls.fetch_add(1, Ordering::SeqCst);
                me.entered.add_permits(1);
                let permit = me.release.acquire().await.expect("open");
                permit.forget();
                Ok(serde_json::json!("slow done"))
            }
        });
        let me = self.clone();
        let after = FnTool::new(EffectPolicy::Idempotent, move |_, _| {
            let me = me.clone();
            async move {
                me.after_calls.fetch_add(1, Ordering::SeqCst);
                Ok(serde_json::json!("after done"))
            }
        });
        Effects::new().tool("slow", slow).tool("after", after)
    }

    /// Wait until the slow tool runs.
    async fn running(&self) {
        let permit = within(PATIENCE, "the slow tool to start", self.entered.acquire())
            .await
            .expect("open");
        permit.forget();
    }
}

fn chat(store: impl Store, tools: &Tools, choice: WhileWorking) -> EngineBuilder {
    let info = SkillInfo::new("chat", "Chat").while_working(choice);
    let steps = match choice {
        WhileWorking::Interrupt => INTERRUPTING,
        _ => QUEUEING,
    };
    Engine::builder(store)
        .without_registered_skills()
        .skill(StepTable::new(info, Chat, steps).unwrap())
        .effects(tools.effects())
}

/// A fault hook that crashes the engine once, right after a message sent while the task works is
/// journaled and before anything delivers it (the engine's `Resuming` boundary).
fn crash_after_keeping() -> impl Fn(&Fault) -> bool + Send + Sync + 'static {
    let fired = Arc::new(std::sync::atomic::AtomicBool::new(false));
    move |f: &Fault| f.boundary == Boundary::Resuming && !fired.swap(true, Ordering::SeqCst)
}

/// A task of `choice` inside its slow call: the store, the tools, the engine, the task.
async fn working(
    choice: WhileWorking,
) -> (MemoryStore, Tools, Engine, radkit_runtime::model::TaskId) {
    let store = MemoryStore::new();
    let tools = Tools::new();
    let engine = chat(store.clone(), &tools, choice).start().await.unwrap();
    let task = engine.send(Request::operator(user("work"))).await.unwrap();
    tools.running().await;
    (store, tools, engine, task)
}

async fn entries(store: &MemoryStore, task: &str) -> Vec<Entry> {
    store
        .journal(task, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.entry)
        .collect()
}

fn texts(history: &[Message], text: &str) -> usize {
    history.iter().filter(|m| m.joined_texts() == text).count()
}

#[test(multi_thread)]
async fn a_message_while_a_task_works_is_refused_by_default() {
    let (_store, tools, engine, task) = working(WhileWorking::Refuse).await;
    let refused = engine
        .send(Request::operator(reply(&task, "and another thing")))
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            EngineError::NotAwaitingInput {
                state: TaskState::Working,
                ..
            }
        ),
        "{refused:?}"
    );
    tools.release.add_permits(1);
    let asked = settled(&engine, &task).await;
    assert_eq!(asked.status.state, TaskState::InputRequired);
    assert_eq!(texts(&asked.history, "and another thing"), 0);
}

#[test(multi_thread)]
async fn a_queued_message_answers_the_next_question_at_once() {
    let (store, tools, engine, task) = working(WhileWorking::Queue).await;
    let kept = engine
        .send(Request::operator(reply(&task, "and another thing")))
        .await
        .unwrap();
    assert_eq!(kept, task, "the message is taken by the task it names");
    // Journaled when accepted, before the task asks anything.
    let at_accept = entries(&store, &task).await;
    assert!(
        at_accept.iter().any(|e| matches!(e, Entry::MessageQueued { message, interrupt: false } if message.joined_texts() == "and another thing")),
        "{at_accept:?}"
    );
    tools.release.add_permits(1);
    let done = settled(&engine, &task).await;
    assert_eq!(done.status.state, TaskState::Completed, "{done:?}");
    assert_eq!(status_text(&done), "got and another thing");
    assert_eq!(texts(&done.history, "and another thing"), 1);
    let journal = entries(&store, &task).await;
    assert!(
        !journal.iter().any(|e| matches!(
            e,
            Entry::StatusChanged {
                state: TaskState::InputRequired
            }
        )),
        "the question never waited: {journal:?}"
    );
    assert_eq!(tools.after_calls.load(Ordering::SeqCst), 1);
}

#[test(multi_thread)]
async fn an_interrupting_message_stops_the_visit_at_its_next_call_and_runs_the_interrupt_step() {
    let (store, tools, engine, task) = working(WhileWorking::Interrupt).await;
    engine
        .send(Request::operator(reply(&task, "stop, do this instead")))
        .await
        .unwrap();
    tools.release.add_permits(1);
    let done = settled(&engine, &task).await;
    assert_eq!(done.status.state, TaskState::Completed, "{done:?}");
    assert_eq!(status_text(&done), "redirected by stop, do this instead");
    assert_eq!(
        tools.after_calls.load(Ordering::SeqCst),
        0,
        "the interrupted visit made no call after the message"
    );
    assert_eq!(tools.slow_calls.load(Ordering::SeqCst), 1);
    let journal = entries(&store, &task).await;
    assert!(
        journal.iter().any(|e| matches!(
            e,
            Entry::Transitioned {
                next: TransitionKind::Interrupt,
                ..
            }
        )),
        "{journal:?}"
    );
}

#[test(multi_thread)]
async fn an_interrupting_message_reaches_a_task_sleeping_inside_a_step_at_once() {
    let store = MemoryStore::new();
    let tools = Tools::new();
    let engine = chat(store.clone(), &tools, WhileWorking::Interrupt)
        .start()
        .await
        .unwrap();
    let task = engine.send(Request::operator(user("nap"))).await.unwrap();
    within(PATIENCE, "the task to sleep", async {
        loop {
            let journal = entries(&store, &task).await;
            if journal.iter().any(|e| matches!(e, Entry::TimerSet { .. })) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    engine
        .send(Request::operator(reply(&task, "wake up")))
        .await
        .unwrap();
    let done = settled(&engine, &task).await;
    assert_eq!(status_text(&done), "redirected by wake up");
    // The sleep was abandoned: nothing waits for it.
    let row = store.task(&task).await.unwrap().unwrap();
    assert_eq!(row.wake_at_ms, None);
}

/// A task of `choice` running its slow call gets `text` while it works, and the engine crashes right
/// after the message is journaled (before anything delivers it). The store, the task, the tools.
async fn crashed_after_keeping(choice: WhileWorking, text: &str) -> (MemoryStore, String, Tools) {
    let store = MemoryStore::new();
    let tools = Tools::new();
    let engine = chat(store.clone(), &tools, choice)
        .fault_hook(crash_after_keeping())
        .start()
        .await
        .unwrap();
    let task = engine.send(Request::operator(user("work"))).await.unwrap();
    tools.running().await;
    engine
        .send(Request::operator(reply(&task, text)))
        .await
        .unwrap();
    wait_halted(&engine).await;
    drop(engine);
    let at_crash = entries(&store, &task).await;
    assert!(
        at_crash
            .iter()
            .any(|e| matches!(e, Entry::MessageQueued { .. })),
        "{at_crash:?}"
    );
    assert!(
        !at_crash
            .iter()
            .any(|e| matches!(e, Entry::QueuedDelivered { .. })),
        "{at_crash:?}"
    );
    (store, task.to_string(), tools)
}

/// The message is journaled, then the engine crashes before the task's question takes it: a new
/// engine on the same journal delivers it, once.
#[test(multi_thread)]
async fn crash_after_a_queued_message_is_journaled_delivers_it_after_restart() {
    let (store, task, _) = crashed_after_keeping(WhileWorking::Queue, "later").await;
    let fresh = Tools::free();
    let engine = chat(store.clone(), &fresh, WhileWorking::Queue)
        .start()
        .await
        .unwrap();
    let done = settled(&engine, &task.clone().into()).await;
    assert_eq!(done.status.state, TaskState::Completed, "{done:?}");
    assert_eq!(status_text(&done), "got later");
    assert_eq!(texts(&done.history, "later"), 1);
}

#[test(multi_thread)]
async fn crash_after_an_interrupting_message_is_journaled_delivers_it_after_restart() {
    let (store, task, tools) =
        crashed_after_keeping(WhileWorking::Interrupt, "change of plan").await;
    let fresh = Tools::free();
    let engine = chat(store.clone(), &fresh, WhileWorking::Interrupt)
        .start()
        .await
        .unwrap();
    let done = settled(&engine, &task.clone().into()).await;
    assert_eq!(status_text(&done), "redirected by change of plan");
    assert_eq!(
        fresh.after_calls.load(Ordering::SeqCst) + tools.after_calls.load(Ordering::SeqCst),
        0,
        "the interrupted visit never went past its slow call"
    );
    let delivered = entries(&store, &task)
        .await
        .iter()
        .filter(|e| matches!(e, Entry::QueuedDelivered { .. }))
        .count();
    assert_eq!(delivered, 1);
}

/// On Postgres (leases, fencing): a message interrupts a task resting on a timer at once, and a
/// queued message sent while a task works answers its question.
#[test(multi_thread, needs = Postgres)]
async fn on_postgres_messages_while_working_are_kept_under_the_tasks_lease() {
    let (_, url) = PostgresStore::create_schema(&services::postgres_url(), "radkit_while_working")
        .await
        .expect("create a test schema");
    let store = PostgresStore::connect(&url).await.expect("connect");
    let tools = Tools::new();
    let interrupting = chat(store.clone(), &tools, WhileWorking::Interrupt)
        .worker_id("w1")
        .start()
        .await
        .unwrap();
    let napping = interrupting
        .send(Request::operator(user("nap")))
        .await
        .unwrap();
    within(PATIENCE, "the task to rest on its timer", async {
        while store
            .task(&napping)
            .await
            .unwrap()
            .unwrap()
            .wake_at_ms
            .is_none()
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    interrupting
        .send(Request::operator(reply(&napping, "wake up")))
        .await
        .unwrap();
    let done = settled(&interrupting, &napping).await;
    assert_eq!(status_text(&done), "redirected by wake up");
    interrupting.shutdown().await;

    let queueing = chat(store.clone(), &tools, WhileWorking::Queue)
        .worker_id("w2")
        .start()
        .await
        .unwrap();
    let task = queueing
        .send(Request::operator(user("work")))
        .await
        .unwrap();
    tools.running().await;
    queueing
        .send(Request::operator(reply(&task, "and more")))
        .await
        .unwrap();
    tools.release.add_permits(1);
    let done = settled(&queueing, &task).await;
    assert_eq!(status_text(&done), "got and more");
}
