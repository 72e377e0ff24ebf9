//! What operators see of skill versions and how they steer them: the tasks per skill, version and
//! state ([`Engine::versions`]), the tasks whose version this engine lacks and that cannot move to
//! the one it serves ([`Engine::stranded`]), and moving a skill's tasks at rest to a served version
//! ([`Engine::migrate`]), each move journaled (`migrated`) under the task's gate and lease.

use std::collections::BTreeMap;
use std::time::Duration;

use super::cluster::Ownership;
use super::replay::replay;
use super::versions::{self, AtRest};
use super::{Engine, EngineError};
use crate::flow::ErasedSkill;
use crate::journal::now_ms;
use crate::model::TaskState;
use crate::store::{Append, TaskQuery, TaskRecord};

/// How many tasks of one skill version are in one state ([`Engine::versions`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VersionCount {
    /// The skill.
    pub skill_id: String,
    /// The version the tasks run on.
    pub version: String,
    /// Their state.
    pub state: TaskState,
    /// What they wait for: `input`, `timer`, `call` (the row's timer and call), or `-` (working).
    pub waiting_on: &'static str,
    /// How many.
    pub tasks: u64,
    /// This engine serves the version.
    pub served: bool,
}

/// What [`Engine::migrate`] did, or would do, with one task.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Move {
    /// The task.
    pub task_id: String,
    /// The version it runs on.
    pub from: String,
    /// The version it was to move to.
    pub to: String,
    /// What came of it.
    pub outcome: MoveOutcome,
}

/// The outcome of one [`Move`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome", content = "reason")]
pub enum MoveOutcome {
    /// Moved: a `migrated` entry is journaled.
    Moved,
    /// Would move (a dry run).
    WouldMove,
    /// Stays on its version, for this reason.
    Stays(String),
}

/// What a row says its task waits on.
fn waiting_on(row: &TaskRecord) -> &'static str {
    match row.state {
        TaskState::InputRequired => "input",
        _ if row.waits_on_call => "call",
        _ if row.wake_at_ms.is_some() => "timer",
        _ => "-",
    }
}

impl Engine {
    /// The unfinished tasks per skill, version, state and what they wait on, with whether this
    /// engine serves the version.
    pub async fn versions(&self) -> Result<Vec<VersionCount>, EngineError> {
        let rows = self.unfinished().await?;
        let mut counts: BTreeMap<(String, String, &'static str, &'static str), (TaskState, u64)> =
            BTreeMap::new();
        for row in &rows {
            counts
                .entry((
                    row.skill_id.clone(),
                    row.skill_version.clone(),
                    row.state.as_str(),
                    waiting_on(row),
                ))
                .or_insert((row.state, 0))
                .1 += 1;
        }
        let out = counts
            .into_iter()
            .map(
                |((skill_id, version, _, waiting_on), (state, tasks))| VersionCount {
                    served: self.inner.versions.exact(&skill_id, &version).is_some(),
                    skill_id,
                    version,
                    state,
                    waiting_on,
                    tasks,
                },
            )
            .collect();
        Ok(out)
    }

    /// The unfinished tasks whose version this engine does not serve and that cannot move to the
    /// newest version of their skill it serves (each with the reason): what a restart would leave
    /// stranded. `radkit serve` refuses to start while there are any (unless told otherwise).
    pub async fn stranded(&self) -> Result<Vec<Move>, EngineError> {
        // The versions first (SQLite answers from an index, whatever the number of tasks): when
        // this engine serves every one, nothing is stranded and no task is read.
        let versions = self.inner.store.unfinished_versions().await?;
        let served = |(skill, version): &(String, String)| {
            self.inner.versions.exact(skill, version).is_some()
        };
        if versions.iter().all(served) {
            return Ok(Vec::new());
        }
        let rows = self.unfinished().await?;
        let mut out = Vec::new();
        for row in rows {
            if self
                .inner
                .versions
                .exact(&row.skill_id, &row.skill_version)
                .is_some()
            {
                continue;
            }
            let Some(newest) = self.inner.versions.newest(&row.skill_id).cloned() else {
                out.push(Move {
                    task_id: row.id.clone(),
                    from: row.skill_version.clone(),
                    to: String::new(),
                    outcome: MoveOutcome::Stays(format!(
                        "this agent does not serve skill `{}`",
                        row.skill_id
                    )),
                });
                continue;
            };
            let checked = self.check_move(&row.id, newest.as_ref()).await?;
            if let MoveOutcome::Stays(_) = checked.outcome {
                out.push(checked);
            }
        }
        Ok(out)
    }

    /// Move the unfinished tasks of `skill_id` to its served version `to` (the newest when
    /// `None`): each task at rest whose step has the same shape there and whose state decodes
    /// there gets a `migrated` entry and runs on `to` from then on; every other one stays, with
    /// the reason. With `dry_run`, nothing is written. A task running in this engine now, or
    /// leased by another worker, stays (move it when it rests).
    pub async fn migrate(
        &self,
        skill_id: &str,
        to: Option<&str>,
        dry_run: bool,
    ) -> Result<Vec<Move>, EngineError> {
        let versions = &self.inner.versions;
        let target = match to {
            Some(version) => versions.exact(skill_id, version),
            None => versions.newest(skill_id),
        }
        .cloned()
        .ok_or_else(|| {
            let served: Vec<String> = versions
                .all(skill_id)
                .iter()
                .map(|s| s.info().version.clone())
                .collect();
            EngineError::InvalidInput(match served.is_empty() {
                true => format!("this agent does not serve skill `{skill_id}`"),
                false => format!(
                    "this agent serves versions {} of skill `{skill_id}`, not {}",
                    served.join(", "),
                    to.unwrap_or_default()
                ),
            })
        })?;
        let rows = self.unfinished().await?;
        let mut out = Vec::new();
        for row in rows
            .iter()
            .filter(|r| r.skill_id == skill_id && r.skill_version != target.info().version)
        {
            let report = match dry_run {
                // A dry run takes no gate and no lease: it reads the journal as it stands.
                true => self.check_move(&row.id, target.as_ref()).await?,
                false => self.move_task(&row.id, &row.skill_version, &target).await?,
            };
            out.push(report);
        }
        Ok(out)
    }

    /// The rows of every unfinished task.
    async fn unfinished(&self) -> Result<Vec<TaskRecord>, EngineError> {
        let query = TaskQuery {
            non_terminal: true,
            ..TaskQuery::default()
        };
        Ok(self.inner.store.list(query).await?)
    }

    /// Whether task `task_id` could move to `to`, written nowhere.
    async fn check_move(&self, task_id: &str, to: &dyn ErasedSkill) -> Result<Move, EngineError> {
        let records = self.inner.store.journal_for_replay(task_id).await?;
        Ok(self.judge(task_id, &records, to).0)
    }

    /// Judge a move of the task `records` hold to `to`: the report, and what to journal for it
    /// (the `migrated` entry at its seq) when it can move.
    fn judge(
        &self,
        task_id: &str,
        records: &[crate::journal::JournalRecord],
        to: &dyn ErasedSkill,
    ) -> (Move, Option<(u64, crate::journal::Entry)>) {
        let target = to.info().version.clone();
        let stays = |from: String, reason: String| Move {
            task_id: task_id.to_owned(),
            from,
            to: target.clone(),
            outcome: MoveOutcome::Stays(reason),
        };
        let Some(recorded) = versions::recorded(records) else {
            return (
                stays(String::new(), "its journal is empty".to_owned()),
                None,
            );
        };
        let initial = to.initial_state().unwrap_or(serde_json::Value::Null);
        let replayed = match replay(records, initial, now_ms()) {
            Ok(replayed) => replayed,
            Err(reason) => return (stays(recorded.version, reason), None),
        };
        let st = &replayed.run;
        if st.status().is_terminal() {
            let reason = format!("it ended ({})", st.status().as_str());
            return (stays(recorded.version, reason), None);
        }
        let rest = AtRest {
            state: st.open().is_none().then(|| st.state()),
        };
        match versions::plan(&recorded, &rest, to) {
            Err(reason) => (stays(recorded.version, reason), None),
            Ok(state) => {
                let entry = versions::migrated(&recorded, to, state);
                let report = Move {
                    task_id: task_id.to_owned(),
                    from: recorded.version,
                    to: target,
                    outcome: MoveOutcome::WouldMove,
                };
                (report, Some((st.next_seq, entry)))
            }
        }
    }

    /// Move one task of version `from` (under its gate and, on a shared store, its lease).
    async fn move_task(
        &self,
        task_id: &str,
        from: &str,
        to: &std::sync::Arc<dyn ErasedSkill>,
    ) -> Result<Move, EngineError> {
        let inner = &self.inner;
        let (_, gate) = inner.live.handles(task_id);
        let guard = gate.lock_owned().await;
        let moved = self.move_owned(task_id, from, to).await;
        // The task's live entry was made for its gate: forget it unless something else uses it.
        drop(guard);
        inner.live.release(task_id, 0);
        moved
    }

    /// [`move_task`](Self::move_task) once its gate is held.
    async fn move_owned(
        &self,
        task_id: &str,
        from: &str,
        to: &std::sync::Arc<dyn ErasedSkill>,
    ) -> Result<Move, EngineError> {
        let inner = &self.inner;
        let stays = |reason: &str| Move {
            task_id: task_id.to_owned(),
            from: from.to_owned(),
            to: to.info().version.clone(),
            outcome: MoveOutcome::Stays(reason.to_owned()),
        };
        if inner.live.running(task_id).is_some() {
            return Ok(stays("it is running in this engine now"));
        }
        let owner = inner.own(task_id, Duration::ZERO).await?;
        if let Ownership::Busy = owner {
            return Ok(stays("another worker holds it now"));
        }
        let fence = owner.token();
        let moved = async {
            let records = inner.store.journal_for_replay(task_id).await?;
            let (mut report, entry) = self.judge(task_id, &records, to.as_ref());
            let Some((next_seq, entry)) = entry else {
                return Ok(report);
            };
            let mut append = Append::new(task_id, next_seq, vec![entry]);
            append.fence = fence;
            append.at_ms = now_ms();
            inner.store.append(append).await?;
            report.outcome = MoveOutcome::Moved;
            Ok::<_, EngineError>(report)
        }
        .await;
        if let Some(token) = fence {
            inner.give_back(task_id, token, false).await;
        }
        moved
    }
}
