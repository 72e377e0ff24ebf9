//! The payment flow (`examples/payments`) hosted by Restate: each task is a Restate workflow whose
//! journal holds every charge, receipt, email and approval; radkit's A2A server stands in front.
//!
//! ```sh
//! # a Restate server (the npm registry's binary package; `restate-server` from any install works)
//! npm install --prefix restate --ignore-scripts @restatedev/restate-server
//! restate/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server &
//! cargo run --example restate --features restate        # the demo, then exit
//! cargo run --example restate --features restate -- --serve   # and keep serving A2A on :8000
//! ```
//!
//! One process serves both sides, over one SQLite file:
//!
//! * the Restate deployment (`RestateHost`, on `RADKIT_RESTATE_ENDPOINT`, default
//!   `127.0.0.1:9080`), registered with the Restate server's admin API (`RESTATE_ADMIN_URL`,
//!   default `http://127.0.0.1:9070`), runs the tasks;
//! * the engine in Restate mode (`EngineBuilder::restate`) forwards sends, replies and cancels to
//!   the ingress (`RESTATE_INGRESS_URL`, default `http://127.0.0.1:8080`) and serves the A2A
//!   surface from the store (`RADKIT_ADDR`, default `127.0.0.1:8000`).
//!
//! Several deployments can share a Postgres store instead; the front then runs anywhere.

#[path = "payments/skill.rs"]
mod skill;

use std::sync::Arc;

use radkit::engine::{Caller, Engine, EngineBuilder, Request};
use radkit::model::{Message, TaskState};
use radkit::restate::{register_deployment, RestateHost};
use radkit::server::{self, ServerConfig};
use radkit::store::{Durability, SqliteStore, Store};
use skill::{read_lines, PaymentWorld, Payments};

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let world = PaymentWorld::new(dir.path());
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(
        dir.path().join("payments.sqlite"),
        Durability::Full,
    )?);
    let builder = || -> EngineBuilder {
        Engine::builder_arc(store.clone())
            .skill(Payments::default())
            .effects(world.effects())
    };

    // The Restate side: the workflow's deployment, registered with the server.
    let endpoint = env_or("RADKIT_RESTATE_ENDPOINT", "127.0.0.1:9080");
    let listener = tokio::net::TcpListener::bind(&endpoint).await?;
    tokio::spawn(RestateHost::from_builder(builder())?.listen(listener));
    let admin = env_or("RESTATE_ADMIN_URL", "http://127.0.0.1:9070");
    register_deployment(&admin, &format!("http://{endpoint}")).await?;

    // The A2A side: the engine forwards to Restate's ingress and reads the store.
    let ingress = env_or("RESTATE_INGRESS_URL", "http://127.0.0.1:8080");
    let engine = builder().restate(ingress).start().await?;
    let addr = env_or("RADKIT_ADDR", "127.0.0.1:8000");
    let a2a = tokio::net::TcpListener::bind(&addr).await?;
    let config = ServerConfig::new(format!("http://{addr}"));
    tokio::spawn(server::serve(a2a, engine.clone(), config));
    println!("A2A on http://{addr}, tasks run by Restate at {admin}");

    for request in ["charge 4200 alice", "refund 50 alice", "refund 9900 bob"] {
        let id = engine
            .send(Request::operator(Message::user_text(request)))
            .await?;
        let mut task = engine.wait_settled(&Caller::Operator, &id).await?;
        println!("{request:>18} -> {:?}: {}", task.status.state, said(&task));
        if task.status.state == TaskState::InputRequired {
            let mut approve = Message::user_text("approve");
            approve.task_id = Some(id.to_string());
            engine.send(Request::operator(approve)).await?;
            task = engine.wait_settled(&Caller::Operator, &id).await?;
            println!(
                "{:>18} -> {:?}: {}",
                "approve",
                task.status.state,
                said(&task)
            );
        }
    }
    let charges = read_lines(&world.file("ledger.jsonl")).len();
    let emails = read_lines(&world.file("outbox.jsonl")).len();
    println!("{charges} charges, {emails} emails");

    if std::env::args().any(|a| a == "--serve") {
        tokio::signal::ctrl_c().await?;
    }
    Ok(())
}

fn said(task: &radkit::model::Task) -> String {
    task.status
        .message
        .as_ref()
        .map(|m| m.joined_texts())
        .unwrap_or_default()
}
