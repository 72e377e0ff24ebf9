//! Leases: how many engines share one store. A task is driven only by the engine that holds its lease
//! (owner, expiry, fencing token). Every claim of a lease bumps the task's token, and an append that
//! carries a stale token is refused inside the append's transaction, so an engine whose lease was taken
//! over (it paused, lost its network, or was presumed dead) can no longer record a step.
//!
//! Stores that one engine owns alone (`memory`, `sqlite`) have no leases: [`Store::leases`] is `None`.
//!
//! [`Store::leases`]: super::Store::leases

use async_trait::async_trait;

use super::StoreError;

/// A lease on one task, held by one owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The task.
    pub task_id: String,
    /// The fencing token: appends must carry it while the lease is held.
    pub token: u64,
    /// Someone asked to cancel the task (see [`Leases::request_cancel`]).
    pub cancel_requested: bool,
}

/// Who holds a task's lease, as the store says now (the console shows it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseHolder {
    /// The engine (`EngineBuilder::worker_id`) that holds or last held it.
    pub owner: Option<String>,
    /// The fencing token: one more for every lease taken on the task, so a new one means another
    /// claim (a takeover when the owner changed).
    pub token: u64,
    /// When the lease runs out (ms since the epoch); `None` when it was given back.
    pub expires_ms: Option<i64>,
}

/// One lease a task was given, as the store logged it ([`Leases::lease_log`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseChange {
    /// The fencing token the claim got.
    pub token: u64,
    /// The engine (`EngineBuilder::worker_id`) that took the lease.
    pub owner: String,
    /// When it was taken (ms since the epoch, the database's clock).
    pub claimed_at_ms: i64,
    /// The owner on record when it was taken: another engine whose lease had run out (a
    /// takeover), the same one (it took its task back), or `None` (the lease was free).
    pub prior_owner: Option<String>,
    /// When the prior owner's lease ran out (ms since the epoch), with `prior_owner`.
    pub prior_expires_ms: Option<i64>,
    /// When the lease was given back; `None` while it is held, and for a lease that ran out or was
    /// taken over.
    pub released_at_ms: Option<i64>,
}

impl LeaseChange {
    /// True when another engine held the lease before and its lease had run out.
    pub fn is_takeover(&self) -> bool {
        self.prior_owner
            .as_deref()
            .is_some_and(|prior| prior != self.owner)
    }
}

/// The token of a lease taken when its task is created (`Append::lease`).
pub const CREATION_TOKEN: u64 = 1;

/// A lease taken with the append that creates a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLease {
    /// The owner.
    pub owner: String,
    /// How long it lasts before it must be renewed, in ms.
    pub ttl_ms: i64,
}

/// The version of a `(skill id, version)` claim pair that takes every numbered version of the
/// skill below `n`: a worker serving version `n` claims tasks of older ones and moves there what it
/// can (a task never moves back to an older version).
pub fn older_than(n: u64) -> String {
    format!("<{n}")
}

/// Lease operations of a shared store.
#[async_trait]
pub trait Leases: Send + Sync {
    /// Claim up to `limit` tasks that have work now and whose lease is free or expired: submitted or
    /// working tasks without a pending timer, tasks whose timer is due, and tasks asked to cancel —
    /// only tasks of the `(skill id, version)` pairs in `skills`, the ones the claimer can run (a
    /// pair whose version is [`older_than(n)`](older_than) takes every numbered version of that skill
    /// below `n`: the claimer moves what it can to its own and gives back the rest), and
    /// none of `held`, the ones it holds already (a late renewal must not fence the claimer's own
    /// run). Two concurrent claimers never get the same task (`FOR UPDATE SKIP LOCKED`).
    async fn claim(
        &self,
        owner: &str,
        skills: &[(String, String)],
        held: &[String],
        ttl_ms: i64,
        limit: usize,
    ) -> Result<Vec<Lease>, StoreError>;

    /// Take the lease on one unfinished task if it is free, expired or already `owner`'s (bumping its
    /// token); `None` while another owner holds it.
    async fn acquire(
        &self,
        owner: &str,
        task_id: &str,
        ttl_ms: i64,
    ) -> Result<Option<Lease>, StoreError>;

    /// Extend the leases of `held` that `owner` still holds with the same token; returns the ids of the
    /// tasks whose lease was taken over.
    async fn renew(
        &self,
        owner: &str,
        held: &[(String, u64)],
        ttl_ms: i64,
    ) -> Result<Vec<String>, StoreError>;

    /// True while `owner` holds the lease on `task_id` with `token` and it has not expired: the
    /// engine asks right before it starts an `AtMostOnce` effect, which must not start without a valid
    /// lease (a worker paused past its lease may otherwise run it after the new owner took the task).
    async fn holds(&self, owner: &str, task_id: &str, token: u64) -> Result<bool, StoreError>;

    /// Give a lease back (its task now waits for input or a timer, or was given up). A task that
    /// finishes needs no release: the store's append that journals its terminal state gives its
    /// lease back in the same write, and an engine whose run finished a task does not call this.
    async fn release(&self, owner: &str, task_id: &str, token: u64) -> Result<(), StoreError>;

    /// Ask whichever engine holds `task_id` to cancel it.
    async fn request_cancel(&self, task_id: &str) -> Result<(), StoreError>;

    /// Tasks leased by `owner` that were asked to cancel.
    async fn cancel_requests(&self, owner: &str) -> Result<Vec<String>, StoreError>;

    /// The lease of `task_id` as it stands; `None` for a task the store does not have.
    async fn holder(&self, task_id: &str) -> Result<Option<LeaseHolder>, StoreError>;

    /// The newest `limit` leases `task_id` was given, oldest first: who took each, with which token,
    /// when, from whom, and when it was given back. A store that keeps no such log returns none.
    async fn lease_log(&self, task_id: &str, limit: usize) -> Result<Vec<LeaseChange>, StoreError> {
        let _ = (task_id, limit);
        Ok(Vec::new())
    }

    /// News of claimable work, for a claimer to wait on between its polls: the value changes when
    /// a statement may have left work to claim (a task created or answered without a lease, a
    /// runnable task's lease given back, a cancel asked), and when the store may have missed such
    /// news (its listening connection was reopened). A claimer claims and looks for cancel requests
    /// at each change, and still every poll: timers falling due and leases running out announce
    /// nothing. `None` (the default): no news, polls only. A receiver whose sender is gone
    /// (`changed()` fails) has no more news to give.
    fn wakeups(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }
}
