//! The InvocationIds of a step's ctx calls never depend on the scheduler: a call takes its id when
//! it is made, in program order, not when it is first polled; `ctx.race` journals its winner so a
//! replay keeps it, and abandons the losers; a ctx call taken out of its step (a spawned task)
//! fails the step instead of running an effect nobody journals an outcome for.

use crate::support::common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::{ended, reply, settled, status_text, user, wait_halted, Ledger};
use futures::future::BoxFuture;
use futures::FutureExt;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::Engine;
use radkit_runtime::engine::{Boundary, Fault, Request};
use radkit_runtime::flow::step_table::{Step, StepInput, StepTable};
use radkit_runtime::flow::{
    CmdKind, EffectPolicy, InvocationId, Receipt, SkillInfo, StepCtx, StepError, StepResult,
};
use radkit_runtime::journal::{Entry, JournalRecord};
use radkit_runtime::model::{TaskId, TaskState};
use radkit_runtime::store::{MemoryStore, Store};
use radkit_runtime::tools::FnTool;
use serde_json::Value;

// ---- tools ----

/// A tool that logs each call in `ledger` and answers its arguments; a call whose tool name is in
/// `hang` never returns (until the step drops it).
fn tool(ledger: &Ledger, name: &'static str, hang: bool) -> FnTool {
    let ledger = ledger.clone();
    FnTool::new(EffectPolicy::Idempotent, move |args, key| {
        let ledger = ledger.clone();
        async move {
            ledger.record_call(name, key.as_str());
            if hang {
                futures::future::pending::<()>().await;
            }
            ledger.apply(name, key.as_str());
            Ok(args)
        }
    })
}

fn effects(ledger: &Ledger, hanging: &[&str]) -> Effects {
    ["a", "b", "after"]
        .into_iter()
        .fold(Effects::new(), |effects, name| {
            effects.tool(name, tool(ledger, name, hanging.contains(&name)))
        })
}

// ---- journal readers ----

/// Every command of the journal: (id, its kind).
fn commands(journal: &[JournalRecord]) -> Vec<(InvocationId, CmdKind)> {
    journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::CommandIssued { id, cmd, .. } => Some((id.clone(), cmd.kind.clone())),
            _ => None,
        })
        .collect()
}

fn receipt_of(journal: &[JournalRecord], id: &InvocationId) -> Option<Receipt> {
    journal.iter().find_map(|r| match &r.entry {
        Entry::ReceiptRecorded { receipt } if &receipt.id == id => Some(receipt.clone()),
        _ => None,
    })
}

fn tool_name(kind: &CmdKind) -> Option<&str> {
    match kind {
        CmdKind::Tool { tool, .. } => Some(tool),
        _ => None,
    }
}

/// The id the journal gave the call of `tool`.
fn id_of(journal: &[JournalRecord], name: &str) -> InvocationId {
    commands(journal)
        .into_iter()
        .find(|(_, kind)| tool_name(kind) == Some(name))
        .unwrap_or_else(|| panic!("no call of `{name}` journaled"))
        .0
}

async fn journal(store: &MemoryStore, task_id: &TaskId) -> Vec<JournalRecord> {
    store.journal(task_id, 0).await.unwrap()
}

fn at(task_id: &TaskId, position: u32) -> InvocationId {
    InvocationId::derive(task_id, 1, position)
}

/// A fault hook that halts the engine once `tool` is journaled.
fn halt_when_journaled(tool: &'static str) -> impl Fn(&Fault) -> bool + Send + Sync + 'static {
    move |f: &Fault| {
        f.boundary == Boundary::CommandJournaled
            && f.what.as_deref() == Some(&format!("tool `{tool}`"))
    }
}

// ---- the skills ----

/// Makes the call of `a`, then the call of `b`, and polls `b` first: `b` is journaled (and
/// performed) first, yet `a` takes position 0, as it was made first. Completes with both answers.
struct Swapped;

fn swapped<'a>(_: &'a Swapped, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let a = ctx.tool("a").call::<_, Value>(1);
        let b = ctx.tool("b").call::<_, Value>(2);
        // `join!` polls its arguments in order: `b` is polled (and journaled) before `a`.
        let (y, x) = futures::join!(b, a);
        ctx.tool("after").call::<_, Value>(0).await?;
        ctx.complete(format!("{} {}", x?, y?), vec![])
    })
}

static SWAPPED_STEPS: &[Step<Swapped>] =
    &[Step::new("swapped", swapped).start().takes_user_message()];

fn swapped_skill() -> StepTable<Swapped> {
    StepTable::new(SkillInfo::new("swapped", "Swapped"), Swapped, SWAPPED_STEPS).unwrap()
}

/// Races the calls of `a` and `b`, then calls `after` with the winner's index; completes with the
/// index and the winner's answer.
struct Racer;

fn racer<'a>(_: &'a Racer, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let (winner, answer) = ctx
            .race([
                ctx.tool("a").call::<_, Value>(1),
                ctx.tool("b").call::<_, Value>(2),
            ])
            .await;
        ctx.tool("after").call::<_, Value>(winner).await?;
        ctx.complete(format!("{winner} {}", answer?), vec![])
    })
}

static RACER_STEPS: &[Step<Racer>] = &[Step::new("racer", racer).start().takes_user_message()];

fn racer_skill() -> StepTable<Racer> {
    StepTable::new(SkillInfo::new("racer", "Racer"), Racer, RACER_STEPS).unwrap()
}

/// Races a question against a durable timer of `timeout_ms`; completes with the winner's index
/// and the answer (or `timeout`).
struct AskOrTimeout {
    timeout_ms: u64,
}

fn ask_or_timeout<'a>(
    s: &'a AskOrTimeout,
    ctx: &'a StepCtx,
    _: StepInput,
) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let timeout = Duration::from_millis(s.timeout_ms);
        let ask = ctx.ask("note", "A note?");
        let timer = ctx.sleep(timeout);
        let (winner, answer) = ctx
            .race([
                async move { Ok::<_, StepError>(ask.await?.joined_texts()) }.boxed(),
                async move {
                    timer.await?;
                    Ok("timeout".to_owned())
                }
                .boxed(),
            ])
            .await;
        ctx.complete(format!("{winner} {}", answer?), vec![])
    })
}

static ASK_STEPS: &[Step<AskOrTimeout>] = &[Step::new("ask_or_timeout", ask_or_timeout)
    .start()
    .takes_user_message()];

fn ask_skill(timeout_ms: u64) -> StepTable<AskOrTimeout> {
    StepTable::new(
        SkillInfo::new("ask_or_timeout", "Ask or time out"),
        AskOrTimeout { timeout_ms },
        ASK_STEPS,
    )
    .unwrap()
}

/// Runs the call of `a` in a spawned task and awaits it there (`awaited`), or spawns it and
/// returns at once.
struct Spawner {
    awaited: bool,
}

fn spawner<'a>(s: &'a Spawner, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let call = ctx.tool("a").call::<_, Value>(1);
        let handle = tokio::spawn(call);
        if s.awaited {
            // The step even swallows the error: the visit fails all the same.
            let _ = handle.await;
        }
        ctx.complete("done", vec![])
    })
}

static SPAWNER_STEPS: &[Step<Spawner>] =
    &[Step::new("spawner", spawner).start().takes_user_message()];

fn spawner_skill(awaited: bool) -> StepTable<Spawner> {
    StepTable::new(
        SkillInfo::new("spawner", "Spawner"),
        Spawner { awaited },
        SPAWNER_STEPS,
    )
    .unwrap()
}

// ---- the promises ----

/// `b` is polled and journaled before `a`, but `a` was made first: `a` takes position 0 and `b`
/// position 1, as a replay that polls them in another order would give them too. The engine dies
/// once `after` is journaled; a fresh engine performs neither `a` nor `b` again (each finds its own
/// receipt) and the task completes with each answer where it belongs.
#[test]
async fn calls_take_their_ids_when_made_not_when_first_polled() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let engine = Engine::builder(store.clone())
        .skill(swapped_skill())
        .effects(effects(&ledger, &[]))
        .fault_hook(halt_when_journaled("after"))
        .check_fold(true)
        .build()
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    wait_halted(&engine).await;
    drop(engine);

    let j = journal(&store, &task_id).await;
    assert_eq!(id_of(&j, "a"), at(&task_id, 0), "`a` was made first");
    assert_eq!(id_of(&j, "b"), at(&task_id, 1), "`b` was made second");
    let order: Vec<_> = commands(&j)
        .into_iter()
        .filter_map(|(_, k)| tool_name(&k).map(str::to_owned))
        .collect();
    assert_eq!(
        order,
        ["b", "a", "after"],
        "`b` was polled, so journaled, first"
    );

    let engine = Engine::builder(store.clone())
        .skill(swapped_skill())
        .effects(effects(&ledger, &[]))
        .check_fold(true)
        .start()
        .await
        .unwrap();
    let task = settled(&engine, &task_id).await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    assert_eq!(
        status_text(&task),
        "1 2",
        "each call got its own receipt back"
    );
    assert_eq!(ledger.calls_of("a").len(), 1, "`a` ran once");
    assert_eq!(ledger.calls_of("b").len(), 1, "`b` ran once");
    assert!(engine.fold_divergences().is_empty());
}

/// `b` answers at once, `a` never: `b`, the second call, wins. The race is journaled at the
/// position after its calls with `b` as its winner, and `a`'s command gets an `abandoned` receipt
/// in the same append. The engine dies once `after` is journaled. A fresh engine, where now `b`
/// would never answer, still finds `b` the winner: it performs neither again (a race decided
/// afresh would take the first call that returns, `a` with its `abandoned` receipt), reissues
/// `after` only, and completes with `b`'s answer.
#[test]
async fn a_race_journals_its_winner_and_a_replay_after_a_crash_keeps_it() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let engine = Engine::builder(store.clone())
        .skill(racer_skill())
        .effects(effects(&ledger, &["a"]))
        .fault_hook(halt_when_journaled("after"))
        .check_fold(true)
        .build()
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    wait_halted(&engine).await;
    drop(engine);

    let j = journal(&store, &task_id).await;
    let race = at(&task_id, 2);
    assert!(
        commands(&j)
            .iter()
            .any(|(id, k)| id == &race && matches!(k, CmdKind::Race { calls: 2 })),
        "the race takes the position after its calls: {:?}",
        commands(&j)
    );
    let won = receipt_of(&j, &race).expect("the race's winner is journaled");
    assert_eq!(won.outcome, Ok(serde_json::json!({ "winner": 1 })));
    let lost = receipt_of(&j, &id_of(&j, "a")).expect("the loser is receipted");
    let error = lost.outcome.expect_err("the loser's receipt is an error");
    assert!(error.message.contains("abandoned"), "{error:?}");
    assert_eq!(ledger.calls_of("b").len(), 1);
    assert_eq!(
        ledger.calls_of("a").len(),
        1,
        "`a` started, then was dropped"
    );

    // The other way round now: `b` would never answer.
    let engine = Engine::builder(store.clone())
        .skill(racer_skill())
        .effects(effects(&ledger, &["b"]))
        .check_fold(true)
        .start()
        .await
        .unwrap();
    let task = settled(&engine, &task_id).await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    assert_eq!(
        status_text(&task),
        "1 2",
        "the journaled winner, with its receipt"
    );
    assert_eq!(ledger.calls_of("b").len(), 1, "`b` is not performed again");
    assert_eq!(
        ledger.calls_of("a").len(),
        1,
        "the abandoned `a` is never reissued"
    );
    assert_eq!(
        ledger.calls_of("after").len(),
        1,
        "`after` had no receipt: issued again, once"
    );
    assert!(engine.fold_divergences().is_empty());
}

/// A question raced against a short durable timer, never answered: both wait, so the step
/// suspends (the task asks); the timer fires and wins, the question is abandoned, and the task
/// completes.
#[test]
async fn a_race_of_calls_that_all_wait_suspends_until_one_of_them_wins() {
    let store = MemoryStore::new();
    let engine = Engine::builder(store.clone())
        .skill(ask_skill(50))
        .check_fold(true)
        .start()
        .await
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = ended(&engine, &task_id).await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    assert_eq!(status_text(&task), "1 timeout");
    let j = journal(&store, &task_id).await;
    let lost = receipt_of(&j, &at(&task_id, 0)).expect("the question is receipted");
    assert!(
        lost.outcome
            .expect_err("abandoned")
            .message
            .contains("abandoned"),
        "the question lost the race"
    );
    assert!(engine.fold_divergences().is_empty());
}

/// The same race with a timer of an hour, answered: the answer wins, the timer is abandoned with
/// the question's reply (the task does not wake for it), and the task completes with the answer.
#[test]
async fn a_race_won_by_an_answer_abandons_the_timer() {
    let store = MemoryStore::new();
    let engine = Engine::builder(store.clone())
        .skill(ask_skill(3_600_000))
        .check_fold(true)
        .start()
        .await
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = settled(&engine, &task_id).await;
    assert_eq!(task.status.state, TaskState::InputRequired);
    engine
        .send(Request::operator(reply(&task_id, "hello")))
        .await
        .unwrap();
    let task = settled(&engine, &task_id).await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    assert_eq!(status_text(&task), "0 hello");
    let j = journal(&store, &task_id).await;
    let timer = receipt_of(&j, &at(&task_id, 1)).expect("the timer is receipted");
    assert!(timer
        .outcome
        .expect_err("abandoned")
        .message
        .contains("abandoned"));
    assert_eq!(
        receipt_of(&j, &at(&task_id, 2)).map(|r| r.outcome),
        Some(Ok(serde_json::json!({ "winner": 0 })))
    );
    assert!(engine.fold_divergences().is_empty());
}

/// A ctx call awaited in a spawned task fails the step, which may not swallow the error: the task
/// fails saying why, and the tool never runs. A fresh engine over the same journal agrees.
#[test(multi_thread)]
async fn a_ctx_call_in_a_spawned_task_fails_the_step_and_runs_no_effect() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let engine = Engine::builder(store.clone())
        .skill(spawner_skill(true))
        .effects(effects(&ledger, &[]))
        .check_fold(true)
        .start()
        .await
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = settled(&engine, &task_id).await;
    assert_eq!(task.status.state, TaskState::Failed);
    let why = status_text(&task);
    assert!(why.contains("outside its own future"), "{why}");
    assert!(
        why.contains("tool `a`"),
        "the message names the call: {why}"
    );
    assert_eq!(ledger.calls_total(), 0, "no effect ran");
    let j = journal(&store, &task_id).await;
    assert!(
        commands(&j).iter().all(|(_, k)| tool_name(k).is_none()),
        "nothing was journaled for it"
    );
    drop(engine);
    let engine = Engine::builder(store.clone())
        .skill(spawner_skill(true))
        .effects(effects(&ledger, &[]))
        .start()
        .await
        .unwrap();
    let task = settled(&engine, &task_id).await;
    assert_eq!(task.status.state, TaskState::Failed, "it stays failed");
    assert_eq!(ledger.calls_total(), 0);
}

/// A step that spawns a ctx call and returns without awaiting it fails: a call alive after its
/// step returned has no step to journal its outcome for. On one thread the spawned task has not
/// even run when the step returns.
#[test]
async fn a_step_that_returns_with_a_call_still_pending_fails_saying_why() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let engine = Engine::builder(store.clone())
        .skill(spawner_skill(false))
        .effects(effects(&ledger, &[]))
        .check_fold(true)
        .start()
        .await
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = settled(&engine, &task_id).await;
    assert_eq!(
        task.status.state,
        TaskState::Failed,
        "{}",
        status_text(&task)
    );
    let why = status_text(&task);
    assert!(why.contains("still pending"), "{why}");
    // The spawned call, whenever it runs, finds its visit over and performs nothing.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(ledger.calls_total(), 0, "no effect ran");
}

/// Counts how often a future is polled, to show `ctx.all` made its calls before it was polled.
#[test]
async fn all_makes_its_calls_when_called() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    static MADE: AtomicU32 = AtomicU32::new(0);
    struct Early;
    fn early<'a>(_: &'a Early, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
        Box::pin(async move {
            let batch = ctx.all((1..=2).map(|i| ctx.tool("a").call::<_, Value>(i)));
            MADE.store(ctx.positions_taken(), Ordering::SeqCst);
            let later = ctx.tool("b").call::<_, Value>(3);
            let (later, batch) = futures::join!(later, batch);
            later?;
            for r in batch {
                r?;
            }
            ctx.complete("ok", vec![])
        })
    }
    static STEPS: &[Step<Early>] = &[Step::new("early", early).start().takes_user_message()];
    let skill = StepTable::new(SkillInfo::new("early", "Early"), Early, STEPS).unwrap();
    let engine = Engine::builder(store.clone())
        .skill(skill)
        .effects(effects(&ledger, &[]))
        .start()
        .await
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = settled(&engine, &task_id).await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    assert_eq!(
        MADE.load(Ordering::SeqCst),
        2,
        "the batch took its positions when made"
    );
    let j = journal(&store, &task_id).await;
    assert_eq!(
        id_of(&j, "b"),
        at(&task_id, 2),
        "`b`, made after the batch, comes after it"
    );
}

/// A child skill that sleeps for an hour.
struct Sleeper;

fn sleeper<'a>(_: &'a Sleeper, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        ctx.sleep(Duration::from_secs(3600)).await?;
        ctx.complete("woke", vec![])
    })
}

static SLEEPER_STEPS: &[Step<Sleeper>] =
    &[Step::new("sleeper", sleeper).start().takes_user_message()];

/// Races a call of the `sleeper` child skill against the `a` tool.
struct CallRacer;

fn call_racer<'a>(_: &'a CallRacer, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let (winner, answer) = ctx
            .race([
                ctx.skill("sleeper")
                    .send("nap")
                    .map(|r| r.map(|reply| reply.text()).map_err(StepError::from))
                    .boxed(),
                ctx.tool("gate")
                    .call::<_, Value>(1)
                    .map(|r| r.map(|v| v.to_string()))
                    .boxed(),
            ])
            .await;
        ctx.complete(format!("{winner} {}", answer?), vec![])
    })
}

static CALL_RACER_STEPS: &[Step<CallRacer>] = &[Step::new("call_racer", call_racer)
    .start()
    .takes_user_message()];

/// A child skill's call loses a race to a tool (let go once the child's task is journaled): the
/// call is abandoned, and its child task, which would otherwise sleep for an hour on nobody's
/// behalf, is canceled.
#[test]
async fn a_child_call_that_loses_a_race_has_its_child_canceled() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    let gate = {
        let release = release.clone();
        FnTool::new(EffectPolicy::Idempotent, move |args, _| {
            let release = release.clone();
            async move {
                release.notified().await;
                Ok(args)
            }
        })
    };
    let engine = Engine::builder(store.clone())
        .skill(
            StepTable::new(
                SkillInfo::new("call_racer", "Call racer"),
                CallRacer,
                CALL_RACER_STEPS,
            )
            .unwrap(),
        )
        .skill(
            StepTable::new(SkillInfo::new("sleeper", "Sleeper"), Sleeper, SLEEPER_STEPS).unwrap(),
        )
        .effects(effects(&ledger, &[]).tool("gate", gate))
        .start()
        .await
        .unwrap();
    let task_id = engine
        .send(Request::operator(user("go")).skill("call_racer"))
        .await
        .unwrap();
    let call = at(&task_id, 0);
    let child = common::within(
        common::PATIENCE,
        "the child's task to be journaled",
        async {
            loop {
                let found =
                    journal(&store, &task_id)
                        .await
                        .into_iter()
                        .find_map(|r| match r.entry {
                            Entry::CallStarted { id, task_id, .. } if id == call => Some(task_id),
                            _ => None,
                        });
                if let Some(child) = found {
                    return TaskId::from(child);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        },
    )
    .await;
    release.notify_one();
    let task = settled(&engine, &task_id).await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    assert_eq!(status_text(&task), "1 1", "the tool won");
    let j = journal(&store, &task_id).await;
    let lost = receipt_of(&j, &call).expect("the call is receipted");
    assert!(lost
        .outcome
        .expect_err("abandoned")
        .message
        .contains("abandoned"));
    let state = ended(&engine, &child).await.status.state;
    assert_eq!(state, TaskState::Canceled);
}

/// Races a call made inside an `async` block (so while the race runs) against a made one.
struct LateRacer;

fn late_racer<'a>(_: &'a LateRacer, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let late = ctx.clone();
        let (_, answer) = ctx
            .race([
                async move { late.tool("a").call::<_, Value>(1).await }.boxed(),
                ctx.tool("b").call::<_, Value>(2).boxed(),
            ])
            .await;
        // Swallowed: the visit fails all the same.
        let _ = answer;
        ctx.complete("done", vec![])
    })
}

static LATE_RACER_STEPS: &[Step<LateRacer>] = &[Step::new("late_racer", late_racer)
    .start()
    .takes_user_message()];

/// A call made while its race runs would take, live, a position a replay (which runs only the
/// winner) never takes, shifting every later id: it fails the step, saying what to write, and
/// runs no effect of its own.
#[test]
async fn a_call_made_inside_a_race_fails_the_step_saying_to_make_it_before() {
    let store = MemoryStore::new();
    let ledger = Ledger::default();
    let engine = Engine::builder(store.clone())
        .skill(
            StepTable::new(
                SkillInfo::new("late_racer", "Late racer"),
                LateRacer,
                LATE_RACER_STEPS,
            )
            .unwrap(),
        )
        .effects(effects(&ledger, &[]))
        .start()
        .await
        .unwrap();
    let task_id = engine.send(Request::operator(user("go"))).await.unwrap();
    let task = settled(&engine, &task_id).await;
    assert_eq!(
        task.status.state,
        TaskState::Failed,
        "{}",
        status_text(&task)
    );
    let why = status_text(&task);
    assert!(why.contains("while `ctx.race` ran"), "{why}");
    assert!(why.contains("before the race"), "{why}");
    assert!(
        ledger.calls_of("a").is_empty(),
        "the late call ran no effect"
    );
}
