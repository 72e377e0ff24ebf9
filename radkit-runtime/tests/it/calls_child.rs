//! Child skills (`ctx.skill(id)`): a step starts another skill of its engine as a child task with
//! its own journal and id, waits for it without a step in memory, gets its reply as the call's
//! receipt, answers its questions, handles its failure as a typed error, and cancels it when the
//! parent is canceled; a crash between the child's creation and the journaled binding never makes
//! a second child.

use crate::support::common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{ended, settled, status_text, user, wait_halted, within, PATIENCE};
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::{Boundary, Caller, Request};
use radkit_runtime::engine::{Engine, EngineBuilder};
use radkit_runtime::flow::step_table::{await_input, Step, StepInput, StepTable};
use radkit_runtime::flow::{AgentError, CmdKind, EffectPolicy, SkillInfo, StepCtx, StepResult};
use radkit_runtime::journal::Entry;
use radkit_runtime::model::{TaskId, TaskState};
use radkit_runtime::store::{MemoryStore, Store, TaskQuery};
use radkit_runtime::tools::FnTool;

struct Parent;

fn parent_start<'a>(
    _: &'a Parent,
    ctx: &'a StepCtx,
    input: StepInput,
) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let text = input.message().joined_texts();
        match text.as_str() {
            "ask" => {
                let mut answer = ctx.skill("child").send("ask").await?;
                if answer.needs_input() {
                    answer = ctx.skill("child").reply(&answer, "blue").await?;
                }
                ctx.complete(format!("parent got: {}", answer.text()), vec![])
            }
            "fail" => match ctx.skill("child").send("fail").await {
                Err(AgentError::Failed { reply, .. }) => {
                    ctx.complete(format!("handled: {}", reply.text()), vec![])
                }
                other => ctx.fail(format!("expected a typed failure, got {other:?}")),
            },
            "unknown" => {
                ctx.skill("nobody").send("hi").await?;
                ctx.complete("unreachable", vec![])
            }
            // A child that sleeps an hour, given 3 s; with `-stream`, followed as it works (the
            // step stays in memory meanwhile).
            "impatient" | "impatient-stream" => {
                let mut call = ctx.skill("child").timeout(Duration::from_secs(3));
                if text.ends_with("-stream") {
                    call = call.stream();
                }
                match call.send("sleep").await {
                    Err(e) => ctx.complete(format!("gave up: {e}"), vec![]),
                    Ok(reply) => ctx.fail(format!("expected a timeout, got {reply:?}")),
                }
            }
            _ => {
                let answer = ctx.skill("child").send(text).await?;
                ctx.complete(format!("parent got: {}", answer.text()), vec![])
            }
        }
    })
}

static PARENT: &[Step<Parent>] = &[Step::new("start", parent_start)
    .start()
    .takes_user_message()];

struct Child;

fn child_start<'a>(_: &'a Child, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let text = input.message().joined_texts();
        match text.as_str() {
            "ask" => await_input("color", "Which color?", ()),
            "fail" => ctx.fail("no way"),
            "sleep" => {
                ctx.sleep(Duration::from_secs(3600)).await?;
                ctx.complete("slept", vec![])
            }
            "work" => {
                let _: serde_json::Value = ctx.tool("slow").call(()).await?;
                ctx.complete("worked", vec![])
            }
            _ => ctx.complete(format!("child saw {text}"), vec![]),
        }
    })
}

fn child_answered<'a>(
    _: &'a Child,
    ctx: &'a StepCtx,
    input: StepInput,
) -> BoxFuture<'a, StepResult> {
    Box::pin(
        async move { ctx.complete(format!("color {}", input.message().joined_texts()), vec![]) },
    )
}

static CHILD: &[Step<Child>] = &[
    Step::new("start", child_start).start().takes_user_message(),
    Step::new("answered", child_answered).resume_from("start"),
];

/// The slow tool runs until the test lets it go; it counts its calls.
struct Gate {
    release: Arc<tokio::sync::Semaphore>,
    calls: Arc<AtomicU32>,
}

fn engine(store: impl Store, gate: &Gate) -> EngineBuilder {
    let (release, calls) = (gate.release.clone(), gate.calls.clone());
    let slow = FnTool::new(EffectPolicy::Idempotent, move |_, _| {
        let (release, calls) = (release.clone(), calls.clone());
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            let _permit = release.acquire().await;
            Ok(serde_json::json!("done"))
        }
    });
    Engine::builder(store)
        .without_registered_skills()
        .skill(StepTable::new(SkillInfo::new("parent", "Parent"), Parent, PARENT).unwrap())
        .skill(StepTable::new(SkillInfo::new("child", "Child"), Child, CHILD).unwrap())
        .default_skill("parent")
        .effects(Effects::new().tool("slow", slow))
        .check_fold(true)
}

fn gate() -> Gate {
    Gate {
        release: Arc::new(tokio::sync::Semaphore::new(0)),
        calls: Arc::new(AtomicU32::new(0)),
    }
}

/// The child tasks in the store (the parent's own id excluded).
async fn children(store: &MemoryStore) -> Vec<TaskId> {
    store
        .list(TaskQuery::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.skill_id == "child")
        .map(|t| TaskId::from(t.id))
        .collect()
}

/// Wait until the parent bound a call to its child.
async fn until_bound(store: &MemoryStore, parent: &TaskId) {
    within(PATIENCE, "the parent to bind its child", async {
        while bound(store, parent).await.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

/// The callee task ids the parent's journal bound its calls to.
async fn bound(store: &MemoryStore, parent: &TaskId) -> Vec<String> {
    store
        .journal(parent, 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| match r.entry {
            Entry::CallStarted { task_id, .. } => Some(task_id),
            _ => None,
        })
        .collect()
}

#[test(multi_thread)]
async fn a_child_skills_reply_is_the_parents_receipt_and_the_child_is_a_task_of_its_own() {
    let store = MemoryStore::new();
    let engine = engine(store.clone(), &gate()).start().await.unwrap();
    let id = engine.send(Request::operator(user("hello"))).await.unwrap();
    let done = settled(&engine, &id).await;
    assert_eq!(done.status.state, TaskState::Completed, "{done:?}");
    assert_eq!(status_text(&done), "parent got: child saw hello");
    let kids = children(&store).await;
    assert_eq!(kids.len(), 1);
    assert_eq!(bound(&store, &id).await, vec![kids[0].to_string()]);
    let child = engine
        .task(&Caller::Operator, &kids[0], None)
        .await
        .unwrap();
    assert_eq!(child.status.state, TaskState::Completed);
    assert_eq!(
        child.context_id, done.context_id,
        "the child shares the parent's context"
    );
    assert!(engine.fold_divergences().is_empty());
}

#[test(multi_thread)]
async fn a_child_that_asks_for_input_surfaces_to_the_parent_which_answers_it() {
    let store = MemoryStore::new();
    let engine = engine(store.clone(), &gate()).start().await.unwrap();
    let id = engine.send(Request::operator(user("ask"))).await.unwrap();
    let done = settled(&engine, &id).await;
    assert_eq!(status_text(&done), "parent got: color blue", "{done:?}");
    let kids = children(&store).await;
    assert_eq!(kids.len(), 1, "the answer went to the same child");
    assert_eq!(bound(&store, &id).await.len(), 2, "the send and the reply");
}

#[test(multi_thread)]
async fn a_failed_child_is_a_typed_error_the_parent_handles() {
    let engine = engine(MemoryStore::new(), &gate()).start().await.unwrap();
    let id = engine.send(Request::operator(user("fail"))).await.unwrap();
    let done = settled(&engine, &id).await;
    assert_eq!(status_text(&done), "handled: no way", "{done:?}");
    assert_eq!(done.status.state, TaskState::Completed);
}

#[test(multi_thread)]
async fn calling_a_skill_the_engine_does_not_serve_fails_the_step_naming_it() {
    let engine = engine(MemoryStore::new(), &gate()).start().await.unwrap();
    let id = engine
        .send(Request::operator(user("unknown")))
        .await
        .unwrap();
    let done = settled(&engine, &id).await;
    assert_eq!(done.status.state, TaskState::Failed);
    let text = status_text(&done);
    assert!(
        text.contains("no skill `nobody`") && text.contains("skills are parent, child"),
        "{text}"
    );
}

#[test(multi_thread)]
async fn the_parent_waits_for_a_working_child_with_no_step_in_memory_and_wakes_when_it_ends() {
    let store = MemoryStore::new();
    let gate = gate();
    let engine = engine(store.clone(), &gate).start().await.unwrap();
    let id = engine.send(Request::operator(user("work"))).await.unwrap();
    until_bound(&store, &id).await;
    // The child runs its tool; the parent is a row: only the child is in hand.
    within(PATIENCE, "the parent's run to close", async {
        while engine.tasks_in_hand() != 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert_eq!(
        engine.state(&Caller::Operator, &id).await.unwrap(),
        TaskState::Working
    );
    gate.release.add_permits(1);
    let done = settled(&engine, &id).await;
    assert_eq!(status_text(&done), "parent got: worked");
    within(PATIENCE, "both runs to close", async {
        while engine.tasks_in_hand() != 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

#[test(multi_thread)]
async fn canceling_the_parent_cancels_its_child() {
    let store = MemoryStore::new();
    let engine = engine(store.clone(), &gate()).start().await.unwrap();
    let id = engine.send(Request::operator(user("sleep"))).await.unwrap();
    until_bound(&store, &id).await;
    let parent = engine.cancel(&Caller::Operator, &id).await.unwrap();
    assert_eq!(parent.status.state, TaskState::Canceled);
    let kid = children(&store).await.remove(0);
    let child = settled(&engine, &kid).await;
    assert_eq!(child.status.state, TaskState::Canceled, "{child:?}");
}

/// Send `text` to a parent on an engine that dies right after the parent's call created its child,
/// before the parent journaled the child's id; returns the parent.
async fn crash_once_the_child_exists(store: &MemoryStore, text: &str) -> TaskId {
    let crashed = engine(store.clone(), &gate())
        .fault_hook(|f: &radkit_runtime::engine::Fault| {
            f.boundary == Boundary::EffectReturned && f.what.as_deref() == Some("skill `child`")
        })
        .start()
        .await
        .unwrap();
    let id = crashed.send(Request::operator(user(text))).await.unwrap();
    wait_halted(&crashed).await;
    assert!(bound(store, &id).await.is_empty(), "the call is not bound");
    assert_eq!(children(store).await.len(), 1, "the child exists");
    crashed.shutdown().await;
    id
}

/// A crash after the child was created and before the parent journaled it, then a cancel of the
/// parent on the next engine (before anything resumed the call): the child, which the parent's
/// journal does not name, is canceled too (its id is derived from the call).
#[test(multi_thread)]
async fn canceling_a_parent_whose_call_was_cut_off_before_its_binding_cancels_the_child() {
    let store = MemoryStore::new();
    let id = crash_once_the_child_exists(&store, "sleep").await;
    let kid = children(&store).await.remove(0);

    // Built without recovery: nothing resumes the parent's call before the cancel.
    let engine = engine(store.clone(), &gate()).build().unwrap();
    let parent = within(
        PATIENCE,
        "the parent's cancel",
        engine.cancel(&Caller::Operator, &id),
    )
    .await
    .unwrap();
    assert_eq!(parent.status.state, TaskState::Canceled);
    let child = within(
        PATIENCE,
        "the child's end",
        engine.wait_settled(&Caller::Operator, &kid),
    )
    .await
    .unwrap();
    assert_eq!(child.status.state, TaskState::Canceled, "{child:?}");
}

/// A crash after the child was created and before the parent journaled it: the restarted parent
/// sends the same message id, which finds the same child.
#[test(multi_thread)]
async fn crash_after_the_child_was_created_before_the_binding_was_journaled_makes_no_second_child()
{
    let store = MemoryStore::new();
    let id = crash_once_the_child_exists(&store, "hello").await;

    let engine = engine(store.clone(), &gate()).start().await.unwrap();
    let done = settled(&engine, &id).await;
    assert_eq!(status_text(&done), "parent got: child saw hello");
    let kids = children(&store).await;
    assert_eq!(kids.len(), 1, "exactly one child: {kids:?}");
    assert_eq!(bound(&store, &id).await, vec![kids[0].to_string()]);
    let journaled: Vec<CmdKind> = store
        .journal(&id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| match r.entry {
            Entry::CommandIssued { cmd, .. } => Some(cmd.kind),
            _ => None,
        })
        .collect();
    assert_eq!(
        journaled.len(),
        1,
        "one call command, resumed: {journaled:?}"
    );
}

/// A crash while the parent waits: the restarted engine finds the call through the row's wake
/// time and completes it from the child's journaled id.
#[test(multi_thread)]
async fn crash_while_waiting_on_a_child_resumes_the_same_child_after_a_restart() {
    let store = MemoryStore::new();
    let gate1 = gate();
    let first = engine(store.clone(), &gate1).start().await.unwrap();
    let id = first.send(Request::operator(user("work"))).await.unwrap();
    within(PATIENCE, "the parent to bind its child", async {
        while bound(&store, &id).await.is_empty() || gate1.calls.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    first.halt();
    first.shutdown().await;

    let gate2 = gate();
    gate2.release.add_permits(10);
    let engine = engine(store.clone(), &gate2).start().await.unwrap();
    let done = ended(&engine, &id).await;
    assert_eq!(status_text(&done), "parent got: worked");
    assert_eq!(children(&store).await.len(), 1);
}

/// The journal entries of `id` that say when the parent's calls were rechecked.
async fn rechecks(store: &MemoryStore, id: &TaskId) -> usize {
    store
        .journal(id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| matches!(r.entry, Entry::TimerSet { .. }))
        .count()
}

/// The parent's engine dies while the parent waits on its working child, with nothing watching the
/// child any more; the next engine finishes the child. The parent's recheck lies ten minutes
/// ahead, far beyond the test's patience: only recovery asking the child at once (and watching it
/// from there) completes the parent in time. Before, recovery armed the row's wake time (the
/// recheck) like a sleep's, and the parent waited for it.
#[test(multi_thread)]
async fn a_restarted_engine_asks_a_waiting_calls_child_at_once_not_at_its_recheck() {
    let store = MemoryStore::new();
    let recheck = Duration::from_secs(600);
    let crashed = engine(store.clone(), &gate())
        .call_recheck(recheck)
        .fault_hook(|f: &radkit_runtime::engine::Fault| {
            f.boundary == Boundary::AwaitingInput && f.what.as_deref() == Some("skill `child`")
        })
        .start()
        .await
        .unwrap();
    let id = crashed.send(Request::operator(user("work"))).await.unwrap();
    wait_halted(&crashed).await;
    crashed.shutdown().await;
    assert_eq!(bound(&store, &id).await.len(), 1, "the call is bound");
    assert_eq!(rechecks(&store, &id).await, 1, "its recheck is journaled");

    let gate = gate();
    gate.release.add_permits(10);
    let engine = engine(store.clone(), &gate)
        .call_recheck(recheck)
        .start()
        .await
        .unwrap();
    let done = ended(&engine, &id).await;
    assert_eq!(status_text(&done), "parent got: worked", "{done:?}");
    assert_eq!(
        rechecks(&store, &id).await,
        1,
        "no recheck fired: recovery asked the child"
    );
    assert_eq!(children(&store).await.len(), 1);
}

/// The deadline journaled with the parent's call (`deadline_ms`, and the `timeout_ms` it came
/// from), the `timer_set` times of its rechecks, and the `at_ms` of its receipt with its error.
async fn call_limits(
    store: &MemoryStore,
    id: &TaskId,
) -> (Option<u64>, i64, Vec<i64>, i64, String) {
    let journal = store.journal(id, 0).await.unwrap();
    let (call, timeout, deadline) = journal
        .iter()
        .find_map(|r| match &r.entry {
            Entry::CommandIssued {
                id,
                cmd:
                    radkit_runtime::flow::Cmd {
                        kind:
                            CmdKind::Skill {
                                timeout_ms,
                                deadline_ms,
                                ..
                            },
                        ..
                    },
                ..
            } => Some((id.clone(), *timeout_ms, *deadline_ms)),
            _ => None,
        })
        .expect("the call is journaled");
    let timers = journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::TimerSet { id, fire_at_ms } if *id == call => Some(*fire_at_ms),
            _ => None,
        })
        .collect();
    let (at, error) = journal
        .iter()
        .find_map(|r| match &r.entry {
            Entry::ReceiptRecorded { receipt } if receipt.id == call => Some((
                r.at_ms,
                receipt.outcome.clone().expect_err("a timeout").message,
            )),
            _ => None,
        })
        .expect("the call's receipt");
    (timeout, deadline.expect("a deadline"), timers, at, error)
}

/// Wait until the child task ended canceled.
async fn child_canceled(engine: &Engine, store: &MemoryStore) {
    let kids = children(store).await;
    assert_eq!(kids.len(), 1, "one child: {kids:?}");
    let child = ended(engine, &kids[0]).await;
    assert_eq!(child.status.state, TaskState::Canceled, "{child:?}");
}

/// Sends `message` (`impatient`, or `impatient-stream`) to a parent whose call gives a child that
/// sleeps an hour 3 s: at the deadline the parent's step gets an error that names the child and
/// the timeout, the child is canceled, and the receipt comes at the deadline, with no recheck set
/// beyond it.
async fn times_out_at_the_deadline(message: &str) {
    let store = MemoryStore::new();
    let engine = engine(store.clone(), &gate()).start().await.unwrap();
    let id = engine.send(Request::operator(user(message))).await.unwrap();
    let done = ended(&engine, &id).await;
    let text = status_text(&done);
    assert!(
        text.starts_with("gave up: skill `child` failed: skill `child` did not finish within the call's timeout of 3s; its task ")
            && text.ends_with(" is canceled"),
        "{text}"
    );
    child_canceled(&engine, &store).await;
    let (timeout, deadline, timers, at, error) = call_limits(&store, &id).await;
    assert_eq!(timeout, Some(3_000));
    assert!(
        at >= deadline,
        "the receipt comes at the deadline, not before"
    );
    assert!(text.ends_with(&error), "{error}");
    assert!(
        timers.iter().all(|t| *t <= deadline),
        "no recheck beyond the deadline: {timers:?} against {deadline}"
    );
    assert!(engine.fold_divergences().is_empty());
}

/// A call with `.timeout(3 s)` waiting with no step in memory times out at its deadline.
#[test(multi_thread)]
async fn a_call_past_its_deadline_fails_the_step_and_cancels_the_callee() {
    times_out_at_the_deadline("impatient").await;
}

/// The same with `.stream()`: the call follows the child in memory, and still ends at its
/// deadline.
#[test(multi_thread)]
async fn a_streaming_call_past_its_deadline_fails_the_step_and_cancels_the_callee() {
    times_out_at_the_deadline("impatient-stream").await;
}

/// The parent's engine dies while its call waits, with a recheck ten minutes away (capped at the
/// call's deadline when it was journaled); the next engine, started after that deadline, keeps
/// the deadline journaled with the call (it is not made again: no new recheck is journaled) and
/// times the call out.
#[test(multi_thread)]
async fn a_calls_deadline_is_journaled_and_survives_a_restart_of_the_caller() {
    let store = MemoryStore::new();
    let recheck = Duration::from_secs(600);
    let crashed = engine(store.clone(), &gate())
        .call_recheck(recheck)
        .fault_hook(|f: &radkit_runtime::engine::Fault| {
            f.boundary == Boundary::AwaitingInput && f.what.as_deref() == Some("skill `child`")
        })
        .start()
        .await
        .unwrap();
    let id = crashed
        .send(Request::operator(user("impatient")))
        .await
        .unwrap();
    wait_halted(&crashed).await;
    crashed.shutdown().await;
    // The next engine starts once the deadline journaled with the call has passed: a deadline
    // made again now would still be ahead (and the call would journal a recheck for it).
    let deadline = store
        .journal(&id, 0)
        .await
        .unwrap()
        .into_iter()
        .find_map(|r| match r.entry {
            Entry::CommandIssued {
                cmd:
                    radkit_runtime::flow::Cmd {
                        kind: CmdKind::Skill { deadline_ms, .. },
                        ..
                    },
                ..
            } => deadline_ms,
            _ => None,
        })
        .expect("the call's deadline is journaled");
    within(PATIENCE, "the journaled deadline to pass", async {
        while radkit_runtime::journal::now_ms() <= deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;

    // A later default changes nothing for a call already journaled.
    let engine = engine(store.clone(), &gate())
        .call_recheck(recheck)
        .call_timeout(Duration::from_secs(3600))
        .start()
        .await
        .unwrap();
    let done = ended(&engine, &id).await;
    assert!(
        status_text(&done).contains("did not finish within the call's timeout of 3s"),
        "{done:?}"
    );
    child_canceled(&engine, &store).await;
    let (_, deadline, timers, at, _) = call_limits(&store, &id).await;
    assert_eq!(
        timers,
        vec![deadline],
        "the one recheck, capped at the deadline"
    );
    assert!(at >= deadline);
}

/// A call whose step sets no timeout gets the engine's (`EngineBuilder::call_timeout`), journaled
/// with it; at its deadline the parent's step fails with the error.
#[test(multi_thread)]
async fn a_call_without_a_timeout_of_its_own_gets_the_engines_default() {
    let store = MemoryStore::new();
    let engine = engine(store.clone(), &gate())
        .call_timeout(Duration::from_secs(3))
        .start()
        .await
        .unwrap();
    let id = engine.send(Request::operator(user("sleep"))).await.unwrap();
    let done = ended(&engine, &id).await;
    assert_eq!(done.status.state, TaskState::Failed, "{done:?}");
    assert!(
        status_text(&done).contains("skill `child` did not finish within the call's timeout of 3s"),
        "{done:?}"
    );
    child_canceled(&engine, &store).await;
    let (timeout, ..) = call_limits(&store, &id).await;
    assert_eq!(
        timeout,
        Some(3_000),
        "the default is journaled with the call"
    );
}

/// The reducer form issues a call from a transition; its reply comes back as the command's result.
struct Reducer;

#[async_trait::async_trait]
impl radkit_runtime::flow::FlowSkill for Reducer {
    type State = u32;
    fn info(&self) -> SkillInfo {
        SkillInfo::new("reducer", "Reducer")
    }
    fn initial_state(&self) -> u32 {
        0
    }
    async fn on_event(
        &self,
        state: u32,
        event: radkit_runtime::flow::Event,
        _: &StepCtx,
    ) -> Result<radkit_runtime::flow::Transition<u32>, radkit_runtime::flow::StepError> {
        use radkit_runtime::flow::{Cmd, Event, Transition};
        match event {
            Event::UserMessage { message } if state == 0 => Ok(Transition::to(1).cmd(Cmd::skill(
                "child",
                radkit_runtime::model::Message::user_text(message.joined_texts()),
            ))),
            Event::CommandResult { outcome, .. } => {
                let reply: radkit_runtime::flow::AgentReply = serde_json::from_value(
                    outcome.map_err(|e| radkit_runtime::flow::StepError::Failed(e.message))?,
                )?;
                Ok(Transition::complete(format!(
                    "reducer got: {}",
                    reply.text()
                )))
            }
            _ => Ok(Transition::ignore()),
        }
    }
}

#[test(multi_thread)]
async fn a_reducer_calls_a_child_from_a_transition_and_gets_its_reply_as_the_result() {
    let store = MemoryStore::new();
    let gate = gate();
    gate.release.add_permits(1);
    let engine = engine(store.clone(), &gate)
        .skill(Reducer)
        .start()
        .await
        .unwrap();
    let id = engine
        .send(Request::operator(user("work")).skill("reducer"))
        .await
        .unwrap();
    let done = ended(&engine, &id).await;
    assert_eq!(status_text(&done), "reducer got: worked", "{done:?}");
    assert_eq!(bound(&store, &id).await.len(), 1);
    assert!(engine.fold_divergences().is_empty());
}

#[test(multi_thread)]
async fn a_child_runs_in_its_parents_permission_mode() {
    let store = MemoryStore::new();
    let engine = engine(store.clone(), &gate()).start().await.unwrap();
    let id = engine
        .send(Request::operator(user("hello")).mode(radkit_runtime::flow::PermissionMode::Plan))
        .await
        .unwrap();
    settled(&engine, &id).await;
    let kid = children(&store).await.remove(0);
    let modes: Vec<_> = store
        .journal(&kid, 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| match r.entry {
            Entry::TaskCreated {
                permission_mode, ..
            } => Some(permission_mode),
            _ => None,
        })
        .collect();
    assert_eq!(modes, vec![radkit_runtime::flow::PermissionMode::Plan]);
}

/// A child task belongs to its parent's principal: it is created, read and answered as that
/// principal, so the principal sees it like its own tasks, another principal does not, and the child
/// never runs with the operator's rights.
#[test(multi_thread)]
async fn a_child_runs_under_its_parents_principal() {
    let store = MemoryStore::new();
    let engine = engine(store.clone(), &gate()).start().await.unwrap();
    let alice = Caller::principal("alice");
    let id = engine
        .send(Request::new(alice.clone(), user("ask")))
        .await
        .unwrap();
    let done = ended(&engine, &id).await;
    assert_eq!(status_text(&done), "parent got: color blue", "{done:?}");
    let rows = store.list(TaskQuery::default()).await.unwrap();
    let kid = rows
        .iter()
        .find(|t| t.skill_id == "child")
        .expect("a child task");
    assert_eq!(kid.principal.as_deref(), Some("alice"), "{kid:?}");
    let kid = TaskId::from(kid.id.clone());
    let seen = engine.task(&alice, &kid, None).await.unwrap();
    assert_eq!(seen.status.state, TaskState::Completed);
    assert!(
        engine
            .task(&Caller::principal("bob"), &kid, None)
            .await
            .is_err(),
        "another principal does not see the child"
    );
}
