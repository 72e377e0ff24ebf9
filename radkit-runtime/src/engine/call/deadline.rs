//! A call's deadline: fixed when the call is journaled (`command::issue`), read back from its
//! journaled command on every visit (`Limit`), and what happens when it passes
//! (`Inner::time_out`). It never decides whether a callee settled; `call_inner` does.

use std::sync::Arc;
use std::time::Duration;

use super::cancel::{cancel_callee, CANCEL_WAIT};
use super::{receipt, CallStep, Peer};
use crate::engine::run::TaskRun;
use crate::engine::Inner;
use crate::flow::{Cmd, CmdKind, EffectError, InvocationId};
use crate::journal::now_ms;

/// A call's time limit as journaled with its command (`timeout_ms`, `deadline_ms`): the engine
/// fixes the deadline when it issues the call, so every later visit, replay or restart reads the
/// same one. A command journaled without a deadline (`Duration::MAX`, or before deadlines
/// existed) has none.
#[derive(Default, Clone, Copy)]
pub(super) struct Limit {
    timeout_ms: Option<u64>,
    deadline_ms: Option<i64>,
}

impl Limit {
    /// The limit of call `id` as its journal record says.
    pub(super) fn of(run: &TaskRun, id: &InvocationId) -> Self {
        let st = run.lock();
        st.command(id)
            .map_or_else(Limit::default, |c| Limit::of_kind(&c.cmd.kind))
    }

    /// The limit a journaled call command carries.
    pub(super) fn of_kind(kind: &CmdKind) -> Self {
        match kind {
            CmdKind::Agent {
                timeout_ms,
                deadline_ms,
                ..
            }
            | CmdKind::Skill {
                timeout_ms,
                deadline_ms,
                ..
            } => Limit {
                timeout_ms: *timeout_ms,
                deadline_ms: *deadline_ms,
            },
            _ => Limit::default(),
        }
    }

    /// True once the deadline has come.
    pub(super) fn passed(&self) -> bool {
        self.deadline_ms.is_some_and(|d| d <= now_ms())
    }

    /// The time left until the deadline (`Duration::MAX` without one).
    pub(super) fn left(&self) -> Duration {
        match self.deadline_ms {
            Some(d) => Duration::from_millis(u64::try_from(d - now_ms()).unwrap_or(0)),
            None => Duration::MAX,
        }
    }

    /// `at`, or the deadline when it comes first.
    pub(super) fn cap(&self, at: i64) -> i64 {
        self.deadline_ms.map_or(at, |d| at.min(d))
    }

    /// The error a call that timed out records: the callee named, the timeout, its task.
    pub(super) fn timed_out(&self, what: &str, task: Option<&str>) -> String {
        let within = match self.timeout_ms {
            Some(ms) => format!("the call's timeout of {:?}", Duration::from_millis(ms)),
            None => "the call's deadline".to_owned(),
        };
        match task {
            Some(task) => {
                format!("{what} did not finish within {within}; its task {task} is canceled")
            }
            None => format!(
                "{what} did not finish within {within}; a task it may have started is canceled"
            ),
        }
    }
}

impl Inner {
    /// The call's deadline passed without an answer: cancel the callee (when `cancel`: its task
    /// `task`, or when the call was never bound the one it may have made; best effort, logged,
    /// waiting at most 2 s before it goes on in the background), then buffer the receipt that
    /// says the call timed out. The cancel comes first: after a crash between the two, the
    /// callee found canceled past the deadline times the call out again (see `call_inner`).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn time_out(
        self: &Arc<Self>,
        run: &Arc<TaskRun>,
        id: &InvocationId,
        cmd: &Cmd,
        peer: &Peer,
        task: Option<String>,
        cancel: bool,
        attempts: u32,
        limit: Limit,
    ) -> CallStep {
        let what = cmd.kind.fingerprint();
        tracing::info!(task = %run.task_id, callee = %what, callee_task = ?task, "the call's deadline passed: it times out and its callee is canceled");
        if cancel {
            let parent = run.task_id.to_string();
            let handle = cancel_callee(
                peer.clone(),
                id.clone(),
                cmd.kind.clone(),
                task.clone(),
                parent,
            );
            let _ = tokio::time::timeout(CANCEL_WAIT, handle).await;
        }
        if run.is_halted() {
            return CallStep::Halted;
        }
        let error = EffectError::permanent(limit.timed_out(&what, task.as_deref()));
        self.settle_call(run, receipt(id, attempts + 1, Err(error)))
    }
}
