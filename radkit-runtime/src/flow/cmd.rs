//! Commands: the side effects a skill asks the engine to perform, and their identities and policies.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::{Artifact, Message};

/// Deterministic identity of one command: `(task id, step visit, ordinal within the visit)`.
///
/// The same logical command gets the same id on every replay and every worker, so tools receive it as
/// their idempotency key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InvocationId(String);

impl InvocationId {
    /// The id of the `ordinal`-th command issued in the `visit`-th step activation of `task_id`.
    pub fn derive(task_id: &str, visit: u64, ordinal: u32) -> Self {
        InvocationId(format!("{task_id}:{visit}:{ordinal}"))
    }

    /// An id from its string form (as journaled).
    pub fn from_string(id: String) -> Self {
        InvocationId(id)
    }

    /// The id as a string (use it as an idempotency key).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InvocationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What may happen to a command that was issued but has no receipt when the engine restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectPolicy {
    /// Safe to repeat with the same InvocationId: the effect deduplicates on it. Reissued.
    Idempotent,
    /// May happen more than once. Reissued with the same InvocationId.
    AtLeastOnce,
    /// Must never happen twice. Never reissued: the outcome is reported as unknown.
    AtMostOnce,
    /// Reissued like `AtLeastOnce`; its compensation runs (in reverse order) on failure or cancel.
    Compensate,
}

impl EffectPolicy {
    /// True when a command without a receipt may be run again after a crash.
    pub fn reissue_allowed(self) -> bool {
        !matches!(self, EffectPolicy::AtMostOnce)
    }
}

/// How often and how patiently a command is retried on transient errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Total attempts including the first (at least 1).
    pub max_attempts: u32,
    /// Delay before the second attempt, in milliseconds; doubled every attempt.
    pub initial_backoff_ms: u64,
    /// Upper bound of one delay, in milliseconds.
    pub max_backoff_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            initial_backoff_ms: 100,
            max_backoff_ms: 10_000,
        }
    }
}

impl RetryPolicy {
    /// Exactly one attempt.
    pub const NONE: RetryPolicy = RetryPolicy {
        max_attempts: 1,
        initial_backoff_ms: 0,
        max_backoff_ms: 0,
    };

    fn none() -> Self {
        Self::NONE
    }

    fn is_none(&self) -> bool {
        *self == Self::NONE
    }

    /// The delay before attempt `attempt` (2 = first retry): exponential, capped, with full jitter
    /// in the upper half so that retrying workers do not fall into step.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(2).min(32);
        let base = self
            .initial_backoff_ms
            .saturating_mul(1u64 << exp)
            .min(self.max_backoff_ms);
        let jitter = if base > 1 {
            fastrand::u64(0..=base / 2)
        } else {
            0
        };
        Duration::from_millis(base - base / 2 + jitter)
    }
}

/// Where the text of a streamed model call goes while the model generates it
/// (`ctx.llm(..).stream_status()` / `.stream_artifact(name)`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "to")]
pub enum StreamTo {
    /// `working` status updates, each with the next piece of text as an agent message.
    Status,
    /// Chunks of the artifact `artifact_id` (named `name`): each attempt's first chunk replaces
    /// what an earlier attempt sent, the next ones append.
    Artifact {
        /// The artifact's id.
        artifact_id: String,
        /// The artifact's name.
        name: String,
    },
}

/// The side effect itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CmdKind {
    /// Call the model registered under `model` with `input`; `schema` asks for structured output.
    Llm {
        /// Registered model name.
        model: String,
        /// Input (text, content parts, or any JSON).
        input: serde_json::Value,
        /// JSON Schema the answer must match.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schema: Option<serde_json::Value>,
        /// The registered tools the model may ask for (tool calling); its answer is then
        /// `{"answer": ..}` or `{"tool_calls": [..]}`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tools: Vec<String>,
        /// The conversation after the prompt: the model's earlier tool calls and their results.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        turns: Vec<super::Turn>,
        /// Stream the answer's text to the task's live subscribers while it is generated (not
        /// journaled: the answer is the receipt).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stream: Option<StreamTo>,
    },
    /// Call the tool registered under `tool` with `args`.
    Tool {
        /// Registered tool name.
        tool: String,
        /// Arguments.
        args: serde_json::Value,
    },
    /// Ask the user; the task waits in `input-required` and the reply is the receipt.
    AskUser {
        /// Name of the answer slot.
        slot: String,
        /// The question.
        message: Message,
        /// Stop waiting after this long and take `on_expiry` as the answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_in_ms: Option<u64>,
        /// The answer an expired question takes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on_expiry: Option<serde_json::Value>,
    },
    /// Send a message to the client.
    EmitMessage {
        /// The message.
        message: Message,
    },
    /// A `working` status update with a progress text.
    Progress {
        /// What the step is doing.
        text: String,
    },
    /// Send an artifact, or one chunk of it.
    EmitArtifact {
        /// The artifact (chunk).
        artifact: Artifact,
        /// Append to an earlier chunk with the same id.
        append: bool,
        /// Last chunk.
        last_chunk: bool,
    },
    /// Send `message` to the A2A agent declared as `agent` (`EngineBuilder::agent`) and wait for its
    /// task to end or ask for input; the receipt is an [`AgentReply`](crate::flow::AgentReply).
    Agent {
        /// The declared agent's name.
        agent: String,
        /// The message (its `messageId` is derived from the command's id when it is sent).
        message: Message,
        /// Follow the callee while it works and relay its status messages as this task's
        /// progress (the step stays in memory meanwhile); else wait with no step in memory.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        stream: bool,
        /// How long the callee may take, from when the call is issued, in milliseconds
        /// (`AgentCall::timeout`); `None` takes the engine's default (`EngineBuilder::call_timeout`)
        /// when the call is issued.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
        /// When the call gives up on its callee (ms since the epoch): fixed by the engine when it
        /// issues the call, from `timeout_ms`, and journaled with it, so a replay or a restart keeps
        /// it. `None` in a journaled command: no deadline.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline_ms: Option<i64>,
    },
    /// Start the skill `skill` of this engine as a child task with `message` and wait for it like an
    /// agent call.
    Skill {
        /// The skill's id.
        skill: String,
        /// The message (its `messageId` is derived from the command's id when it is sent).
        message: Message,
        /// As for `Agent`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        stream: bool,
        /// As for `Agent`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
        /// As for `Agent`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline_ms: Option<i64>,
    },
    /// Wait; the timer is persisted and fires after a restart too.
    Sleep {
        /// How long, in milliseconds.
        millis: u64,
    },
    /// Which of `calls` calls run together won a race (`StepCtx::race`): journaled with its
    /// receipt (`{"winner": index}`) when the first call finishes, never performed.
    Race {
        /// How many calls raced.
        calls: u32,
    },
}

impl CmdKind {
    /// Short kind name (`llm`, `tool`, ...).
    pub fn kind_name(&self) -> &'static str {
        match self {
            CmdKind::Llm { .. } => "llm",
            CmdKind::Tool { .. } => "tool",
            CmdKind::AskUser { .. } => "ask_user",
            CmdKind::EmitMessage { .. } => "emit_message",
            CmdKind::Progress { .. } => "progress",
            CmdKind::EmitArtifact { .. } => "emit_artifact",
            CmdKind::Sleep { .. } => "sleep",
            CmdKind::Agent { .. } => "agent",
            CmdKind::Skill { .. } => "skill",
            CmdKind::Race { .. } => "race",
        }
    }

    /// What the determinism guard compares on replay: the kind and the target it names. Inputs are not
    /// compared, because they may legitimately carry fresh ids (message and artifact ids).
    pub fn fingerprint(&self) -> String {
        match self {
            CmdKind::Llm { model, .. } => format!("llm `{model}`"),
            CmdKind::Tool { tool, .. } => format!("tool `{tool}`"),
            CmdKind::AskUser { slot, .. } => format!("ask_user `{slot}`"),
            CmdKind::Agent { agent, .. } => format!("agent `{agent}`"),
            CmdKind::Skill { skill, .. } => format!("skill `{skill}`"),
            other => other.kind_name().to_owned(),
        }
    }

    /// True for a call to another agent or a child skill: started once, then waited on.
    pub fn is_call(&self) -> bool {
        matches!(self, CmdKind::Agent { .. } | CmdKind::Skill { .. })
    }

    /// True for a call that follows its callee and relays its progress.
    pub fn streams(&self) -> bool {
        matches!(
            self,
            CmdKind::Agent { stream: true, .. } | CmdKind::Skill { stream: true, .. }
        )
    }

    /// True for effects the engine performs itself by writing the journal (emits, progress): their
    /// journal entry is their receipt.
    pub fn is_journal_effect(&self) -> bool {
        matches!(
            self,
            CmdKind::EmitMessage { .. } | CmdKind::Progress { .. } | CmdKind::EmitArtifact { .. }
        )
    }
}

/// A command: an effect with its policy and retry rules. Its [`InvocationId`] is assigned by the engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cmd {
    /// The effect.
    pub kind: CmdKind,
    /// Crash policy.
    pub policy: EffectPolicy,
    /// Retry policy.
    #[serde(
        default = "RetryPolicy::none",
        skip_serializing_if = "RetryPolicy::is_none"
    )]
    pub retry: RetryPolicy,
}

impl Cmd {
    /// A command with the default policy for its kind: LLM calls are `AtLeastOnce`, tools `AtMostOnce`
    /// until the tool registry says otherwise, engine effects and calls `Idempotent` (a call's
    /// `messageId` is derived from its id, and a task is resumed by the journaled callee id).
    pub fn new(kind: CmdKind) -> Self {
        let policy = match kind {
            CmdKind::Llm { .. } => EffectPolicy::AtLeastOnce,
            CmdKind::Tool { .. } => EffectPolicy::AtMostOnce,
            _ => EffectPolicy::Idempotent,
        };
        let retry = match kind {
            CmdKind::Llm { .. } | CmdKind::Tool { .. } => RetryPolicy::default(),
            // A peer restarting is worth waiting for: about two minutes of attempts.
            CmdKind::Agent { .. } | CmdKind::Skill { .. } => RetryPolicy {
                max_attempts: 10,
                initial_backoff_ms: 250,
                max_backoff_ms: 30_000,
            },
            _ => RetryPolicy::NONE,
        };
        Cmd {
            kind,
            policy,
            retry,
        }
    }

    /// An LLM call.
    pub fn llm(model: impl Into<String>, input: serde_json::Value) -> Self {
        Cmd::new(CmdKind::Llm {
            model: model.into(),
            input,
            schema: None,
            tools: Vec::new(),
            turns: Vec::new(),
            stream: None,
        })
    }

    /// A tool call.
    pub fn tool(tool: impl Into<String>, args: serde_json::Value) -> Self {
        Cmd::new(CmdKind::Tool {
            tool: tool.into(),
            args,
        })
    }

    /// Ask the user.
    pub fn ask_user(slot: impl Into<String>, message: Message) -> Self {
        Cmd::new(CmdKind::AskUser {
            slot: slot.into(),
            message,
            expires_in_ms: None,
            on_expiry: None,
        })
    }

    /// Emit a message.
    pub fn emit_message(message: Message) -> Self {
        Cmd::new(CmdKind::EmitMessage { message })
    }

    /// Emit a whole artifact.
    pub fn emit_artifact(artifact: Artifact) -> Self {
        Cmd::new(CmdKind::EmitArtifact {
            artifact,
            append: false,
            last_chunk: true,
        })
    }

    /// Call the A2A agent declared as `agent`; the result is an `AgentReply` (see `StepCtx::agent`).
    pub fn agent(agent: impl Into<String>, message: Message) -> Self {
        Cmd::new(CmdKind::Agent {
            agent: agent.into(),
            message,
            stream: false,
            timeout_ms: None,
            deadline_ms: None,
        })
    }

    /// Start the skill `skill` as a child task; the result is an `AgentReply` (see
    /// `StepCtx::skill`).
    pub fn skill(skill: impl Into<String>, message: Message) -> Self {
        Cmd::new(CmdKind::Skill {
            skill: skill.into(),
            message,
            stream: false,
            timeout_ms: None,
            deadline_ms: None,
        })
    }

    /// Sleep.
    pub fn sleep(duration: Duration) -> Self {
        Cmd::new(CmdKind::Sleep {
            millis: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// With another effect policy.
    pub fn policy(mut self, policy: EffectPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// With another retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }
}
