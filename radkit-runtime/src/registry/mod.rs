//! Skills registered by `#[flow_skill]` through `inventory`: listing them and checking ids are
//! unique (this file), the agent card built from them (`card.rs`) and a skill's step graph
//! (`graph.rs`). The registry sits below the engine (whose builder serves the registered skills) and
//! the server (which serves the card), so it never names either.

mod card;
mod graph;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::flow::ErasedSkill;

pub use card::agent_card;
pub(crate) use card::{card_for, serves_extended_card};
pub use graph::mermaid;

/// One registered skill (built by the macro; users never construct it).
pub struct SkillRegistration {
    /// Skill id.
    pub id: &'static str,
    /// Where it was declared.
    pub file: &'static str,
    /// Line of the declaration.
    pub line: u32,
    build: fn() -> Arc<dyn ErasedSkill>,
}

impl SkillRegistration {
    #[doc(hidden)]
    pub const fn new(
        id: &'static str,
        file: &'static str,
        line: u32,
        build: fn() -> Arc<dyn ErasedSkill>,
    ) -> Self {
        SkillRegistration {
            id,
            file,
            line,
            build,
        }
    }

    /// A fresh instance of the skill.
    pub fn build(&self) -> Arc<dyn ErasedSkill> {
        (self.build)()
    }
}

inventory::collect!(SkillRegistration);

/// Two served skills with one id.
#[derive(Debug, thiserror::Error)]
#[error("skill id `{id}` is served twice: {first} and {second}; give one another id, leave one out (`register = false`, `EngineBuilder::only_skills`), or keep both as versions of one skill, each with its own number (`version = 1`, `version = 2`: the highest serves new tasks)")]
pub struct DuplicateSkill {
    /// The id.
    pub id: String,
    /// Where one comes from (`registered at file:line` or `added with EngineBuilder::skill`).
    pub first: String,
    /// Where the other comes from.
    pub second: String,
}

/// A served skill whose id cannot name it: ids go into task records, the agent card and `skillId`
/// metadata, where an empty id or one with whitespace cannot be told apart or written.
#[derive(Debug, thiserror::Error)]
#[error("skill `{name}` ({origin}) has the id `{id}`, which {problem}; give it an id without whitespace, such as `{suggestion}`")]
pub struct InvalidSkillId {
    /// The id, as declared.
    pub id: String,
    /// The skill's name, as declared.
    pub name: String,
    /// Where the skill comes from (`registered by #[flow_skill] at file:line` or `added with
    /// EngineBuilder::skill`).
    pub origin: String,
    /// What is wrong with the id (`is empty`, `contains whitespace`).
    pub problem: &'static str,
    /// An id that would do, derived from the name.
    pub suggestion: String,
}

/// What is wrong with `id` as a skill id, if anything: `"is empty"` or `"contains whitespace"`.
/// `#[flow_skill]` applies the same rule to its `id = ".."` literal at compile time.
pub fn id_problem(id: &str) -> Option<&'static str> {
    if id.is_empty() {
        Some("is empty")
    } else if id.chars().any(char::is_whitespace) {
        Some("contains whitespace")
    } else {
        None
    }
}

/// Check the id of a skill named `name` from `origin`.
pub fn check_id(id: &str, name: &str, origin: &SkillOrigin) -> Result<(), InvalidSkillId> {
    let Some(problem) = id_problem(id) else {
        return Ok(());
    };
    let words: Vec<String> = name
        .split_whitespace()
        .map(str::to_lowercase)
        .filter(|w| !w.is_empty())
        .collect();
    let suggestion = if words.is_empty() {
        "my_skill".to_owned()
    } else {
        words.join("_")
    };
    Err(InvalidSkillId {
        id: id.to_owned(),
        name: name.to_owned(),
        origin: origin.to_string(),
        problem,
        suggestion,
    })
}

/// Where a served skill comes from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillOrigin {
    /// Registered by `#[flow_skill]` at `file:line`.
    Registered {
        /// Source file.
        file: &'static str,
        /// Line.
        line: u32,
    },
    /// Added with `EngineBuilder::skill`.
    Added,
}

impl SkillOrigin {
    /// The origin of a registration.
    pub fn registered(registration: &SkillRegistration) -> Self {
        SkillOrigin::Registered {
            file: registration.file,
            line: registration.line,
        }
    }
}

impl std::fmt::Display for SkillOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkillOrigin::Registered { file, line } => {
                write!(f, "registered by #[flow_skill] at {file}:{line}")
            }
            SkillOrigin::Added => f.write_str("added with EngineBuilder::skill"),
        }
    }
}

/// Every registered skill, sorted by id.
pub fn skills() -> Vec<&'static SkillRegistration> {
    let mut all: Vec<&'static SkillRegistration> =
        inventory::iter::<SkillRegistration>.into_iter().collect();
    all.sort_by(|a, b| {
        a.id.cmp(b.id)
            .then(a.file.cmp(b.file))
            .then(a.line.cmp(&b.line))
    });
    all
}

/// Check that `registrations` have unique ids.
pub fn check_unique(registrations: &[&SkillRegistration]) -> Result<(), DuplicateSkill> {
    let mut seen: BTreeMap<&str, &SkillRegistration> = BTreeMap::new();
    for r in registrations {
        if let Some(first) = seen.insert(r.id, r) {
            return Err(DuplicateSkill {
                id: r.id.to_owned(),
                first: SkillOrigin::registered(first).to_string(),
                second: SkillOrigin::registered(r).to_string(),
            });
        }
    }
    Ok(())
}

/// Every registered skill, built; an error if two share an id.
pub fn build_all() -> Result<Vec<Arc<dyn ErasedSkill>>, DuplicateSkill> {
    let all = skills();
    check_unique(&all)?;
    Ok(all.iter().map(|r| r.build()).collect())
}
