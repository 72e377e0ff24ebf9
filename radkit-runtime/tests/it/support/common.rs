//! Shared pieces of the engine tests: a counting ledger tool, a payment-like skill, waiting helpers.
#![allow(dead_code)]

use radkit_runtime::engine::Caller;
use radkit_runtime::model::TaskId;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::Engine;
use radkit_runtime::flow::step_table::{await_input, Step, StepInput, StepTable};
use radkit_runtime::flow::{EffectError, EffectPolicy, SkillInfo, StepCtx, StepResult};
use radkit_runtime::model::{Message, TaskState};
use radkit_runtime::tools::FnTool;

/// How long a test waits for anything before it fails.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// `fut`, or a panic naming `what` was awaited when it takes longer than `limit`: a regression fails
/// the test instead of hanging it.
pub async fn within<T>(limit: Duration, what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, fut).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {limit:?} waiting for {what}"),
    }
}

/// Counts calls per idempotency key and applies each key's effect once (like a payment provider).
/// `log` keeps every raw call in order (`tool:key`), so a test can tell one call from two calls with
/// the same key, which `applied` (deduplicated by key) cannot.
#[derive(Clone, Default)]
pub struct Ledger {
    pub calls: Arc<Mutex<HashMap<String, u32>>>,
    pub applied: Arc<Mutex<Vec<String>>>,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Ledger {
    pub fn calls_total(&self) -> u32 {
        self.calls.lock().unwrap().values().sum()
    }
    pub fn applied(&self) -> Vec<String> {
        self.applied.lock().unwrap().clone()
    }
    /// Every call of `tool` so far, in order, as `tool:key` (repeats included).
    pub fn calls_of(&self, tool: &str) -> Vec<String> {
        let prefix = format!("{tool}:");
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|call| call.starts_with(&prefix))
            .cloned()
            .collect()
    }
    /// The keys of `tool` whose effect was applied (each once).
    pub fn applied_of(&self, tool: &str) -> Vec<String> {
        let prefix = format!("{tool}:");
        self.applied()
            .into_iter()
            .filter(|key| key.starts_with(&prefix))
            .collect()
    }
    /// Record one raw call of `name` with `key`.
    pub fn record_call(&self, name: &str, key: &str) {
        let entry = format!("{name}:{key}");
        *self.calls.lock().unwrap().entry(entry.clone()).or_default() += 1;
        self.log.lock().unwrap().push(entry);
    }
    /// Apply the effect of `name` for `key`, unless that key was applied already.
    pub fn apply(&self, name: &str, key: &str) {
        let entry = format!("{name}:{key}");
        let mut applied = self.applied.lock().unwrap();
        if !applied.contains(&entry) {
            applied.push(entry);
        }
    }
    /// A tool with `policy` that records each call and applies each key once.
    pub fn tool(&self, name: &'static str, policy: EffectPolicy) -> FnTool {
        let ledger = self.clone();
        FnTool::new(policy, move |args, key| {
            let ledger = ledger.clone();
            async move {
                ledger.record_call(name, key.as_str());
                ledger.apply(name, key.as_str());
                Ok(serde_json::json!({ "tool": name, "key": key.as_str(), "args": args }))
            }
        })
    }
}

pub struct Pay;

/// charge (Idempotent) -> write_receipt (AtLeastOnce) -> ask for a note -> send_email (AtMostOnce).
pub static PAY_STEPS: &[Step<Pay>] = &[
    Step::new("charge", charge).start().takes_user_message(),
    Step::new("confirm", confirm).resume_from("charge"),
];

fn charge<'a>(_: &'a Pay, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let amount = input.message().joined_texts();
        let charge: serde_json::Value = ctx
            .tool("charge_card")
            .call(serde_json::json!({ "amount": amount }))
            .await?;
        let _: serde_json::Value = ctx.tool("write_receipt").call(&charge).await?;
        await_input("note", "Any note for the email?", charge)
    })
}

fn confirm<'a>(_: &'a Pay, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let charge: serde_json::Value = input.payload()?;
        let note = input.message().joined_texts();
        let _: serde_json::Value = ctx
            .tool("send_email")
            .call(serde_json::json!({ "charge": charge, "note": note }))
            .await?;
        ctx.complete(format!("Paid; email sent with note: {note}"), vec![])
    })
}

pub fn pay_skill() -> StepTable<Pay> {
    StepTable::new(SkillInfo::new("pay", "Pay"), Pay, PAY_STEPS).unwrap()
}

pub fn pay_effects(ledger: &Ledger) -> Effects {
    Effects::new()
        .tool(
            "charge_card",
            ledger.tool("charge_card", EffectPolicy::Idempotent),
        )
        .tool(
            "write_receipt",
            ledger.tool("write_receipt", EffectPolicy::AtLeastOnce),
        )
        .tool(
            "send_email",
            ledger.tool("send_email", EffectPolicy::AtMostOnce),
        )
}

pub fn flaky(failures: u32, kind_transient: bool) -> (FnTool, Arc<Mutex<u32>>) {
    let count = Arc::new(Mutex::new(0u32));
    let c = count.clone();
    let tool = FnTool::new(EffectPolicy::AtLeastOnce, move |_args, _key| {
        let c = c.clone();
        async move {
            let mut n = c.lock().unwrap();
            *n += 1;
            if *n <= failures {
                if kind_transient {
                    Err(EffectError::transient(format!("flaky failure {n}")))
                } else {
                    Err(EffectError::permanent("card declined"))
                }
            } else {
                Ok(serde_json::json!("ok"))
            }
        }
    });
    (tool, count)
}

pub fn user(text: &str) -> Message {
    Message::user_text(text)
}

pub fn reply(task_id: &str, text: &str) -> Message {
    let mut m = Message::user_text(text);
    m.task_id = Some(task_id.to_owned());
    m
}

/// Wait until the engine halted (an injected crash happened). The engine has no event for its halt
/// (a crash is the absence of everything after it), so this polls its flag, with a deadline. Once
/// halted it writes nothing more: every flush checks the flag first.
pub async fn wait_halted(engine: &Engine) {
    let deadline = Instant::now() + PATIENCE;
    while !engine.is_halted() {
        assert!(
            Instant::now() < deadline,
            "timed out after {PATIENCE:?} waiting for the engine to halt: the fault boundary was not reached"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Wait until the task is input-required or finished (bounded, so a hang fails the test).
pub async fn settled(engine: &Engine, task_id: &TaskId) -> radkit_runtime::model::Task {
    within(
        PATIENCE,
        &format!("task {task_id} to settle (input-required or finished)"),
        engine.wait_settled(&Caller::Operator, task_id),
    )
    .await
    .expect("wait_settled failed")
}

/// Wait until the task ended (bounded): one that waits for input, or a parent waiting on its child
/// (`working`), has not.
pub async fn ended(engine: &Engine, task_id: &TaskId) -> radkit_runtime::model::Task {
    within(PATIENCE, &format!("task {task_id} to end"), async {
        loop {
            let task = engine.task(&Caller::Operator, task_id, None).await.unwrap();
            if task.status.state.is_terminal() {
                return task;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

pub fn state_of(task: &radkit_runtime::model::Task) -> TaskState {
    task.status.state
}

pub fn status_text(task: &radkit_runtime::model::Task) -> String {
    task.status
        .message
        .as_ref()
        .map(|m| m.joined_texts())
        .unwrap_or_default()
}
