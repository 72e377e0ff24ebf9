//! Commands handed to executors: a host that does not perform a command itself (a serverless pass,
//! for a tool declared dispatched) records it here after journaling it, and any executor claims it,
//! performs it under its InvocationId and records the receipt in the task's journal. A row is only
//! the executors' to-do list: the journal stays the truth (a command whose receipt is journaled is
//! done, whatever its row says).

use async_trait::async_trait;

use super::StoreError;
use crate::flow::{Cmd, InvocationId};

/// A dispatched command, as an executor claimed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatched {
    /// Its task.
    pub task_id: String,
    /// Its id: the effect's idempotency key.
    pub id: InvocationId,
    /// The command (with its policy).
    pub cmd: Cmd,
    /// How many times it was claimed, this claim included: more than one means an executor
    /// claimed it before and stopped without recording its outcome.
    pub claims: u32,
}

/// The executors' to-do list of a shared store.
#[async_trait]
pub trait DispatchStore: Send + Sync {
    /// Hand command `id` of `task_id` to the executors. Dispatching a command again (a pass that
    /// re-ran the step after a crash) keeps its row and its claims.
    async fn dispatch(&self, task_id: &str, id: &InvocationId, cmd: &Cmd)
        -> Result<(), StoreError>;

    /// Claim up to `limit` commands that nobody holds (never claimed, or whose claim expired) for
    /// `owner` until `ttl_ms` from now, oldest first. Two claimers never get the same command.
    async fn claim_dispatched(
        &self,
        owner: &str,
        ttl_ms: i64,
        limit: usize,
    ) -> Result<Vec<Dispatched>, StoreError>;

    /// Command `id`'s receipt is in its task's journal: its row goes.
    async fn dispatch_done(&self, id: &InvocationId) -> Result<(), StoreError>;
}
