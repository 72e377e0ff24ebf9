//! A store that stops accepting writes (a full disk) and accepts them again: clients get the
//! documented `-32050 storage unavailable` at once — a blocking `message/send` whose task's run could
//! not write returns instead of hanging — and the task resumes by itself once writes work again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use radkit::effects::Effects;
use radkit::engine::Engine;
use radkit::flow::{EffectPolicy, StepCtx, StepResult};
use radkit::flow_skill;
use radkit::journal::JournalRecord;
use radkit::server::ServerConfig;
use radkit::store::{Append, MemoryStore, Store, StoreError, TaskQuery, TaskRecord};
use radkit::tools::FnTool;
use serde_json::{json, Value};

/// How long anything here may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(20);

/// Calls `wait` (which returns when the test lets it), then completes.
#[derive(Default)]
struct Waits;

#[flow_skill(id = "waits", name = "Waits", register = false)]
impl Waits {
    #[step(start)]
    async fn work(&self, ctx: &StepCtx, _: radkit::model::Content) -> StepResult {
        let _: Value = ctx.tool("wait").call(json!({})).await?;
        ctx.complete("done", vec![])
    }
}

/// A memory store whose appends fail while `full` is set, as on a full disk (reads work).
#[derive(Clone, Default)]
struct FillableStore {
    inner: MemoryStore,
    full: Arc<AtomicBool>,
}

#[async_trait]
impl Store for FillableStore {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
        if self.full.load(Ordering::SeqCst) {
            return Err(StoreError::backend(
                "appending",
                "database or disk is full (/var/lib/radkit/tasks.sqlite)",
            ));
        }
        self.inner.append(append).await
    }

    async fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        self.inner.task(task_id).await
    }

    async fn journal(
        &self,
        task_id: &str,
        after_seq: u64,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        self.inner.journal(task_id, after_seq).await
    }

    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        self.inner.journal_for_replay(task_id).await
    }

    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        self.inner.list(query).await
    }
}

/// An engine serving `Waits` over a fillable store, its `wait` tool held until the test releases it.
struct Gated {
    store: FillableStore,
    /// One permit lets one call of `wait` return.
    release: Arc<tokio::sync::Semaphore>,
    /// Calls of `wait` begun.
    started: Arc<std::sync::atomic::AtomicUsize>,
    engine: Engine,
}

async fn gated() -> Gated {
    let store = FillableStore::default();
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let wait = {
        let (release, started) = (release.clone(), started.clone());
        FnTool::new(EffectPolicy::Idempotent, move |_, _| {
            let (release, started) = (release.clone(), started.clone());
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                release.acquire().await.expect("open").forget();
                Ok(json!("released"))
            }
        })
    };
    let engine = Engine::builder(store.clone())
        .without_registered_skills()
        .skill(Waits)
        .effects(Effects::new().tool("wait", wait))
        .start()
        .await
        .unwrap();
    Gated {
        store,
        release,
        started,
        engine,
    }
}

async fn rpc(client: &reqwest::Client, url: &str, method: &str, params: Value) -> Value {
    let request = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    client
        .post(url)
        .json(&request)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method}: {e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("{method}: not JSON: {e}"))
}

fn message(text: &str) -> Value {
    json!({ "role": "user", "parts": [{ "kind": "text", "text": text }],
            "messageId": radkit::model::new_id(), "kind": "message" })
}

#[test(multi_thread)]
async fn a_full_disk_answers_storage_unavailable_at_once_and_the_task_resumes_when_space_returns() {
    let Gated {
        store,
        release,
        engine,
        ..
    } = gated().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let server = tokio::spawn(radkit::server::serve(
        listener,
        engine.clone(),
        ServerConfig::new(url.clone()),
    ));
    let client = reqwest::Client::builder()
        .timeout(PATIENCE)
        .build()
        .unwrap();

    // A blocking send whose task's run cannot write its tool's receipt: the answer comes at once,
    // the documented storage error, and no detail of the store.
    let blocking = {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move {
            let params = json!({ "message": message("go"), "configuration": { "blocking": true } });
            rpc(&client, &url, "message/send", params).await
        })
    };
    let task_id = tokio::time::timeout(PATIENCE, async {
        loop {
            let rows = store.list(TaskQuery::default()).await.unwrap();
            if let Some(row) = rows.first() {
                return row.id.clone();
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the task is created");
    store.full.store(true, Ordering::SeqCst);
    release.add_permits(1);
    let answer = tokio::time::timeout(PATIENCE, blocking)
        .await
        .expect("the blocking send returns")
        .unwrap();
    // Answered at all: the disk stays full, so a send that waited for its task to move on would
    // never be answered within the bound above.
    assert_eq!(answer["error"]["code"], -32050, "{answer}");
    let text = answer.to_string();
    assert!(
        !text.contains("/var/lib") && !text.contains("disk is full"),
        "{text}"
    );

    // A new task cannot be written either: the same error, and nothing acknowledged.
    let refused = rpc(
        &client,
        &url,
        "message/send",
        json!({ "message": message("new") }),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32050, "{refused}");
    assert_eq!(store.list(TaskQuery::default()).await.unwrap().len(), 1);

    // Space returns: the task resumes by itself (no request, no restart) and completes; its tool
    // runs again with the same key, the receipt that could not be written being lost.
    store.full.store(false, Ordering::SeqCst);
    release.add_permits(1);
    let done = tokio::time::timeout(PATIENCE, async {
        loop {
            let got = rpc(&client, &url, "tasks/get", json!({ "id": task_id })).await;
            if got["result"]["status"]["state"] == "completed" {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the task completes once the store accepts writes");
    assert_eq!(
        done["result"]["status"]["message"]["parts"][0]["text"],
        "done"
    );
    server.abort();
    engine.halt();
}

/// The race a blocking send can lose on a busy machine: the task's run stops on a failed append
/// before the send's wait begins. Whoever begins following the task after that is told the store
/// is unavailable at once (not left waiting for a write that cannot happen: the reload reissues a
/// tool that never returns here), and once an append succeeds again the task is followed as ever.
#[test(multi_thread)]
async fn a_subscriber_that_begins_after_a_failed_append_is_told_at_once_and_followed_once_writes_work(
) {
    use radkit::engine::{Caller, EngineError, Request};
    use radkit::model::Message;

    let Gated {
        store,
        release,
        started,
        engine,
    } = gated().await;
    let task = engine
        .send(Request::operator(Message::user_text("go")))
        .await
        .unwrap();
    // A subscriber from the start hears the run stop: that is when the later ones begin.
    let mut early = engine.subscribe(&Caller::Operator, &task).await.unwrap();
    // The tool runs (its command is journaled): the append that fails is its receipt's, and the
    // reload that follows reissues the tool, which waits, appending nothing.
    tokio::time::timeout(PATIENCE, async {
        while started.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the tool starts");
    store.full.store(true, Ordering::SeqCst);
    release.add_permits(1);
    let heard = tokio::time::timeout(PATIENCE, async {
        loop {
            match early.next().await {
                Some(Ok(_)) => continue,
                other => return other,
            }
        }
    })
    .await
    .expect("the early subscriber hears of the failed append");
    assert!(
        matches!(heard, Some(Err(EngineError::StorageUnavailable { .. }))),
        "{heard:?}"
    );

    // Begun after the run stopped: the records the store has, then the same error, at once.
    let mut late = engine.subscribe(&Caller::Operator, &task).await.unwrap();
    let told = tokio::time::timeout(PATIENCE, async {
        let mut records = 0;
        loop {
            match late.next().await {
                Some(Ok(_)) => records += 1,
                other => return (records, other),
            }
        }
    })
    .await
    .expect("a late subscriber is told, not left waiting");
    assert!(told.0 > 0, "the committed records come first");
    assert!(
        matches!(told.1, Some(Err(EngineError::StorageUnavailable { .. }))),
        "{:?}",
        told.1
    );
    let settled = tokio::time::timeout(PATIENCE, engine.wait_settled(&Caller::Operator, &task))
        .await
        .expect("a blocking wait begun late returns");
    assert!(
        matches!(settled, Err(EngineError::StorageUnavailable { .. })),
        "{settled:?}"
    );

    // Writes work again and the reloaded run's tool returns: its receipt is appended, and a
    // subscriber follows the task to its end.
    store.full.store(false, Ordering::SeqCst);
    release.add_permits(1);
    let ended = tokio::time::timeout(PATIENCE, async {
        loop {
            let mut sub = engine.subscribe(&Caller::Operator, &task).await.unwrap();
            let mut last = None;
            while let Some(update) = sub.next().await {
                match update {
                    Ok(update) => last = Some(update),
                    // Still before the reloaded run's first append: follow again.
                    Err(EngineError::StorageUnavailable { .. }) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            if let Some(update) = last.filter(|u| u.is_final) {
                return update;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the task completes once the store accepts writes");
    assert!(ended.is_final);
    let task = engine.task(&Caller::Operator, &task, None).await.unwrap();
    assert_eq!(task.status.state, radkit::model::TaskState::Completed);
    engine.halt();
}
