//! A waiting task costs nothing until an event arrives for it, and a message to a task that is not
//! waiting is answered at once.

use crate::support::common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::{reply, settled, user, within, PATIENCE};
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::Engine;
use radkit_runtime::engine::{Caller, EngineError, Request};
use radkit_runtime::flow::step_table::{await_input, Step, StepInput, StepTable};
use radkit_runtime::flow::{EffectPolicy, SkillInfo, StepCtx, StepResult};
use radkit_runtime::journal::JournalRecord;
use radkit_runtime::model::TaskState;
use radkit_runtime::store::{Append, MemoryStore, Store, StoreError, TaskQuery, TaskRecord};
use radkit_runtime::tools::FnTool;

/// Asks for a note (`note`), or works until the test lets it go (`work`), then completes; a note
/// `hold` is kept until `hold` is notified, and so is a first message `hold` before it asks.
#[derive(Default)]
struct Errand {
    hold: Arc<tokio::sync::Notify>,
}

fn start<'a>(errand: &'a Errand, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        if input.message().joined_texts() == "hold" {
            // Something that is not an effect: the driver takes nothing to the store meanwhile.
            errand.hold.notified().await;
        }
        if input.message().joined_texts() == "work" {
            let _: serde_json::Value = ctx.tool("slow").call(()).await?;
            return ctx.complete("worked", vec![]);
        }
        await_input("note", "A note?", ())
    })
}

fn noted<'a>(errand: &'a Errand, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let note = input.message().joined_texts();
        if note == "hold" {
            // Something that is not an effect: the driver takes nothing to the store meanwhile.
            errand.hold.notified().await;
        }
        ctx.complete(format!("noted {note}"), vec![])
    })
}

static STEPS: &[Step<Errand>] = &[
    Step::new("start", start).start().takes_user_message(),
    Step::new("noted", noted).resume_from("start"),
];

/// A memory store that counts replay loads and appends.
#[derive(Clone, Default)]
struct CountingLoads {
    inner: MemoryStore,
    loads: Arc<AtomicU32>,
    appends: Arc<AtomicU32>,
}

#[async_trait]
impl Store for CountingLoads {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        self.inner.append(append).await
    }
    async fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        self.inner.task(task_id).await
    }
    async fn journal(&self, task_id: &str, after: u64) -> Result<Vec<JournalRecord>, StoreError> {
        self.inner.journal(task_id, after).await
    }
    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        self.inner.journal_for_replay(task_id).await
    }
    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        self.inner.list(query).await
    }
}

fn errand(
    store: impl Store,
    release: Arc<tokio::sync::Notify>,
) -> radkit_runtime::engine::EngineBuilder {
    errand_holding(store, release, Default::default())
}

/// [`errand`], its resumed step holding a `hold` note until `hold` is notified.
fn errand_holding(
    store: impl Store,
    release: Arc<tokio::sync::Notify>,
    hold: Arc<tokio::sync::Notify>,
) -> radkit_runtime::engine::EngineBuilder {
    let slow = FnTool::new(EffectPolicy::Idempotent, move |_, _| {
        let release = release.clone();
        async move {
            release.notified().await;
            Ok(serde_json::json!("done"))
        }
    });
    Engine::builder(store)
        .without_registered_skills()
        .skill(StepTable::new(SkillInfo::new("errand", "Errand"), Errand { hold }, STEPS).unwrap())
        .effects(Effects::new().tool("slow", slow))
}

/// A task that waits, created and settled on `engine`.
async fn waiting_task(engine: &Engine) -> radkit_runtime::model::TaskId {
    let id = engine.send(Request::operator(user("note"))).await.unwrap();
    assert_eq!(
        settled(engine, &id).await.status.state,
        TaskState::InputRequired
    );
    id
}

/// The reply rides the resumed step's first append: an answer whose step completes the task is
/// one commit, not the reply's and then the step's.
#[test(multi_thread)]
async fn an_answer_and_the_step_it_resumes_are_one_append() {
    let store = CountingLoads::default();
    let engine = errand(store.clone(), Default::default())
        // Patience enough for any machine: the driver always takes the reply with its step.
        .reply_patience(PATIENCE)
        .start()
        .await
        .unwrap();
    let id = waiting_task(&engine).await;
    let before = store.appends.load(Ordering::SeqCst);
    within(
        PATIENCE,
        "the answer",
        engine.send(Request::operator(reply(&id, "hi"))),
    )
    .await
    .unwrap();
    let done = settled(&engine, &id).await;
    assert_eq!(done.status.state, TaskState::Completed);
    assert_eq!(
        store.appends.load(Ordering::SeqCst) - before,
        1,
        "the reply and the completion in one append"
    );
    let history: Vec<String> = done.history.iter().map(|m| m.joined_texts()).collect();
    assert!(history.contains(&"hi".to_owned()), "{history:?}");
}

/// A resumed step that awaits something other than an effect does not hold the answer back past
/// the reply patience, and what is acknowledged is durable: the reply is in the store while the
/// step still waits.
#[test(multi_thread)]
async fn an_answer_is_durable_when_acknowledged_though_its_step_holds() {
    let store = CountingLoads::default();
    let hold = Arc::new(tokio::sync::Notify::new());
    let engine = errand_holding(store.clone(), Default::default(), hold.clone())
        .start()
        .await
        .unwrap();
    let id = waiting_task(&engine).await;
    within(
        PATIENCE,
        "the answer to a step that holds",
        engine.send(Request::operator(reply(&id, "hold"))),
    )
    .await
    .unwrap();
    let journal = store.journal(&id, 0).await.unwrap();
    assert!(
        journal.iter().any(|r| matches!(
            &r.entry,
            radkit_runtime::journal::Entry::MessageReceived { message } if message.joined_texts() == "hold"
        )),
        "the acknowledged reply is journaled while its step holds"
    );
    assert_eq!(
        engine.state(&Caller::Operator, &id).await.unwrap(),
        TaskState::Working,
        "the step still holds"
    );
    hold.notify_one();
    let done = settled(&engine, &id).await;
    assert_eq!(done.status.state, TaskState::Completed);
    assert_eq!(common::status_text(&done), "noted hold");
}

/// A new task is created by its driver's first append, and its send acknowledged once that is
/// durable; a first step that awaits something other than an effect does not hold the send back:
/// past the reply patience the creation commits alone, and the task is in the store while the
/// step holds.
#[test(multi_thread)]
async fn a_new_task_is_durable_when_acknowledged_though_its_first_step_holds() {
    let store = CountingLoads::default();
    let hold = Arc::new(tokio::sync::Notify::new());
    let engine = errand_holding(store.clone(), Default::default(), hold.clone())
        .start()
        .await
        .unwrap();
    let id = within(
        PATIENCE,
        "the send of a task whose first step holds",
        engine.send(Request::operator(user("hold"))),
    )
    .await
    .unwrap();
    assert!(
        store.task(&id).await.unwrap().is_some(),
        "the acknowledged task is in the store while its first step holds"
    );
    hold.notify_one();
    assert_eq!(
        settled(&engine, &id).await.status.state,
        TaskState::InputRequired
    );
}

#[test(multi_thread)]
async fn recovery_loads_no_task_that_waits_for_input_until_it_is_answered() {
    let store = CountingLoads::default();
    let release = Arc::new(tokio::sync::Notify::new());
    let first = errand(store.clone(), release.clone())
        .start()
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let id = first.send(Request::operator(user("note"))).await.unwrap();
        assert_eq!(
            settled(&first, &id).await.status.state,
            TaskState::InputRequired
        );
        tasks.push(id);
    }
    first.shutdown().await;

    store.loads.store(0, Ordering::SeqCst);
    let engine = errand(store.clone(), release).start().await.unwrap();
    assert_eq!(
        store.loads.load(Ordering::SeqCst),
        0,
        "recovery read no waiting task's journal"
    );
    engine
        .send(Request::operator(reply(&tasks[7], "hi")))
        .await
        .unwrap();
    let done = settled(&engine, &tasks[7]).await;
    assert_eq!(done.status.state, TaskState::Completed);
    assert_eq!(
        store.loads.load(Ordering::SeqCst),
        1,
        "the answered task, once"
    );
}

#[test(multi_thread)]
async fn a_message_to_a_working_task_is_answered_at_once() {
    let release = Arc::new(tokio::sync::Notify::new());
    let engine = errand(MemoryStore::new(), release.clone())
        .start()
        .await
        .unwrap();
    let id = engine.send(Request::operator(user("work"))).await.unwrap();
    // The step is inside its tool call now (or about to be): the task works.
    within(PATIENCE, "the task to start working", async {
        while engine.state(&Caller::Operator, &id).await.unwrap() != TaskState::Working {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let refused = within(
        Duration::from_secs(5),
        "the answer to a message sent to a working task",
        engine.send(Request::operator(reply(&id, "are you there?"))),
    )
    .await;
    match refused {
        Err(EngineError::NotAwaitingInput { state, .. }) => assert_eq!(state, TaskState::Working),
        other => panic!("expected a refusal saying the task works, got {other:?}"),
    }
    release.notify_one();
    assert_eq!(
        settled(&engine, &id).await.status.state,
        TaskState::Completed
    );
}

/// A user message whose metadata nests arrays until the whole message is `depth` levels deep.
fn nested(text: &str, depth: usize) -> radkit_runtime::model::Message {
    let mut message = user(text);
    let mut levels = 0;
    loop {
        let mut value = serde_json::json!(1);
        for _ in 0..levels {
            value = serde_json::json!([value]);
        }
        message.metadata = Some(serde_json::Map::from_iter([("deep".to_owned(), value)]));
        let got = radkit_runtime::journal::json_depth(&serde_json::to_value(&message).unwrap());
        if got >= depth {
            assert_eq!(got, depth, "depths are reached one at a time");
            return message;
        }
        levels += 1;
    }
}

/// Whatever is acknowledged can be read back: the deepest message the engine accepts is journaled,
/// read back (also by a new engine over the same file, as after a restart) and answered with; one
/// level deeper is refused before anything is written.
#[test(multi_thread)]
async fn the_deepest_accepted_message_round_trips_and_a_deeper_one_leaves_no_task() {
    use radkit_runtime::journal::MAX_MESSAGE_DEPTH;
    use radkit_runtime::store::{Durability, SqliteStore};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.sqlite");
    let open = || SqliteStore::open(&path, Durability::Full).unwrap();
    let release = Arc::new(tokio::sync::Notify::new());

    let engine = errand(open(), release.clone()).start().await.unwrap();
    let deeper = nested("note", MAX_MESSAGE_DEPTH + 1);
    match engine.send(Request::operator(deeper)).await {
        Err(EngineError::InvalidInput(why)) => {
            assert!(why.contains(&MAX_MESSAGE_DEPTH.to_string()), "{why}")
        }
        other => panic!("expected the depth limit, got {other:?}"),
    }
    let rows = engine.store().list(TaskQuery::default()).await.unwrap();
    assert!(
        rows.is_empty(),
        "a refused message leaves no task: {rows:?}"
    );

    let deepest = nested("note", MAX_MESSAGE_DEPTH);
    let id = engine
        .send(Request::operator(deepest.clone()))
        .await
        .unwrap();
    let waiting = settled(&engine, &id).await;
    assert_eq!(waiting.status.state, TaskState::InputRequired);
    let first = &waiting.history[0];
    assert_eq!(first.metadata, deepest.metadata, "read back as sent");
    engine.shutdown().await;
    drop(engine);

    let engine = errand(open(), release).start().await.unwrap();
    let mut answer = nested("deep answer", MAX_MESSAGE_DEPTH);
    answer.task_id = Some(id.to_string());
    engine
        .send(Request::operator(answer.clone()))
        .await
        .unwrap();
    let done = settled(&engine, &id).await;
    assert_eq!(done.status.state, TaskState::Completed);
    let history = done.history;
    assert_eq!(history[0].metadata, deepest.metadata);
    assert!(history.iter().any(|m| m.metadata == answer.metadata));
}

/// A client that retries `message/send` (it lost the answer to a reset connection) gets the task its
/// first send created, not a second one; A2A's `messageId` is unique per message, and a task id is
/// derived from it and the sender, so another principal's message with the same id is another task.
#[test(multi_thread)]
async fn a_retried_message_finds_its_task_instead_of_starting_another() {
    let store = MemoryStore::new();
    let engine = errand(store.clone(), Arc::new(tokio::sync::Notify::new()))
        .start()
        .await
        .unwrap();
    let message = user("note");
    let first = engine
        .send(Request::operator(message.clone()))
        .await
        .unwrap();
    let again = engine
        .send(Request::operator(message.clone()))
        .await
        .unwrap();
    assert_eq!(first, again, "the retry names the first task");
    // Sent twice at the same time: still one task.
    let twice = user("note");
    let (a, b) = tokio::join!(
        engine.send(Request::operator(twice.clone())),
        engine.send(Request::operator(twice.clone()))
    );
    assert_eq!(a.unwrap(), b.unwrap());
    // Another principal's message with the same id is its own task.
    let alice = engine
        .send(Request::new(Caller::principal("alice"), message.clone()))
        .await
        .unwrap();
    assert_ne!(alice, first);
    let rows = store.list(TaskQuery::default()).await.unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    // The retry did not disturb the task: it waits for its note, and takes it once.
    assert_eq!(
        settled(&engine, &first).await.status.state,
        TaskState::InputRequired
    );
    engine
        .send(Request::operator(reply(&first, "hi")))
        .await
        .unwrap();
    assert_eq!(
        settled(&engine, &first).await.status.state,
        TaskState::Completed
    );
}

/// A `messageId` names one message: another message under a used id is a client bug and gets a clear
/// error (a new task's, and a reply's), never a task that ignores what was sent; the same reply sent
/// again (its answer was lost) gets the task as it is, and is not taken a second time.
#[test(multi_thread)]
async fn a_message_id_names_one_message_and_a_reply_sent_again_is_not_taken_twice() {
    let store = MemoryStore::new();
    let engine = errand(store.clone(), Arc::new(tokio::sync::Notify::new()))
        .start()
        .await
        .unwrap();
    let message = user("note");
    let task = engine
        .send(Request::operator(message.clone()))
        .await
        .unwrap();
    let mut other = user("something else");
    other.message_id = message.message_id.clone();
    let refused = engine.send(Request::operator(other)).await.unwrap_err();
    assert!(
        matches!(&refused, EngineError::InvalidInput(why) if why.contains("already used for a different message")),
        "{refused:?}"
    );
    assert_eq!(
        settled(&engine, &task).await.status.state,
        TaskState::InputRequired
    );

    let answer = reply(&task, "hi");
    engine
        .send(Request::operator(answer.clone()))
        .await
        .unwrap();
    assert_eq!(
        settled(&engine, &task).await.status.state,
        TaskState::Completed
    );
    // The same reply again: the task as it is (completed), not "the task has finished".
    assert_eq!(
        engine
            .send(Request::operator(answer.clone()))
            .await
            .unwrap(),
        task
    );
    let mut changed = answer.clone();
    changed.parts = vec![radkit_runtime::model::Part::text("bye")];
    let refused = engine.send(Request::operator(changed)).await.unwrap_err();
    assert!(
        matches!(&refused, EngineError::InvalidInput(why) if why.contains("already used for a different message")),
        "{refused:?}"
    );
    let received = store
        .journal(&task, 0)
        .await
        .unwrap()
        .iter()
        .filter(|r| {
            matches!(&r.entry, radkit_runtime::journal::Entry::MessageReceived { message } if message.message_id == answer.message_id)
        })
        .count();
    assert_eq!(received, 1, "the reply was taken once");
}

/// A first message sent again finds its task through the store's refusal of a second creating
/// append; that refusal is not a failed write of the task's: the task is not marked stalled, and
/// whoever follows it is not told that its run stopped (the follower sees the answer and the end).
async fn a_first_message_sent_again_leaves_its_task_and_followers_alone(store: impl Store) {
    let engine = errand(store, Arc::new(tokio::sync::Notify::new()))
        .start()
        .await
        .unwrap();
    let message = user("note");
    let task = engine
        .send(Request::operator(message.clone()))
        .await
        .unwrap();
    assert_eq!(
        settled(&engine, &task).await.status.state,
        TaskState::InputRequired
    );
    // Its driver let it go (the question was published a moment before): a retry now takes the
    // free gate and makes the creating append the store refuses.
    within(PATIENCE, "the driver to let the task go", async {
        while engine.tasks_in_hand() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    // A follower that has seen everything so far: the next thing it hears is live.
    let seen = engine
        .snapshot(&Caller::Operator, &task, Some(0))
        .await
        .unwrap()
        .last_seq;
    let mut follower = engine
        .subscribe_from(&Caller::Operator, &task, seen)
        .await
        .unwrap();
    // Listening while the retries are made: whatever the task's run is said to do reaches it.
    let followed = tokio::spawn(async move {
        loop {
            match follower.next().await {
                Some(Ok(update)) if update.is_final => return Ok(update),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => panic!("the subscription ended before the task did"),
            }
        }
    });
    for _ in 0..3 {
        assert_eq!(
            engine
                .send(Request::operator(message.clone()))
                .await
                .unwrap(),
            task,
            "the retry finds the task"
        );
    }
    assert_eq!(
        settled(&engine, &task).await.status.state,
        TaskState::InputRequired
    );
    engine
        .send(Request::operator(reply(&task, "hi")))
        .await
        .unwrap();
    let ended = within(PATIENCE, "the follower to see the end", followed)
        .await
        .unwrap()
        .expect("no failed write was reported to the follower");
    assert!(matches!(
        ended.record.entry,
        radkit_runtime::journal::Entry::Terminal { .. }
    ));
}

#[test(multi_thread)]
async fn a_first_message_sent_again_leaves_its_task_and_followers_alone_in_memory() {
    a_first_message_sent_again_leaves_its_task_and_followers_alone(MemoryStore::new()).await;
}

#[test(multi_thread)]
async fn a_first_message_sent_again_leaves_its_task_and_followers_alone_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = radkit_runtime::store::SqliteStore::open_default(dir.path().join("radkit.db"))
        .expect("open the SQLite store");
    a_first_message_sent_again_leaves_its_task_and_followers_alone(store).await;
}

/// The same first message sent eight times at once (a client retrying before its first send was
/// answered) makes one task, whose effect runs once, and every send gets that task: the sends that
/// lose the race find the task the winner's first append created, and write nothing.
async fn the_same_first_message_sent_at_once_makes_one_task(store: Arc<dyn Store>) {
    let ledger = common::Ledger::default();
    let engine = Engine::builder_arc(store.clone())
        .without_registered_skills()
        .skill(common::pay_skill())
        .effects(common::pay_effects(&ledger))
        .start()
        .await
        .unwrap();
    let message = user("10 EUR");
    let sends = (0..8).map(|_| engine.send(Request::operator(message.clone())));
    let tasks = within(
        PATIENCE,
        "eight sends of one message",
        futures::future::try_join_all(sends),
    )
    .await
    .unwrap();
    assert!(tasks.iter().all(|t| *t == tasks[0]), "{tasks:?}");
    assert_eq!(
        settled(&engine, &tasks[0]).await.status.state,
        TaskState::InputRequired
    );
    assert_eq!(ledger.calls_of("charge_card").len(), 1, "charged once");
    let journal = store.journal(&tasks[0], 0).await.unwrap();
    let created = journal
        .iter()
        .filter(|r| matches!(r.entry, radkit_runtime::journal::Entry::TaskCreated { .. }))
        .count();
    assert_eq!(created, 1);
    let seqs: Vec<u64> = journal.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
}

#[test(multi_thread)]
async fn the_same_first_message_sent_at_once_makes_one_task_in_memory() {
    the_same_first_message_sent_at_once_makes_one_task(Arc::new(MemoryStore::new())).await;
}

#[test(multi_thread)]
async fn the_same_first_message_sent_at_once_makes_one_task_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = radkit_runtime::store::SqliteStore::open_default(dir.path().join("radkit.db"))
        .expect("open the SQLite store");
    the_same_first_message_sent_at_once_makes_one_task(Arc::new(store)).await;
}

/// The task a message starts is named by its sender as well as its `messageId`: two principals whose
/// clients happen to pick the same `messageId` (names of the same length, so nothing but the name
/// tells them apart) each get a task of their own, which the other cannot see; neither send finds,
/// nor is refused because of, the other's task.
#[test(multi_thread)]
async fn two_principals_sending_the_same_message_id_get_two_tasks() {
    let store = MemoryStore::new();
    let engine = errand(store.clone(), Arc::new(tokio::sync::Notify::new()))
        .start()
        .await
        .unwrap();
    let (alice, carol) = (Caller::principal("alice"), Caller::principal("carol"));
    let message = user("note");
    let alices = engine
        .send(Request::new(alice.clone(), message.clone()))
        .await
        .unwrap();
    let carols = engine
        .send(Request::new(carol.clone(), message.clone()))
        .await
        .expect("carol's send starts her own task");
    assert_ne!(alices, carols, "one task per sender");
    for (caller, own, other) in [(&alice, &alices, &carols), (&carol, &carols, &alices)] {
        assert_eq!(
            engine.task(caller, own, None).await.unwrap().id,
            own.as_str()
        );
        assert!(
            matches!(
                engine.task(caller, other, None).await,
                Err(EngineError::TaskNotFound(_))
            ),
            "{caller:?} cannot see the other principal's task"
        );
    }
    let rows = store.list(TaskQuery::default()).await.unwrap();
    let mut owners: Vec<_> = rows.iter().map(|r| r.principal.as_deref()).collect();
    owners.sort();
    assert_eq!(owners, vec![Some("alice"), Some("carol")], "{rows:?}");
    // Each one's retry still finds its own task.
    let again = engine
        .send(Request::new(carol.clone(), message.clone()))
        .await
        .unwrap();
    assert_eq!(again, carols);
}
