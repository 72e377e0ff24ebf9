//! The seed's payment flow end to end on SQLite, with the engine embedded as a library (no CLI): a
//! charge, a small refund, and a large refund that waits for approval (approved here).
//!
//! ```sh
//! cargo run --example payments
//! ```
//!
//! `skill.rs` is the skill and its three tools; `tests/it/payments.rs` kills a real process in the
//! middle of it.

mod skill;

use radkit::engine::Engine;
use radkit::engine::{Caller, Request};
use radkit::model::Message;
use radkit::store::{Durability, SqliteStore};
use skill::{read_lines, PaymentWorld, Payments};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let world = PaymentWorld::new(dir.path());
    let store = SqliteStore::open(dir.path().join("payments.sqlite"), Durability::Full)?;
    let engine = Engine::builder(store)
        .skill(Payments::default())
        .effects(world.effects())
        .start()
        .await?;

    for request in ["charge 4200 alice", "refund 50 alice", "refund 9900 bob"] {
        let id = engine
            .send(Request::operator(Message::user_text(request)))
            .await?;
        let mut task = engine.wait_settled(&Caller::Operator, &id).await?;
        println!(
            "{request:>18} -> {:?}: {}",
            task.status.state,
            task.status
                .message
                .as_ref()
                .map(|m| m.joined_texts())
                .unwrap_or_default()
        );
        if task.status.state == radkit::model::TaskState::InputRequired {
            let mut approve = Message::user_text("approve");
            approve.task_id = Some(id.to_string());
            engine.send(Request::operator(approve)).await?;
            task = engine.wait_settled(&Caller::Operator, &id).await?;
            println!(
                "{:>18} -> {:?}: {}",
                "approve",
                task.status.state,
                task.status
                    .message
                    .as_ref()
                    .map(|m| m.joined_texts())
                    .unwrap_or_default()
            );
        }
    }
    println!(
        "ledger: {} charges",
        read_lines(&world.file("ledger.jsonl")).len()
    );
    Ok(())
}
