//! The seed's payment flow: `charge_card` (Idempotent, keyed by InvocationId, against a ledger that
//! refuses duplicate keys) -> approval for refunds over a limit -> `write_receipt` (AtLeastOnce) ->
//! `send_email` (AtMostOnce). The ledger, receipts and outbox are JSON-lines files in a directory, so
//! "exactly one charge" can be checked across processes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use radkit::effects::Effects;
use radkit::flow::{ApprovalRequest, Decision, EffectError, EffectPolicy, StepCtx, StepResult};
use radkit::flow_skill;
use radkit::model::{Artifact, Content};
use radkit::tools::FnTool;

/// Refunds above this amount need a human's approval.
pub const REFUND_LIMIT: u64 = 100;

/// A payment request, parsed from `charge <amount> <customer>` or `refund <amount> <customer>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Payment {
    /// `charge` or `refund`.
    pub op: String,
    /// Amount in cents.
    pub amount: u64,
    /// Customer.
    pub customer: String,
}

fn parse(text: &str) -> Result<Payment, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    match words.as_slice() {
        [op @ ("charge" | "refund"), amount, customer] => Ok(Payment {
            op: (*op).to_owned(),
            amount: amount
                .parse()
                .map_err(|_| format!("`{amount}` is not an amount in cents"))?,
            customer: (*customer).to_owned(),
        }),
        _ => Err(format!(
            "expected `charge <cents> <customer>` or `refund <cents> <customer>`, got `{text}`"
        )),
    }
}

/// The payment skill.
#[derive(Debug, Clone)]
pub struct Payments {
    /// How long a refund approval waits before it is rejected.
    pub approval_timeout: Duration,
}

impl Default for Payments {
    fn default() -> Self {
        Payments {
            approval_timeout: Duration::from_secs(24 * 3600),
        }
    }
}

/// Charges or refunds a customer, asking a human before large refunds.
#[flow_skill(id = "payments", name = "Payments", tags = ["payments"], examples = ["charge 4200 alice"], register = false)]
impl Payments {
    #[step(start)]
    async fn pay(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let payment = match parse(&msg.joined_texts()) {
            Ok(p) => p,
            Err(e) => return ctx.reject(e),
        };
        let signed = if payment.op == "refund" {
            -(payment.amount as i64)
        } else {
            payment.amount as i64
        };
        let args = json!({ "customer": payment.customer, "amount": signed });
        if payment.op == "refund" && payment.amount > REFUND_LIMIT {
            let request = ApprovalRequest::new(
                "charge_card",
                args.clone(),
                format!(
                    "refund of {} cents is over the limit of {REFUND_LIMIT}",
                    payment.amount
                ),
            )
            .expires(self.approval_timeout, Decision::Reject);
            let approval = ctx.approve("refund_approval", request).await?;
            if !approval.approved() {
                let why = if approval.expired {
                    "the approval expired"
                } else {
                    "the approver rejected it"
                };
                return ctx.reject(format!("refund not made: {why}"));
            }
        }
        let charge: Value = ctx.tool("charge_card").call(&args).await?;
        let _: Value = ctx.tool("write_receipt").call(&charge).await?;
        let _: Value = ctx
            .tool("send_email")
            .call(json!({ "to": payment.customer, "charge": charge }))
            .await?;
        ctx.complete(
            format!(
                "{} of {} cents for {} done",
                payment.op, payment.amount, payment.customer
            ),
            vec![Artifact::from_text("charge.json", charge.to_string())],
        )
    }
}

/// Read a JSON-lines file.
pub fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn append(path: &Path, value: &Value) -> Result<(), EffectError> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| EffectError::transient(format!("{}: {e}", path.display())))?;
    writeln!(file, "{value}")
        .and_then(|_| file.sync_all())
        .map_err(|e| EffectError::transient(format!("{}: {e}", path.display())))
}

/// The fake payment provider and mail server, in `dir`: `ledger.jsonl` (one line per charge key),
/// `calls.jsonl` (every call), `receipts.jsonl`, `outbox.jsonl`.
#[derive(Debug, Clone)]
pub struct PaymentWorld {
    dir: PathBuf,
    pause_after: Option<String>,
}

impl PaymentWorld {
    /// The world in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        PaymentWorld {
            dir: dir.into(),
            pause_after: None,
        }
    }

    /// After `tool` has applied its effect, write `paused-<tool>` and hang instead of returning: a
    /// process killed then died after the effect and before its receipt (`tests/it/payments.rs`).
    #[allow(dead_code)] // the example itself never pauses
    pub fn pause_after(mut self, tool: &str) -> Self {
        self.pause_after = Some(tool.to_owned());
        self
    }

    /// A file of this world.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    async fn after(&self, tool: &str) {
        if self.pause_after.as_deref() == Some(tool) {
            let _ = std::fs::write(self.file(&format!("paused-{tool}")), b"effect applied");
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    }

    /// The three tools, with their policies.
    pub fn effects(&self) -> Effects {
        let w = self.clone();
        let charge = FnTool::new(EffectPolicy::Idempotent, move |args, key| {
            let w = w.clone();
            async move {
                append(
                    &w.file("calls.jsonl"),
                    &json!({ "tool": "charge_card", "key": key.as_str() }),
                )?;
                // The provider refuses a second charge with the same idempotency key: it returns the first.
                if let Some(existing) = read_lines(&w.file("ledger.jsonl"))
                    .into_iter()
                    .find(|c| c["key"] == key.as_str())
                {
                    return Ok(existing);
                }
                let charge = json!({ "key": key.as_str(), "customer": args["customer"], "amount": args["amount"] });
                append(&w.file("ledger.jsonl"), &charge)?;
                w.after("charge_card").await;
                Ok(charge)
            }
        });
        let w = self.clone();
        let receipt = FnTool::new(EffectPolicy::AtLeastOnce, move |args, key| {
            let w = w.clone();
            async move {
                append(
                    &w.file("receipts.jsonl"),
                    &json!({ "key": key.as_str(), "charge": args }),
                )?;
                w.after("write_receipt").await;
                Ok(json!({ "receipt": key.as_str() }))
            }
        });
        let w = self.clone();
        let email = FnTool::new(EffectPolicy::AtMostOnce, move |args, key| {
            let w = w.clone();
            async move {
                append(
                    &w.file("outbox.jsonl"),
                    &json!({ "key": key.as_str(), "email": args }),
                )?;
                w.after("send_email").await;
                Ok(json!({ "sent": true }))
            }
        });
        Effects::new()
            .tool("charge_card", charge)
            .tool("write_receipt", receipt)
            .tool("send_email", email)
    }
}
