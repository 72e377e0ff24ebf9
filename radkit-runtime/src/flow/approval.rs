//! Approval gates: a step asks a human to approve an exact proposed action. The question is a
//! journaled `ask_user` command carrying the action as a structured data part; the reply (or, after
//! the deadline, the declared default) is its receipt. Approval is a state transition, not a chat.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Cmd, CmdKind, StepCtx, StepError};
use crate::model::{Message, Part, Role};

/// Approve or reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Go ahead.
    Approve,
    /// Do not.
    Reject,
}

/// What the approver is asked to decide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The tool (or action) that would run.
    pub tool: String,
    /// Its exact arguments.
    pub arguments: serde_json::Value,
    /// Why approval is needed.
    pub reason: String,
    /// How long to wait for an answer (`None`: forever).
    #[serde(skip)]
    pub expires_in: Option<Duration>,
    /// The decision an unanswered request takes when it expires.
    pub default: Decision,
}

impl ApprovalRequest {
    /// A request to approve `tool` with `arguments` because of `reason`; rejected if unanswered.
    pub fn new(
        tool: impl Into<String>,
        arguments: serde_json::Value,
        reason: impl Into<String>,
    ) -> Self {
        ApprovalRequest {
            tool: tool.into(),
            arguments,
            reason: reason.into(),
            expires_in: None,
            default: Decision::Reject,
        }
    }

    /// Expire after `after`, taking `default`.
    pub fn expires(mut self, after: Duration, default: Decision) -> Self {
        self.expires_in = Some(after);
        self.default = default;
        self
    }
}

/// The approver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// The decision.
    pub decision: Decision,
    /// True when nobody answered in time and the default was taken.
    pub expired: bool,
    /// The approver's words, if any.
    pub note: String,
}

impl Approval {
    /// True when approved.
    pub fn approved(&self) -> bool {
        self.decision == Decision::Approve
    }
}

/// Read a reply: a data part with `"decision"`, or text starting with approve/yes/ok or reject/no.
pub(crate) fn read_reply(value: serde_json::Value) -> Result<Approval, StepError> {
    if let Some(decision) = value.get("decision") {
        let decision: Decision = serde_json::from_value(decision.clone())?;
        let expired = value
            .get("expired")
            .and_then(|e| e.as_bool())
            .unwrap_or(false);
        return Ok(Approval {
            decision,
            expired,
            note: String::new(),
        });
    }
    let message: Message = serde_json::from_value(value)?;
    for part in &message.parts {
        if let Part::Data { data, .. } = part {
            if let Some(decision) = data.get("decision") {
                let decision: Decision = serde_json::from_value(decision.clone())?;
                return Ok(Approval {
                    decision,
                    expired: false,
                    note: message.joined_texts(),
                });
            }
        }
    }
    let note = message.joined_texts();
    let first = note
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase();
    let decision = match first.as_str() {
        "approve" | "approved" | "yes" | "ok" | "y" => Decision::Approve,
        "reject" | "rejected" | "no" | "deny" | "n" => Decision::Reject,
        _ => return Err(StepError::msg(format!("the reply to an approval request must start with `approve` or `reject` (or carry a data part {{\"decision\": ..}}); got: {note}"))),
    };
    Ok(Approval {
        decision,
        expired: false,
        note,
    })
}

impl StepCtx {
    /// Ask a human to approve `request`; the task waits in `input-required` with the proposed action
    /// as a data part (`{"type": "approval_request", "tool", "arguments", "reason", "default",
    /// "expires_in_ms"}`). Returns the decision; journaled, so a replay returns the same one.
    pub async fn approve(
        &self,
        slot: impl Into<String>,
        request: ApprovalRequest,
    ) -> Result<Approval, StepError> {
        let value = self.run(ask_cmd(slot, &request)?).await?;
        read_reply(value)
    }
}

/// The `ask_user` command of an approval request.
pub(crate) fn ask_cmd(
    slot: impl Into<String>,
    request: &ApprovalRequest,
) -> Result<Cmd, StepError> {
    let mut data = serde_json::Map::new();
    data.insert("type".into(), "approval_request".into());
    data.insert("tool".into(), request.tool.clone().into());
    data.insert("arguments".into(), request.arguments.clone());
    data.insert("reason".into(), request.reason.clone().into());
    data.insert("default".into(), serde_json::to_value(request.default)?);
    let expires_in_ms = request
        .expires_in
        .map(|d| d.as_millis().min(u128::from(u64::MAX)) as u64);
    if let Some(ms) = expires_in_ms {
        data.insert("expires_in_ms".into(), ms.into());
    }
    let text = format!(
        "Approval needed to run `{}`: {}. Reply `approve` or `reject`.",
        request.tool, request.reason
    );
    let message = Message::new(Role::Agent, vec![Part::text(text), Part::data(data)]);
    let on_expiry = serde_json::json!({ "decision": request.default, "expired": true });
    let kind = CmdKind::AskUser {
        slot: slot.into(),
        message,
        expires_in_ms,
        on_expiry: Some(on_expiry),
    };
    Ok(Cmd::new(kind))
}
