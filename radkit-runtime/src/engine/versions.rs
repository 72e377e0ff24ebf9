//! A skill's versions side by side, and which one a task runs on. A task runs on the version it
//! was created with while this engine has it; a task whose version is gone, or one an operator
//! moves, moves to another version only at rest (no visit open) and only when the step it rests
//! before has the same shape there (its name, whether it answers a question, its payload type: see
//! [`StepInfo::shape`](crate::flow::StepInfo::shape)) and the state it carries decodes there. A
//! move is journaled (`migrated`) before anything runs on the new version, so replay is exact.

use std::collections::HashMap;
use std::sync::Arc;

use crate::flow::ErasedSkill;
use crate::journal::{Entry, JournalRecord, StepShapes};

/// The served versions of each skill, newest first.
#[derive(Default)]
pub(crate) struct Versions {
    by_id: HashMap<String, Vec<Arc<dyn ErasedSkill>>>,
}

impl Versions {
    /// The versions of `skills` (each id's numbered versions, highest first; an id served once
    /// may have any version).
    pub fn new(skills: &[Arc<dyn ErasedSkill>]) -> Self {
        let mut by_id: HashMap<String, Vec<Arc<dyn ErasedSkill>>> = HashMap::new();
        for skill in skills {
            by_id
                .entry(skill.info().id.clone())
                .or_default()
                .push(skill.clone());
        }
        for versions in by_id.values_mut() {
            versions.sort_by_key(|s| std::cmp::Reverse(s.info().version_number()));
        }
        Versions { by_id }
    }

    /// The version that serves new tasks of `skill_id`.
    pub fn newest(&self, skill_id: &str) -> Option<&Arc<dyn ErasedSkill>> {
        self.by_id.get(skill_id).and_then(|v| v.first())
    }

    /// Version `version` of `skill_id`, if served.
    pub fn exact(&self, skill_id: &str, version: &str) -> Option<&Arc<dyn ErasedSkill>> {
        self.by_id
            .get(skill_id)?
            .iter()
            .find(|s| s.info().version == version)
    }

    /// Every served version of `skill_id`, newest first.
    pub fn all(&self, skill_id: &str) -> &[Arc<dyn ErasedSkill>] {
        self.by_id.get(skill_id).map_or(&[], Vec::as_slice)
    }

    /// Each skill whose newest version is numbered, with that number.
    pub fn newest_numbers(&self) -> Vec<(String, u64)> {
        self.by_id
            .iter()
            .filter_map(|(id, v)| Some((id.clone(), v.first()?.info().version_number()?)))
            .collect()
    }

    /// Every served version that is not its skill's newest.
    pub fn older(&self) -> Vec<Arc<dyn ErasedSkill>> {
        self.by_id
            .values()
            .flat_map(|v| v.iter().skip(1).cloned())
            .collect()
    }

    /// Every served `(skill, version)`.
    pub fn pairs(&self) -> Vec<(String, String)> {
        self.by_id
            .values()
            .flatten()
            .map(|s| (s.info().id.clone(), s.info().version.clone()))
            .collect()
    }
}

/// Each skill's newest version of `skills`, in the order the skills first appear.
pub(crate) fn newest_only(skills: Vec<Arc<dyn ErasedSkill>>) -> Vec<Arc<dyn ErasedSkill>> {
    let versions = Versions::new(&skills);
    let mut ids: Vec<&str> = Vec::new();
    for skill in &skills {
        if !ids.contains(&skill.info().id.as_str()) {
            ids.push(&skill.info().id);
        }
    }
    ids.iter()
        .filter_map(|id| versions.newest(id).cloned())
        .collect()
}

/// The skill and version a task runs on, and its steps' shapes, as its journal says (its
/// `task_created` entry, then its last `migrated` entry or checkpoint that says where it moved).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Recorded {
    pub skill_id: String,
    pub version: String,
    pub steps: StepShapes,
}

/// What `records` (a journal as `Store::journal_for_replay` returns it) say the task runs on;
/// `None` without a `task_created` entry.
pub(crate) fn recorded(records: &[JournalRecord]) -> Option<Recorded> {
    let mut found: Option<Recorded> = None;
    for record in records {
        match &record.entry {
            Entry::TaskCreated {
                skill_id,
                skill_version,
                steps,
                ..
            } => {
                found = Some(Recorded {
                    skill_id: skill_id.clone(),
                    version: skill_version.clone(),
                    steps: steps.clone(),
                })
            }
            Entry::Migrated { to, steps, .. } => {
                if let Some(found) = &mut found {
                    (found.version, found.steps) = (to.clone(), steps.clone());
                }
            }
            Entry::Checkpoint {
                runs_on: Some(runs_on),
                ..
            } => {
                if let Some(found) = &mut found {
                    (found.version, found.steps) = (runs_on.version.clone(), runs_on.steps.clone());
                }
            }
            _ => {}
        }
    }
    found
}

/// Where a task rests, for a move: the state it carries (`None`: a visit is open, or the task
/// ended).
pub(crate) struct AtRest<'a> {
    pub state: Option<&'a serde_json::Value>,
}

/// How a task moves to `to`: `Ok(None)` as it is (it rests, the step it rests before has the same
/// shape in `to` as in the version it runs on, and its state decodes in `to`), `Ok(Some(state))`
/// with the state a migration `to` declares made, or `Err` with why it cannot.
pub(crate) fn plan(
    recorded: &Recorded,
    rest: &AtRest<'_>,
    to: &dyn ErasedSkill,
) -> Result<Option<serde_json::Value>, String> {
    let info = to.info();
    if recorded.version == info.version {
        return Ok(None);
    }
    if let (Ok(from), Some(to)) = (recorded.version.parse::<u64>(), info.version_number()) {
        if to < from {
            return Err(format!(
                "it runs on version {from}, newer than version {to} (a task never moves back to an older version)"
            ));
        }
    }
    let Some(state) = rest.state else {
        return Err("it is in the middle of a step (a task moves only at rest)".to_owned());
    };
    let reason = match unchanged(recorded, state, to) {
        None => return Ok(None),
        Some(reason) => reason,
    };
    match to.migrate_state(&recorded.version, state) {
        None => Err(format!(
            "{reason} (declare a migration from version {} in version {} to move it)",
            recorded.version, info.version
        )),
        Some(Err(e)) => Err(format!(
            "{reason}, and the migration from version {} failed: {e}",
            recorded.version
        )),
        Some(Ok(migrated)) => match to.accepts_state(&migrated) {
            Ok(()) => Ok(Some(migrated)),
            Err(e) => Err(format!(
                "the migration from version {} made a state version {} does not decode: {e}",
                recorded.version, info.version
            )),
        },
    }
}

/// Why the task's `state` does not carry over to `to` unchanged, or `None` when it does.
fn unchanged(
    recorded: &Recorded,
    state: &serde_json::Value,
    to: &dyn ErasedSkill,
) -> Option<String> {
    let info = to.info();
    if recorded.steps.is_empty() {
        return Some(format!(
            "its journal does not say the shapes of version {}'s steps (written before they were journaled, or a skill without a step graph)",
            recorded.version
        ));
    }
    let step = to.step_name(state);
    let Some(was) = recorded.steps.get(&step) else {
        return Some(format!(
            "it rests before step `{step}`, which version {} does not have",
            recorded.version
        ));
    };
    let Some(now) = info.steps.iter().find(|s| s.name == step) else {
        return Some(format!("version {} has no step `{step}`", info.version));
    };
    if *was != now.shape() {
        return Some(format!(
            "step `{step}` changed its shape (its payload type, or whether it answers a question) between version {} and version {}",
            recorded.version, info.version
        ));
    }
    if let Err(e) = to.accepts_state(state) {
        return Some(format!(
            "the state it carries into step `{step}` does not decode in version {}: {e}",
            info.version
        ));
    }
    None
}

/// The entry that moves a task from `recorded` to `to`, with the state a migration made.
pub(crate) fn migrated(
    recorded: &Recorded,
    to: &dyn ErasedSkill,
    state: Option<serde_json::Value>,
) -> Entry {
    Entry::Migrated {
        from: recorded.version.clone(),
        to: to.info().version.clone(),
        steps: to.info().step_shapes(),
        state,
    }
}
