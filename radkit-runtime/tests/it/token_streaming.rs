//! Token streaming through the engine (`ctx.llm(..).stream_artifact(..)` / `.stream_status()`): a
//! model's text reaches the task's live subscribers while it is generated, and only the answer is
//! journaled (the receipt, then the artifact or message that sends it whole). What a client makes of
//! the stream (chunks applied with A2A's `append` rule, then the journaled artifact) is always the
//! answer: after a retried attempt, after a crash before the receipt (the call is reissued with the
//! same InvocationId and its text starts over), and after a crash after it (nothing is streamed
//! again; the model is not called again).

use crate::support::common;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::{
    stream_event, token_event, Boundary, Caller, Engine, EngineBuilder, Fault, Followed,
    StreamEvent, Subscription,
};
use radkit_runtime::flow::step_table::{Step, StepInput, StepTable};
use radkit_runtime::flow::{
    EffectError, InvocationId, RetryPolicy, SkillInfo, StepCtx, StepResult,
};
use radkit_runtime::journal::{Entry, JournalRecord};
use radkit_runtime::llm::{LlmRequest, LlmResponse, Model, Tokens};
use radkit_runtime::model::{Message, TaskId, TaskState};
use radkit_runtime::store::MemoryStore;
use tokio::sync::Semaphore;

use common::{within, PATIENCE};

/// One attempt of the model: the pieces it streams, then its answer (their concatenation), a
/// transient error, or nothing ever (a generation the process dies in).
#[derive(Clone)]
enum Attempt {
    Answers(Vec<&'static str>),
    FailsAfter(Vec<&'static str>),
    HangsAfter(Vec<&'static str>),
}

/// A model that streams scripted attempts, each once the test lets it start (`go`), and tells the
/// test (`streamed`) when an attempt has sent its pieces.
#[derive(Clone)]
struct Writer {
    attempts: Arc<Mutex<VecDeque<Attempt>>>,
    go: Arc<Semaphore>,
    streamed: Arc<Semaphore>,
    /// The InvocationId of every call, in order.
    ids: Arc<Mutex<Vec<InvocationId>>>,
    completes: Arc<AtomicU32>,
}

impl Writer {
    fn new(attempts: Vec<Attempt>) -> Self {
        Writer {
            attempts: Arc::new(Mutex::new(attempts.into())),
            go: Arc::new(Semaphore::new(0)),
            streamed: Arc::new(Semaphore::new(0)),
            ids: Arc::default(),
            completes: Arc::default(),
        }
    }

    fn calls(&self) -> usize {
        self.ids.lock().unwrap().len()
    }
}

#[async_trait]
impl Model for Writer {
    async fn complete(&self, _: LlmRequest) -> Result<LlmResponse, EffectError> {
        self.completes.fetch_add(1, Ordering::SeqCst);
        Err(EffectError::permanent("a streamed call must be streamed"))
    }

    async fn stream(
        &self,
        request: LlmRequest,
        tokens: &Tokens,
    ) -> Result<LlmResponse, EffectError> {
        self.ids.lock().unwrap().push(request.invocation_id.clone());
        self.go.acquire().await.unwrap().forget();
        let attempt = self
            .attempts
            .lock()
            .unwrap()
            .pop_front()
            .expect("an attempt");
        let (pieces, end) = match attempt {
            Attempt::Answers(p) => (p, 0),
            Attempt::FailsAfter(p) => (p, 1),
            Attempt::HangsAfter(p) => (p, 2),
        };
        for piece in &pieces {
            tokens.send(piece);
        }
        self.streamed.add_permits(1);
        match end {
            0 => Ok(LlmResponse::answer(
                serde_json::Value::String(pieces.concat()),
                None,
            )),
            1 => Err(EffectError::transient("the connection was cut")),
            _ => std::future::pending().await,
        }
    }
}

/// Streams its answer into the artifact `answer` (or as status messages), then completes.
struct Author {
    status: bool,
}

fn write<'a>(author: &'a Author, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let call = ctx.llm("writer").retry(RetryPolicy {
            max_attempts: 3,
            initial_backoff_ms: 1,
            max_backoff_ms: 1,
        });
        let call = if author.status {
            call.stream_status()
        } else {
            call.stream_artifact("answer")
        };
        let answer: String = call.run(input.message().joined_texts()).await?;
        ctx.complete(format!("wrote {} bytes", answer.len()), vec![])
    })
}

static WRITE: &[Step<Author>] = &[Step::new("write", write).start().takes_user_message()];

fn engine(store: &MemoryStore, model: &Writer, status: bool) -> EngineBuilder {
    Engine::builder(store.clone())
        .without_registered_skills()
        .skill(
            StepTable::new(SkillInfo::new("author", "Author"), Author { status }, WRITE).unwrap(),
        )
        .effects(Effects::new().model("writer", model.clone()))
}

async fn start(engine: &Engine) -> (TaskId, Subscription) {
    let task = engine
        .send(radkit_runtime::engine::Request::operator(
            Message::user_text("a haiku"),
        ))
        .await
        .unwrap();
    let sub = engine
        .subscribe(&Caller::Operator, &task)
        .await
        .unwrap()
        .with_tokens();
    (task, sub)
}

/// What a subscriber saw, as the A2A events a client gets.
#[derive(Default)]
struct Seen {
    events: Vec<StreamEvent>,
    /// For each event: it came from a piece of text (not journaled).
    live: Vec<bool>,
    records: Vec<JournalRecord>,
}

impl Seen {
    fn push(&mut self, sub: &Subscription, item: Followed) {
        match item {
            Followed::Tokens(chunk) => {
                self.events
                    .push(token_event(&sub.task_id, &sub.context_id, &chunk, 0));
                self.live.push(true);
            }
            Followed::Update(update) => {
                if let Some(event) = stream_event(&sub.task_id, &sub.context_id, &update) {
                    self.events.push(event);
                    self.live.push(false);
                }
                self.records.push(update.record);
            }
        }
    }

    /// The artifact's text as a client applying A2A's `append` rule holds it after each event.
    fn artifact_text(&self) -> String {
        let mut text = String::new();
        for event in &self.events {
            if let StreamEvent::Artifact(update) = event {
                if !update.append {
                    text.clear();
                }
                for part in &update.artifact.parts {
                    let part = serde_json::to_value(part).unwrap();
                    text.push_str(part["text"].as_str().unwrap_or_default());
                }
            }
        }
        text
    }

    fn live_texts(&self) -> Vec<String> {
        self.events
            .iter()
            .zip(&self.live)
            .filter(|(_, live)| **live)
            .map(|(event, _)| match event {
                StreamEvent::Artifact(a) => serde_json::to_value(&a.artifact.parts[0]).unwrap()
                    ["text"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                StreamEvent::Status(s) => s.status.message.as_ref().unwrap().joined_texts(),
            })
            .collect()
    }
}

/// Follow `sub` to its end.
async fn follow(sub: &mut Subscription, seen: &mut Seen) {
    within(PATIENCE, "the task's stream to end", async {
        while let Some(item) = sub.next_followed().await {
            seen.push(sub, item.unwrap());
        }
    })
    .await;
}

#[test(multi_thread)]
async fn streamed_text_reaches_a_subscriber_before_the_journaled_artifact_that_replaces_it() {
    let store = MemoryStore::new();
    let model = Writer::new(vec![Attempt::Answers(vec!["Old ", "pond, ", "a frog"])]);
    let engine = engine(&store, &model, false).start().await.unwrap();
    let (task, mut sub) = start(&engine).await;
    model.go.add_permits(1);
    let mut seen = Seen::default();
    follow(&mut sub, &mut seen).await;

    assert_eq!(seen.live_texts(), ["Old ", "pond, ", "a frog"]);
    // Every piece came before the journaled artifact, which is the answer whole and its last chunk.
    let whole = seen
        .events
        .iter()
        .position(|e| matches!(e, StreamEvent::Artifact(a) if a.last_chunk))
        .expect("the journaled artifact");
    assert!(seen.live[..whole].iter().filter(|l| **l).count() == 3);
    assert!(
        !seen.live[whole..].iter().any(|l| *l),
        "no piece after the artifact"
    );
    assert_eq!(seen.artifact_text(), "Old pond, a frog");
    let StreamEvent::Artifact(artifact) = &seen.events[whole] else {
        unreachable!()
    };
    assert!(
        !artifact.append,
        "the whole answer replaces the streamed chunks"
    );

    // The journal holds the answer in the receipt and the artifact, and no record per piece.
    let journal = engine.journal(&Caller::Operator, &task).await.unwrap();
    let holding: Vec<&str> = journal
        .iter()
        .filter(|r| serde_json::to_string(&r.entry).unwrap().contains("pond"))
        .map(|r| match &r.entry {
            Entry::ReceiptRecorded { .. } => "receipt",
            Entry::ArtifactEmitted { .. } => "artifact",
            Entry::CommandIssued { .. } => "command",
            _ => "other",
        })
        .collect();
    assert!(
        holding.contains(&"receipt") && holding.contains(&"artifact"),
        "{holding:?}"
    );
    assert!(!holding.contains(&"other"), "{holding:?}");
    let done = engine.task(&Caller::Operator, &task, None).await.unwrap();
    assert_eq!(done.status.state, TaskState::Completed);
    assert_eq!(done.artifacts.len(), 1);
    assert_eq!(done.artifacts[0].parts.len(), 1);
    assert_eq!(
        model.completes.load(Ordering::SeqCst),
        0,
        "the call was streamed"
    );
}

#[test(multi_thread)]
async fn streamed_status_messages_carry_the_pieces_and_the_answer_is_journaled_as_a_final_message()
{
    let store = MemoryStore::new();
    let model = Writer::new(vec![Attempt::Answers(vec!["Old ", "pond"])]);
    let engine = engine(&store, &model, true).start().await.unwrap();
    let (task, mut sub) = start(&engine).await;
    model.go.add_permits(1);
    let mut seen = Seen::default();
    follow(&mut sub, &mut seen).await;

    assert_eq!(seen.live_texts(), ["Old ", "pond"]);
    let pieces: Vec<&Message> = seen
        .events
        .iter()
        .zip(&seen.live)
        .filter(|(_, live)| **live)
        .filter_map(|(e, _)| match e {
            StreamEvent::Status(s) => s.status.message.as_ref(),
            StreamEvent::Artifact(_) => None,
        })
        .collect();
    let meta = &pieces[1].metadata.as_ref().unwrap()["radkit/tokens"];
    assert_eq!(meta["attempt"], 1);
    assert_eq!(meta["index"], 1);
    assert_ne!(pieces[0].message_id, pieces[1].message_id);
    // After the pieces, the journaled message with the whole answer, marked final.
    let journal = engine.journal(&Caller::Operator, &task).await.unwrap();
    let emitted: Vec<&Message> = journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::MessageEmitted { message } => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(emitted.len(), 1);
    assert_eq!(emitted[0].joined_texts(), "Old pond");
    assert_eq!(
        emitted[0].metadata.as_ref().unwrap()["radkit/tokens"]["final"],
        true
    );
}

#[test(multi_thread)]
async fn a_retried_attempt_starts_the_streamed_artifact_over() {
    let store = MemoryStore::new();
    let model = Writer::new(vec![
        Attempt::FailsAfter(vec!["Old ", "po"]),
        Attempt::Answers(vec!["Old ", "pond"]),
    ]);
    let engine = engine(&store, &model, false).start().await.unwrap();
    let (_task, mut sub) = start(&engine).await;
    model.go.add_permits(2);
    let mut seen = Seen::default();
    follow(&mut sub, &mut seen).await;

    assert_eq!(seen.live_texts(), ["Old ", "po", "Old ", "pond"]);
    let firsts: Vec<bool> = seen
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Artifact(a) => Some(a.append),
            StreamEvent::Status(_) => None,
        })
        .collect();
    // Each attempt's first chunk replaces, the next ones append; the journaled whole replaces.
    assert_eq!(firsts, [false, true, false, true, false]);
    assert_eq!(seen.artifact_text(), "Old pond");
    let ids = model.ids.lock().unwrap().clone();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], ids[1], "a retry is the same call");
}

/// A crash while the model generates (its command journaled, no receipt): a fresh engine reissues
/// the call with the same InvocationId, and a client that follows the task again sees the reissued
/// call's text from its start, then the answer whole — never the half the crash cut.
#[test(multi_thread)]
async fn crash_mid_generation_reissues_the_call_and_its_text_starts_over() {
    let store = MemoryStore::new();
    let model = Writer::new(vec![
        Attempt::HangsAfter(vec!["Old ", "po"]),
        Attempt::Answers(vec!["Old ", "pond, ", "a frog"]),
    ]);
    let first = engine(&store, &model, false).start().await.unwrap();
    let (task, mut sub) = start(&first).await;
    model.go.add_permits(1);
    let mut before = Seen::default();
    within(PATIENCE, "the first attempt's pieces", async {
        while before.live_texts().len() < 2 {
            let item = sub.next_followed().await.unwrap().unwrap();
            before.push(&sub, item);
        }
    })
    .await;
    let _ = within(PATIENCE, "the pieces sent", model.streamed.acquire()).await;
    first.halt();
    drop(sub);
    assert_eq!(before.artifact_text(), "Old po");

    let second = engine(&store, &model, false).start().await.unwrap();
    let mut sub = second
        .subscribe(&Caller::Operator, &task)
        .await
        .unwrap()
        .with_tokens();
    model.go.add_permits(1);
    let mut after = Seen::default();
    follow(&mut sub, &mut after).await;
    // The client that saw the cut half applies what it sees now: the answer, once.
    let mut client = before;
    for (event, live) in after.events.iter().zip(&after.live) {
        if *live || matches!(event, StreamEvent::Artifact(_)) {
            client.events.push(event.clone());
            client.live.push(*live);
        }
    }
    assert_eq!(client.artifact_text(), "Old pond, a frog");
    assert_eq!(after.artifact_text(), "Old pond, a frog");
    let ids = model.ids.lock().unwrap().clone();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], ids[1], "the reissued call has the crashed one's id");
    let done = common::settled(&second, &task).await;
    assert_eq!(done.status.state, TaskState::Completed);
}

/// A crash after the receipt is written and before the whole answer is journaled: a fresh engine
/// does not call the model again and streams nothing; it journals the artifact from the receipt.
#[test(multi_thread)]
async fn crash_after_a_streamed_calls_receipt_streams_nothing_again() {
    let store = MemoryStore::new();
    let model = Writer::new(vec![Attempt::Answers(vec!["Old ", "pond"])]);
    let fired = Arc::new(AtomicBool::new(false));
    let crash = {
        let fired = fired.clone();
        move |f: &Fault| {
            f.boundary == Boundary::ReceiptWritten
                && f.what.as_deref().is_some_and(|w| w.contains("writer"))
                && !fired.swap(true, Ordering::SeqCst)
        }
    };
    let first = engine(&store, &model, false)
        .fault_hook(crash)
        .start()
        .await
        .unwrap();
    let (task, _sub) = start(&first).await;
    model.go.add_permits(1);
    common::wait_halted(&first).await;
    drop(first);

    let second = engine(&store, &model, false).start().await.unwrap();
    let mut sub = second
        .subscribe(&Caller::Operator, &task)
        .await
        .unwrap()
        .with_tokens();
    let mut seen = Seen::default();
    follow(&mut sub, &mut seen).await;
    assert!(seen.live_texts().is_empty(), "{:?}", seen.live_texts());
    assert_eq!(seen.artifact_text(), "Old pond");
    assert_eq!(model.calls(), 1, "the receipt short-circuits the call");
    let artifacts = seen
        .records
        .iter()
        .filter(|r| matches!(r.entry, Entry::ArtifactEmitted { .. }))
        .count();
    assert_eq!(artifacts, 1);
}

/// Streams two answers at once (`futures::join!`): `fast` answers at once, `writer` when let.
struct Pair;

fn pair<'a>(_: &'a Pair, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let fast = ctx.llm("fast").stream_artifact("fast").run::<String>("a");
        let slow = ctx.llm("writer").stream_artifact("slow").run::<String>("b");
        let (fast, slow) = futures::join!(fast, slow);
        ctx.complete(format!("{} | {}", fast?, slow?), vec![])
    })
}

static PAIR: &[Step<Pair>] = &[Step::new("pair", pair).start().takes_user_message()];

/// The journaled answer of a streamed call takes a position reserved when the call was made: it
/// may start while a sibling of its batch still runs (the one that finished first does not decide
/// any id), and a replay takes the same ids.
#[test(multi_thread)]
async fn streamed_calls_in_one_batch_journal_their_answers_whichever_finishes_first() {
    let store = MemoryStore::new();
    let model = Writer::new(vec![Attempt::Answers(vec!["slow ", "answer"])]);
    let engine = Engine::builder(store.clone())
        .without_registered_skills()
        .skill(StepTable::new(SkillInfo::new("pair", "Pair"), Pair, PAIR).unwrap())
        .effects(Effects::new().model("writer", model.clone()).model(
            "fast",
            radkit_runtime::llm::ScriptedModel::sequence(vec![serde_json::json!("fast answer")]),
        ))
        .start()
        .await
        .unwrap();
    let task = engine
        .send(radkit_runtime::engine::Request::operator(
            Message::user_text("go"),
        ))
        .await
        .unwrap();
    // The fast call's answer is journaled while the slow one still generates.
    within(PATIENCE, "the fast answer's artifact", async {
        loop {
            let journal = engine.journal(&Caller::Operator, &task).await.unwrap();
            if journal.iter().any(|r| matches!(&r.entry, Entry::ArtifactEmitted { artifact, .. } if artifact.name.as_deref() == Some("fast"))) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
    model.go.add_permits(1);
    let done = common::settled(&engine, &task).await;
    assert_eq!(done.status.state, TaskState::Completed, "{done:?}");
    assert_eq!(
        done.status.message.map(|m| m.joined_texts()).as_deref(),
        Some("fast answer | slow answer")
    );
    assert_eq!(done.artifacts.len(), 2);
}

/// A subscriber that reads late gets the journal from the store, not the live channel: the pieces
/// it queued meanwhile still come before the journaled artifact that replaces them.
#[test(multi_thread)]
async fn pieces_queued_by_a_late_reader_come_before_the_artifact_read_from_the_store() {
    let store = MemoryStore::new();
    let model = Writer::new(vec![Attempt::Answers(vec!["Old ", "pond"])]);
    let engine = engine(&store, &model, false).start().await.unwrap();
    let (task, mut sub) = start(&engine).await;
    model.go.add_permits(1);
    // Nothing is read until the task has ended: its records are in the store and the live channel.
    common::settled(&engine, &task).await;
    let mut seen = Seen::default();
    follow(&mut sub, &mut seen).await;
    assert_eq!(seen.live_texts(), ["Old ", "pond"]);
    let whole = seen
        .events
        .iter()
        .position(|e| matches!(e, StreamEvent::Artifact(a) if a.last_chunk))
        .expect("the journaled artifact");
    assert!(
        !seen.live[whole..].iter().any(|l| *l),
        "no piece after the artifact"
    );
    assert_eq!(seen.artifact_text(), "Old pond");
}

#[test(multi_thread)]
async fn a_subscriber_that_comes_in_mid_call_gets_the_pieces_sent_so_far_first() {
    let store = MemoryStore::new();
    let model = Writer::new(vec![Attempt::HangsAfter(vec!["Old ", "pond, "])]);
    let engine = engine(&store, &model, false).start().await.unwrap();
    let task = engine
        .send(radkit_runtime::engine::Request::operator(
            Message::user_text("a haiku"),
        ))
        .await
        .unwrap();
    model.go.add_permits(1);
    // The call has sent its pieces before anyone follows the task (as when a stream's send starts
    // the task and the model answers at once, or a client resubscribes mid-call).
    within(PATIENCE, "the pieces to be sent", model.streamed.acquire())
        .await
        .unwrap()
        .forget();
    let mut sub = engine
        .subscribe(&Caller::Operator, &task)
        .await
        .unwrap()
        .with_tokens();
    let mut seen = Seen::default();
    within(PATIENCE, "the pieces sent so far", async {
        while seen.live.iter().filter(|l| **l).count() < 2 {
            let item = sub.next_followed().await.expect("the task goes on");
            seen.push(&sub, item.unwrap());
        }
    })
    .await;
    assert_eq!(
        seen.live_texts(),
        ["Old ", "pond, "],
        "each piece once, in order"
    );
    assert_eq!(seen.artifact_text(), "Old pond, ");
    engine.halt();
}
