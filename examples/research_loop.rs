//! The seed's research loop run end to end on a SQLite file with the scripted models:
//! working -> input-required -> (reply) -> completed. Pick the authoring form:
//!
//! `cargo run --example research_loop [macro|reducer|table]` (`src/demo/research_macro.rs`,
//! `research_reducer.rs`, `research_table.rs`; the macro form by default).

use radkit::demo;
use radkit::model::Message;
use radkit::store::{Durability, SqliteStore};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open(dir.path().join("research.sqlite"), Durability::Full)?;
    let engine = demo::engine_builder(store).start().await?;

    let skill = match std::env::args().nth(1).as_deref() {
        None | Some("macro") => "research_loop_v2",
        Some("reducer") => "research_reducer",
        Some("table") => "research_table",
        Some(other) => anyhow::bail!("unknown form `{other}`; expected macro, reducer or table"),
    };
    println!("skill {skill}");
    let id = engine
        .send(
            None,
            Some(skill),
            Message::user_text("Durable execution for agents"),
        )
        .await?;
    let task = engine.wait_settled(None, &id).await?;
    println!(
        "{:?}: {}",
        task.status.state,
        task.status
            .message
            .as_ref()
            .map(|m| m.joined_texts())
            .unwrap_or_default()
    );

    let mut reply = Message::user_text("Make it friendlier.");
    reply.task_id = Some(id.clone());
    engine.send(None, None, reply).await?;
    let task = engine.wait_settled(None, &id).await?;
    println!(
        "{:?}: {}",
        task.status.state,
        task.status
            .message
            .as_ref()
            .map(|m| m.joined_texts())
            .unwrap_or_default()
    );
    for artifact in task.artifacts.unwrap_or_default() {
        println!(
            "artifact {}: {}",
            artifact.name.unwrap_or_default(),
            artifact.parts[0].as_text().unwrap_or_default()
        );
    }
    println!("journal:");
    for record in engine.journal(None, &id).await? {
        println!("  {:>3} {}", record.seq, record.entry.kind_name());
    }
    Ok(())
}
