//! `radkit graph <skill-id>`: a registered skill's step graph as Mermaid.

/// Arguments of `radkit graph`.
#[derive(clap::Args)]
pub struct Args {
    /// The skill id (`radkit graph --list` shows them).
    pub skill: Option<String>,
    /// List the registered skills.
    #[arg(long)]
    pub list: bool,
}

/// Run `radkit graph`.
pub async fn run(args: Args) -> anyhow::Result<()> {
    // Registered skills, plus the demo skills `radkit serve` runs.
    let mut skills = radkit::registry::build_all()?;
    skills.push(radkit::flow::erase(
        radkit::demo::research_macro::ResearchLoop,
    ));
    skills.push(radkit::flow::erase(radkit::demo::research_table::skill()));
    skills.push(radkit::flow::erase(radkit::demo::report::skill()));
    let ids: Vec<String> = skills.iter().map(|s| s.info().id.clone()).collect();
    match args.skill {
        Some(id) if !args.list => {
            let skill = skills.iter().find(|s| s.info().id == id).ok_or_else(|| {
                anyhow::anyhow!(
                    "no registered skill `{id}`; registered skills are {}",
                    ids.join(", ")
                )
            })?;
            print!("{}", radkit::registry::mermaid(skill.info()));
        }
        _ => {
            for skill in &skills {
                println!("{}\t{}", skill.info().id, skill.info().name);
            }
        }
    }
    Ok(())
}
