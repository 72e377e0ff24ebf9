//! The journal: the append-only log of one task, the single source of truth. Task status, history and
//! artifacts are projections of it (the engine's `project_task` and `stream_event`). This module owns the entry shapes only.

use serde::{Deserialize, Serialize};

use crate::flow::{Cmd, EffectError, Event, InvocationId, PermissionMode, Receipt};
use crate::model::{Artifact, Message, TaskState};

pub use crate::flow::StepShapes;

/// The version a task runs on after a move ([`Entry::Migrated`]), as a checkpoint carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunsOn {
    /// The skill version.
    pub version: String,
    /// Its steps' shapes.
    #[serde(default, skip_serializing_if = "StepShapes::is_empty")]
    pub steps: StepShapes,
}

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Entry {
    /// The task exists: which skill, which version, for whom.
    TaskCreated {
        /// Skill id.
        skill_id: String,
        /// Skill version at creation.
        skill_version: String,
        /// Context id.
        context_id: String,
        /// The principal that created the task (visibility is scoped to it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        principal: Option<String>,
        /// The task's permission mode.
        #[serde(default)]
        permission_mode: PermissionMode,
        /// The shapes of the version's steps (empty in journals written before they were
        /// journaled, and for skills without a step graph).
        #[serde(default, skip_serializing_if = "StepShapes::is_empty")]
        steps: StepShapes,
    },
    /// The task, at rest, moved to another version of its skill: what follows runs on `to`.
    Migrated {
        /// The version it ran on.
        from: String,
        /// The version it runs on now.
        to: String,
        /// The shapes of `to`'s steps.
        #[serde(default, skip_serializing_if = "StepShapes::is_empty")]
        steps: StepShapes,
        /// The state the task carries from here, when a migration `to` declares made it (else it
        /// carries its state unchanged).
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "present"
        )]
        state: Option<serde_json::Value>,
    },
    /// A user message arrived (part of the history).
    MessageReceived {
        /// The message.
        message: Message,
    },
    /// An event was delivered to a state: one step visit begins.
    Activated {
        /// Visit number, from 1; part of every InvocationId issued in the visit.
        visit: u64,
        /// Step name.
        step: String,
        /// The state (payload) the step runs with.
        state: serde_json::Value,
        /// The event.
        event: Event,
    },
    /// A command was issued (written before it runs).
    CommandIssued {
        /// Its id.
        id: InvocationId,
        /// The command.
        cmd: Cmd,
        /// Issued by a transition (its result comes back as an event), not from inside a step.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        transition: bool,
    },
    /// One attempt failed and will be retried.
    AttemptFailed {
        /// Which command.
        id: InvocationId,
        /// Attempt number.
        attempt: u32,
        /// The error.
        error: EffectError,
    },
    /// The command's final outcome.
    ReceiptRecorded {
        /// The receipt.
        receipt: Receipt,
    },
    /// A step visit ended with a transition (`to`, `goto`, `ignore`; awaits and ends have their own
    /// entries after this one).
    Transitioned {
        /// The visit that ended.
        visit: u64,
        /// How it ended.
        next: TransitionKind,
        /// The new state, for `to`, `goto` and `await_input`.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "present"
        )]
        state: Option<serde_json::Value>,
    },
    /// A timer was set for a sleep command.
    TimerSet {
        /// The sleep command.
        id: InvocationId,
        /// When it fires (ms since the Unix epoch).
        fire_at_ms: i64,
    },
    /// The task waits for user input.
    AwaitingInput {
        /// Slot name.
        slot: String,
        /// The question.
        message: Message,
        /// The state the reply is delivered to; `None` when an `ask` command inside a step waits.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "present"
        )]
        resume: Option<serde_json::Value>,
        /// The ask command being answered, when `resume` is `None`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ask: Option<InvocationId>,
    },
    /// A message was sent to the client.
    MessageEmitted {
        /// The message.
        message: Message,
    },
    /// A `working` progress update.
    Progress {
        /// The update's message.
        message: Message,
    },
    /// An artifact (chunk) was sent to the client.
    ArtifactEmitted {
        /// The artifact.
        artifact: Artifact,
        /// Append to an earlier chunk.
        append: bool,
        /// Last chunk.
        last_chunk: bool,
    },
    /// The task's state changed (non-terminal).
    StatusChanged {
        /// New state.
        state: TaskState,
    },
    /// A cancel was requested.
    CancelRequested,
    /// A user message arrived while the task worked and was kept (the skill queues such messages or
    /// is interrupted by them; part of the history).
    MessageQueued {
        /// The message.
        message: Message,
        /// It interrupts the task (else it waits for the task's next question).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        interrupt: bool,
    },
    /// A queued message was handed to the skill: as the answer to the question just asked, or (an
    /// interrupting one) to the skill's interrupt step, whose visit follows.
    QueuedDelivered {
        /// The queued message's id.
        message_id: String,
    },
    /// A compensation ran for a `Compensate` command.
    Compensated {
        /// The compensated command.
        id: InvocationId,
        /// Its outcome.
        outcome: Result<serde_json::Value, EffectError>,
    },
    /// Everything replay needs from the journal so far, written after a `goto` transition every
    /// `checkpoint_every` visits: a task is reloaded from its first entry and its last checkpoint, so
    /// resuming a long-running task costs the same as resuming a short one.
    Checkpoint {
        /// The visit that just ended.
        visit: u64,
        /// The state the `goto` moved to.
        state: serde_json::Value,
        /// The task's status.
        status: TaskState,
        /// `Compensate` commands with successful receipts, in issue order (what a cancel undoes).
        compensable: Vec<Compensable>,
        /// The version the task runs on, when it moved since it was created (the `migrated`
        /// entries before a checkpoint are not read again).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runs_on: Option<RunsOn>,
    },
    /// A call to another agent or to a child skill was accepted: the task it created (journaled as
    /// soon as the callee answers, so a crash never starts a second one: the call resumes by this id).
    CallStarted {
        /// The call command.
        id: InvocationId,
        /// The callee's task id.
        task_id: String,
        /// The callee's context id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context_id: Option<String>,
        /// The callee was asked to post its task's updates to this engine's call webhook.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        webhook: bool,
    },
    /// The task ended.
    Terminal {
        /// Final state.
        state: TaskState,
        /// Final agent message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<Message>,
    },
}

impl Entry {
    /// The entry's kind name (for messages and logs; stores derive their columns from the entry itself).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Entry::TaskCreated { .. } => "task_created",
            Entry::Migrated { .. } => "migrated",
            Entry::MessageReceived { .. } => "message_received",
            Entry::Activated { .. } => "activated",
            Entry::CommandIssued { .. } => "command_issued",
            Entry::AttemptFailed { .. } => "attempt_failed",
            Entry::ReceiptRecorded { .. } => "receipt_recorded",
            Entry::Transitioned { .. } => "transitioned",
            Entry::TimerSet { .. } => "timer_set",
            Entry::AwaitingInput { .. } => "awaiting_input",
            Entry::MessageEmitted { .. } => "message_emitted",
            Entry::Progress { .. } => "progress",
            Entry::ArtifactEmitted { .. } => "artifact_emitted",
            Entry::StatusChanged { .. } => "status_changed",
            Entry::CancelRequested => "cancel_requested",
            Entry::MessageQueued { .. } => "message_queued",
            Entry::QueuedDelivered { .. } => "queued_delivered",
            Entry::Compensated { .. } => "compensated",
            Entry::Checkpoint { .. } => "checkpoint",
            Entry::CallStarted { .. } => "call_started",
            Entry::Terminal { .. } => "terminal",
        }
    }
}

/// How a step visit ended, as its `transitioned` entry records it (stored as the snake-case name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransitionKind {
    /// To a new state, waiting for the next event.
    To,
    /// To a new state, entered at once.
    Goto,
    /// To a state that waits for a user message.
    AwaitInput,
    /// The task completed.
    Complete,
    /// The task failed.
    Fail,
    /// The task was rejected.
    Reject,
    /// The event was ignored.
    Ignore,
    /// The skill was told of a cancel.
    Cancel,
    /// The visit was interrupted by a message sent while it ran; it made no transition.
    Interrupt,
}

impl TransitionKind {
    /// The transitions that end the task (its terminal entry follows, after owed compensations).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            TransitionKind::Complete | TransitionKind::Fail | TransitionKind::Reject
        )
    }

    /// The journal name.
    pub fn as_str(self) -> &'static str {
        match self {
            TransitionKind::To => "to",
            TransitionKind::Goto => "goto",
            TransitionKind::AwaitInput => "await_input",
            TransitionKind::Complete => "complete",
            TransitionKind::Fail => "fail",
            TransitionKind::Reject => "reject",
            TransitionKind::Ignore => "ignore",
            TransitionKind::Cancel => "cancel",
            TransitionKind::Interrupt => "interrupt",
        }
    }
}

impl std::fmt::Display for TransitionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<S> From<&crate::flow::Next<S>> for TransitionKind {
    fn from(next: &crate::flow::Next<S>) -> Self {
        use crate::flow::Next;
        match next {
            Next::To(_) => TransitionKind::To,
            Next::Goto(_) => TransitionKind::Goto,
            Next::AwaitInput { .. } => TransitionKind::AwaitInput,
            Next::Complete { .. } => TransitionKind::Complete,
            Next::Fail { .. } => TransitionKind::Fail,
            Next::Reject { .. } => TransitionKind::Reject,
            Next::Ignore => TransitionKind::Ignore,
        }
    }
}

/// A command a cancel would compensate, as a checkpoint carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compensable {
    /// The command's id.
    pub id: InvocationId,
    /// The command.
    pub cmd: Cmd,
    /// Its successful receipt.
    pub receipt: Receipt,
}

/// A present field is `Some`, even when it holds JSON `null` (a unit state is a real state).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(d).map(Some)
}

/// A stored entry with its position and time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalRecord {
    /// Position, from 1, strictly increasing without gaps.
    pub seq: u64,
    /// When it was appended (ms since the Unix epoch).
    pub at_ms: i64,
    /// The entry.
    pub entry: Entry,
}

/// The deepest JSON nesting a message may have (the message object is level 1). The journal stores a
/// message inside up to about ten levels of its own (a row, an entry, a receipt's outcome, a skill's
/// state), and its decoder refuses anything deeper than 128 levels; this limit keeps every message
/// that is accepted readable back, with room for a skill's state around it. Checked when a message
/// enters the engine.
pub const MAX_MESSAGE_DEPTH: usize = 64;

/// How deeply `value` nests, counting every value as a level (a scalar is 1, `[]` and `{}` are 1,
/// `[[1]]` is 3): one more than the decoder's count of arrays and objects when the deepest value is a
/// scalar, so the limit errs on the safe side.
pub fn json_depth(value: &serde_json::Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((value, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        match value {
            serde_json::Value::Array(items) => stack.extend(items.iter().map(|v| (v, depth + 1))),
            serde_json::Value::Object(map) => stack.extend(map.values().map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    deepest
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
