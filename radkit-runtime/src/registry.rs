//! Skills registered by `#[flow_skill]` through `inventory`: listing them, checking ids are unique,
//! building an engine and the agent card from them, and drawing a skill's step graph.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::flow::{ErasedSkill, SkillInfo};
use crate::model::AgentCard;
use crate::server::ServerConfig;

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

/// Two registrations with one id.
#[derive(Debug, thiserror::Error)]
#[error("skill id `{id}` is registered twice: at {first} and at {second}")]
pub struct DuplicateSkill {
    /// The id.
    pub id: String,
    /// `file:line` of one.
    pub first: String,
    /// `file:line` of the other.
    pub second: String,
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
                first: format!("{}:{}", first.file, first.line),
                second: format!("{}:{}", r.file, r.line),
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

/// The agent card of every registered skill.
pub fn agent_card(config: &ServerConfig) -> Result<AgentCard, DuplicateSkill> {
    let infos: Vec<SkillInfo> = build_all()?.iter().map(|s| s.info().clone()).collect();
    Ok(crate::server::card::agent_card(&infos, config))
}

/// The step graph as a Mermaid flowchart.
pub fn mermaid(info: &SkillInfo) -> String {
    let mut out = String::from("flowchart TD\n");
    out.push_str("    __start([first message])\n");
    for step in &info.steps {
        out.push_str(&format!("    {}[\"{}\"]\n", step.name, step.name));
    }
    for step in &info.steps {
        if step.start {
            out.push_str(&format!("    __start --> {}\n", step.name));
        }
        for target in &step.gotos {
            out.push_str(&format!("    {} -->|goto| {}\n", step.name, target));
        }
        if let Some(from) = &step.resume_from {
            out.push_str(&format!(
                "    {from} -.->|await_input / reply| {}\n",
                step.name
            ));
        }
    }
    out
}
