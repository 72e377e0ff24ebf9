//! Changing a skill while tasks wait: an order waits for its size under version 1; two deploys
//! later it is answered, on SQLite, with the engine embedded as a library.
//!
//! ```sh
//! cargo run --example versions
//! ```
//!
//! - Version 2 changes `confirm`'s body only: the waiting task moves to it by itself (its step kept
//!   its shape), journaled as `migrated {from: 1, to: 2}`.
//! - Version 3 adds a field to what `confirm` carries: a task waiting under version 1 cannot move
//!   as it is, so version 3 declares a typed migration from version 1.

use radkit::engine::{Caller, Engine, Request};
use radkit::flow::{StepCtx, StepResult};
use radkit::journal::Entry;
use radkit::model::{Content, Message, TaskId};
use radkit::store::{Durability, SqliteStore};
use radkit::{await_input, flow_skill};
use serde::{Deserialize, Serialize};

/// What versions 1 and 2 carry into `confirm`.
#[derive(Serialize, Deserialize)]
struct Order {
    item: String,
}

/// What version 3 carries: a quantity too.
#[derive(Serialize, Deserialize)]
struct OrderLine {
    item: String,
    quantity: u32,
}

#[derive(Default)]
struct OrderV1;

/// Takes an order, asks for its size.
#[flow_skill(id = "order", name = "Order", version = 1, register = false)]
impl OrderV1 {
    #[step(start)]
    async fn take(&self, order: Content) -> StepResult {
        let order = Order {
            item: order.joined_texts(),
        };
        await_input!(slot = "size", message = "Which size?", carry = order)
    }

    #[step(resume_from = "take")]
    async fn confirm(&self, ctx: &StepCtx, order: Order, size: Content) -> StepResult {
        let size = size.joined_texts();
        ctx.complete(format!("v1: {} ({size})", order.item), vec![])
    }
}

#[derive(Default)]
struct OrderV2;

/// Version 2: another confirmation; `confirm` keeps its shape.
#[flow_skill(id = "order", name = "Order", version = 2, register = false)]
impl OrderV2 {
    #[step(start)]
    async fn take(&self, order: Content) -> StepResult {
        let order = Order {
            item: order.joined_texts(),
        };
        await_input!(
            slot = "size",
            message = "Which size, please?",
            carry = order
        )
    }

    #[step(resume_from = "take")]
    async fn confirm(&self, ctx: &StepCtx, order: Order, size: Content) -> StepResult {
        let size = size.joined_texts();
        ctx.complete(format!("v2: one {} in size {size}", order.item), vec![])
    }
}

#[derive(Default)]
struct OrderV3;

/// Version 3: `confirm` carries a quantity; tasks resting before version 1's `confirm` migrate.
#[flow_skill(id = "order", name = "Order", version = 3, register = false)]
impl OrderV3 {
    #[step(start)]
    async fn take(&self, order: Content) -> StepResult {
        let line = OrderLine {
            item: order.joined_texts(),
            quantity: 1,
        };
        await_input!(slot = "size", message = "Which size?", carry = line)
    }

    #[step(resume_from = "take")]
    async fn confirm(&self, ctx: &StepCtx, line: OrderLine, size: Content) -> StepResult {
        let size = size.joined_texts();
        let text = format!("v3: {} x {} in size {size}", line.quantity, line.item);
        ctx.complete(text, vec![])
    }

    /// Version 1 carried no quantity: one.
    #[migrate(from = 1, step = "confirm")]
    fn confirm_from_v1(old: Order) -> Result<OrderLine, String> {
        Ok(OrderLine {
            item: old.item,
            quantity: 1,
        })
    }
}

/// An engine over the SQLite file at `path` serving `build`'s versions.
async fn engine(
    path: &std::path::Path,
    build: impl FnOnce(radkit::engine::EngineBuilder) -> radkit::engine::EngineBuilder,
) -> anyhow::Result<Engine> {
    let store = SqliteStore::open(path, Durability::Full)?;
    let builder = Engine::builder(store).without_registered_skills();
    Ok(build(builder).refuse_stranded().start().await?)
}

/// A new order for `item`, waiting for its size.
async fn order(engine: &Engine, item: &str) -> anyhow::Result<TaskId> {
    let id = engine
        .send(Request::operator(Message::user_text(item)))
        .await?;
    engine.wait_settled(&Caller::Operator, &id).await?;
    Ok(id)
}

/// Answer `task` with `size`; its final message and the versions it moved between.
async fn answer(engine: &Engine, task: &TaskId, size: &str) -> anyhow::Result<String> {
    let mut reply = Message::user_text(size);
    reply.task_id = Some(task.to_string());
    engine.send(Request::operator(reply)).await?;
    let done = engine.wait_settled(&Caller::Operator, task).await?;
    let moves: Vec<String> = engine
        .journal(&Caller::Operator, task)
        .await?
        .into_iter()
        .filter_map(|r| match r.entry {
            Entry::Migrated { from, to, .. } => Some(format!("{from} -> {to}")),
            _ => None,
        })
        .collect();
    let text = done.status.message.map(|m| m.joined_texts());
    Ok(format!(
        "{} [moved: {}]",
        text.unwrap_or_default(),
        moves.join(", ")
    ))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("orders.sqlite");

    // Monday: version 1 takes two orders; both wait for a size.
    let v1 = engine(&path, |b| b.skill(OrderV1)).await?;
    let tea = order(&v1, "tea").await?;
    let cake = order(&v1, "cake").await?;
    v1.halt();
    drop(v1);

    // Tuesday: a binary with version 2 only. `tea` is answered and moves by itself.
    let v2 = engine(&path, |b| b.skill(OrderV2)).await?;
    println!("tea:  {}", answer(&v2, &tea, "M").await?);
    v2.halt();
    drop(v2);

    // Wednesday: version 3, whose `confirm` carries more; `cake` still rests under version 1.
    let v3 = engine(&path, |b| b.skill(OrderV3)).await?;
    println!("cake: {}", answer(&v3, &cake, "L").await?);
    v3.halt();
    Ok(())
}
