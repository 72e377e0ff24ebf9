//! Skill versions side by side (issue 29): a task waiting under one version is answered by an
//! engine over the same SQLite file that serves another — as after a deploy — and runs on the new
//! version when the step it rests before kept its shape (the move journaled), on the kept old
//! version when it did not, and is refused (and listed by the startup check) when neither can
//! take it. Operators move tasks with `Engine::migrate`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use radkit::effects::Effects;
use radkit::engine::{Boundary, Caller, Engine, EngineBuilder, EngineError, MoveOutcome, Request};
use radkit::flow::{EffectPolicy, StepCtx, StepResult};
use radkit::journal::Entry;
use radkit::model::{Content, Message, TaskId, TaskState};
use radkit::store::{Durability, SqliteStore, Store};
use radkit::tools::FnTool;
use radkit::{await_input, flow_skill};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// How long anything here may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// What version 1 and 2 carry into `confirm`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Order {
    item: String,
}

/// What version 3 carries into `confirm`: another type.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SizedOrder {
    item: String,
    size: u32,
}

/// Version 1: asks for a size, confirms.
#[derive(Default)]
struct OrderV1;

#[flow_skill(id = "order", name = "Order", version = 1, register = false)]
impl OrderV1 {
    #[step(start)]
    async fn take(&self, order: Content) -> StepResult {
        let order = Order {
            item: order.joined_texts(),
        };
        await_input!(slot = "size", message = "Which size?", carry = order)
    }

    #[step(resume_from = "take")]
    async fn confirm(&self, ctx: &StepCtx, order: Order, size: Content) -> StepResult {
        ctx.complete(
            format!("v1: {} in size {}", order.item, size.joined_texts()),
            vec![],
        )
    }
}

/// Version 2: `confirm` has the same shape and another body (it records the order with a tool),
/// and a step was added after it.
#[derive(Default)]
struct OrderV2;

#[flow_skill(id = "order", name = "Order", version = 2, register = false)]
impl OrderV2 {
    #[step(start)]
    async fn take(&self, order: Content) -> StepResult {
        let order = Order {
            item: order.joined_texts(),
        };
        await_input!(
            slot = "size",
            message = "Which size, please?",
            carry = order
        )
    }

    #[step(resume_from = "take")]
    async fn confirm(&self, ctx: &StepCtx, order: Order, size: Content) -> StepResult {
        let line = format!("{} in size {}", order.item, size.joined_texts());
        let _: serde_json::Value = ctx.tool("record").call(json!({ "line": line })).await?;
        goto!("thank", line)
    }

    #[step]
    async fn thank(&self, ctx: &StepCtx, line: String) -> StepResult {
        ctx.complete(format!("v2: {line}"), vec![])
    }
}

/// Version 3: `confirm` carries another type: a task resting before version 1's cannot move.
#[derive(Default)]
struct OrderV3;

#[flow_skill(id = "order", name = "Order", version = 3, register = false)]
impl OrderV3 {
    #[step(start)]
    async fn take(&self, order: Content) -> StepResult {
        let order = SizedOrder {
            item: order.joined_texts(),
            size: 0,
        };
        await_input!(slot = "size", message = "Which size?", carry = order)
    }

    #[step(resume_from = "take")]
    async fn confirm(&self, ctx: &StepCtx, order: SizedOrder, size: Content) -> StepResult {
        ctx.complete(
            format!(
                "v3: {} in size {} ({})",
                order.item,
                size.joined_texts(),
                order.size
            ),
            vec![],
        )
    }
}

fn store(path: &Path) -> SqliteStore {
    SqliteStore::open(path, Durability::Full).expect("open the SQLite store")
}

/// The `record` tool version 2 calls.
fn effects() -> Effects {
    Effects::new().tool(
        "record",
        FnTool::new(EffectPolicy::Idempotent, |_, _| async {
            Ok(json!("recorded"))
        }),
    )
}

fn builder(path: &Path) -> EngineBuilder {
    Engine::builder(store(path))
        .without_registered_skills()
        .effects(effects())
        .check_fold(true)
}

/// A new `order` task waiting for its size, created by an engine serving version 1 only.
async fn waiting_under_v1(path: &Path) -> TaskId {
    let v1 = builder(path).skill(OrderV1).start().await.unwrap();
    let task = v1
        .send(Request::operator(Message::user_text("tea")))
        .await
        .unwrap();
    let settled = tokio::time::timeout(PATIENCE, v1.wait_settled(&Caller::Operator, &task))
        .await
        .expect("the task asks")
        .unwrap();
    assert_eq!(settled.status.state, TaskState::InputRequired);
    v1.halt();
    task
}

fn answer(task: &TaskId, text: &str) -> Message {
    let mut reply = Message::user_text(text);
    reply.task_id = Some(task.to_string());
    reply
}

/// Answer `task` on `engine` and wait for it to end: its final message.
async fn answered(engine: &Engine, task: &TaskId, text: &str) -> String {
    engine
        .send(Request::operator(answer(task, text)))
        .await
        .unwrap();
    let done = tokio::time::timeout(PATIENCE, engine.wait_settled(&Caller::Operator, task))
        .await
        .expect("the task ends")
        .unwrap();
    assert_eq!(done.status.state, TaskState::Completed, "{done:?}");
    done.status.message.expect("a final message").joined_texts()
}

/// The `migrated` entries of `task`, as `(from, to)`.
async fn moves(engine: &Engine, task: &TaskId) -> Vec<(String, String)> {
    engine
        .journal(&Caller::Operator, task)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| match r.entry {
            Entry::Migrated { from, to, .. } => Some((from, to)),
            _ => None,
        })
        .collect()
}

#[test(multi_thread)]
async fn a_task_waiting_under_v1_completes_under_v2_after_a_restart_when_its_step_kept_its_shape() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("order.sqlite");
    let task = waiting_under_v1(&path).await;

    // The deploy: a binary with version 2 only.
    let v2 = builder(&path).skill(OrderV2).start().await.unwrap();
    assert_eq!(answered(&v2, &task, "M").await, "v2: tea in size M");
    assert_eq!(moves(&v2, &task).await, [("1".to_owned(), "2".to_owned())]);
    let row = store(&path).task(&task).await.unwrap().unwrap();
    assert_eq!(
        row.skill_version, "2",
        "the row says the version it runs on"
    );
    assert!(
        v2.fold_divergences().is_empty(),
        "{:?}",
        v2.fold_divergences()
    );
    v2.halt();
}

#[test(multi_thread)]
async fn a_task_whose_step_changed_shape_runs_on_the_kept_version_beside_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("order.sqlite");
    let task = waiting_under_v1(&path).await;

    let both = builder(&path)
        .skill(OrderV1)
        .skill(OrderV3)
        .start()
        .await
        .unwrap();
    // New tasks start on the newest version; the card lists the skill once.
    assert_eq!(both.skills().len(), 1);
    assert_eq!(both.skills()[0].version, "3");
    // An operator asking to move it is told why it stays.
    let dry = both.migrate("order", None, true).await.unwrap();
    assert_eq!(dry.len(), 1);
    match &dry[0].outcome {
        MoveOutcome::Stays(reason) => assert!(
            reason.contains("step `confirm` changed its shape"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(answered(&both, &task, "L").await, "v1: tea in size L");
    assert!(moves(&both, &task).await.is_empty());
    both.halt();
}

#[test(multi_thread)]
async fn a_task_no_served_version_can_take_is_refused_untouched_and_stops_a_strict_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("order.sqlite");
    let task = waiting_under_v1(&path).await;

    // A start that refuses stranded tasks says which and why.
    let refused = builder(&path)
        .skill(OrderV3)
        .refuse_stranded()
        .start()
        .await;
    let Err(EngineError::Stranded(stranded)) = refused else {
        panic!("a strict start is refused");
    };
    assert_eq!(stranded.len(), 1);
    assert_eq!(stranded[0].task_id, task.to_string());
    let text = EngineError::Stranded(stranded).to_string();
    assert!(text.contains("--allow-stranded"), "{text}");

    // Started anyway: the answer is refused with the reason, and the journal is untouched.
    let v3 = builder(&path).skill(OrderV3).start().await.unwrap();
    let before = v3.journal(&Caller::Operator, &task).await.unwrap();
    let error = v3
        .send(Request::operator(answer(&task, "S")))
        .await
        .expect_err("refused");
    match &error {
        EngineError::VersionMismatch { reason, .. } => {
            assert!(
                reason.contains("step `confirm` changed its shape"),
                "{reason}"
            )
        }
        other => panic!("{other}"),
    }
    assert_eq!(v3.journal(&Caller::Operator, &task).await.unwrap(), before);
    v3.halt();

    // The old binary finishes it.
    let v1 = builder(&path).skill(OrderV1).start().await.unwrap();
    assert_eq!(answered(&v1, &task, "S").await, "v1: tea in size S");
    v1.halt();
}

#[test(multi_thread)]
async fn migrate_moves_resting_tasks_journals_each_move_and_the_moved_task_runs_on_after_a_restart()
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("order.sqlite");
    let first = waiting_under_v1(&path).await;
    let second = waiting_under_v1(&path).await;

    let both = builder(&path)
        .skill(OrderV1)
        .skill(OrderV2)
        .start()
        .await
        .unwrap();
    let dry = both.migrate("order", Some("2"), true).await.unwrap();
    assert_eq!(dry.len(), 2);
    assert!(
        dry.iter().all(|m| m.outcome == MoveOutcome::WouldMove),
        "{dry:?}"
    );
    assert!(
        moves(&both, &first).await.is_empty(),
        "a dry run writes nothing"
    );
    let moved = both.migrate("order", Some("2"), false).await.unwrap();
    assert!(
        moved.iter().all(|m| m.outcome == MoveOutcome::Moved),
        "{moved:?}"
    );
    let counts = both.versions().await.unwrap();
    assert_eq!(counts.len(), 1, "{counts:?}");
    assert_eq!((counts[0].version.as_str(), counts[0].tasks), ("2", 2));
    assert_eq!(counts[0].waiting_on, "input");
    // Moved while version 1 is still served: the tasks run on version 2 from now on.
    assert_eq!(answered(&both, &first, "S").await, "v2: tea in size S");
    both.halt();
    drop(both);

    // A restart after the move (the `migrated` entry is all that was written): still version 2.
    let v2 = builder(&path).skill(OrderV2).start().await.unwrap();
    assert_eq!(answered(&v2, &second, "XL").await, "v2: tea in size XL");
    assert_eq!(
        moves(&v2, &second).await,
        [("1".to_owned(), "2".to_owned())]
    );
    v2.halt();
}

#[test(multi_thread)]
async fn a_crash_after_the_move_mid_step_resumes_on_the_new_version_without_moving_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("order.sqlite");
    let task = waiting_under_v1(&path).await;

    // Version 2 takes the answer (the move and the visit are journaled) and crashes while its
    // `record` tool runs.
    let crashed = Arc::new(AtomicBool::new(false));
    let once = crashed.clone();
    let v2 = builder(&path)
        .skill(OrderV2)
        .fault_hook(move |f| {
            f.boundary == Boundary::DuringEffect && !once.swap(true, Ordering::SeqCst)
        })
        .start()
        .await
        .unwrap();
    v2.send(Request::operator(answer(&task, "M")))
        .await
        .unwrap();
    tokio::time::timeout(PATIENCE, async {
        while !v2.is_halted() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the injected crash halts the engine");
    assert!(crashed.load(Ordering::SeqCst));
    drop(v2);

    // The restart replays on version 2 (the journal says so), reissues the tool, completes.
    let again = builder(&path).skill(OrderV2).start().await.unwrap();
    let done = tokio::time::timeout(PATIENCE, again.wait_settled(&Caller::Operator, &task))
        .await
        .expect("the task ends")
        .unwrap();
    assert_eq!(done.status.state, TaskState::Completed);
    assert_eq!(
        done.status.message.unwrap().joined_texts(),
        "v2: tea in size M"
    );
    assert_eq!(
        moves(&again, &task).await,
        [("1".to_owned(), "2".to_owned())]
    );
    assert!(again.fold_divergences().is_empty());
    again.halt();
}

#[test(multi_thread)]
async fn two_impls_of_one_skill_without_distinct_version_numbers_are_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("order.sqlite");
    let error = builder(&path)
        .skill(OrderV1)
        .skill(OrderV1)
        .start()
        .await
        .err()
        .expect("refused");
    let text = error.to_string();
    assert!(text.contains("served twice"), "{text}");
    assert!(text.contains("`version = 2`"), "{text}");
}
