//! Push-notification configs and their delivery cursors, kept by the store beside the task they
//! belong to. A config is a webhook (URL, token, authentication) plus how far its deliveries have
//! come: `delivered_seq`, the journal seq of the last update the webhook acknowledged. The journal
//! already orders every update, so a config's pending work is exactly the task's records after its
//! cursor; nothing about deliveries is written to the journal (replay and the fold never see them).
//!
//! A sender claims configs with pending work under a lease (`owner`, `lease_until`), so on a store
//! shared by several engines each delivery has one sender at a time; a lease that runs out (its
//! sender died) is claimed again and the sender continues after the cursor. This module owns the
//! types and the trait; the stores implement it; it knows nothing of HTTP or A2A versions' wire forms.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::StoreError;

/// Which A2A version's payload a webhook receives (the version of the request that set it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PushFormat {
    /// A2A 0.3: the task as it is (a `Task` JSON object), as the 0.3 SDK's sender posts it.
    #[serde(rename = "0.3")]
    V0_3,
    /// A2A 1.0: one `StreamResponse` (ProtoJSON) per update, as the stream carries it.
    #[serde(rename = "1.0")]
    V1_0,
}

/// How the agent authenticates to the webhook: `Authorization: <scheme> <credentials>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushAuth {
    /// Schemes (1.0 has one; 0.3 a list, of which the first is used).
    pub schemes: Vec<String>,
    /// The credentials, in the scheme's format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

/// One webhook of a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushConfig {
    /// The config's id, unique within its task.
    pub id: String,
    /// Where updates are posted (checked when set and again at every delivery).
    pub url: String,
    /// Sent as `X-A2A-Notification-Token`, so the receiver can check the post is for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Sent as the `Authorization` header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<PushAuth>,
    /// The payload's version.
    pub format: PushFormat,
}

/// A config with pending work, claimed by a sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushClaim {
    /// The task.
    pub task_id: String,
    /// The config.
    pub config: PushConfig,
    /// The seq of the last update the webhook acknowledged.
    pub delivered_seq: u64,
    /// Failed attempts since the last success (the next backoff grows with it).
    pub attempts: u32,
}

/// Where the delivery of one push config of a task stands (the console shows it).
#[derive(Debug, Clone, PartialEq)]
pub struct PushDelivery {
    /// The config.
    pub config: PushConfig,
    /// The seq of the last update its webhook acknowledged.
    pub delivered_seq: u64,
    /// Failed attempts since the last acknowledged update.
    pub attempts: u32,
    /// When the next attempt is due (ms since the epoch; 0: at once).
    pub next_at_ms: i64,
    /// The update that ended the task was acknowledged: nothing more to send.
    pub finished: bool,
    /// The engine delivering it now, while its lease lasts.
    pub sender: Option<String>,
}

/// Push configs and delivery cursors (see the module docs). Every store of the crate has them
/// ([`Store::push`](super::Store::push)).
#[async_trait]
pub trait PushStore: Send + Sync {
    /// Create the config `config.id` of `task_id`, or replace it. A new config's cursor is
    /// `delivered_seq` (the updates after it are delivered); a replaced one keeps its cursor, so
    /// setting the same config again sends nothing twice.
    async fn put_push_config(
        &self,
        task_id: &str,
        config: &PushConfig,
        delivered_seq: u64,
    ) -> Result<(), StoreError>;

    /// The config `config_id` of `task_id`.
    async fn push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> Result<Option<PushConfig>, StoreError>;

    /// The configs of `task_id` in id order, after `after` (an id), at most `limit`.
    async fn push_configs(
        &self,
        task_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PushConfig>, StoreError>;

    /// Every config of `task_id` with where its delivery stands, in id order (at most
    /// [`crate::engine::MAX_CONFIGS_PER_TASK`] exist).
    async fn push_deliveries(&self, task_id: &str) -> Result<Vec<PushDelivery>, StoreError>;

    /// Delete a config; `false` when there was none.
    async fn delete_push_config(&self, task_id: &str, config_id: &str) -> Result<bool, StoreError>;

    /// Claim at most `limit` configs whose task has records after their cursor, whose next attempt
    /// is due at `now_ms`, and whose lease is free or expired (or held by another owner when
    /// `exclusive`: this engine is the store's only user, so a lease left by an earlier process is
    /// void; its own leases still keep a config it is delivering from being claimed twice); each is
    /// leased to `owner` until `now_ms + lease_ms`. With `task_id`, only that task's configs (a
    /// serverless pass delivers what its own task committed before it answers).
    async fn claim_push(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
        exclusive: bool,
        task_id: Option<&str>,
    ) -> Result<Vec<PushClaim>, StoreError>;

    /// The webhook acknowledged the update at `seq`: move the cursor there (never back), clear
    /// the failures, and extend the lease to `lease_until_ms`. With `finished` the update ended the
    /// task: the config has nothing more to send and claims skip it from now on (an index of
    /// unfinished configs keeps a claim's cost to the live ones). `false` when `owner` no longer
    /// holds the lease (or the config was deleted): the sender stops.
    async fn push_delivered(
        &self,
        task_id: &str,
        config_id: &str,
        owner: &str,
        seq: u64,
        finished: bool,
        lease_until_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Give the lease back: the next attempt is due at `next_at_ms` after `attempts` failures
    /// (`0` after a success). A lease `owner` no longer holds is left alone.
    async fn release_push(
        &self,
        task_id: &str,
        config_id: &str,
        owner: &str,
        attempts: u32,
        next_at_ms: i64,
    ) -> Result<(), StoreError>;
}

/// A config's JSON column.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn config_json(config: &PushConfig) -> Result<String, StoreError> {
    serde_json::to_string(config)
        .map_err(|e| StoreError::backend("a push config does not serialize", e))
}

/// A config read back from its JSON column.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn config_of(task_id: &str, body: &str) -> Result<PushConfig, StoreError> {
    serde_json::from_str(body).map_err(|e| StoreError::Corrupt {
        task_id: task_id.to_owned(),
        seq: 0,
        reason: format!("push config does not decode: {e}"),
    })
}
