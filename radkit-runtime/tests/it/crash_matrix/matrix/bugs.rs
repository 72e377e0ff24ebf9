//! Engine bugs the matrix ran into that are not crash cells: each is a test stating the documented
//! behaviour. A test here that fails today runs only with `RADKIT_MATRIX_KNOWN_BUGS=1`, like the
//! table's rows marked `.bug(..)`; a fixed one runs by default and keeps the bug from coming back.

use radkit_runtime::engine::{Caller, Request};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::Engine;
use radkit_runtime::flow::EffectPolicy;
use radkit_runtime::journal::JournalRecord;
use radkit_runtime::model::TaskState;
use radkit_runtime::store::{
    Append, Lease, Leases, PostgresStore, Store, StoreError, TaskQuery, TaskRecord,
};
use tokio::sync::Notify;

use super::probe::{Probe, EFFECT};
use super::skills::skill;
use super::stores::Site;
use super::{Backend, Form, Point};
use crate::support::common::user;

/// What went wrong in [`cancel_right_after_the_task_settled`] (fixed: a run's driver closes it under
/// the lock a cancel marks it with, and a cancel a closed run refuses goes the idle path).
pub const CANCEL_RIGHT_AFTER_SETTLING: &str = "a cancel that arrives while the task's driver is still \
    giving its lease back is lost: `Engine::cancel` marks the finished run, skips the idle path because \
    the run is still registered, and waits for a terminal entry nobody writes";

/// `Engine::cancel` right after `wait_settled` said the task waits for input: the task is canceled
/// and its compensation runs. The driver gives the task's lease back after the task settled; the
/// store below holds that release until the cancel has been sent, so the cancel always arrives in
/// that window (which a busy Postgres opens about every other time on its own).
pub async fn cancel_right_after_the_task_settled() {
    let site = Site::new(Backend::Postgres).await;
    let Site::Postgres(schema) = &site else {
        unreachable!("a Postgres site")
    };
    let store = Arc::new(HeldRelease {
        inner: PostgresStore::connect(schema.url())
            .await
            .expect("connect to the test schema"),
        hold: AtomicBool::new(true),
        releasing: Notify::new(),
        watch_reads: AtomicBool::new(false),
        read: Notify::new(),
        go: Notify::new(),
    });
    let probe = Probe::new(Point::AwaitingInput);
    let builder = Engine::builder_arc(store.clone())
        .without_registered_skills()
        .erased_skill(skill(Form::Ctx, &probe))
        .effects(Effects::new().tool(EFFECT, probe.tool(EffectPolicy::Compensate)));
    let engine = site
        .leases(builder, false)
        .start()
        .await
        .expect("start the engine");
    let task_id = engine
        .send(Request::operator(user("order 7")))
        .await
        .unwrap();
    let waiting = tokio::time::timeout(
        Duration::from_secs(20),
        engine.wait_settled(&Caller::Operator, &task_id),
    )
    .await
    .expect("the task settles")
    .expect("wait_settled");
    assert_eq!(waiting.status.state, TaskState::InputRequired);
    tokio::time::timeout(Duration::from_secs(20), store.releasing.notified())
        .await
        .expect("the driver gives the lease back");
    store.watch_reads.store(true, Ordering::SeqCst);
    let canceling = {
        let (engine, task_id) = (engine.clone(), task_id.clone());
        tokio::spawn(async move { engine.cancel(&Caller::Operator, &task_id).await })
    };
    // The cancel reads the journal once it has decided how to cancel (following the task); an
    // engine that waits for the driver instead gets the release after this bounded wait.
    let _ = tokio::time::timeout(Duration::from_secs(2), store.read.notified()).await;
    store.go.notify_one();
    let canceled = tokio::time::timeout(Duration::from_secs(10), canceling)
        .await
        .unwrap_or_else(|_| {
            panic!("Engine::cancel did not return within 10 s: {CANCEL_RIGHT_AFTER_SETTLING}")
        })
        .expect("the cancel task")
        .expect("cancel");
    assert_eq!(canceled.status.state, TaskState::Canceled);
    assert_eq!(probe.undos(), 1, "the effect is compensated once");
    engine.shutdown().await;
    site.close().await;
}

/// A Postgres store that holds the first lease release until told to go, and says when a journal is
/// read once the test watches for it.
struct HeldRelease {
    inner: PostgresStore,
    hold: AtomicBool,
    releasing: Notify,
    watch_reads: AtomicBool,
    read: Notify,
    go: Notify,
}

impl HeldRelease {
    fn leases(&self) -> &dyn Leases {
        self.inner.leases().expect("Postgres has leases")
    }
}

#[async_trait]
impl Store for HeldRelease {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
        self.inner.append(append).await
    }
    async fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        self.inner.task(task_id).await
    }
    async fn journal(&self, task_id: &str, after: u64) -> Result<Vec<JournalRecord>, StoreError> {
        if self.watch_reads.swap(false, Ordering::SeqCst) {
            self.read.notify_one();
        }
        self.inner.journal(task_id, after).await
    }
    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        self.inner.list(query).await
    }
    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        self.inner.journal_for_replay(task_id).await
    }
    fn leases(&self) -> Option<&dyn Leases> {
        Some(self)
    }
}

#[async_trait]
impl Leases for HeldRelease {
    async fn claim(
        &self,
        owner: &str,
        skills: &[(String, String)],
        held: &[String],
        ttl_ms: i64,
        limit: usize,
    ) -> Result<Vec<Lease>, StoreError> {
        self.leases()
            .claim(owner, skills, held, ttl_ms, limit)
            .await
    }
    async fn acquire(
        &self,
        owner: &str,
        task_id: &str,
        ttl_ms: i64,
    ) -> Result<Option<Lease>, StoreError> {
        self.leases().acquire(owner, task_id, ttl_ms).await
    }
    async fn renew(
        &self,
        owner: &str,
        held: &[(String, u64)],
        ttl_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        self.leases().renew(owner, held, ttl_ms).await
    }
    async fn holds(&self, owner: &str, task_id: &str, token: u64) -> Result<bool, StoreError> {
        self.leases().holds(owner, task_id, token).await
    }
    async fn release(&self, owner: &str, task_id: &str, token: u64) -> Result<(), StoreError> {
        if self.hold.swap(false, Ordering::SeqCst) {
            self.releasing.notify_one();
            self.go.notified().await;
        }
        self.leases().release(owner, task_id, token).await
    }
    async fn request_cancel(&self, task_id: &str) -> Result<(), StoreError> {
        self.leases().request_cancel(task_id).await
    }
    async fn cancel_requests(&self, owner: &str) -> Result<Vec<String>, StoreError> {
        self.leases().cancel_requests(owner).await
    }

    async fn holder(
        &self,
        task_id: &str,
    ) -> Result<Option<radkit_runtime::store::LeaseHolder>, StoreError> {
        self.leases().holder(task_id).await
    }
}
