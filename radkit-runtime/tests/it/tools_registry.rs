//! The typed tool registry: `ctx.tool(name).call::<Args, Out>(args)`, the tool's declared policy, and
//! its idempotency key (the command's InvocationId, the same on every attempt).

use crate::support::common;

use radkit_runtime::engine::{Caller, Request};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::*;
use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::Engine;
use radkit_runtime::flow::step_table::{Step, StepInput, StepTable};
use radkit_runtime::flow::{
    EffectError, EffectPolicy, ErrorKind, InvocationId, RetryPolicy, SkillInfo, StepCtx, StepResult,
};
use radkit_runtime::journal::{Entry, JournalRecord};
use radkit_runtime::model::TaskState;
use radkit_runtime::store::MemoryStore;
use radkit_runtime::tools::{FnTool, Tool};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct ChargeArgs {
    customer: String,
    cents: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Charged {
    charge_id: String,
    cents: u64,
}

struct Shop;

/// `<tool> <customer> <cents>`: calls `tool` with typed arguments; `raw <tool>` sends bad arguments.
fn buy<'a>(_: &'a Shop, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let text = input.message().joined_texts();
        let words: Vec<&str> = text.split_whitespace().collect();
        let fast = RetryPolicy {
            max_attempts: 4,
            initial_backoff_ms: 1,
            max_backoff_ms: 2,
        };
        if words[0] == "raw" {
            let _: serde_json::Value = ctx
                .tool(words[1])
                .retry(fast)
                .call(serde_json::json!({ "customer": 7 }))
                .await?;
            return ctx.complete("unreachable", vec![]);
        }
        let args = ChargeArgs {
            customer: words[1].to_owned(),
            cents: words[2].parse().unwrap_or(0),
        };
        let out: Charged = ctx.tool(words[0]).retry(fast).call(args).await?;
        ctx.complete(format!("{} {}", out.charge_id, out.cents), vec![])
    })
}

static SHOP: &[Step<Shop>] = &[Step::new("buy", buy).start().takes_user_message()];

/// A typed tool that fails transiently `failures` times, recording every key it was given.
fn charge_tool(failures: u32, keys: Arc<Mutex<Vec<String>>>) -> FnTool {
    FnTool::typed(
        EffectPolicy::Idempotent,
        move |args: ChargeArgs, key: InvocationId| {
            let keys = keys.clone();
            async move {
                let n = {
                    let mut k = keys.lock().unwrap();
                    k.push(key.to_string());
                    k.len() as u32
                };
                if n <= failures {
                    return Err(EffectError::transient(format!("provider busy ({n})")));
                }
                Ok(Charged {
                    charge_id: format!("ch-{}-{key}", args.customer),
                    cents: args.cents,
                })
            }
        },
    )
}

async fn run(effects: Effects, text: &str) -> (radkit_runtime::model::Task, Vec<JournalRecord>) {
    let engine = Engine::builder(MemoryStore::new())
        .skill(StepTable::new(SkillInfo::new("shop", "Shop"), Shop, SHOP).unwrap())
        .effects(effects)
        .start()
        .await
        .unwrap();
    let id = engine.send(Request::operator(user(text))).await.unwrap();
    let task = settled(&engine, &id).await;
    let journal = engine.journal(&Caller::Operator, &id).await.unwrap();
    (task, journal)
}

fn issued(journal: &[JournalRecord]) -> Vec<(InvocationId, EffectPolicy)> {
    journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::CommandIssued { id, cmd, .. } => Some((id.clone(), cmd.policy)),
            _ => None,
        })
        .collect()
}

#[test]
async fn a_typed_tool_gets_the_invocation_id_as_its_key_on_every_attempt() {
    let keys = Arc::new(Mutex::new(Vec::new()));
    let effects = Effects::new().tool("charge_card", charge_tool(2, keys.clone()));
    let (task, journal) = run(effects, "charge_card alice 4200").await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    let commands = issued(&journal);
    assert_eq!(commands.len(), 1);
    let (id, policy) = &commands[0];
    assert_eq!(
        *policy,
        EffectPolicy::Idempotent,
        "the tool's declared policy wins"
    );
    assert_eq!(
        *keys.lock().unwrap(),
        vec![id.to_string(); 3],
        "three attempts, one key: the command's InvocationId"
    );
    let failed: Vec<u32> = journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::AttemptFailed { attempt, error, .. } => {
                assert_eq!(error.kind, ErrorKind::Transient);
                Some(*attempt)
            }
            _ => None,
        })
        .collect();
    assert_eq!(failed, vec![1, 2], "every failed attempt is journaled");
    assert_eq!(status_text(&task), format!("ch-alice-{id} 4200"));
}

#[test]
async fn arguments_of_the_wrong_type_fail_once_and_permanently() {
    let keys = Arc::new(Mutex::new(Vec::new()));
    let effects = Effects::new().tool("charge_card", charge_tool(0, keys.clone()));
    let (task, journal) = run(effects, "raw charge_card").await;
    assert_eq!(task.status.state, TaskState::Failed);
    let text = status_text(&task);
    assert!(
        text.contains("tool `charge_card` failed: the arguments do not match")
            && text.contains("ChargeArgs"),
        "{text}"
    );
    assert!(keys.lock().unwrap().is_empty(), "the tool's body never ran");
    assert!(!journal
        .iter()
        .any(|r| matches!(r.entry, Entry::AttemptFailed { .. })));
}

#[test]
async fn an_unregistered_tool_is_a_permanent_error_naming_it() {
    let (task, _) = run(Effects::new(), "refund_card bob 10").await;
    assert_eq!(task.status.state, TaskState::Failed);
    assert!(
        status_text(&task).contains("no tool registered as `refund_card`"),
        "{}",
        status_text(&task)
    );
}

/// A hand-written tool, registered behind an `Arc` so the test keeps a handle to it.
#[derive(Default)]
struct Counter {
    calls: Mutex<Vec<String>>,
}

#[async_trait]
impl Tool for Counter {
    fn policy(&self) -> EffectPolicy {
        EffectPolicy::AtLeastOnce
    }

    async fn call(
        &self,
        args: serde_json::Value,
        key: &InvocationId,
    ) -> Result<serde_json::Value, EffectError> {
        self.calls.lock().unwrap().push(key.to_string());
        Ok(
            serde_json::json!({ "charge_id": format!("n{}", self.calls.lock().unwrap().len()), "cents": args["cents"] }),
        )
    }
}

#[test]
async fn a_shared_tool_implementation_declares_its_own_policy() {
    let counter = Arc::new(Counter::default());
    let effects = Effects::new().tool("count", counter.clone());
    let (task, journal) = run(effects, "count carol 5").await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}",
        status_text(&task)
    );
    assert_eq!(status_text(&task), "n1 5");
    assert_eq!(issued(&journal)[0].1, EffectPolicy::AtLeastOnce);
    assert_eq!(counter.calls.lock().unwrap().len(), 1);
}
