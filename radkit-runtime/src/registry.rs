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

/// The step graph as a Mermaid flowchart: the first message into the start step, `goto!` edges, and
/// dotted `await_input!` edges from a step to the step its reply resumes.
pub fn mermaid(info: &SkillInfo) -> String {
    let mut out = String::from("flowchart TD\n");
    out.push_str("    __start([first message])\n");
    for step in &info.steps {
        out.push_str(&format!("    {}[\"{}\"]\n", node(&step.name), step.name));
    }
    for step in &info.steps {
        let id = node(&step.name);
        if step.start {
            out.push_str(&format!("    __start --> {id}\n"));
        }
        for target in &step.gotos {
            out.push_str(&format!("    {id} -->|goto| {}\n", node(target)));
        }
        if let Some(from) = &step.resume_from {
            out.push_str(&format!(
                "    {} -.->|await_input / reply| {id}\n",
                node(from)
            ));
        }
    }
    out
}

/// A Mermaid node id for a step: its name, unless the name is a word Mermaid reserves (`end` would
/// close the chart).
fn node(step: &str) -> String {
    const RESERVED: &[&str] = &[
        "end",
        "graph",
        "subgraph",
        "flowchart",
        "style",
        "class",
        "classDef",
        "click",
        "linkStyle",
        "direction",
        "default",
    ];
    if RESERVED.iter().any(|r| r.eq_ignore_ascii_case(step)) {
        format!("{step}_step")
    } else {
        step.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::StepInfo;

    #[test]
    fn reserved_step_names_get_safe_node_ids() {
        let step = |name: &str, start: bool, gotos: &[&str]| StepInfo {
            name: name.to_owned(),
            start,
            resume_from: None,
            gotos: gotos.iter().map(|g| (*g).to_owned()).collect(),
            payload: "()".to_owned(),
        };
        let mut info = SkillInfo::new("s", "S");
        info.steps = vec![step("begin", true, &["end"]), step("end", false, &[])];
        let chart = mermaid(&info);
        assert!(chart.contains("    end_step[\"end\"]\n"), "{chart}");
        assert!(chart.contains("    begin -->|goto| end_step\n"), "{chart}");
        assert!(!chart.contains(" end\n"), "{chart}");
    }
}
