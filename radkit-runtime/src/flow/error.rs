//! Errors a step can meet: failed effects, unknown outcomes, non-determinism, and its own.

use serde::{Deserialize, Serialize};

use super::InvocationId;

/// Whether an effect error is worth retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Timeouts, rate limits, unavailable services: retried.
    Transient,
    /// Validation, permission, rejection: not retried.
    Permanent,
}

/// An effect's failure, as recorded on its receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct EffectError {
    /// Retry or not.
    pub kind: ErrorKind,
    /// What went wrong.
    pub message: String,
    /// The service asked to wait this long before retrying (`Retry-After`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl EffectError {
    /// A transient error.
    pub fn transient(message: impl Into<String>) -> Self {
        EffectError {
            kind: ErrorKind::Transient,
            message: message.into(),
            retry_after_ms: None,
        }
    }

    /// A permanent error.
    pub fn permanent(message: impl Into<String>) -> Self {
        EffectError {
            kind: ErrorKind::Permanent,
            message: message.into(),
            retry_after_ms: None,
        }
    }

    /// With a `Retry-After` hint.
    pub fn retry_after(mut self, delay: std::time::Duration) -> Self {
        self.retry_after_ms = Some(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// True for transient errors.
    pub fn is_transient(&self) -> bool {
        self.kind == ErrorKind::Transient
    }
}

/// Why a step did not produce a transition. Most variants end the task as `failed` with this text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StepError {
    /// A command failed (after its retries).
    #[error("{what} failed: {error}")]
    Effect {
        /// The command (`tool \`charge_card\``).
        what: String,
        /// The error on its receipt.
        error: EffectError,
    },
    /// An `AtMostOnce` command was issued before a crash and has no receipt: it may or may not have run.
    #[error("outcome unknown: {what} (invocation {id}) was issued before a crash and has no receipt; its policy is at-most-once, so it is not run again")]
    OutcomeUnknown {
        /// The command.
        what: String,
        /// Its id.
        id: InvocationId,
    },
    /// On replay, the step issued another command than the journal recorded at this position.
    #[error("non-determinism in skill `{skill}`, step `{step}`, command #{position}: the journal recorded {recorded} but the step now issues {issued}")]
    NonDeterminism {
        /// Skill id.
        skill: String,
        /// Step name.
        step: String,
        /// Ordinal of the command within the step visit.
        position: u32,
        /// What the journal has.
        recorded: String,
        /// What the step issued now.
        issued: String,
    },
    /// A payload, receipt or answer could not be decoded into the expected type.
    #[error("decode error: {0}")]
    Decode(String),
    /// The step's own error.
    #[error("{0}")]
    Failed(String),
    /// A human (or a gate) declined: the task ends `rejected`, a business outcome.
    #[error("{0}")]
    Rejected(String),
    /// The task was canceled while the step ran.
    #[error("task canceled")]
    Canceled,
    /// A message sent while the step ran interrupts the task (the skill declared
    /// `WhileWorking::Interrupt`): the visit stops, and the skill's interrupt step gets the message.
    #[doc(hidden)]
    #[error("interrupted by a new message")]
    Interrupted,
    /// The step must wait (a timer or a question) and will be re-run from its top when woken.
    #[doc(hidden)]
    #[error("step suspended")]
    Suspended,
    /// The engine stopped (shutdown or an injected crash) while the step ran; nothing more is written.
    #[doc(hidden)]
    #[error("engine halted")]
    Halted,
}

impl StepError {
    /// A step error with a message.
    pub fn msg(message: impl std::fmt::Display) -> Self {
        StepError::Failed(message.to_string())
    }
}

impl From<serde_json::Error> for StepError {
    fn from(error: serde_json::Error) -> Self {
        StepError::Decode(error.to_string())
    }
}

impl From<String> for StepError {
    fn from(message: String) -> Self {
        StepError::Failed(message)
    }
}

impl From<&str> for StepError {
    fn from(message: &str) -> Self {
        StepError::Failed(message.to_owned())
    }
}
