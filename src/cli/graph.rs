//! `graph <skill-id>`: the step graph of a skill the program serves, as Mermaid.

use std::sync::Arc;

use super::App;
use crate::store::MemoryStore;

/// Arguments of `graph`.
#[derive(clap::Args)]
pub struct Args {
    /// The skill id (without it, or with `--list`, the served skills are listed).
    pub skill: Option<String>,
    /// List the served skills.
    #[arg(long)]
    pub list: bool,
}

/// Run `graph`.
pub async fn run(app: &App, args: Args) -> anyhow::Result<()> {
    // The skills `serve` would serve; the store is never touched.
    let skills = app.builder(Arc::new(MemoryStore::new())).skills()?;
    match args.skill {
        Some(id) if !args.list => {
            let skill = skills.iter().find(|s| s.info().id == id).ok_or_else(|| {
                let ids: Vec<&str> = skills.iter().map(|s| s.info().id.as_str()).collect();
                anyhow::anyhow!(
                    "this program serves no skill `{id}`; it serves {}",
                    ids.join(", ")
                )
            })?;
            print!("{}", crate::registry::mermaid(skill.info()));
        }
        _ => {
            for skill in &skills {
                println!("{}\t{}", skill.info().id, skill.info().name);
            }
        }
    }
    Ok(())
}
