//! The push sender: a loop that claims configs with pending updates (`PushStore::claim_push`) and
//! posts each update after the config's cursor to its webhook, in journal order, moving the cursor
//! as the webhook acknowledges (2xx). A serverless pass and a sweep run the same delivery in their
//! own future until their deadline instead (`until`). A failure (refused connection, timeout,
//! non-2xx) gives the claim back with the next attempt due after an exponential backoff; the cursor
//! stays, so the update is posted again. A crash between a post and its cursor move posts it again too: delivery
//! is at least once, and every post carries the record's journal seq (`X-A2A-Event-Id`, the same id
//! SSE events carry) so a receiver drops what it has seen.
//!
//! Payloads: a 1.0 config gets one `StreamResponse` (ProtoJSON, `application/a2a+json`) per status
//! or artifact update, as a stream carries it; a 0.3 config gets the task as it is
//! (`application/json`), as the 0.3 SDK's sender posts it — one post for all the updates pending,
//! whose seq is the task's last.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};

use super::super::{projection, StreamEvent, Update};
use super::{target, PushSettings, Pusher};
use crate::journal::{now_ms, Entry};
use crate::model::{v0_3, v1};
use crate::store::{PushClaim, PushFormat, PushStore};

/// Configs claimed per round.
const CLAIMS: usize = 32;
/// Journal appends read per page.
const PAGE_APPENDS: usize = 16;

/// How a delivery round ended well.
enum Done {
    /// Everything pending was acknowledged; the task goes on.
    Caught,
    /// The task's end was acknowledged: nothing more will come.
    Ended,
}

/// Why a delivery round stopped before the end.
enum Stop {
    /// The engine halted (a crash, or a shutdown): leave the lease to expire.
    Halted,
    /// Another sender holds the config now, or it was deleted.
    Lost,
    /// The webhook did not take the update (why, and whether any update got through first).
    Failed { why: String, progressed: bool },
}

/// Start the sender loop; it ends when the engine is dropped or halts.
pub(super) fn spawn(pusher: &Arc<Pusher>) {
    let weak = Arc::downgrade(pusher);
    let watch = pusher.watch.clone();
    tokio::spawn(async move {
        loop {
            let (poll, full) = {
                let Some(pusher) = weak.upgrade() else { break };
                if pusher.halted.load(Ordering::SeqCst) {
                    break;
                }
                let started = round(&pusher).await;
                (pusher.settings.poll, started == CLAIMS)
            };
            if full {
                // More may be due: claim again now.
                continue;
            }
            tokio::select! {
                _ = watch.wake.notified() => {}
                _ = tokio::time::sleep(poll) => {}
            }
        }
    });
}

/// Claim what is due, as much as there is room for, and deliver each claim on its own task; how
/// many deliveries started.
async fn round(pusher: &Arc<Pusher>) -> usize {
    let lease_ms = millis(pusher.settings.lease);
    let admitted = admit(pusher, None, lease_ms).await;
    let started = admitted.len();
    for delivery in admitted {
        // Claimed here: its task's commits here wake the sender.
        pusher.watch.watch(&delivery.claim.task_id);
        let pusher = pusher.clone();
        tokio::spawn(async move {
            deliver(&pusher, &delivery.claim).await;
            drop(delivery);
            // Room again: what waits for it need not wait for the next poll.
            pusher.watch.wake.notify_one();
        });
    }
    started
}

/// Deliver what is due now (of `task_id` only, or of every task) in this future, until nothing
/// due is left or `deadline` comes; how many deliveries ran. Another round follows only a full one
/// (more may be due), so a failed delivery waits for a later invocation, its backoff honoured,
/// instead of being retried here until the deadline. A delivery the deadline cuts off keeps its
/// claim until its lease (the time that was left, plus one post's timeout) runs out; its update is
/// posted again then (at least once, as after a crash).
pub(super) async fn until(
    pusher: &Arc<Pusher>,
    task_id: Option<&str>,
    deadline: std::time::Instant,
) -> usize {
    let mut ran = 0;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || pusher.halted.load(Ordering::SeqCst) {
            return ran;
        }
        let lease_ms = millis(left.saturating_add(pusher.settings.timeout));
        let admitted = admit(pusher, task_id, lease_ms).await;
        if admitted.is_empty() {
            return ran;
        }
        let all = futures::future::join_all(admitted.iter().map(|d| deliver(pusher, &d.claim)));
        if tokio::time::timeout_at(deadline.into(), all).await.is_err() {
            return ran;
        }
        ran += admitted.len();
        if admitted.len() < CLAIMS {
            return ran;
        }
    }
}

/// A claimed config this sender delivers: it holds one of the sender's permits and its receiver's
/// share, both given back when it is dropped (also when a deadline drops it mid-post).
struct Admitted {
    claim: PushClaim,
    receiver: String,
    pusher: Arc<Pusher>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.pusher
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .end(&self.claim.task_id, &self.claim.config.id, &self.receiver);
    }
}

/// Claim what is due (of `task_id` only, when given), leased for `lease_ms`, as much as there is
/// room for.
///
/// Room is taken before the claim (a permit of [`MAX_DELIVERIES_IN_FLIGHT`] per config claimed),
/// so a claimed config never waits in memory for a slot while its claim runs out. A config whose
/// receiver has its share in flight ([`MAX_DELIVERIES_PER_RECEIVER`]) is given back at once, due
/// after one post's timeout, without counting an attempt; one this sender delivers already is left
/// to that delivery.
///
/// [`MAX_DELIVERIES_IN_FLIGHT`]: super::MAX_DELIVERIES_IN_FLIGHT
/// [`MAX_DELIVERIES_PER_RECEIVER`]: super::MAX_DELIVERIES_PER_RECEIVER
async fn admit(pusher: &Arc<Pusher>, task_id: Option<&str>, lease_ms: i64) -> Vec<Admitted> {
    let Some(push) = pusher.store.push() else {
        return Vec::new();
    };
    let room = pusher.deliveries.available_permits().min(CLAIMS);
    if room == 0 {
        return Vec::new();
    }
    let Ok(mut permits) = pusher
        .deliveries
        .clone()
        .try_acquire_many_owned(u32::try_from(room).unwrap_or(0))
    else {
        return Vec::new();
    };
    let claims = match push
        .claim_push(
            &pusher.owner,
            now_ms(),
            lease_ms,
            room,
            pusher.exclusive,
            task_id,
        )
        .await
    {
        Ok(claims) => claims,
        Err(e) => {
            tracing::warn!(error = %e, "push deliveries could not be claimed; retrying");
            return Vec::new();
        }
    };
    let mut admitted = Vec::with_capacity(claims.len());
    for claim in claims {
        let receiver = super::receiver_of(&claim.config.url);
        let begun = pusher
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .begin(&claim.task_id, &claim.config.id, &receiver);
        match begun {
            Ok(()) => {}
            Err(super::Busy::Config) => continue,
            Err(super::Busy::Receiver) => {
                let next_at = now_ms().saturating_add(millis(pusher.settings.timeout));
                if let Err(e) = push
                    .release_push(
                        &claim.task_id,
                        &claim.config.id,
                        &pusher.owner,
                        claim.attempts,
                        next_at,
                    )
                    .await
                {
                    tracing::warn!(task = %claim.task_id, error = %e, "push claim not released; its lease will expire");
                }
                continue;
            }
        }
        let Some(permit) = permits.split(1) else {
            // Never: as many permits as claims were taken.
            pusher
                .in_flight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .end(&claim.task_id, &claim.config.id, &receiver);
            continue;
        };
        admitted.push(Admitted {
            claim,
            receiver,
            pusher: pusher.clone(),
            _permit: permit,
        });
    }
    admitted
}

fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The delay before attempt `attempts + 1`, after `attempts` failures in a row.
fn backoff(settings: &PushSettings, attempts: u32) -> std::time::Duration {
    let doubled = settings
        .retry_base
        .saturating_mul(1u32 << attempts.saturating_sub(1).min(20));
    doubled.min(settings.retry_max)
}

/// Deliver one claim, then give it back, in a `push` span (its posts carry its trace context; the
/// sender runs apart from any request, so it starts a trace of its own).
async fn deliver(pusher: &Pusher, claim: &PushClaim) {
    let span = tracing::info_span!("push", task = %claim.task_id);
    tracing::Instrument::instrument(deliver_claim(pusher, claim), span).await
}

async fn deliver_claim(pusher: &Pusher, claim: &PushClaim) {
    let Some(push) = pusher.store.push() else {
        return;
    };
    let outcome = match claim.config.format {
        PushFormat::V1_0 => events(pusher, push, claim).await,
        PushFormat::V0_3 => whole_task(pusher, push, claim).await,
    };
    let mut again = false;
    let (attempts, next_at) = match outcome {
        Ok(done) => {
            match done {
                Done::Ended => pusher.watch.forget(&claim.task_id),
                // A commit during the round found the config leased (to this round): look again
                // once it is released.
                Done::Caught => again = true,
            }
            (0, now_ms())
        }
        Err(Stop::Halted | Stop::Lost) => return,
        Err(Stop::Failed { why, progressed }) => {
            let attempts = if progressed {
                1
            } else {
                claim.attempts.saturating_add(1)
            };
            let delay = backoff(&pusher.settings, attempts);
            tracing::warn!(task = %claim.task_id, config = %claim.config.id, attempts, retry_in = ?delay, "push notification not delivered: {why}");
            (attempts, now_ms().saturating_add(millis(delay)))
        }
    };
    if let Err(e) = push
        .release_push(
            &claim.task_id,
            &claim.config.id,
            &pusher.owner,
            attempts,
            next_at,
        )
        .await
    {
        tracing::warn!(task = %claim.task_id, error = %e, "push claim not released; its lease will expire");
    }
    if again {
        pusher.watch.wake.notify_one();
    }
}

/// Record that the webhook has everything up to `seq` (and keep the lease).
async fn acknowledge(
    pusher: &Pusher,
    push: &dyn PushStore,
    claim: &PushClaim,
    seq: u64,
    finished: bool,
) -> Result<(), Stop> {
    let until = now_ms().saturating_add(millis(pusher.settings.lease));
    match push
        .push_delivered(
            &claim.task_id,
            &claim.config.id,
            &pusher.owner,
            seq,
            finished,
            until,
        )
        .await
    {
        Ok(true) => Ok(()),
        Ok(false) => Err(Stop::Lost),
        Err(e) => Err(Stop::Failed {
            why: format!("the delivery cursor could not be stored: {e}"),
            progressed: false,
        }),
    }
}

/// 1.0: each update after the cursor as a `StreamResponse`.
async fn events(pusher: &Pusher, push: &dyn PushStore, claim: &PushClaim) -> Result<Done, Stop> {
    let store_failed = |e: crate::store::StoreError| Stop::Failed {
        why: format!("the task could not be read: {e}"),
        progressed: false,
    };
    let Some(task) = pusher
        .store
        .task(&claim.task_id)
        .await
        .map_err(store_failed)?
    else {
        return Err(Stop::Lost);
    };
    let (mut cursor, mut acked, mut progressed) = (claim.delivered_seq, claim.delivered_seq, false);
    // The task's end: nothing comes after it, so the config is finished once it is acknowledged.
    let mut ended = false;
    loop {
        let page = pusher
            .store
            .journal_page(&claim.task_id, cursor, PAGE_APPENDS)
            .await
            .map_err(|e| Stop::Failed {
                why: format!("the journal could not be read: {e}"),
                progressed,
            })?;
        let Some(last) = page.last().map(|r| r.seq) else {
            break;
        };
        for record in page {
            let seq = record.seq;
            ended |= matches!(record.entry, Entry::Terminal { .. });
            let is_final = ended || matches!(record.entry, Entry::AwaitingInput { .. });
            let update = Update { record, is_final };
            let body = projection::stream_event(&task.id, &task.context_id, &update)
                .and_then(|event| stream_response(&claim.task_id, seq, event));
            if let Some(body) = body {
                post(pusher, claim, body, "application/a2a+json", seq)
                    .await
                    .map_err(|why| match why {
                        Stop::Failed { why, .. } => Stop::Failed { why, progressed },
                        other => other,
                    })?;
                acknowledge(pusher, push, claim, seq, ended).await?;
                (acked, progressed) = (seq, true);
            }
        }
        if last > acked {
            // Records that are no update (a step's bookkeeping): the cursor passes them.
            acknowledge(pusher, push, claim, last, ended).await?;
            acked = last;
        }
        cursor = last;
    }
    Ok(if ended { Done::Ended } else { Done::Caught })
}

/// A stream event as 1.0 ProtoJSON, or `None` (logged) when it cannot be written.
fn stream_response(task_id: &str, seq: u64, event: StreamEvent) -> Option<Vec<u8>> {
    let response = match event {
        StreamEvent::Status(status) => v1::StreamResponse::StatusUpdate(status.into()),
        StreamEvent::Artifact(artifact) => v1::StreamResponse::ArtifactUpdate(artifact.into()),
    };
    match serde_json::to_vec(&response) {
        Ok(body) => Some(body),
        Err(e) => {
            tracing::warn!(task = %task_id, seq, error = %e, "an update that cannot be written as JSON is not pushed");
            None
        }
    }
}

/// 0.3: the task as it is, once for everything pending.
async fn whole_task(
    pusher: &Pusher,
    push: &dyn PushStore,
    claim: &PushClaim,
) -> Result<Done, Stop> {
    let view = match pusher.store.task_view(&claim.task_id, None).await {
        Ok(Some(view)) => view,
        Ok(None) => return Err(Stop::Lost),
        Err(e) => {
            return Err(Stop::Failed {
                why: format!("the task could not be read: {e}"),
                progressed: false,
            })
        }
    };
    let seq = view.record.last_seq;
    let ended = view.record.state.is_terminal();
    let body =
        serde_json::to_vec(&v0_3::Task::from(projection::project_task(view))).map_err(|e| {
            Stop::Failed {
                why: format!("the task does not serialize: {e}"),
                progressed: false,
            }
        })?;
    post(pusher, claim, body, "application/json", seq).await?;
    acknowledge(pusher, push, claim, seq, ended).await?;
    Ok(if ended { Done::Ended } else { Done::Caught })
}

/// Post one payload to the claim's webhook with its headers: the journal seq, the task, the
/// config's token and authentication.
async fn post(
    pusher: &Pusher,
    claim: &PushClaim,
    body: Vec<u8>,
    content_type: &'static str,
    seq: u64,
) -> Result<(), Stop> {
    if pusher.halted.load(Ordering::SeqCst) {
        return Err(Stop::Halted);
    }
    let failed = |why: String| Stop::Failed {
        why,
        progressed: false,
    };
    let settings = &pusher.settings;
    let config = &claim.config;
    let url = target::check_literal(&config.url, settings.allow_private)
        .map_err(|e| failed(e.to_string()))?;
    let client = match pusher.client.get() {
        Some(client) => client.clone(),
        None => {
            let client = target::client(settings.allow_private, settings.timeout)
                .map_err(|e| failed(format!("the webhook client could not be built: {e}")))?;
            pusher.client.get_or_init(|| client).clone()
        }
    };
    let mut request = crate::telemetry::traced(client.post(url))
        .header(CONTENT_TYPE, content_type)
        .header("X-A2A-Event-Id", seq.to_string())
        .header("X-A2A-Task-Id", claim.task_id.as_str());
    if let Some(token) = &config.token {
        request = request.header("X-A2A-Notification-Token", token.as_str());
    }
    if let Some(auth) = &config.authentication {
        if let (Some(scheme), Some(credentials)) = (auth.schemes.first(), &auth.credentials) {
            request = request.header(AUTHORIZATION, format!("{scheme} {credentials}"));
        }
    }
    // The delivery holds one of the sender's permits: this post is in its count.
    let response = request.body(body).send().await.map_err(|e| {
        failed(format!(
            "posting to the webhook failed: {}",
            crate::store::describe(&e)
        ))
    })?;
    if response.status().is_success() {
        Ok(())
    } else {
        Err(failed(format!(
            "the webhook answered {}",
            response.status()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn backoff_doubles_from_the_base_up_to_the_cap() {
        let settings = PushSettings {
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
            ..PushSettings::default()
        };
        let delays: Vec<u64> = (1..=9).map(|n| backoff(&settings, n).as_secs()).collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(backoff(&settings, u32::MAX), Duration::from_secs(60));
    }
}
