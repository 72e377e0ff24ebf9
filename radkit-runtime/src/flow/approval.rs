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

/// How many times an approval question is asked again after replies that are neither approve nor
/// reject, before the step fails.
pub const MAX_UNCLEAR_REPLIES: u32 = 5;

/// A reply, read.
pub(crate) enum Reply {
    /// Approve or reject.
    Clear(Approval),
    /// Neither: the reply's text, to quote when asking again.
    Unclear(String),
}

fn decision_of(value: &serde_json::Value) -> Option<Decision> {
    match value.as_str()?.to_ascii_lowercase().as_str() {
        "approve" | "approved" => Some(Decision::Approve),
        "reject" | "rejected" => Some(Decision::Reject),
        _ => None,
    }
}

/// Read a reply: a data part with `"decision"`, or text starting with approve/yes/ok or reject/no.
/// The expiry default (`{"decision", "expired": true}`) is read too.
pub(crate) fn read_reply(value: serde_json::Value) -> Result<Reply, StepError> {
    if let Some(decision) = value.get("decision") {
        let decision = decision_of(decision).ok_or_else(|| {
            StepError::Decode(format!("an approval receipt has the decision {decision}"))
        })?;
        let expired = value
            .get("expired")
            .and_then(|e| e.as_bool())
            .unwrap_or(false);
        return Ok(Reply::Clear(Approval {
            decision,
            expired,
            note: String::new(),
        }));
    }
    let message: Message = serde_json::from_value(value)?;
    let note = message.joined_texts();
    for part in &message.parts {
        if let Part::Data { data, .. } = part {
            if let Some(decision) = data.get("decision") {
                return Ok(match decision_of(decision) {
                    Some(decision) => Reply::Clear(Approval {
                        decision,
                        expired: false,
                        note,
                    }),
                    None => Reply::Unclear(format!("{{\"decision\": {decision}}}")),
                });
            }
        }
    }
    let first = note
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase();
    let decision = match first.as_str() {
        "approve" | "approved" | "yes" | "ok" | "y" => Decision::Approve,
        "reject" | "rejected" | "no" | "deny" | "n" => Decision::Reject,
        _ => return Ok(Reply::Unclear(note)),
    };
    Ok(Reply::Clear(Approval {
        decision,
        expired: false,
        note,
    }))
}

impl StepCtx {
    /// Ask a human to approve `request`; the task waits in `input-required` with the proposed action
    /// as a data part (`{"type": "approval_request", "tool", "arguments", "reason", "default",
    /// "expires_in_ms"}`). Returns the decision; journaled, so a replay returns the same one. A reply
    /// that is neither approve nor reject is answered with the question again (each a journaled
    /// command of its own, each with the full expiry), at most [`MAX_UNCLEAR_REPLIES`] times.
    pub async fn approve(
        &self,
        slot: impl Into<String>,
        request: ApprovalRequest,
    ) -> Result<Approval, StepError> {
        let slot = slot.into();
        decide(&slot, &request, |_, cmd| Box::pin(self.run(cmd))).await
    }
}

/// Ask until the reply is clear; `ask(round, cmd)` runs the `round`-th question (0 first).
pub(crate) async fn decide<'a, F>(
    slot: &str,
    request: &ApprovalRequest,
    mut ask: F,
) -> Result<Approval, StepError>
where
    F: FnMut(u32, Cmd) -> futures::future::BoxFuture<'a, Result<serde_json::Value, StepError>>,
{
    let mut unclear: Option<String> = None;
    for round in 0..=MAX_UNCLEAR_REPLIES {
        let value = ask(round, ask_cmd(slot, request, unclear.as_deref())?).await?;
        match read_reply(value)? {
            Reply::Clear(approval) => return Ok(approval),
            Reply::Unclear(note) => unclear = Some(note),
        }
    }
    Err(StepError::msg(format!(
        "no clear answer to the approval of `{}` after {} replies; the last was: {}",
        request.tool,
        MAX_UNCLEAR_REPLIES + 1,
        unclear.unwrap_or_default()
    )))
}

/// The `ask_user` command of an approval request; `unclear` quotes a previous reply that was
/// neither approve nor reject.
pub(crate) fn ask_cmd(
    slot: &str,
    request: &ApprovalRequest,
    unclear: Option<&str>,
) -> Result<Cmd, StepError> {
    let mut data = serde_json::Map::new();
    data.insert("type".into(), "approval_request".into());
    data.insert("tool".into(), request.tool.clone().into());
    data.insert("arguments".into(), request.arguments.clone());
    data.insert("reason".into(), request.reason.clone().into());
    data.insert("default".into(), serde_json::to_value(request.default)?);
    let expires_in_ms = request
        .expires_in
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    if let Some(ms) = expires_in_ms {
        data.insert("expires_in_ms".into(), ms.into());
    }
    let mut text = format!(
        "Approval needed to run `{}`: {}. Reply `approve` or `reject`.",
        request.tool, request.reason
    );
    if let Some(note) = unclear {
        let quoted: String = note.chars().take(200).collect();
        text = format!("The reply `{quoted}` is neither approve nor reject. {text}");
    }
    let message = Message::new(Role::Agent, vec![Part::text(text), Part::data(data)]);
    let on_expiry = serde_json::json!({ "decision": request.default, "expired": true });
    let kind = CmdKind::AskUser {
        slot: slot.to_owned(),
        message,
        expires_in_ms,
        on_expiry: Some(on_expiry),
    };
    Ok(Cmd::new(kind))
}
