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
use radkit::{await_input, flow_skill, goto};
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

/// Version 4: `confirm` carries `SizedOrder` as version 3's does, and says how a task that rests
/// before version 1's `confirm` moves: a typed migration (which refuses an order without an item).
#[derive(Default)]
struct OrderV4;

#[flow_skill(id = "order", name = "Order", version = 4, register = false)]
impl OrderV4 {
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
                "v4: {} in size {} ({})",
                order.item,
                size.joined_texts(),
                order.size
            ),
            vec![],
        )
    }

    /// Version 1 carried no size.
    #[migrate(from = 1, step = "confirm")]
    fn confirm_from_v1(old: Order) -> Result<SizedOrder, String> {
        if old.item == "-" {
            return Err("an order without an item cannot be sized".to_owned());
        }
        Ok(SizedOrder {
            item: old.item,
            size: 1,
        })
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
    ordered_under_v1(path, "tea").await
}

/// A new `order` task for `item`, waiting for its size under version 1.
async fn ordered_under_v1(path: &Path, item: &str) -> TaskId {
    let v1 = builder(path).skill(OrderV1).start().await.unwrap();
    let task = v1
        .send(Request::operator(Message::user_text(item)))
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
    assert_eq!(both.tasks_in_hand(), 0, "a move keeps nothing in hand");
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

#[test(multi_thread)]
async fn a_declared_migration_moves_a_task_whose_step_changed_and_a_failing_one_leaves_it_with_why()
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("order.sqlite");
    let tea = ordered_under_v1(&path, "tea").await;
    let nothing = ordered_under_v1(&path, "-").await;

    let v4 = builder(&path).skill(OrderV4).start().await.unwrap();
    let dry = v4.migrate("order", None, true).await.unwrap();
    let outcome = |task: &TaskId| {
        dry.iter()
            .find(|m| m.task_id == task.as_str())
            .map(|m| m.outcome.clone())
            .unwrap()
    };
    assert_eq!(outcome(&tea), MoveOutcome::WouldMove);
    match outcome(&nothing) {
        MoveOutcome::Stays(reason) => assert!(
            reason.contains(
                "the migration from version 1 failed: an order without an item cannot be sized"
            ),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    // Moved by the operator: the `migrated` entry, with the state the migration made, is all that
    // is written; then the process stops.
    let moved = v4.migrate("order", None, false).await.unwrap();
    assert_eq!(
        moved
            .iter()
            .filter(|m| m.outcome == MoveOutcome::Moved)
            .count(),
        1,
        "{moved:?}"
    );
    let journal = v4.journal(&Caller::Operator, &tea).await.unwrap();
    let state = journal
        .iter()
        .find_map(|r| match &r.entry {
            Entry::Migrated { state, .. } => state.clone(),
            _ => None,
        })
        .expect("the migration's state is journaled");
    assert_eq!(state, json!({ "confirm": { "item": "tea", "size": 1 } }));
    v4.halt();
    drop(v4);

    // After the restart the answer runs version 4's step on the migrated state, once.
    let again = builder(&path).skill(OrderV4).start().await.unwrap();
    assert_eq!(answered(&again, &tea, "M").await, "v4: tea in size M (1)");
    assert_eq!(
        moves(&again, &tea).await,
        [("1".to_owned(), "4".to_owned())]
    );
    // The one whose migration failed stays on version 1, untouched, and says why when answered.
    let error = again
        .send(Request::operator(answer(&nothing, "S")))
        .await
        .expect_err("refused");
    assert!(error.to_string().contains("cannot be sized"), "{error}");
    assert!(moves(&again, &nothing).await.is_empty());
    assert!(again.fold_divergences().is_empty());
    again.halt();
}

/// The child process of the test below: serves version 1 over the SQLite file in
/// `RADKIT_VERSIONS_DIR`, creates a task that waits for its size, writes its id to `task`, and
/// stays up until the parent kills it.
#[test(multi_thread)]
#[ignore = "run by versions::a_task_waiting_in_a_killed_v1_process_completes_in_a_v2_process"]
async fn child_process_serves_version_1_until_killed() {
    let Some(dir) = std::env::var_os("RADKIT_VERSIONS_DIR") else {
        return;
    };
    let dir = Path::new(&dir);
    let v1 = builder(&dir.join("order.sqlite"))
        .skill(OrderV1)
        .start()
        .await
        .unwrap();
    let task = v1
        .send(Request::operator(Message::user_text("tea")))
        .await
        .unwrap();
    let settled = v1.wait_settled(&Caller::Operator, &task).await.unwrap();
    assert_eq!(settled.status.state, TaskState::InputRequired);
    std::fs::write(dir.join("task.tmp"), task.as_str()).unwrap();
    std::fs::rename(dir.join("task.tmp"), dir.join("task")).unwrap();
    // Until the parent kills this process; should the parent die first, exit on our own.
    tokio::time::sleep(Duration::from_secs(120)).await;
}

#[test(multi_thread)]
async fn a_task_waiting_in_a_killed_v1_process_completes_in_a_v2_process() {
    let dir = tempfile::tempdir().unwrap();
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "versions::child_process_serves_version_1_until_killed",
            "--ignored",
            "--nocapture",
        ])
        .env("RADKIT_VERSIONS_DIR", dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut child = crate::support::common::Killed(child);
    // The id is written by another process: no event reaches this one, so poll, with a deadline.
    let started = std::time::Instant::now();
    let task = loop {
        if let Ok(id) = std::fs::read_to_string(dir.path().join("task")) {
            break TaskId::from(id.as_str());
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "timed out waiting for the v1 process's task"
        );
        if let Some(status) = child.0.try_wait().unwrap() {
            panic!("the v1 process exited ({status}) before its task waited");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    child.0.kill().unwrap(); // SIGKILL: the deploy replaces the process.
    child.0.wait().unwrap();

    let v2 = builder(&dir.path().join("order.sqlite"))
        .skill(OrderV2)
        .refuse_stranded()
        .start()
        .await
        .expect("nothing is stranded: the task can move");
    assert_eq!(answered(&v2, &task, "M").await, "v2: tea in size M");
    assert_eq!(moves(&v2, &task).await, [("1".to_owned(), "2".to_owned())]);
    v2.halt();
}

// ---- a rolling deploy on Postgres ----

/// Counts down from its number, one durable `note` per step; version 1 and 2 differ in their end
/// only (every step keeps its shape), so a task of version 1 moves to 2 whenever it rests between
/// steps.
#[derive(Default)]
struct CountV1;

#[flow_skill(id = "count", name = "Count", version = 1, register = false)]
impl CountV1 {
    #[step(start)]
    async fn begin(&self, n: Content) -> StepResult {
        goto!("tick", n.joined_texts().trim().parse::<u32>().unwrap_or(3))
    }

    #[step]
    async fn tick(&self, ctx: &StepCtx, left: u32) -> StepResult {
        let _: serde_json::Value = ctx.tool("note").call(json!({ "left": left })).await?;
        if left == 0 {
            return ctx.complete("counted by v1", vec![]);
        }
        goto!("tick", left - 1)
    }
}

#[derive(Default)]
struct CountV2;

#[flow_skill(id = "count", name = "Count", version = 2, register = false)]
impl CountV2 {
    #[step(start)]
    async fn begin(&self, n: Content) -> StepResult {
        goto!("tick", n.joined_texts().trim().parse::<u32>().unwrap_or(3))
    }

    #[step]
    async fn tick(&self, ctx: &StepCtx, left: u32) -> StepResult {
        let _: serde_json::Value = ctx.tool("note").call(json!({ "left": left })).await?;
        if left == 0 {
            return ctx.complete("counted by v2", vec![]);
        }
        goto!("tick", left - 1)
    }
}

/// An engine of one version over the Postgres schema at `url`: a worker (`worker`), or a
/// submitter that only creates tasks.
async fn count_engine(url: &str, name: &str, v2: bool, worker: bool) -> Engine {
    let store = radkit::store::PostgresStore::connect(url)
        .await
        .expect("connect the store");
    let note = FnTool::new(EffectPolicy::Idempotent, |_, _| async {
        tokio::time::sleep(Duration::from_millis(5)).await;
        Ok(json!("noted"))
    });
    let builder = Engine::builder(store)
        .without_registered_skills()
        .effects(Effects::new().tool("note", note))
        .worker_id(name)
        .lease_ttl(Duration::from_millis(1_500))
        .poll_interval(Duration::from_millis(20));
    let builder = match v2 {
        true => builder.skill(CountV2),
        false => builder.skill(CountV1),
    };
    match worker {
        true => builder.start().await.expect("start the worker"),
        false => builder
            .max_active_tasks(0)
            .build()
            .expect("build the submitter"),
    }
}

/// Old and new workers side by side under load, one of them killed mid-run (halted: its leases
/// expire), a worker of its version started again: every task completes with exactly one receipt
/// per command, a task started on version 2 never runs on version 1, and a task moves at most once
/// (forward).
async fn rolling_deploy_with_the_worker_of_version_killed(killed_v2: bool) {
    let (_, url) = radkit::store::PostgresStore::create_schema(
        &crate::support::services::postgres_url(),
        "radkit_versions",
    )
    .await
    .expect("create a test schema");
    let submit_v1 = count_engine(&url, "submit-v1", false, false).await;
    let submit_v2 = count_engine(&url, "submit-v2", true, false).await;
    let w1 = count_engine(&url, "worker-v1", false, true).await;
    let w2 = count_engine(&url, "worker-v2", true, true).await;
    let mut tasks = Vec::new();
    for i in 0..12 {
        let (submitter, started_on) = match i % 2 {
            0 => (&submit_v1, "1"),
            _ => (&submit_v2, "2"),
        };
        let task = submitter
            .send(Request::operator(Message::user_text("8")))
            .await
            .unwrap();
        tasks.push((task, started_on));
    }
    // Let both work a while, then kill one.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let survivor = if killed_v2 {
        w2.halt();
        drop(w2);
        w1
    } else {
        w1.halt();
        drop(w1);
        w2
    };
    // A worker of the killed version comes back: what the survivor cannot take, it finishes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let again = count_engine(&url, "worker-again", killed_v2, true).await;
    for (task, started_on) in &tasks {
        let done = tokio::time::timeout(
            Duration::from_secs(90),
            survivor.wait_settled(&Caller::Operator, task),
        )
        .await
        .unwrap_or_else(|_| panic!("task {task} (started on v{started_on}) completes"))
        .unwrap();
        assert_eq!(done.status.state, TaskState::Completed, "{done:?}");
        let text = done.status.message.unwrap().joined_texts();
        let journal = survivor.journal(&Caller::Operator, task).await.unwrap();
        let moves: Vec<(String, String)> = journal
            .iter()
            .filter_map(|r| match &r.entry {
                Entry::Migrated { from, to, .. } => Some((from.clone(), to.clone())),
                _ => None,
            })
            .collect();
        match *started_on {
            "2" => {
                assert_eq!(text, "counted by v2", "task {task}");
                assert!(moves.is_empty(), "task {task} moved: {moves:?}");
            }
            _ => {
                assert!(moves.len() <= 1, "task {task} moved twice: {moves:?}");
                let ended_on = if moves.is_empty() { "v1" } else { "v2" };
                assert_eq!(text, format!("counted by {ended_on}"), "task {task}");
                assert!(moves.iter().all(|(f, t)| f == "1" && t == "2"), "{moves:?}");
            }
        }
        // Exactly one receipt per command, nine notes (8 down to 0), the seqs gap-free.
        let mut receipts: std::collections::HashMap<String, usize> = Default::default();
        for record in &journal {
            if let Entry::ReceiptRecorded { receipt } = &record.entry {
                *receipts.entry(receipt.id.to_string()).or_default() += 1;
            }
        }
        assert_eq!(receipts.len(), 9, "task {task}: {receipts:?}");
        assert!(
            receipts.values().all(|n| *n == 1),
            "task {task}: {receipts:?}"
        );
        let seqs: Vec<u64> = journal.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (1..=journal.len() as u64).collect::<Vec<_>>());
    }
    survivor.halt();
    again.halt();
}

#[test(multi_thread, needs = Postgres)]
async fn a_rolling_deploy_finishes_every_task_when_the_old_worker_is_killed() {
    rolling_deploy_with_the_worker_of_version_killed(false).await;
}

#[test(multi_thread, needs = Postgres)]
async fn a_rolling_deploy_finishes_every_task_when_the_new_worker_is_killed() {
    rolling_deploy_with_the_worker_of_version_killed(true).await;
}

#[test(multi_thread)]
async fn serverless_passes_run_a_task_on_its_kept_version_and_move_one_whose_version_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("order.sqlite");
    let serverless = |build: fn(EngineBuilder) -> EngineBuilder| {
        let builder = Engine::builder(store(&path))
            .without_registered_skills()
            .effects(effects());
        build(builder)
            .serverless(Duration::from_secs(10))
            .build()
            .unwrap()
    };
    let ask = |engine: Engine| async move {
        let task = engine
            .send(Request::operator(Message::user_text("tea")))
            .await
            .unwrap();
        let asked = engine.task(&Caller::Operator, &task, None).await.unwrap();
        assert_eq!(asked.status.state, TaskState::InputRequired);
        task
    };
    let answer_in_a_pass = |engine: Engine, task: TaskId, text: &'static str| async move {
        engine
            .send(Request::operator(answer(&task, text)))
            .await
            .unwrap();
        let done = engine.task(&Caller::Operator, &task, None).await.unwrap();
        assert_eq!(done.status.state, TaskState::Completed, "{done:?}");
        done.status.message.unwrap().joined_texts()
    };
    let v1 = serverless(|b| b.skill(OrderV1));
    let kept = ask(v1.clone()).await;
    let moved = ask(v1).await;

    let both = serverless(|b| b.skill(OrderV1).skill(OrderV3));
    assert_eq!(
        answer_in_a_pass(both.clone(), kept.clone(), "L").await,
        "v1: tea in size L"
    );
    assert!(moves(&both, &kept).await.is_empty());

    let v2 = serverless(|b| b.skill(OrderV2));
    assert_eq!(
        answer_in_a_pass(v2.clone(), moved.clone(), "M").await,
        "v2: tea in size M"
    );
    assert_eq!(moves(&v2, &moved).await, [("1".to_owned(), "2".to_owned())]);
}
