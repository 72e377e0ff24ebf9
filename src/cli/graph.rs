//! `graph <skill-id>`: the step graph of a skill the program serves, as Mermaid.

use std::sync::Arc;

use super::App;
use crate::flow::ErasedSkill;
use crate::store::MemoryStore;

/// Arguments of `graph`.
#[derive(clap::Args)]
pub struct Args {
    /// The skill id (without it, or with `--list`, the served skills are listed).
    pub skill: Option<String>,
    /// List the served skills.
    #[arg(long)]
    pub list: bool,
    /// The version to draw, of a skill served in several (default: each, newest first, each chart
    /// after a `%% <skill> version <v>` line).
    #[arg(long)]
    pub version: Option<String>,
}

/// Run `graph`.
pub async fn run(app: &App, args: Args) -> anyhow::Result<()> {
    // The skills `serve` would serve, every version; the store is never touched.
    let skills = app.builder(Arc::new(MemoryStore::new())).skills()?;
    match args.skill {
        Some(id) if !args.list => print!("{}", draw(&skills, &id, args.version.as_deref())?),
        _ => print!("{}", list(&skills)),
    }
    Ok(())
}

/// `skills` newest first (a skill's numbered versions by number).
fn newest_first(skills: &[Arc<dyn ErasedSkill>]) -> Vec<&Arc<dyn ErasedSkill>> {
    let mut sorted: Vec<_> = skills.iter().collect();
    sorted.sort_by_key(|s| std::cmp::Reverse(s.info().version_number()));
    sorted
}

/// The Mermaid chart of skill `id` at `version`, or of each version it is served in (newest
/// first, each after a `%% <id> version <v>` line).
fn draw(
    skills: &[Arc<dyn ErasedSkill>],
    id: &str,
    version: Option<&str>,
) -> anyhow::Result<String> {
    let versions: Vec<_> = newest_first(skills)
        .into_iter()
        .filter(|s| s.info().id == id)
        .collect();
    if versions.is_empty() {
        let mut ids: Vec<&str> = skills.iter().map(|s| s.info().id.as_str()).collect();
        ids.dedup();
        anyhow::bail!(
            "this program serves no skill `{id}`; it serves {}",
            ids.join(", ")
        );
    }
    let drawn: Vec<_> = versions
        .iter()
        .filter(|s| version.is_none_or(|v| s.info().version == v))
        .collect();
    if drawn.is_empty() {
        let served: Vec<&str> = versions.iter().map(|s| s.info().version.as_str()).collect();
        anyhow::bail!(
            "this program serves skill `{id}` in version {}, not {}",
            served.join(", "),
            version.unwrap_or_default()
        );
    }
    let several = drawn.len() > 1;
    let mut out = String::new();
    for skill in drawn {
        if several {
            out.push_str(&format!("%% {id} version {}\n", skill.info().version));
        }
        out.push_str(&crate::registry::mermaid(skill.info()));
    }
    Ok(out)
}

/// One line per served skill: its id and name, and its versions when it is served in several.
fn list(skills: &[Arc<dyn ErasedSkill>]) -> String {
    let mut out = String::new();
    let mut listed: Vec<&str> = Vec::new();
    for skill in skills {
        let info = skill.info();
        if listed.contains(&info.id.as_str()) {
            continue;
        }
        listed.push(&info.id);
        let versions: Vec<&str> = newest_first(skills)
            .into_iter()
            .filter(|s| s.info().id == info.id)
            .map(|s| s.info().version.as_str())
            .collect();
        match versions.as_slice() {
            [_] => out.push_str(&format!("{}\t{}\n", info.id, info.name)),
            many => out.push_str(&format!(
                "{}\t{}\tversions {}\n",
                info.id,
                info.name,
                many.join(", ")
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::future::BoxFuture;

    use super::{draw, list};
    use crate::flow::step_table::{Step, StepInput, StepTable};
    use crate::flow::{ErasedSkill, SkillInfo, StepCtx, StepResult};

    struct Order;

    fn take<'a>(_: &'a Order, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
        Box::pin(async move { ctx.complete("taken", vec![]) })
    }

    static ONE: &[Step<Order>] = &[Step::new("take", take).start().takes_user_message()];
    static TWO: &[Step<Order>] = &[
        Step::new("take", take).start().takes_user_message(),
        Step::new("confirm", take),
    ];

    fn order(version: &str, steps: &'static [Step<Order>]) -> Arc<dyn ErasedSkill> {
        let info = SkillInfo::new("order", "Order").version(version);
        crate::flow::erase(StepTable::new(info, Order, steps).unwrap())
    }

    #[test]
    fn a_skill_in_two_versions_is_listed_once_and_each_version_is_drawn_newest_first() {
        let skills = vec![order("2", ONE), order("3", TWO)];
        assert_eq!(list(&skills), "order\tOrder\tversions 3, 2\n");
        let both = draw(&skills, "order", None).unwrap();
        let three = both.find("%% order version 3").unwrap();
        let two = both.find("%% order version 2").unwrap();
        assert!(three < two, "{both}");
        assert!(both[three..two].contains("confirm"), "{both}");
        assert!(!both[two..].contains("confirm"), "{both}");
        let one = draw(&skills, "order", Some("2")).unwrap();
        assert!(!one.contains("%%") && !one.contains("confirm"), "{one}");
        let missing = draw(&skills, "order", Some("9")).unwrap_err().to_string();
        assert_eq!(
            missing,
            "this program serves skill `order` in version 3, 2, not 9"
        );
    }
}
