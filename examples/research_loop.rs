//! The seed's research loop in the macro form (`radkit::demo::research_macro`), run end to end on a
//! SQLite file with the scripted models: working -> input-required -> (reply) -> completed.
//!
//! `cargo run --example research_loop`

use radkit::demo;
use radkit::model::Message;
use radkit::store::{Durability, SqliteStore};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open(dir.path().join("research.sqlite"), Durability::Full)?;
    let engine = demo::engine_builder(store).start().await?;

    let id = engine
        .send(
            None,
            Some("research_loop_v2"),
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
