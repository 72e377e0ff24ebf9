//! `Executor`: performs the commands serverless passes handed out (`EngineBuilder::dispatch`) and
//! journals their receipts. An executor claims commands from the store's dispatch list (each for
//! the executor's deadline and a margin; two executors never hold one), performs each under its
//! InvocationId — the effect's idempotency key, the same whoever performs it — with the command's
//! retries, and appends the receipt to the task's journal under the task's lease and its fencing
//! token, as a worker does, with the task's row due at once so the next pass (a sweep) goes on.
//!
//! An executor that dies mid-command leaves its claim to expire; the next executor to claim the
//! command follows the command's policy exactly as the engine does after a crash: `Idempotent` and
//! `AtLeastOnce` commands are performed again under the same id, an `AtMostOnce` one is not (its
//! receipt is an error saying its outcome is unknown, and the task fails on it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{EngineBuilder, EngineError};
use crate::effects::Effects;
use crate::flow::{EffectError, InvocationId, Receipt};
use crate::journal::{now_ms, Entry};
use crate::store::{Append, Dispatched, Store, StoreError};

/// How much longer than its deadline an executor's claims (and its leases on tasks) last: the time
/// an effect started just before the deadline has to return.
const CLAIM_MARGIN: Duration = Duration::from_secs(30);

/// What an executor did with one command.
#[derive(Debug, Clone, PartialEq)]
pub enum Executed {
    /// Performed, its receipt journaled (`ok`: the effect succeeded).
    Recorded {
        /// The command.
        id: InvocationId,
        /// The effect succeeded.
        ok: bool,
    },
    /// An `AtMostOnce` command an earlier executor claimed and did not finish: not performed, its
    /// receipt says its outcome is unknown.
    Unknown {
        /// The command.
        id: InvocationId,
    },
    /// Its receipt was journaled already (its task ended, or an earlier executor recorded it).
    AlreadyDone {
        /// The command.
        id: InvocationId,
    },
    /// Its task's lease stayed held until the deadline: the command goes back to the list.
    Busy {
        /// The command.
        id: InvocationId,
    },
}

/// Performs dispatched commands. Cheap to clone.
#[derive(Clone)]
pub struct Executor {
    store: Arc<dyn Store>,
    effects: Effects,
    owner: String,
}

impl Executor {
    /// The store and the effects (models, tools) of `builder`.
    pub fn from_builder(builder: EngineBuilder) -> Result<Self, EngineError> {
        let parts = builder.into_parts()?;
        if parts.store.dispatch().is_none() {
            return Err(EngineError::Config(
                "an executor needs a store with a dispatch list; use Postgres".to_owned(),
            ));
        }
        Ok(Executor {
            store: parts.store,
            effects: parts.effects,
            owner: format!("executor-{}", crate::model::new_id()),
        })
    }

    /// Claim up to `limit` dispatched commands and carry each out (concurrently), starting no
    /// attempt after `deadline`.
    pub async fn run(&self, deadline: Instant, limit: usize) -> Result<Vec<Executed>, StoreError> {
        let Some(dispatch) = self.store.dispatch() else {
            return Ok(Vec::new());
        };
        let ttl = deadline.saturating_duration_since(Instant::now()) + CLAIM_MARGIN;
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let claimed = dispatch
            .claim_dispatched(&self.owner, ttl_ms, limit)
            .await?;
        let runs = claimed
            .into_iter()
            .map(|d| self.execute(d, deadline, ttl_ms));
        futures::future::join_all(runs).await.into_iter().collect()
    }

    async fn execute(
        &self,
        d: Dispatched,
        deadline: Instant,
        ttl_ms: i64,
    ) -> Result<Executed, StoreError> {
        if self.recorded(&d.task_id, &d.id).await? {
            self.done(&d.id).await?;
            return Ok(Executed::AlreadyDone { id: d.id });
        }
        let what = d.cmd.kind.fingerprint();
        let (receipt, executed) = if d.claims > 1 && !d.cmd.policy.reissue_allowed() {
            let error = EffectError::permanent(format!(
                "outcome unknown: {what} (invocation {}) was dispatched to an executor that stopped before recording its outcome; its policy is at-most-once, so it is not run again",
                d.id
            ));
            let receipt = Receipt {
                id: d.id.clone(),
                attempt: d.claims - 1,
                outcome: Err(error),
                usage: None,
            };
            (receipt, Executed::Unknown { id: d.id.clone() })
        } else {
            let receipt = self.perform(&d, deadline).await;
            let ok = receipt.outcome.is_ok();
            (
                receipt,
                Executed::Recorded {
                    id: d.id.clone(),
                    ok,
                },
            )
        };
        if !self.record(&d.task_id, receipt, deadline, ttl_ms).await? {
            return Ok(Executed::Busy { id: d.id });
        }
        self.done(&d.id).await?;
        Ok(executed)
    }

    /// Perform the command with its retries (backoff, `Retry-After`), starting no attempt after
    /// the deadline; its receipt.
    async fn perform(&self, d: &Dispatched, deadline: Instant) -> Receipt {
        let max = d.cmd.retry.max_attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = self.effects.perform(&d.id, &d.cmd.kind).await;
            match result {
                Err(error) if error.is_transient() && attempt < max => {
                    let hint = Duration::from_millis(error.retry_after_ms.unwrap_or(0));
                    let delay = d.cmd.retry.backoff(attempt + 1).max(hint);
                    if Instant::now() + delay >= deadline {
                        return receipt(&d.id, attempt, Err(error), None);
                    }
                    tokio::time::sleep(delay).await;
                }
                Ok(performed) => {
                    return receipt(&d.id, attempt, Ok(performed.value), performed.usage)
                }
                Err(error) => return receipt(&d.id, attempt, Err(error), None),
            }
        }
    }

    /// True when the task's journal holds a receipt for `id`, or the task ended (nothing more is
    /// journaled for it).
    async fn recorded(&self, task_id: &str, id: &InvocationId) -> Result<bool, StoreError> {
        let Some(record) = self.store.task(task_id).await? else {
            return Ok(true);
        };
        if record.state.is_terminal() {
            return Ok(true);
        }
        let journal = self.store.journal(task_id, 0).await?;
        Ok(journal
            .iter()
            .any(|r| matches!(&r.entry, Entry::ReceiptRecorded { receipt } if &receipt.id == id)))
    }

    /// Append `receipt` to its task's journal under the task's lease (taken, waiting while a pass
    /// holds it, until the deadline), with the task due at once. False when the lease stayed held.
    async fn record(
        &self,
        task_id: &str,
        receipt: Receipt,
        deadline: Instant,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        loop {
            let fence = match self.store.leases() {
                Some(leases) => match leases.acquire(&self.owner, task_id, ttl_ms).await? {
                    Some(lease) => Some(lease.token),
                    None if self
                        .store
                        .task(task_id)
                        .await?
                        .is_none_or(|r| r.state.is_terminal()) =>
                    {
                        return Ok(true)
                    }
                    None if Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                    None => return Ok(false),
                },
                None => None,
            };
            let appended = self.append_receipt(task_id, &receipt, fence).await;
            if let (Some(leases), Some(token)) = (self.store.leases(), fence) {
                let _ = leases.release(&self.owner, task_id, token).await;
            }
            match appended {
                Ok(()) => return Ok(true),
                // A pass appended meanwhile (a store without leases): read the task again.
                Err(StoreError::Conflict { .. }) if Instant::now() < deadline => continue,
                Err(e) => return Err(e),
            }
        }
    }

    async fn append_receipt(
        &self,
        task_id: &str,
        receipt: &Receipt,
        fence: Option<u64>,
    ) -> Result<(), StoreError> {
        if self.recorded(task_id, &receipt.id).await? {
            return Ok(());
        }
        let Some(record) = self.store.task(task_id).await? else {
            return Ok(());
        };
        let now = now_ms();
        let mut append = Append::new(
            task_id,
            record.last_seq + 1,
            vec![Entry::ReceiptRecorded {
                receipt: receipt.clone(),
            }],
        );
        // Due at once: the next pass (a sweep, a worker's claim) goes on with the task.
        append.wake_at_ms = Some(Some(now));
        append.fence = fence;
        append.at_ms = now;
        self.store.append(append).await
    }

    async fn done(&self, id: &InvocationId) -> Result<(), StoreError> {
        match self.store.dispatch() {
            Some(dispatch) => dispatch.dispatch_done(id).await,
            None => Ok(()),
        }
    }
}

fn receipt(
    id: &InvocationId,
    attempt: u32,
    outcome: Result<serde_json::Value, EffectError>,
    usage: Option<serde_json::Value>,
) -> Receipt {
    Receipt {
        id: id.clone(),
        attempt,
        outcome,
        usage,
    }
}
