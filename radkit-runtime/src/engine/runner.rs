//! Running tasks: loading and replaying a task, driving it on its own tokio task, reloading it after a
//! failed append, waking it on timers.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::cluster::Ownership;
use super::replay::{replay, Wait};
use super::run::TaskRun;
use super::{EngineError, Inner};
use crate::flow::Event;
use crate::journal::now_ms;
use crate::store::Lease;

/// The longest wait between reloads of a task whose appends keep failing.
const RELOAD_BACKOFF_CAP: Duration = Duration::from_secs(5);

/// The alarms set in this process, by task and time.
#[derive(Default)]
pub(crate) struct Alarms(Mutex<HashSet<(String, i64)>>);

impl Alarms {
    /// True when no alarm was set yet for `task_id` at `at_ms` (it is now).
    fn set(&self, task_id: &str, at_ms: i64) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((task_id.to_owned(), at_ms))
    }

    /// The alarm rang (before it wakes the task: one set meanwhile for the same time rings again).
    fn rung(&self, task_id: &str, at_ms: i64) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(task_id.to_owned(), at_ms));
    }

    /// How many alarms are set and have not rung.
    #[cfg(feature = "metrics")]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// What the reloads after failed appends remember (single-engine stores; a shared store keeps both on
/// the task's row and lease).
#[derive(Default)]
pub(crate) struct Reloads {
    /// Runs in a row of a task that stopped on a failed append, for the backoff of its reloads.
    failures: Mutex<HashMap<String, u32>>,
    /// Tasks whose run was asked to cancel and stopped before carrying it out: the reload cancels them.
    cancels: Mutex<HashSet<String>>,
}

impl Reloads {
    /// One more run of `task_id` stopped on a failed append; returns how many in a row.
    fn failed(&self, task_id: &str) -> u32 {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(task_id.to_owned()).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    /// A run of `task_id` ended without a failed append.
    fn succeeded(&self, task_id: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(task_id);
    }

    /// Keep a cancel the run of `task_id` could not carry out.
    fn keep_cancel(&self, task_id: &str) {
        self.cancels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(task_id.to_owned());
    }

    /// Take the kept cancel of `task_id`, if any.
    fn take_cancel(&self, task_id: &str) -> bool {
        self.cancels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(task_id)
    }
}

impl Inner {
    /// Load and replay a task the caller owns (it holds its gate and, on a shared store, the lease
    /// `fence`, which is given back if the task cannot be loaded).
    pub(super) async fn load_owned(
        &self,
        task_id: &str,
        fence: Option<u64>,
    ) -> Result<(Arc<TaskRun>, Wait, Option<(u64, Event)>), EngineError> {
        let loaded = self.load(task_id, fence).await;
        if let (Err(_), Some(token)) = (&loaded, fence) {
            self.give_back(task_id, token, false).await;
        }
        loaded
    }

    async fn load(
        &self,
        task_id: &str,
        fence: Option<u64>,
    ) -> Result<(Arc<TaskRun>, Wait, Option<(u64, Event)>), EngineError> {
        let records = self.store.journal_for_replay(task_id).await?;
        let recorded = super::versions::recorded(&records);
        // The version the task runs on, else the newest (which it may move to, below).
        let skill = recorded.as_ref().and_then(|r| {
            self.versions
                .exact(&r.skill_id, &r.version)
                .or_else(|| self.versions.newest(&r.skill_id))
                .cloned()
        });
        // No journal, no task (one whose creating append failed never was).
        let Some(recorded) = recorded else {
            return Err(EngineError::TaskNotFound(task_id.to_owned()));
        };
        let Some(skill) = skill else {
            return Err(EngineError::SkillNotServed {
                task_id: task_id.to_owned(),
                skill_id: recorded.skill_id,
            });
        };
        let initial = skill.initial_state().unwrap_or(serde_json::Value::Null);
        let mut replayed = replay(&records, initial, now_ms()).map_err(|reason| {
            EngineError::Store(crate::store::StoreError::Corrupt {
                task_id: task_id.to_owned(),
                seq: 0,
                reason,
            })
        })?;
        let info = skill.info();
        if replayed.header.skill_version != info.version
            && !matches!(replayed.wait, Wait::Terminal(_))
        {
            // Its version is gone: it moves to the newest if it rests where that one can take it
            // on; the move is journaled with the run's first flush, before anything runs on it.
            let st = &replayed.run;
            let rest = super::versions::AtRest {
                state: st.open().is_none().then(|| st.state()),
            };
            let migrated = match super::versions::plan(&recorded, &rest, skill.as_ref()) {
                Ok(state) => super::versions::migrated(&recorded, skill.as_ref(), state),
                Err(reason) => {
                    return Err(EngineError::VersionMismatch {
                        task_id: task_id.to_owned(),
                        skill_id: info.id.clone(),
                        recorded: replayed.header.skill_version,
                        running: info.version.clone(),
                        reason,
                    })
                }
            };
            replayed.run.push(migrated);
        }
        let (tx, _) = self.live.handles(task_id);
        let mut state = replayed.run;
        state.call_timeout = self.config.call_timeout;
        let mut run = TaskRun::new(
            task_id.into(),
            replayed.header.context_id.into(),
            info.id.clone(),
            state,
            self.store.clone(),
            self.halted.clone(),
            tx,
        );
        run.mode = replayed.header.permission_mode;
        run.fence = fence;
        self.equip(&mut run, &skill);
        Ok((Arc::new(run), replayed.wait, replayed.open_visit))
    }

    /// Load a task and drive it if it has work (recovery, timers, claims). `claimed`: the lease a
    /// claim took; without it, a shared store's lease is acquired here (and nothing happens while
    /// another engine holds it).
    pub(super) async fn resume(
        self: &Arc<Self>,
        task_id: &str,
        claimed: Option<Lease>,
    ) -> Result<(), EngineError> {
        self.resume_within(task_id, claimed, Duration::ZERO, None)
            .await
            .map(drop)
    }

    /// Load and continue a task whose callee settled: like a timer's alarm, but on a shared store
    /// it waits up to a lease's ttl for the run that started the call to give the task back.
    pub(crate) async fn wake(self: &Arc<Self>, task_id: &str) -> Result<(), EngineError> {
        self.resume_within(task_id, None, self.config.lease_ttl, None)
            .await
            .map(drop)
    }

    /// Load and continue a task waiting on a call, when a worker starts: like [`Inner::wake`], but
    /// it tries for up to two lease ttls, so that a lease left by a worker that died (its last
    /// renewal at most a ttl before) has expired. The task's gate is held only while a try runs, not
    /// while it waits: a cancel or a reply for the task is not held up meanwhile.
    pub(crate) async fn ask_after_leases(
        self: &Arc<Self>,
        task_id: &str,
    ) -> Result<(), EngineError> {
        let deadline = tokio::time::Instant::now() + self.config.lease_ttl * 2;
        loop {
            if self
                .resume_within(task_id, None, Duration::ZERO, None)
                .await?
            {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline || self.halted.load(Ordering::SeqCst) {
                return Ok(());
            }
            tokio::time::sleep(self.config.poll.min(Duration::from_millis(50))).await;
        }
    }

    /// Like [`Inner::wake`], for posts to the call webhook about `calls` (their names in its
    /// URLs): a task none of whose posted calls still waits for its callee (each has its receipt,
    /// or the task ended) is left as it is, so a post about a call that settled journals nothing.
    pub(crate) async fn wake_for_posts(
        self: &Arc<Self>,
        task_id: &str,
        calls: &HashSet<String>,
    ) -> Result<(), EngineError> {
        self.resume_within(task_id, None, self.config.lease_ttl, Some(calls))
            .await
            .map(drop)
    }

    /// Load `task_id` and drive it if it has work, owning it for the while (its lease on a shared
    /// store, waiting up to `wait` for another owner to give it back). False when another owner holds
    /// it still: nothing was done.
    async fn resume_within(
        self: &Arc<Self>,
        task_id: &str,
        claimed: Option<Lease>,
        wait: Duration,
        posted: Option<&HashSet<String>>,
    ) -> Result<bool, EngineError> {
        let (_, gate) = self.live.handles(task_id);
        let guard = gate.lock_owned().await;
        let owner = match claimed {
            Some(lease) => Ownership::Leased(lease),
            None => self.own(task_id, wait).await?,
        };
        let cancel = match &owner {
            Ownership::Busy => return Ok(false),
            Ownership::Leased(lease) => lease.cancel_requested,
            Ownership::Sole => false,
        };
        let (run, wait, _) = self.load_owned(task_id, owner.token()).await?;
        // A cancel its last run was asked for and could not carry out (taken once the task is loaded,
        // so a reload that fails keeps it).
        let cancel = self.reloads.take_cancel(task_id) || cancel;
        if cancel && !matches!(wait, Wait::Terminal(_)) {
            run.lock().request_cancel();
            self.spawn_drive(run, guard);
            return Ok(true);
        }
        if posted.is_some_and(|calls| !super::call::waits_on_any(&run.lock(), calls)) {
            self.disown(&run).await;
            return Ok(true);
        }
        match wait {
            Wait::Runnable => {
                self.spawn_drive(run, guard);
                return Ok(true);
            }
            Wait::Timer(at) => self.schedule_timer(task_id.to_owned(), at),
            Wait::Input {
                expires_at_ms: Some(at),
                ..
            } => self.schedule_timer(task_id.to_owned(), at),
            Wait::Input { .. } | Wait::Terminal(_) => {}
        }
        self.disown(&run).await;
        Ok(true)
    }

    pub(super) fn spawn_drive(
        self: &Arc<Self>,
        run: Arc<TaskRun>,
        guard: tokio::sync::OwnedMutexGuard<()>,
    ) {
        let task_id = run.task_id.to_string();
        self.live.start(&run);
        let engine = self.clone();
        // The driver's spans are children of the span that started it (an A2A request's).
        tokio::spawn(tracing::Instrument::in_current_span(async move {
            let _stop = engine.drive(run.clone()).await;
            run.driver_stopped();
            // From here on a cancel is refused by this run and goes through the gate (which this
            // task holds until the run is deregistered) or, on a shared store, the task's row.
            let unserved_cancel = run.lock().close();
            // A run whose creating append was refused never was: the task it found is another
            // run's, and nothing of it is reloaded, kept or cleared here.
            let failed = run.write_failed() && !run.duplicate();
            if unserved_cancel && failed && !engine.shared() {
                engine.reloads.keep_cancel(&task_id);
            }
            engine.disown(&run).await;
            engine.live.stop(&task_id, guard);
            if failed {
                engine.reload_after_failed_write(task_id);
            } else if !run.duplicate() {
                engine.reloads.succeeded(&task_id);
                engine.stalled.clear(&task_id);
            }
        }));
    }

    /// A run stopped because an append failed: reload the task from the store and drive it again (what
    /// a restart would do), after a backoff that grows while its runs keep failing. On a shared store
    /// the run gave its lease back and a worker's claim does this.
    fn reload_after_failed_write(self: &Arc<Self>, task_id: String) {
        if self.shared() {
            return;
        }
        let mut failures = self.reloads.failed(&task_id);
        let engine = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                // 50 ms, doubling, at most 5 s: a task resumes soon after the store accepts writes again.
                let delay = Duration::from_millis(50 << failures.clamp(1, 8).saturating_sub(1));
                tokio::time::sleep(delay.min(RELOAD_BACKOFF_CAP)).await;
                let Some(engine) = engine.upgrade() else {
                    return;
                };
                if engine.halted.load(Ordering::SeqCst) {
                    return;
                }
                match engine.resume(&task_id, None).await {
                    Ok(()) => return,
                    // A task whose creating append failed does not exist (its send was refused,
                    // and its client sends again): nothing to reload.
                    Err(EngineError::TaskNotFound(_)) => {
                        engine.reloads.succeeded(&task_id);
                        engine.stalled.clear(&task_id);
                        return;
                    }
                    Err(EngineError::Store(e)) => {
                        tracing::warn!(task = %task_id, error = %e, "reloading the task after a failed append failed; retrying");
                        failures = failures.saturating_add(1);
                    }
                    Err(e) => {
                        tracing::error!(task = %task_id, error = %e, "task not reloaded after a failed append");
                        return;
                    }
                }
            }
        });
    }

    /// Wake `task_id` at `at_ms` (the timer is durable in the journal; this is only the alarm clock).
    /// An alarm already set for that task and time is not set twice: every visit of a waiting
    /// call re-arms its recheck, and one wake at that time does what any number would.
    pub(crate) fn schedule_timer(self: &Arc<Self>, task_id: String, at_ms: i64) {
        if !self.alarms.set(&task_id, at_ms) {
            return;
        }
        let engine = self.clone();
        tokio::spawn(async move {
            let delay = u64::try_from(at_ms.saturating_sub(now_ms())).unwrap_or(0);
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
            engine.alarms.rung(&task_id, at_ms);
            if engine.halted.load(Ordering::SeqCst) {
                return;
            }
            if let Err(e) = engine.resume(&task_id, None).await {
                tracing::error!(task = %task_id, error = %e, "timer wake failed");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task with no journal (one whose creating append failed never was) loads as not found,
    /// not as a task of a skill this engine does not serve: the reload after a failed append
    /// stops on it instead of retrying.
    struct Done;

    fn done<'a>(
        _: &'a Done,
        ctx: &'a crate::flow::StepCtx,
        _: crate::flow::step_table::StepInput,
    ) -> futures::future::BoxFuture<'a, crate::flow::StepResult> {
        Box::pin(async move { ctx.complete("done", vec![]) })
    }

    static DONE: &[crate::flow::step_table::Step<Done>] =
        &[crate::flow::step_table::Step::new("done", done)
            .start()
            .takes_user_message()];

    #[tokio::test]
    async fn a_task_without_a_journal_loads_as_not_found() {
        let skill = crate::flow::step_table::StepTable::new(
            crate::flow::SkillInfo::new("done", "Done"),
            Done,
            DONE,
        )
        .unwrap();
        let engine = crate::engine::Engine::builder(crate::store::MemoryStore::new())
            .without_registered_skills()
            .skill(skill)
            .build()
            .unwrap();
        match engine.inner.load("never-created", None).await {
            Err(EngineError::TaskNotFound(id)) => assert_eq!(id, "never-created"),
            Err(other) => panic!("expected TaskNotFound, got {other:?}"),
            Ok(_) => panic!("a task without a journal loaded"),
        }
    }
}
