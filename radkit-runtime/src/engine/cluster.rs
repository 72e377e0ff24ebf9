//! Sharing one store with other engines (many workers on many machines). When the store has leases
//! ([`Store::leases`]), an engine drives a task only while it holds the task's lease, and every append
//! carries the lease's fencing token:
//!
//! - a task the engine creates is leased to it in the creating append (when it has room for it);
//! - every `poll` the engine claims runnable tasks whose lease is free or expired (new tasks others
//!   created, tasks of dead workers, timers that fell due) and checks for cancel requests, and at
//!   once when the store announces such work ([`Leases::wakeups`]: on Postgres, `LISTEN`/`NOTIFY`)
//!   or when a slot frees up while claimable work was left behind;
//! - every third of the lease's lifetime it renews the leases it holds, on a thread and a runtime of
//!   its own (and, on Postgres, a connection of its own), so that the work the leases protect never
//!   delays their renewal; a lease taken over meanwhile stops its run (and the store refuses that
//!   run's appends anyway);
//! - it knows, by its own clock, until when each lease is certainly held (the moment the statement
//!   that took or renewed it was sent, plus the lifetime): an effect starts only while its lease has
//!   at least a third of its lifetime left; when the keeper is late the run renews its own lease
//!   first, and stops (the effect never starts) when the store does not confirm it before the lease
//!   can expire — so no other worker can take a task over while this one still starts its effects;
//! - while renewals are slow (a round took more than a sixth of the lifetime, at least 200 ms) or
//!   failing, it takes no new task in hand (no claims; tasks it creates are left unleased for
//!   others);
//! - a run that ends waiting (for input or a timer) or finished gives its lease back, so whichever
//!   engine is free takes the next event.
//!
//! [`Store::leases`]: crate::store::Store::leases
//! [`Leases::wakeups`]: crate::store::Leases::wakeups

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::run::TaskRun;
use super::{EngineError, Inner};
use crate::store::{older_than, Lease};

/// This engine's part in a shared store's leases: the leases it holds, its worker loop, its claims.
#[derive(Default)]
pub(crate) struct LeaseState {
    /// Leases held, by task id.
    held: Mutex<HashMap<String, Held>>,
    /// How the last renewal round went: [`RENEWAL_FAILED`], or how long it took in µs.
    last_renewal_us: AtomicU64,
    /// The worker loop (claims, renewals, cancel polling) runs.
    worker_started: AtomicBool,
    /// Held while claiming, so that shutdown can wait for a claim in flight.
    claiming: tokio::sync::Mutex<()>,
    /// The last claim may have left claimable work behind (it took as many as it had room for, or
    /// had no room): a lease given back then wakes the worker loop.
    backlog: AtomicBool,
    /// Wakes the worker loop (see `backlog`).
    slot_freed: Arc<tokio::sync::Notify>,
    /// Tasks of a version this engine does not serve that it claimed and could not move to the
    /// version it serves (a step half-run, a changed shape), with when: left to a worker that
    /// serves theirs, and not claimed here again for [`UNMOVABLE_FOR`].
    unmovable: Mutex<HashMap<String, Instant>>,
}

/// How long a claim leaves out a task it could not move: after it, the task is looked at again (a
/// worker of its version may have brought it to rest where this one can take it on).
const UNMOVABLE_FOR: Duration = Duration::from_secs(60);

/// At most this many unmovable tasks are remembered: beyond it they are all forgotten, and each
/// may be claimed, and given back, once more.
const UNMOVABLE_KEPT: usize = 10_000;

/// A lease this engine holds.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// Its fencing token.
    token: u64,
    /// Until when it is certainly held, by this process's clock: when the statement that took or
    /// last renewed it was sent, plus the lifetime (the store computed the expiry after that).
    until: Instant,
}

/// A renewal round slower than this (µs) is slow: a sixth of the lease's lifetime, and at least
/// 200 ms (a loaded machine's scheduling alone can cost tens of ms; short test leases must not stop
/// claims for it).
fn slow_renewal_us(ttl: Duration) -> u64 {
    u64::try_from((ttl / 6).max(Duration::from_millis(200)).as_micros()).unwrap_or(u64::MAX)
}

/// [`LeaseState::last_renewal_us`] after a round that failed.
const RENEWAL_FAILED: u64 = u64::MAX;

/// Who may drive a task.
pub(crate) enum Ownership {
    /// The store is this engine's alone: no lease needed.
    Sole,
    /// This engine holds the task's lease.
    Leased(Lease),
    /// Another engine holds it.
    Busy,
}

impl Ownership {
    pub fn token(&self) -> Option<u64> {
        match self {
            Ownership::Leased(lease) => Some(lease.token),
            _ => None,
        }
    }
}

/// A worker id that is unique per process: host, pid and a random suffix.
pub(crate) fn default_worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    let suffix = &crate::model::new_id()[..8];
    format!("{host}-{}-{suffix}", std::process::id())
}

impl Inner {
    /// True when other engines may share the store.
    pub(crate) fn shared(&self) -> bool {
        self.store.leases().is_some()
    }

    fn ttl_ms(&self) -> i64 {
        i64::try_from(self.config.lease_ttl.as_millis()).unwrap_or(i64::MAX)
    }

    /// Leases this engine holds now.
    pub(crate) fn held_count(&self) -> usize {
        self.held().len()
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.leases.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Note the lease on `task_id` with `token`, taken by a statement sent at `sent`.
    pub(crate) fn hold(&self, task_id: &str, token: u64, sent: Instant) {
        let until = sent + self.config.lease_ttl;
        self.held()
            .insert(task_id.to_owned(), Held { token, until });
    }

    /// True when this engine may take another task in hand: it has room, and its renewals keep up
    /// (the last round succeeded within a sixth of the lease's lifetime). A worker whose renewals
    /// are slow would otherwise take on more leases than it can keep.
    pub(crate) fn has_room(&self) -> bool {
        self.held_count() < self.config.max_active_tasks && self.renewals_keep_up()
    }

    fn renewals_keep_up(&self) -> bool {
        let last = self.leases.last_renewal_us.load(Ordering::SeqCst);
        last != RENEWAL_FAILED && last <= slow_renewal_us(self.config.lease_ttl)
    }

    /// Right before an effect of `run` starts (every policy; shared stores only): true while the
    /// run's lease has at least a third of its lifetime left by this engine's clock. When it has
    /// less (the keeper's renewal is late: a paused process, a busy machine), the run renews its
    /// own lease there and then, and goes on only when the store confirms it (the statement checks
    /// owner and token, so a lease another worker took is not renewed: the run stops as on a lost
    /// lease, and the effect never starts). A renewal that fails is tried again while the lease has
    /// a tenth of its lifetime left; then the run stops, before the lease can expire.
    pub(crate) async fn lease_lasts(&self, run: &TaskRun) -> bool {
        let (Some(leases), Some(token)) = (self.store.leases(), run.fence) else {
            return true;
        };
        let ttl = self.config.lease_ttl;
        loop {
            if run.is_halted() || run.lease_lost() {
                return false;
            }
            let held = self.held().get(&*run.task_id).copied();
            let Some(held) = held.filter(|h| h.token == token) else {
                // Renewal found it taken over (and said so), or the engine gave it back.
                run.stop_as_lost();
                return false;
            };
            let now = Instant::now();
            if held.until > now + ttl / 3 {
                return true;
            }
            let sent = Instant::now();
            let mine = [(run.task_id.to_string(), token)];
            match leases
                .renew(&self.config.worker_id, &mine, self.ttl_ms())
                .await
            {
                Ok(lost) if lost.is_empty() => {
                    if let Some(h) = self.held().get_mut(&*run.task_id) {
                        if h.token == token {
                            h.until = h.until.max(sent + ttl);
                        }
                    }
                }
                Ok(_) => {
                    self.forget_lease(&run.task_id, token);
                    run.lose_lease();
                    return false;
                }
                Err(e) if held.until > Instant::now() + ttl / 10 => {
                    tracing::debug!(task = %run.task_id, error = %e, "the lease could not be renewed before an effect; trying again");
                    tokio::time::sleep((ttl / 50).max(Duration::from_millis(1))).await;
                }
                Err(e) => {
                    tracing::warn!(task = %run.task_id, token, error = %e, "the lease could not be renewed in time; this run stops before the lease can expire (the task's next owner goes on from its journal)");
                    run.stop_as_lost();
                    return false;
                }
            }
        }
    }

    /// Forget the lease on `task_id` with `token` (taken over; nothing to give back).
    fn forget_lease(&self, task_id: &str, token: u64) {
        let mut map = self.held();
        if map.get(task_id).is_some_and(|h| h.token == token) {
            map.remove(task_id);
        }
    }

    /// Take the lease on `task_id` (the caller holds its gate), retrying for up to `wait` while another
    /// engine holds it.
    pub(crate) async fn own(
        &self,
        task_id: &str,
        wait: Duration,
    ) -> Result<Ownership, EngineError> {
        let Some(leases) = self.store.leases() else {
            return Ok(Ownership::Sole);
        };
        let deadline = Instant::now() + wait;
        loop {
            let sent = Instant::now();
            if let Some(lease) = leases
                .acquire(&self.config.worker_id, task_id, self.ttl_ms())
                .await?
            {
                if self.halted.load(Ordering::SeqCst) {
                    // Shut down meanwhile: `release_all` may have run already.
                    let _ = leases
                        .release(&self.config.worker_id, task_id, lease.token)
                        .await;
                    return Ok(Ownership::Busy);
                }
                self.hold(task_id, lease.token, sent);
                return Ok(Ownership::Leased(lease));
            }
            if Instant::now() >= deadline || self.halted.load(Ordering::SeqCst) {
                return Ok(Ownership::Busy);
            }
            tokio::time::sleep(self.config.poll.min(Duration::from_millis(50))).await;
        }
    }

    /// Right before an `AtMostOnce` effect of `run` starts: true when the run may start it, because
    /// it still holds its task's lease (owner and token current, not expired) or needs none. A worker
    /// paused past its lease (GC, SIGSTOP, a partition) would otherwise start the effect after the new
    /// owner took the task, and fencing refuses only its receipt. When the lease is gone, or the store
    /// cannot say, the run stops as on a lost lease: the effect never starts, and the task's next
    /// owner reports its outcome as unknown, as it does for any `AtMostOnce` command journaled
    /// without a receipt.
    pub(crate) async fn may_start_at_most_once(&self, run: &TaskRun) -> bool {
        let (Some(leases), Some(token)) = (self.store.leases(), run.fence) else {
            return true;
        };
        match leases
            .holds(&self.config.worker_id, &run.task_id, token)
            .await
        {
            Ok(true) => true,
            Ok(false) => {
                run.lose_lease();
                false
            }
            Err(e) => {
                tracing::warn!(task = %run.task_id, error = %e, "the lease could not be confirmed before an at-most-once effect; the effect does not start and this run stops");
                run.stop_as_lost();
                false
            }
        }
    }

    /// Give back the lease `run` holds (it waits, finished or stopped). A halted engine keeps its
    /// leases, as a crashed one would: they expire, unless `Engine::shutdown` gives them back.
    pub(crate) async fn disown(&self, run: &TaskRun) {
        if self.halted.load(Ordering::SeqCst) {
            return;
        }
        if let Some(token) = run.fence {
            // The append that finished the task gave its lease back.
            let finished = !run.write_failed() && run.lock().finished_durably();
            self.give_back(&run.task_id, token, run.lease_lost() || finished)
                .await;
        }
    }

    /// Forget the lease of `task_id` here and, unless it is `gone` already (lost to another
    /// owner, or given back by the append that finished the task), release it in the store.
    pub(crate) async fn give_back(&self, task_id: &str, token: u64, gone: bool) {
        let Some(leases) = self.store.leases() else {
            return;
        };
        self.forget_lease(task_id, token);
        if self.leases.backlog.load(Ordering::SeqCst) {
            self.leases.slot_freed.notify_one();
        }
        if gone {
            return;
        }
        if let Err(e) = leases.release(&self.config.worker_id, task_id, token).await {
            // It expires on its own.
            tracing::warn!(task = %task_id, error = %e, "lease not released");
        }
    }

    /// Start claiming, renewing and cancel polling (once; only for shared stores).
    pub(crate) fn start_worker(self: &Arc<Self>) {
        if self.shared() && !self.leases.worker_started.swap(true, Ordering::SeqCst) {
            tracing::info!(worker = %self.config.worker_id, ttl_ms = self.ttl_ms(), poll_ms = u64::try_from(self.config.poll.as_millis()).unwrap_or(u64::MAX), max_active = self.config.max_active_tasks, "worker started");
            tokio::spawn(work(Arc::downgrade(self)));
            spawn_lease_keeper(Arc::downgrade(self));
        }
    }

    /// Renew every lease held, with a statement sent at `sent`; stop the runs whose lease was
    /// taken over.
    async fn renew(&self, sent: Instant) -> Result<(), EngineError> {
        let Some(leases) = self.store.leases() else {
            return Ok(());
        };
        let held: Vec<(String, u64)> = self
            .held()
            .iter()
            .map(|(id, h)| (id.clone(), h.token))
            .collect();
        let lost = leases
            .renew(&self.config.worker_id, &held, self.ttl_ms())
            .await?;
        let until = sent + self.config.lease_ttl;
        {
            let mut map = self.held();
            for (task_id, token) in &held {
                if lost.contains(task_id) {
                    continue;
                }
                if let Some(h) = map.get_mut(task_id).filter(|h| h.token == *token) {
                    h.until = h.until.max(until);
                }
            }
        }
        for task_id in lost {
            let Some(token) = held.iter().find(|(id, _)| *id == task_id).map(|h| h.1) else {
                continue;
            };
            self.forget_lease(&task_id, token);
            if let Some(run) = self.live.running(&task_id) {
                if run.fence == Some(token) {
                    run.lose_lease();
                }
            }
        }
        Ok(())
    }

    /// Deliver cancel requests other engines left for tasks this engine runs.
    async fn deliver_cancels(&self) -> Result<(), EngineError> {
        let Some(leases) = self.store.leases() else {
            return Ok(());
        };
        for task_id in leases.cancel_requests(&self.config.worker_id).await? {
            // A run whose driver stopped refuses it; the request stays on the row, which keeps the
            // task claimable, so the next claim carries it out.
            if let Some(run) = self.live.running(&task_id) {
                run.lock().request_cancel();
            }
        }
        Ok(())
    }

    /// Claim runnable tasks while there is room (at most [`CLAIM_BATCH`]), and drive them: `true`
    /// when it took as many as it asked for, so more may be waiting.
    async fn claim(self: &Arc<Self>) -> Result<bool, EngineError> {
        let Some(leases) = self.store.leases() else {
            return Ok(false);
        };
        let room = self
            .config
            .max_active_tasks
            .saturating_sub(self.held_count())
            .min(CLAIM_BATCH);
        if room == 0 {
            // Whatever woke this claim waits for a slot.
            self.leases.backlog.store(true, Ordering::SeqCst);
            return Ok(false);
        }
        if !self.renewals_keep_up() {
            tracing::debug!("renewals are slow or failing; no claims until they keep up");
            return Ok(false);
        }
        // Every version this engine serves (a task claimed runs on its own), and the older
        // numbered versions of its skills: a task of one moves here when it can (else it is given
        // back and left to a worker that serves its version, see `unmovable`).
        let mut skills = self.versions.pairs();
        skills.extend(
            self.versions
                .newest_numbers()
                .into_iter()
                .map(|(id, n)| (id, older_than(n))),
        );
        let mut held: Vec<String> = self.held().keys().cloned().collect();
        {
            let mut unmovable = self.unmovable();
            unmovable.retain(|_, since| since.elapsed() < UNMOVABLE_FOR);
            held.extend(unmovable.keys().cloned());
        }
        // `release_all` waits for a claim in flight, and a claim that started before the halt gives
        // back what it got.
        let _claiming = self.leases.claiming.lock().await;
        if self.halted.load(Ordering::SeqCst) {
            return Ok(false);
        }
        let sent = Instant::now();
        let claimed = leases
            .claim(&self.config.worker_id, &skills, &held, self.ttl_ms(), room)
            .await?;
        if self.halted.load(Ordering::SeqCst) {
            for lease in claimed {
                let _ = leases
                    .release(&self.config.worker_id, &lease.task_id, lease.token)
                    .await;
            }
            return Ok(false);
        }
        let full = claimed.len() >= room;
        self.leases.backlog.store(full, Ordering::SeqCst);
        self.metrics.lease_claims(claimed.len());
        for lease in claimed {
            tracing::debug!(task = %lease.task_id, token = lease.token, "claimed");
            let engine = self.clone();
            self.hold(&lease.task_id, lease.token, sent);
            tokio::spawn(async move {
                let task_id = lease.task_id.clone();
                match engine.resume(&task_id, Some(lease)).await {
                    Ok(()) => {}
                    Err(e @ EngineError::VersionMismatch { .. }) => {
                        tracing::info!(task = %task_id, reason = %e, "claimed a task of another skill version that cannot move here; left to a worker that serves its version");
                        engine.unmovable_found(task_id);
                    }
                    Err(e) => {
                        tracing::error!(task = %task_id, error = %e, "claimed task not resumed")
                    }
                }
            });
        }
        Ok(full)
    }

    fn unmovable(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.leases
            .unmovable
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// A claimed task could not move to this engine's version: claims leave it out from now on.
    fn unmovable_found(&self, task_id: String) {
        let mut unmovable = self.unmovable();
        if unmovable.len() >= UNMOVABLE_KEPT {
            unmovable.clear();
        }
        unmovable.insert(task_id, Instant::now());
    }

    /// Give back every lease (shutdown, after the halt): other workers take the tasks over at once.
    pub(crate) async fn release_all(&self) {
        let _no_claim_in_flight = self.leases.claiming.lock().await;
        let held: Vec<(String, Held)> = self.held().drain().collect();
        if let Some(leases) = self.store.leases() {
            for (task_id, held) in held {
                let _ = leases
                    .release(&self.config.worker_id, &task_id, held.token)
                    .await;
            }
        }
    }
}

/// Start [`keep_leases`] on a thread of its own with a runtime of its own: a worker whose runtime is
/// saturated by its tasks (hundreds of steps ready at once, a step that computes for a while) must
/// still renew their leases on time, or another worker takes them over and runs their effects a
/// second time. The thread holds the engine weakly and ends with it (or when it halts).
fn spawn_lease_keeper(engine: Weak<Inner>) {
    let keeper = engine.clone();
    let spawned = std::thread::Builder::new()
        .name("radkit-leases".to_owned())
        .spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime.block_on(keep_leases(keeper)),
                Err(e) => tracing::error!(error = %e, "the lease keeper's runtime could not be built; leases are not renewed"),
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no thread for the lease keeper; renewing leases on the engine's runtime");
        tokio::spawn(keep_leases(engine));
    }
}

/// Renew every third of the lease's lifetime, counted from the start of the previous round (a slow
/// round does not push the next one back). A renewal that fails (the database is unreachable, or the
/// statement lost a conflict) says nothing about the leases: none is given up for it, and the next
/// renewal comes sooner, a tenth of the lifetime after the failed one started, while the leases
/// still have most of theirs. How each round went decides whether the engine takes more tasks in
/// hand ([`Inner::has_room`]).
async fn keep_leases(engine: Weak<Inner>) {
    let mut next = Instant::now();
    loop {
        let ttl = match engine.upgrade() {
            Some(e) => e.config.lease_ttl,
            None => return,
        };
        tokio::time::sleep_until(next.into()).await;
        let Some(e) = engine.upgrade() else {
            return;
        };
        if e.halted.load(Ordering::SeqCst) {
            return;
        }
        let sent = Instant::now();
        let result = e.renew(sent).await;
        let took = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX - 1);
        let (status, period) = match &result {
            Ok(()) => (took.min(RENEWAL_FAILED - 1), ttl / 3),
            Err(err) => {
                tracing::warn!(error = %err, "lease renewal failed; retrying soon");
                (RENEWAL_FAILED, ttl / 10)
            }
        };
        e.leases.last_renewal_us.store(status, Ordering::SeqCst);
        if result.is_ok() && took > slow_renewal_us(ttl) {
            tracing::warn!(
                took_ms = took / 1000,
                ttl_ms = e.ttl_ms(),
                "lease renewal was slow; taking no new tasks until renewals keep up"
            );
        }
        drop(e);
        next = sent + period;
    }
}

/// The worker loop: cancel requests and claims every poll, and at once when the store announces
/// claimable work or a slot frees up with work left behind; claims again at once while a claim
/// fills its batch. It holds the engine weakly and ends with it (or when it halts).
async fn work(engine: Weak<Inner>) {
    let mut news = engine
        .upgrade()
        .and_then(|e| e.store.leases().and_then(|l| l.wakeups()));
    loop {
        let (poll, slot_freed) = match engine.upgrade() {
            Some(e) => (e.config.poll, e.leases.slot_freed.clone().notified_owned()),
            None => return,
        };
        let heard = async {
            match news.as_mut() {
                Some(news) => news.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep(poll) => {}
            () = slot_freed => {}
            listening = heard => {
                if !listening {
                    // The store stopped announcing: polls only.
                    news = None;
                }
            }
        }
        let Some(e) = engine.upgrade() else {
            return;
        };
        if e.halted.load(Ordering::SeqCst) {
            return;
        }
        if let Some(news) = news.as_mut() {
            // This round looks at everything announced until now.
            news.borrow_and_update();
        }
        if let Err(err) = e.deliver_cancels().await {
            tracing::warn!(error = %err, "cancel poll failed");
        }
        loop {
            match e.claim().await {
                Ok(true) if !e.halted.load(Ordering::SeqCst) => {}
                Ok(_) => break,
                Err(err) => {
                    tracing::warn!(error = %err, "claim failed");
                    break;
                }
            }
        }
    }
}

/// The most tasks one claim takes.
const CLAIM_BATCH: usize = 64;
