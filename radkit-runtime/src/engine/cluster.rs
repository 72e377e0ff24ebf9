//! Sharing one store with other engines (many workers on many machines). When the store has leases
//! ([`Store::leases`]), an engine drives a task only while it holds the task's lease, and every append
//! carries the lease's fencing token:
//!
//! - a task the engine creates is leased to it in the creating append (when it has room for it);
//! - every `poll` the engine claims runnable tasks whose lease is free or expired (new tasks others
//!   created, tasks of dead workers, timers that fell due) and checks for cancel requests;
//! - every third of the lease's lifetime it renews the leases it holds; a lease taken over meanwhile
//!   stops its run (and the store refuses that run's appends anyway);
//! - a run that ends waiting (for input or a timer) or finished gives its lease back, so whichever
//!   engine is free takes the next event.
//!
//! [`Store::leases`]: crate::store::Store::leases

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::run::TaskRun;
use super::{EngineError, Inner};
use crate::store::Lease;

/// This engine's part in a shared store's leases: the leases it holds, its worker loop, its claims.
#[derive(Default)]
pub(crate) struct LeaseState {
    /// Leases held (task id -> token).
    held: Mutex<HashMap<String, u64>>,
    /// The worker loop (claims, renewals, cancel polling) runs.
    worker_started: AtomicBool,
    /// Held while claiming, so that shutdown can wait for a claim in flight.
    claiming: tokio::sync::Mutex<()>,
}

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
        self.leases
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    pub(crate) fn hold(&self, task_id: &str, token: u64) {
        self.leases
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(task_id.to_owned(), token);
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
                self.hold(task_id, lease.token);
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
            self.give_back(&run.task_id, token, run.lease_lost()).await;
        }
    }

    pub(crate) async fn give_back(&self, task_id: &str, token: u64, lost: bool) {
        let Some(leases) = self.store.leases() else {
            return;
        };
        {
            let mut held = self.leases.held.lock().unwrap_or_else(|p| p.into_inner());
            if held.get(task_id) == Some(&token) {
                held.remove(task_id);
            }
        }
        if lost {
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
            tokio::spawn(keep_leases(Arc::downgrade(self)));
        }
    }

    /// Renew every lease held; stop the runs whose lease was taken over.
    async fn renew(&self) -> Result<(), EngineError> {
        let Some(leases) = self.store.leases() else {
            return Ok(());
        };
        let held: Vec<(String, u64)> = self
            .leases
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(id, token)| (id.clone(), *token))
            .collect();
        let lost = leases
            .renew(&self.config.worker_id, &held, self.ttl_ms())
            .await?;
        for task_id in lost {
            let token = held.iter().find(|(id, _)| *id == task_id).map(|h| h.1);
            {
                let mut map = self.leases.held.lock().unwrap_or_else(|p| p.into_inner());
                if map.get(&task_id).copied() == token {
                    map.remove(&task_id);
                }
            }
            if let Some(run) = self.live.running(&task_id) {
                if run.fence == token {
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

    /// Claim runnable tasks while there is room, and drive them.
    async fn claim(self: &Arc<Self>) -> Result<(), EngineError> {
        let Some(leases) = self.store.leases() else {
            return Ok(());
        };
        let room = self
            .config
            .max_active_tasks
            .saturating_sub(self.held_count())
            .min(64);
        if room == 0 {
            return Ok(());
        }
        let skills: Vec<(String, String)> = self
            .skills
            .values()
            .map(|s| (s.info().id.clone(), s.info().version.clone()))
            .collect();
        let held: Vec<String> = self
            .leases
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        // `release_all` waits for a claim in flight, and a claim that started before the halt gives
        // back what it got.
        let _claiming = self.leases.claiming.lock().await;
        if self.halted.load(Ordering::SeqCst) {
            return Ok(());
        }
        let claimed = leases
            .claim(&self.config.worker_id, &skills, &held, self.ttl_ms(), room)
            .await?;
        if self.halted.load(Ordering::SeqCst) {
            for lease in claimed {
                let _ = leases
                    .release(&self.config.worker_id, &lease.task_id, lease.token)
                    .await;
            }
            return Ok(());
        }
        for lease in claimed {
            tracing::debug!(task = %lease.task_id, token = lease.token, "claimed");
            let engine = self.clone();
            self.hold(&lease.task_id, lease.token);
            tokio::spawn(async move {
                let task_id = lease.task_id.clone();
                if let Err(e) = engine.resume(&task_id, Some(lease)).await {
                    tracing::error!(task = %task_id, error = %e, "claimed task not resumed");
                }
            });
        }
        Ok(())
    }

    /// Give back every lease (shutdown, after the halt): other workers take the tasks over at once.
    pub(crate) async fn release_all(&self) {
        let _no_claim_in_flight = self.leases.claiming.lock().await;
        let held: Vec<(String, u64)> = self
            .leases
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        if let Some(leases) = self.store.leases() {
            for (task_id, token) in held {
                let _ = leases
                    .release(&self.config.worker_id, &task_id, token)
                    .await;
            }
        }
    }
}

/// Run `tick` every `period` of the engine until it halts or is dropped (the loop holds it weakly).
async fn every<Fut>(
    engine: Weak<Inner>,
    period: impl Fn(&Inner) -> Duration,
    tick: impl Fn(Arc<Inner>) -> Fut,
) where
    Fut: std::future::Future<Output = ()>,
{
    loop {
        let wait = match engine.upgrade() {
            Some(e) => period(&e),
            None => return,
        };
        tokio::time::sleep(wait).await;
        let Some(engine) = engine.upgrade() else {
            return;
        };
        if engine.halted.load(Ordering::SeqCst) {
            return;
        }
        tick(engine).await;
    }
}

/// Renew every third of the lease's lifetime, on its own task so that claiming and resuming never
/// delay it. A renewal that fails (the database is unreachable, or the statement lost a conflict)
/// says nothing about the leases: none is given up for it, and the next renewal comes sooner, after a
/// tenth of the lifetime, while the leases still have most of theirs.
async fn keep_leases(engine: Weak<Inner>) {
    let failed = Arc::new(AtomicBool::new(false));
    every(
        engine,
        {
            let failed = failed.clone();
            move |e| match failed.load(Ordering::SeqCst) {
                true => e.config.lease_ttl / 10,
                false => e.config.lease_ttl / 3,
            }
        },
        |e| {
            let failed = failed.clone();
            async move {
                let result = e.renew().await;
                if let Err(e) = &result {
                    tracing::warn!(error = %e, "lease renewal failed; retrying soon");
                }
                failed.store(result.is_err(), Ordering::SeqCst);
            }
        },
    )
    .await
}

/// The worker loop: claims and cancel requests every poll.
async fn work(engine: Weak<Inner>) {
    every(
        engine,
        |e| e.config.poll,
        |e| async move {
            if let Err(err) = e.deliver_cancels().await {
                tracing::warn!(error = %err, "cancel poll failed");
            }
            if let Err(err) = e.claim().await {
                tracing::warn!(error = %err, "claim failed");
            }
        },
    )
    .await
}
