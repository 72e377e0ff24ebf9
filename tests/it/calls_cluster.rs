//! Child skills on a Postgres cluster: a child is a task like any other, so whichever worker has
//! the task's lease drives it, and a worker that dies mid-call leaves both the parent's wait and the
//! child's work to another. The server is `RADKIT_TEST_POSTGRES_URL`, else the local one (see
//! `services`); when it does not answer these tests are reported ignored.

use std::time::Duration;

use radkit::engine::EngineBuilder;
use radkit::engine::{Caller, Request};
use radkit::journal::Entry;
use radkit::model::{TaskId, TaskState};
use radkit::prelude::*;
use radkit::store::{PostgresStore, Store, TaskQuery};

use crate::support::services;

const PATIENCE: Duration = Duration::from_secs(60);

/// Starts `child` with the message and completes with its answer.
#[derive(Default)]
struct Parent;

#[flow_skill(id = "parent", name = "Parent", register = false)]
impl Parent {
    #[step(start)]
    async fn start(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let answer = ctx.skill("child").send(msg.joined_texts()).await?;
        ctx.complete(format!("parent got: {}", answer.text()), vec![])
    }
}

/// Sleeps durably for 1.5 s, then says which worker finished it.
#[derive(Default)]
struct Child;

#[flow_skill(id = "child", name = "Child", register = false)]
impl Child {
    #[step(start)]
    async fn start(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        ctx.sleep(Duration::from_millis(1500)).await?;
        let worker: String = ctx.tool("whoami").call(()).await?;
        ctx.complete(format!("{} done on {worker}", msg.joined_texts()), vec![])
    }
}

async fn worker(url: &str, name: &'static str) -> Engine {
    builder(url, name)
        .await
        .start()
        .await
        .expect("start the engine")
}

async fn builder(url: &str, name: &'static str) -> EngineBuilder {
    let store = PostgresStore::connect(url)
        .await
        .expect("connect the store");
    let whoami = radkit::tools::FnTool::new(EffectPolicy::Idempotent, move |_, _| async move {
        Ok(serde_json::json!(name))
    });
    Engine::builder(store)
        .without_registered_skills()
        .skill(Parent)
        .skill(Child)
        .default_skill("parent")
        .effects(Effects::new().tool("whoami", whoami))
        .worker_id(name)
        .lease_ttl(Duration::from_millis(400))
        .poll_interval(Duration::from_millis(20))
}

#[test(multi_thread, needs = Postgres)]
async fn a_child_and_its_parent_are_finished_by_another_worker_when_theirs_dies() {
    let (_, url) =
        radkit::store::PostgresStore::create_schema(&services::postgres_url(), "radkit_calls")
            .await
            .expect("create a test schema");
    let a = worker(&url, "worker-a").await;
    let parent = a
        .send(Request::operator(Message::user_text("job")))
        .await
        .unwrap();
    let store = a.store().clone();
    tokio::time::timeout(PATIENCE, async {
        loop {
            let journal = store.journal(&parent, 0).await.unwrap();
            if journal
                .iter()
                .any(|r| matches!(r.entry, Entry::CallStarted { .. }))
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the parent to start its child");
    // Worker A dies with the child asleep and the parent waiting on it.
    a.halt();
    drop(a);
    let b = worker(&url, "worker-b").await;
    let done = tokio::time::timeout(PATIENCE, async {
        loop {
            let task = b.task(&Caller::Operator, &parent, None).await.unwrap();
            if task.status.state.is_terminal() {
                return task;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("worker B to finish the parent");
    assert_eq!(done.status.state, TaskState::Completed, "{done:?}");
    let text = done
        .status
        .message
        .map(|m| m.joined_texts())
        .unwrap_or_default();
    assert_eq!(text, "parent got: job done on worker-b");
    let children: Vec<TaskId> = store
        .list(TaskQuery::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.skill_id == "child")
        .map(|t| TaskId::from(t.id))
        .collect();
    assert_eq!(children.len(), 1, "one child: {children:?}");
}

/// The `timer_set` entries of `id`'s journal: its calls' rechecks.
async fn rechecks(store: &dyn Store, id: &TaskId) -> usize {
    store
        .journal(id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| matches!(r.entry, Entry::TimerSet { .. }))
        .count()
}

/// Worker A dies while the parent waits on its child (the watcher that followed the child dies
/// with it), and the parent's recheck lies ten minutes ahead, beyond the test's patience. Worker B
/// starts, finishes the child, and completes the parent in time only because a worker that
/// starts asks the callees of the calls waiting in the cluster at once (before, it claimed the
/// parent at its recheck, when the row's wake time came due).
#[test(multi_thread, needs = Postgres)]
async fn a_worker_that_starts_asks_the_callee_of_a_waiting_call_at_once() {
    a_starting_worker_finishes_the_waiting_parent("radkit_calls_ask", false).await;
}

/// The same, with worker A dead while it still held the parent's lease (it died between
/// journaling the call's recheck and giving the task back): worker B waits the lease out and asks
/// at once all the same (before, its ask found the task busy and left it to the recheck).
#[test(multi_thread, needs = Postgres)]
async fn a_worker_that_starts_waits_out_the_lease_a_dead_worker_left_on_a_waiting_caller() {
    a_starting_worker_finishes_the_waiting_parent("radkit_calls_ask_leased", true).await;
}

/// Worker A starts the parent and dies once it waits on its child (still holding the parent's
/// lease when `dead_owner`); worker B, started then, completes the parent before its recheck.
async fn a_starting_worker_finishes_the_waiting_parent(schema: &str, dead_owner: bool) {
    let (_, url) = radkit::store::PostgresStore::create_schema(&services::postgres_url(), schema)
        .await
        .expect("create a test schema");
    let recheck = Duration::from_secs(600);
    let a = builder(&url, "worker-a")
        .await
        .call_recheck(recheck)
        .start()
        .await
        .expect("start worker A");
    let parent = a
        .send(Request::operator(Message::user_text("job")))
        .await
        .unwrap();
    let store = a.store().clone();
    tokio::time::timeout(PATIENCE, async {
        while rechecks(store.as_ref(), &parent).await == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the parent to wait on its child");
    a.halt();
    drop(a);
    if dead_owner {
        // A dead worker's lease, as long as the workers' own (A may still hold its own instead).
        let leases = store.leases().expect("Postgres holds leases");
        let _ = leases.acquire("worker-dead", &parent, 400).await.unwrap();
    }
    let b = builder(&url, "worker-b")
        .await
        .call_recheck(recheck)
        .start()
        .await
        .expect("start worker B");
    let done = tokio::time::timeout(PATIENCE, async {
        loop {
            let task = b.task(&Caller::Operator, &parent, None).await.unwrap();
            if task.status.state.is_terminal() {
                return task;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("worker B to finish the parent before its recheck");
    let text = done
        .status
        .message
        .map(|m| m.joined_texts())
        .unwrap_or_default();
    assert_eq!(text, "parent got: job done on worker-b");
    assert_eq!(
        rechecks(store.as_ref(), &parent).await,
        1,
        "no recheck fired: worker B asked the child when it started"
    );
}
