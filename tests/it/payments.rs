//! The payment flow's promises: approval gates as state transitions, and the seed's crash plan with a
//! real process killed by SIGKILL: no double charge, no second email.

use radkit::engine::{Caller, Request};
use radkit::model::TaskId;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[allow(dead_code)]
#[path = "../../examples/payments/skill.rs"]
pub(crate) mod skill;

use radkit::engine::Engine;
use radkit::model::{Message, Part, Task, TaskState};
use radkit::store::{Durability, MemoryStore, SqliteStore, TaskQuery};
use skill::{read_lines, PaymentWorld, Payments};

fn reply(id: &str, text: &str) -> Message {
    let mut m = Message::user_text(text);
    m.task_id = Some(id.to_owned());
    m
}

/// How long a test waits for anything before it fails.
const PATIENCE: Duration = Duration::from_secs(30);

async fn settle(engine: &Engine, id: &TaskId) -> Task {
    match tokio::time::timeout(PATIENCE, engine.wait_settled(&Caller::Operator, id)).await {
        Ok(task) => task.expect("task"),
        Err(_) => panic!("timed out after {PATIENCE:?} waiting for task {id} to settle"),
    }
}

fn text(task: &Task) -> String {
    task.status
        .message
        .as_ref()
        .map(|m| m.joined_texts())
        .unwrap_or_default()
}

async fn engine(dir: &Path, payments: Payments) -> Engine {
    Engine::builder(MemoryStore::new())
        .without_registered_skills()
        .skill(payments)
        .effects(PaymentWorld::new(dir).effects())
        .start()
        .await
        .unwrap()
}

#[test]
async fn a_charge_is_applied_once_receipted_and_mailed() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), Payments::default()).await;
    let id = engine
        .send(Request::operator(Message::user_text("charge 4200 alice")))
        .await
        .unwrap();
    let task = settle(&engine, &id).await;
    assert_eq!(task.status.state, TaskState::Completed, "{}", text(&task));
    let world = PaymentWorld::new(dir.path());
    assert_eq!(read_lines(&world.file("ledger.jsonl")).len(), 1);
    assert_eq!(read_lines(&world.file("receipts.jsonl")).len(), 1);
    assert_eq!(read_lines(&world.file("outbox.jsonl")).len(), 1);
}

#[test]
async fn a_large_refund_waits_for_approval_with_the_exact_proposed_action() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), Payments::default()).await;
    let id = engine
        .send(Request::operator(Message::user_text("refund 9900 bob")))
        .await
        .unwrap();
    let task = settle(&engine, &id).await;
    assert_eq!(task.status.state, TaskState::InputRequired);
    let question = task.status.message.clone().unwrap();
    let data = question
        .parts
        .iter()
        .find_map(|p| match p {
            Part::Data { data, .. } => Some(data.clone()),
            _ => None,
        })
        .expect("a data part");
    assert_eq!(data["type"], "approval_request");
    assert_eq!(data["tool"], "charge_card");
    assert_eq!(
        data["arguments"],
        serde_json::json!({ "customer": "bob", "amount": -9900 })
    );
    assert_eq!(data["default"], "reject");
    assert!(data["reason"].as_str().unwrap().contains("over the limit"));
    assert!(
        read_lines(&PaymentWorld::new(dir.path()).file("ledger.jsonl")).is_empty(),
        "nothing charged before approval"
    );
    engine
        .send(Request::operator(reply(
            &id,
            "approve, checked with finance",
        )))
        .await
        .unwrap();
    let task = settle(&engine, &id).await;
    assert_eq!(task.status.state, TaskState::Completed, "{}", text(&task));
    assert_eq!(
        read_lines(&PaymentWorld::new(dir.path()).file("ledger.jsonl")).len(),
        1
    );
}

#[test]
async fn a_rejected_refund_ends_the_task_as_rejected_without_charging() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), Payments::default()).await;
    let id = engine
        .send(Request::operator(Message::user_text("refund 9900 bob")))
        .await
        .unwrap();
    settle(&engine, &id).await;
    let mut decision = Message::user_text("");
    decision.parts = vec![Part::data(
        serde_json::json!({ "decision": "reject" })
            .as_object()
            .unwrap()
            .clone(),
    )];
    decision.task_id = Some(id.to_string());
    engine.send(Request::operator(decision)).await.unwrap();
    let task = settle(&engine, &id).await;
    assert_eq!(
        task.status.state,
        TaskState::Rejected,
        "a business outcome, not a failure"
    );
    assert!(text(&task).contains("approver rejected"));
    assert!(read_lines(&PaymentWorld::new(dir.path()).file("ledger.jsonl")).is_empty());
}

#[test]
async fn an_expired_approval_takes_its_declared_default() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(
        dir.path(),
        Payments {
            approval_timeout: Duration::from_millis(200),
        },
    )
    .await;
    let id = engine
        .send(Request::operator(Message::user_text("refund 9900 bob")))
        .await
        .unwrap();
    let mut sub = engine.subscribe(&Caller::Operator, &id).await.unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while let Some(record) = tokio::time::timeout_at(deadline, sub.next())
        .await
        .unwrap_or_else(|_| panic!("timed out after {PATIENCE:?} waiting for the approval to expire and the task to end"))
    {
        let _ = record;
    }
    let task = engine.task(&Caller::Operator, &id, None).await.unwrap();
    assert_eq!(task.status.state, TaskState::Rejected, "{}", text(&task));
    assert!(text(&task).contains("expired"));
    assert!(read_lines(&PaymentWorld::new(dir.path()).file("ledger.jsonl")).is_empty());
}

// ---- the seed's crash plan, with a real process killed by SIGKILL ----

fn sqlite_engine(dir: &Path, world: PaymentWorld) -> radkit::engine::EngineBuilder {
    let store = SqliteStore::open(dir.join("payments.sqlite"), Durability::Full).unwrap();
    Engine::builder(store)
        .without_registered_skills()
        .skill(Payments::default())
        .effects(world.effects())
}

#[test]
#[ignore = "entry point of the child process of the kill tests below"]
async fn child_process_runs_a_payment_until_killed() {
    let dir = std::path::PathBuf::from(
        std::env::var("RADKIT_PAYMENTS_DIR").expect("run by a parent test"),
    );
    let pause = std::env::var("RADKIT_PAYMENTS_PAUSE").expect("which tool to pause after");
    let engine = sqlite_engine(&dir, PaymentWorld::new(&dir).pause_after(&pause))
        .start()
        .await
        .unwrap();
    engine
        .send(Request::operator(Message::user_text("charge 4200 alice")))
        .await
        .unwrap();
    // Stay alive until the parent kills this process; should the parent itself be killed first,
    // exit on our own instead of lingering.
    tokio::time::sleep(Duration::from_secs(120)).await;
}

/// Run a payment in a child process, SIGKILL it right after `tool` applied its effect (before the
/// receipt is written), then recover in this process and return the settled task.
async fn kill_after(tool: &str, dir: &Path) -> Task {
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "payments::child_process_runs_a_payment_until_killed",
            "--ignored",
            "--nocapture",
        ])
        .env("RADKIT_PAYMENTS_DIR", dir)
        .env("RADKIT_PAYMENTS_PAUSE", tool)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = crate::support::common::Killed(child);
    // The pause file is written by another process: no event reaches this one, so poll, with a
    // deadline.
    let started = Instant::now();
    while !dir.join(format!("paused-{tool}")).exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "timed out waiting for the child to pause after {tool}"
        );
        if let Some(status) = child.0.try_wait().unwrap() {
            panic!("the child exited ({status}) before it paused after {tool}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.0.kill().unwrap(); // SIGKILL
    child.0.wait().unwrap();
    let engine = sqlite_engine(dir, PaymentWorld::new(dir))
        .start()
        .await
        .unwrap();
    let tasks = engine.store().list(TaskQuery::default()).await.unwrap();
    assert_eq!(tasks.len(), 1);
    settle(&engine, &TaskId::from(&tasks[0].id)).await
}

#[test]
async fn kill_9_between_charge_and_its_receipt_charges_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let task = kill_after("charge_card", dir.path()).await;
    assert_eq!(task.status.state, TaskState::Completed, "{}", text(&task));
    let world = PaymentWorld::new(dir.path());
    assert_eq!(
        read_lines(&world.file("ledger.jsonl")).len(),
        1,
        "exactly one charge"
    );
    let calls = read_lines(&world.file("calls.jsonl"));
    assert_eq!(calls.len(), 2, "reissued once after the kill");
    assert_eq!(
        calls[0]["key"], calls[1]["key"],
        "with the same idempotency key"
    );
    assert_eq!(read_lines(&world.file("outbox.jsonl")).len(), 1);
}

#[test]
async fn kill_9_during_send_email_reports_the_unknown_outcome_instead_of_sending_twice() {
    let dir = tempfile::tempdir().unwrap();
    let task = kill_after("send_email", dir.path()).await;
    assert_eq!(task.status.state, TaskState::Failed);
    let message = text(&task);
    assert!(
        message.contains("outcome unknown") && message.contains("send_email"),
        "{message}"
    );
    let world = PaymentWorld::new(dir.path());
    assert_eq!(
        read_lines(&world.file("outbox.jsonl")).len(),
        1,
        "never sent twice"
    );
    assert_eq!(read_lines(&world.file("ledger.jsonl")).len(), 1);
}
