//! Shared pieces of the engine tests: a counting ledger tool, a payment-like skill, waiting helpers.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::flow::step_table::{await_input, Step, StepInput, StepTable};
use radkit_runtime::flow::{EffectError, EffectPolicy, SkillInfo, StepCtx, StepResult};
use radkit_runtime::model::{Message, TaskState};
use radkit_runtime::tools::FnTool;
use radkit_runtime::Engine;

/// Counts calls per idempotency key and applies each key's effect once (like a payment provider).
#[derive(Clone, Default)]
pub struct Ledger {
    pub calls: Arc<Mutex<HashMap<String, u32>>>,
    pub applied: Arc<Mutex<Vec<String>>>,
}

impl Ledger {
    pub fn calls_total(&self) -> u32 {
        self.calls.lock().unwrap().values().sum()
    }
    pub fn applied(&self) -> Vec<String> {
        self.applied.lock().unwrap().clone()
    }
    /// A tool with `policy` that records each call and applies each key once.
    pub fn tool(&self, name: &'static str, policy: EffectPolicy) -> FnTool {
        let ledger = self.clone();
        FnTool::new(policy, move |args, key| {
            let ledger = ledger.clone();
            async move {
                *ledger
                    .calls
                    .lock()
                    .unwrap()
                    .entry(format!("{name}:{key}"))
                    .or_default() += 1;
                let mut applied = ledger.applied.lock().unwrap();
                let entry = format!("{name}:{key}");
                if !applied.contains(&entry) {
                    applied.push(entry);
                }
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

/// Wait until the engine halted (an injected crash happened).
pub async fn wait_halted(engine: &Engine) {
    for _ in 0..500 {
        if engine.is_halted() {
            // Let in-flight tasks notice.
            tokio::time::sleep(Duration::from_millis(20)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("engine never halted: the fault boundary was not reached");
}

/// Wait until the task is input-required or finished (bounded, so a hang fails the test).
pub async fn settled(engine: &Engine, task_id: &str) -> radkit_runtime::model::Task {
    tokio::time::timeout(Duration::from_secs(20), engine.wait_settled(None, task_id))
        .await
        .expect("task did not settle within 20 s")
        .expect("wait_settled failed")
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
