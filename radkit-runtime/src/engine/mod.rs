//! The journal-first executor. It owns task lifecycles: creating tasks, driving step visits, replaying
//! journals after a crash, waking timers, accepting input and cancels. It talks to skills through the
//! `flow` contract and to persistence through `Store`; it knows nothing of the A2A server's HTTP
//! (its one outbound HTTP is `push`, posting task updates to webhooks).

mod api;
mod builder;
mod call;
mod changes;
mod cluster;
mod command;
mod driver;
mod error;
mod executor;
mod fault;
mod fold;
mod hooks;
#[cfg(feature = "restate")]
pub(crate) mod hosted;
mod invoke;
mod live;
pub mod machine;
mod migrate;
mod pass;
mod perform;
mod projection;
pub(crate) mod push;
mod replay;
mod request;
mod retention;
mod run;
mod runner;
mod stalled;
mod subscription;
mod versions;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub(crate) use api::{check_message, reused_id, same_message, task_id_for, Sent};
pub use builder::{
    EngineBuilder, EngineConfig, DEFAULT_CALL_TIMEOUT, DEFAULT_CALL_WEBHOOK_TTL,
    DEFAULT_MAX_PARALLEL_EFFECTS, DEFAULT_REPLY_PATIENCE,
};
pub use call::AgentSpec;
#[cfg(feature = "restate")]
pub(crate) use call::{message_id as call_message_id, pass as call_pass, Agents};
pub use changes::{TaskChange, TaskChanges};
pub use error::EngineError;
pub use executor::{Executed, Executor};
#[cfg_attr(not(feature = "testing"), allow(unused_imports))] // public with `testing` only
pub use fault::*;
pub use hooks::{Hook, HookAnswer, HookCall, HookContext, HookDecision, HookKind};
pub use migrate::{Move, MoveOutcome, VersionCount};
#[cfg(feature = "restate")]
pub(crate) use pass::machine_skills;
pub use pass::{
    with_deadline, Event as PassEvent, PassError, Passed, Passes, Rest, DEFAULT_LEASE_MARGIN,
    DISPATCH_RECHECK,
};
pub use projection::{project_task, stream_event, token_event, StreamEvent};
pub use push::{PushSettings, TargetError, MAX_CONFIGS_PER_TASK};
pub use request::{Caller, Request};
pub use retention::Retention;
pub use subscription::{Followed, Snapshot, Subscription, TokenChunk, Update};

use self::run::TaskRun;
use crate::effects::Effects;
use crate::flow::{ErasedSkill, InvocationId};
use crate::store::Store;

pub(crate) struct Inner {
    store: Arc<dyn Store>,
    /// The version of each skill that serves new tasks.
    skills: HashMap<String, Arc<dyn ErasedSkill>>,
    /// Every served version of each skill (what a task is loaded on).
    versions: versions::Versions,
    order: Vec<String>,
    default_skill: Option<String>,
    pub(crate) effects: Arc<Effects>,
    config: EngineConfig,
    halted: Arc<AtomicBool>,
    /// The tasks in hand (broadcast, gate, run).
    live: live::LiveTasks,
    /// The ids of the tasks this process commits to, for readers of many tasks.
    changes: Arc<changes::Changes>,
    /// Leases held, the worker loop, claims (shared stores only).
    leases: cluster::LeaseState,
    /// What reloads after failed appends remember (single-engine stores).
    reloads: runner::Reloads,
    /// The tasks whose last run stopped on a failed append (single-engine stores).
    stalled: Arc<stalled::Stalled>,
    /// Differences between live and stored folds (`EngineConfig::check_fold`).
    divergences: Arc<Mutex<Vec<String>>>,
    /// The push-notification sender (`push`).
    pusher: Arc<push::Pusher>,
    /// The agents steps may call (`ctx.agent`), each connected on first use.
    agents: call::Agents,
    /// The calls this engine follows (one watcher each).
    watchers: call::Watchers,
    /// The posts to the call webhook being answered (a coalesced wake per task).
    posts: call::Posts,
    /// The timer alarms set in this process.
    alarms: runner::Alarms,
    /// The engine's counters (`/metrics`, with the `metrics` feature).
    pub(crate) metrics: crate::telemetry::Metrics,
    /// Serverless mode: the passes that run each request's task (`EngineBuilder::serverless`).
    passes: Option<Passes>,
    /// The pruner runs (`retention`).
    pruner_started: AtomicBool,
}

/// The durable engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

impl Engine {
    /// What `/metrics` shows besides the counters, read now: tasks by state from the store, tasks in
    /// hand, alarms set and calls followed in this process, and `streams` (the server's).
    #[cfg(feature = "metrics")]
    pub(crate) async fn scrape(
        &self,
        streams: usize,
    ) -> Result<crate::telemetry::prometheus::Scrape, crate::store::StoreError> {
        use crate::telemetry::prometheus::{Batches, Scrape};
        let inner = &self.inner;
        let tasks = inner
            .store
            .state_counts(&crate::store::ViewQuery::default())
            .await?;
        let input_required = tasks
            .iter()
            .find(|(state, _)| *state == crate::model::TaskState::InputRequired)
            .map_or(0, |(_, n)| *n);
        Ok(Scrape {
            tasks: tasks.iter().map(|(s, n)| (s.as_str(), *n)).collect(),
            input_required,
            in_hand: inner.live.len(),
            timers: inner.alarms.len(),
            calls: inner.watchers.len(),
            streams,
            store: inner.store.commit_stats().map(|stats| Batches {
                count: stats.batches,
                appends: stats.appends,
                buckets: crate::store::BATCH_SIZE_BOUNDS
                    .iter()
                    .copied()
                    .zip(stats.batch_sizes)
                    .collect(),
            }),
        })
    }

    /// The engine's counters, when it records them.
    #[cfg(feature = "metrics")]
    pub(crate) fn metric_families(&self) -> Option<&crate::telemetry::prometheus::Families> {
        self.inner.metrics.families.as_deref()
    }
}

impl Inner {
    /// True when no task runs in this engine: each request is a serverless pass, or Restate's
    /// workflows drive the tasks (the engine reads the store they write).
    pub(crate) fn hosted_elsewhere(&self) -> bool {
        self.passes.is_some() || self.restate().is_some()
    }

    /// Restate mode's ingress.
    #[cfg(feature = "restate")]
    pub(crate) fn restate(&self) -> Option<&hosted::Ingress> {
        self.config.restate.as_ref()
    }

    #[cfg(not(feature = "restate"))]
    pub(crate) fn restate(&self) -> Option<&std::convert::Infallible> {
        None
    }

    /// The fold check of a run of `skill`, when the engine checks folds.
    fn fold_check(&self, skill: &dyn ErasedSkill) -> Option<fold::FoldCheck> {
        self.config.check_fold.then(|| fold::FoldCheck {
            initial: skill.initial_state().unwrap_or_default(),
            divergences: self.divergences.clone(),
        })
    }

    /// What every run of this engine is given: the fold check of its `skill`, the engine's push
    /// watch, changes, stalled mark, counters and bound on parallel effects.
    fn equip(&self, run: &mut TaskRun, skill: &Arc<dyn ErasedSkill>) {
        run.fold_check = self.fold_check(skill.as_ref());
        run.skill = Some(skill.clone());
        run.push_watch = Some(self.push_watch());
        run.changes = Some(self.changes.clone());
        // On a shared store another engine may take the task on and write what this one could
        // not: nothing here would clear the mark.
        run.stalled = (!self.shared()).then(|| self.stalled.clone());
        run.metrics = self.metrics.clone();
        run.effect_slots = run::effect_slots(self.config.max_parallel_effects);
    }

    pub(crate) fn halt(&self) {
        self.halted.store(true, Ordering::SeqCst);
    }

    /// Ask the fault hook; no side effect.
    pub(crate) fn wants_crash(
        &self,
        boundary: Boundary,
        run: &TaskRun,
        id: Option<&InvocationId>,
        what: Option<&str>,
    ) -> bool {
        match &self.config.fault {
            Some(hook) => hook(&Fault {
                boundary,
                task_id: run.task_id.to_string(),
                command: id.cloned(),
                what: what.map(str::to_owned),
            }),
            None => false,
        }
    }

    /// Ask the fault hook and halt if it says so.
    pub(crate) fn crash_at(
        &self,
        boundary: Boundary,
        run: &TaskRun,
        id: Option<&InvocationId>,
        what: Option<&str>,
    ) -> bool {
        let crash = self.wants_crash(boundary, run, id, what);
        if crash {
            tracing::warn!(task = %run.task_id, ?boundary, "injected crash");
            self.halt();
        }
        crash
    }
}
