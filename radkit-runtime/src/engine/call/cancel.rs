//! Canceling a call's callee: the callees of a task that is canceled or fails
//! (`Inner::cancel_calls`), and one whose call timed out; a call cut off before it journaled its
//! callee has its callee found first (`unbound_callee`). Best effort: what cannot be reached is
//! logged. It never writes the caller's journal.

use std::sync::Arc;
use std::time::Duration;

use super::{message_id, Peer, Started};
use crate::engine::run::TaskRun;
use crate::engine::Inner;
use crate::flow::{Cmd, CmdKind, InvocationId};

/// How long a canceled task waits for each callee's cancel before it ends anyway.
pub(super) const CANCEL_WAIT: Duration = Duration::from_secs(2);

impl Inner {
    /// Cancel the callees of the task's calls that have not settled (a canceled or failed task
    /// leaves no work running on its behalf). Best effort: a callee that cannot be reached is
    /// logged; one that ended already is fine.
    ///
    /// A call cut off before it journaled its callee (a crash after the command was journaled, or
    /// with the start in flight) may still have made the callee's task, which the journal does not
    /// name: it is found and canceled too (see `unbound_callee`).
    pub(crate) async fn cancel_calls(self: &Arc<Self>, run: &Arc<TaskRun>) {
        let open = super::open_calls(&run.lock());
        for (id, cmd, callee) in open {
            let Ok(peer) = self.peer(run, &cmd.kind) else {
                continue;
            };
            let cancel = cancel_callee(peer, id, cmd.kind, callee, run.task_id.to_string());
            // The callee may take long to wind down (a tool in flight finishes first): the cancel
            // goes on in the background once it is asked, and this task ends without waiting for it.
            let _ = tokio::time::timeout(CANCEL_WAIT, cancel).await;
        }
    }

    /// Cancel the callees of `calls` (id, command, callee task when journaled), calls that lost a
    /// race (`ctx.race`) and were abandoned: nothing waits for them any more. In the background:
    /// the step goes on at once.
    pub(crate) fn cancel_abandoned(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        calls: Vec<(InvocationId, Cmd, Option<String>)>,
    ) {
        for (id, cmd, callee) in calls {
            if let Ok(peer) = self.peer(run, &cmd.kind) {
                drop(cancel_callee(
                    peer,
                    id,
                    cmd.kind,
                    callee,
                    run.task_id.to_string(),
                ));
            }
        }
    }
}

/// The callee task that call `id` (of `kind`, to `peer`) made, though the call was cut off before
/// it journaled it: the caller crashed after journaling the command, or with the start in flight.
/// `None` when no such task exists (or it cannot be learned now).
///
/// A child skill's id is derived from the call (the parent's principal and the call's
/// `messageId`). A remote agent's task is known only by the id it answers with, so the call's
/// message is sent again, with the same `messageId`: a peer that deduplicates on it (radkit does)
/// answers with the task the first send made, and the cancel that follows cancels that. A peer
/// that does not deduplicate, or never got the first send, makes a task now, which is canceled at
/// once. A reply (`.reply(..)`) names the callee's task itself and is never sent again.
async fn unbound_callee(peer: &Peer, id: &InvocationId, kind: &CmdKind) -> Option<String> {
    let (CmdKind::Agent { message, .. } | CmdKind::Skill { message, .. }) = kind else {
        return None;
    };
    match peer {
        Peer::Child(child) => child.task_of(id, message),
        Peer::Remote(_) if message.task_id.is_some() => message.task_id.clone(),
        Peer::Remote(remote) => {
            let mut message = message.clone();
            message.message_id = message_id(id);
            match remote.start(message, None).await {
                Ok((Started::Task(task), _)) => Some(task.id),
                // The agent answered with a message and made no task.
                Ok((Started::Message(_), _)) => None,
                Err(e) => {
                    tracing::warn!(invocation = %id, callee = %kind.fingerprint(), error = %e, "could not learn the callee's task of a call cut off before it was bound; it is not canceled");
                    None
                }
            }
        }
    }
}

/// Cancel the callee of call `id` (its task `callee` when journaled, else the one
/// `unbound_callee` finds), trying a transient failure again twice; the work goes on in a task
/// of its own, which the returned handle ends with. `parent`: the calling task, for the logs.
pub(super) fn cancel_callee(
    peer: Peer,
    id: InvocationId,
    kind: CmdKind,
    callee: Option<String>,
    parent: String,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let what = kind.fingerprint();
        let task_id = match callee {
            Some(task_id) => task_id,
            None => match unbound_callee(&peer, &id, &kind).await {
                Some(task_id) => task_id,
                None => return,
            },
        };
        for tries in 1..=3u32 {
            match peer.cancel(&task_id).await {
                Ok(()) => {
                    tracing::info!(task = %parent, callee = %what, callee_task = %task_id, "callee canceled");
                    return;
                }
                Err(e) if e.is_transient() && tries < 3 => {
                    tokio::time::sleep(Duration::from_millis(200 << tries)).await;
                }
                Err(e) => {
                    tracing::warn!(task = %parent, callee = %what, callee_task = %task_id, error = %e, "could not cancel the callee");
                    return;
                }
            }
        }
    })
}
