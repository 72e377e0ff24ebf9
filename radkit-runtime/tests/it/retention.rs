//! Retention: a finished task keeps what A2A shows of it after its journal is compacted, and is
//! gone after its own retention; running and waiting tasks are never pruned; an engine whose store
//! cannot prune refuses to start with a retention set.

use crate::support::common;

use std::time::Duration;

use common::{reply, settled, user};
use futures::future::BoxFuture;
use radkit_runtime::engine::{Caller, Engine, EngineBuilder, EngineError, Request, Retention};
use radkit_runtime::flow::step_table::{await_input, goto, Step, StepInput, StepTable};
use radkit_runtime::flow::{SkillInfo, StepCtx, StepResult};
use radkit_runtime::journal::{Entry, JournalRecord};
use radkit_runtime::model::{Artifact, TaskState};
use radkit_runtime::store::{Durability, Pruned, SqliteStore, Store, TaskQuery};

use crate::store_conformance::NeverCompacts;

/// Three visits that each say something, then an answer as an artifact; `ask` waits for input
/// first.
struct Chores;

fn start<'a>(_: &'a Chores, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        if input.message().joined_texts() == "ask" {
            return await_input("answer", "Which one?", ());
        }
        ctx.progress("starting").await?;
        goto("chore", 1u32)
    })
}

fn chore<'a>(_: &'a Chores, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let n: u32 = input.payload()?;
        ctx.progress(format!("chore {n}")).await?;
        if n < 3 {
            return goto("chore", n + 1);
        }
        ctx.complete(
            "all done",
            vec![Artifact::from_text("report", "three chores")],
        )
    })
}

fn answered<'a>(_: &'a Chores, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { ctx.complete(format!("got {}", input.message().joined_texts()), vec![]) })
}

static STEPS: &[Step<Chores>] = &[
    Step::new("start", start)
        .start()
        .takes_user_message()
        .goes_to(&["chore"]),
    Step::new("chore", chore).goes_to(&["chore"]),
    Step::new("answered", answered).resume_from("start"),
];

fn chores(store: impl Store, retention: Retention) -> EngineBuilder {
    Engine::builder(store)
        .without_registered_skills()
        .skill(StepTable::new(SkillInfo::new("chores", "Chores"), Chores, STEPS).unwrap())
        .retention(retention)
}

fn keep(journal: Option<Duration>, task: Option<Duration>) -> Retention {
    Retention { journal, task }
}

/// Everything a client can read of a task: the task, and the records a follower from the start
/// gets until its end.
async fn read_back(
    engine: &Engine,
    id: &radkit_runtime::model::TaskId,
) -> (radkit_runtime::model::Task, Vec<JournalRecord>) {
    let task = engine.task(&Caller::Operator, id, None).await.unwrap();
    let mut followed = Vec::new();
    let mut sub = engine.subscribe(&Caller::Operator, id).await.unwrap();
    common::within(
        common::PATIENCE,
        "a follower to reach the task's end",
        async {
            while let Some(update) = sub.next().await {
                let update = update.unwrap();
                followed.push(update.record);
                if update.is_final {
                    break;
                }
            }
        },
    )
    .await;
    (task, followed)
}

/// The pruner runs beside the test (its first pass at the start, then every second): each check
/// is of what the store holds after a pass, never of which pass did the work.
#[test(multi_thread)]
async fn a_compacted_task_reads_back_as_it_ended_and_a_deleted_one_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("r.sqlite"), Durability::Full).unwrap();
    let engine = chores(store.clone(), Retention::FOREVER)
        .start()
        .await
        .unwrap();
    let first = user("go");
    let id = engine.send(Request::operator(first.clone())).await.unwrap();
    assert_eq!(
        settled(&engine, &id).await.status.state,
        TaskState::Completed
    );
    let waiting = engine.send(Request::operator(user("ask"))).await.unwrap();
    assert_eq!(
        settled(&engine, &waiting).await.status.state,
        TaskState::InputRequired
    );
    let (task_before, followed_before) = read_back(&engine, &id).await;
    let journal_before = engine.journal(&Caller::Operator, &id).await.unwrap();
    let waiting_before = engine.journal(&Caller::Operator, &waiting).await.unwrap();
    assert_eq!(
        engine.prune_finished().await.unwrap(),
        Pruned::default(),
        "an engine that keeps everything prunes nothing"
    );
    engine.shutdown().await;

    // Journals compacted as soon as their task finished: the start's first pass does it.
    let engine = chores(store.clone(), keep(Some(Duration::ZERO), None))
        .start()
        .await
        .unwrap();
    engine.prune_finished().await.unwrap();
    let journal = engine.journal(&Caller::Operator, &id).await.unwrap();
    assert!(
        journal.len() < journal_before.len(),
        "the journal was compacted: {} of {} records",
        journal.len(),
        journal_before.len()
    );
    assert!(matches!(journal[0].entry, Entry::TaskCreated { .. }));
    assert!(matches!(
        journal.last().map(|r| &r.entry),
        Some(Entry::Terminal { .. })
    ));
    // What a client reads is what it read before: the task (status, history, artifacts), and a
    // follower from the start still reaches its end.
    let (task_after, followed_after) = read_back(&engine, &id).await;
    assert_eq!(task_after, task_before);
    assert_eq!(
        followed_after.last(),
        followed_before.last(),
        "a follower ends on the same record"
    );
    // The send that made it, sent again, is still recognized (the task, no second run); another
    // message under its id is still refused.
    let again = engine.send(Request::operator(first.clone())).await.unwrap();
    assert_eq!(again, id, "a retried send names the same task");
    let mut other = user("something else");
    other.message_id = first.message_id.clone();
    match engine.send(Request::operator(other)).await {
        Err(EngineError::InvalidInput(why)) => assert!(why.contains("messageId"), "{why}"),
        refused => panic!("another message under a used id is refused, got {refused:?}"),
    }
    // A waiting task is never pruned; answered, it finishes and is compacted in its turn.
    assert_eq!(
        engine.journal(&Caller::Operator, &waiting).await.unwrap(),
        waiting_before
    );
    engine
        .send(Request::operator(reply(&waiting, "this one")))
        .await
        .unwrap();
    assert_eq!(
        settled(&engine, &waiting).await.status.state,
        TaskState::Completed
    );
    engine.prune_finished().await.unwrap();
    let answered = engine.journal(&Caller::Operator, &waiting).await.unwrap();
    assert!(matches!(answered[0].entry, Entry::TaskCreated { .. }));
    assert!(matches!(
        answered.last().map(|r| &r.entry),
        Some(Entry::Terminal { .. })
    ));
    engine.shutdown().await;

    // Tasks deleted as soon as they finished: the start's first pass does it.
    let engine = chores(store.clone(), keep(None, Some(Duration::ZERO)))
        .start()
        .await
        .unwrap();
    engine.prune_finished().await.unwrap();
    match engine.task(&Caller::Operator, &id, None).await {
        Err(EngineError::TaskNotFound(gone)) => assert_eq!(gone, id.to_string()),
        other => panic!("a deleted task is not found, got {other:?}"),
    }
    assert!(store.journal(&id, 0).await.unwrap().is_empty());
    assert!(store.list(TaskQuery::default()).await.unwrap().is_empty());
    // The first message sent again after its task is gone starts a new task under the same id.
    let anew = engine.send(Request::operator(first)).await.unwrap();
    assert_eq!(anew, id);
}

#[test]
async fn an_engine_whose_store_cannot_prune_refuses_a_retention_when_it_starts() {
    // The trait's default `prune`: a store that keeps every task.
    let store = NeverCompacts(Default::default());
    let refused = chores(store, keep(None, Some(Duration::from_secs(60))))
        .start()
        .await;
    match refused {
        Err(EngineError::Config(why)) => {
            assert!(why.contains("retention is set"), "{why}");
            assert!(why.contains("pruning finished tasks"), "{why}");
        }
        Err(other) => panic!("expected a configuration error, got {other}"),
        Ok(_) => panic!("expected a configuration error, the engine started"),
    }
    // Without a retention it starts.
    let store = NeverCompacts(Default::default());
    chores(store, Retention::default()).start().await.unwrap();
}
