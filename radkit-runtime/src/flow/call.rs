//! Calls from a step to another A2A agent (`ctx.agent("planner")`) or to a child skill of the same
//! engine (`ctx.skill("summarize")`): one journaled command each, whose receipt is the callee's
//! [`AgentReply`] once its task ends or asks for input. The engine journals the callee's task id as
//! soon as it answers, derives the outgoing `messageId` from the command's id, and waits without a
//! step in memory (see `radkit-runtime/src/engine/call/mod.rs`).

use serde::{Deserialize, Serialize};

use super::{CallFuture, Cmd, CmdKind, RetryPolicy, StepCtx, StepError};
use crate::model::{Artifact, Message, Part, Role, Task, TaskState};

/// What a called agent or child skill answered: its task as it stood when the call settled (ended,
/// or asking for input).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentReply {
    /// The callee's task id (`None` when the agent answered with a message and made no task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The callee's context id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// The callee task's state: `completed`, or `input-required` (answer it with `.reply(..)`); the
    /// failing states come back as an [`AgentError`].
    pub state: TaskState,
    /// The status message: the answer, the question, or the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// The artifacts the callee produced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
}

impl AgentReply {
    /// The reply a task stands for.
    pub fn from_task(task: Task) -> Self {
        AgentReply {
            message: task.status.message.or_else(|| {
                // Some agents leave the answer in the history only.
                task.history
                    .iter()
                    .rev()
                    .find(|m| m.role == Role::Agent)
                    .cloned()
            }),
            task_id: Some(task.id),
            context_id: Some(task.context_id),
            state: task.status.state,
            artifacts: task.artifacts,
        }
    }

    /// The reply of an agent that answered with a message and no task.
    pub fn from_message(message: Message) -> Self {
        AgentReply {
            task_id: message.task_id.clone(),
            context_id: message.context_id.clone(),
            state: TaskState::Completed,
            message: Some(message),
            artifacts: Vec::new(),
        }
    }

    /// True when the callee asks for input: answer with `.reply(&reply, ..)` or ask your own client.
    pub fn needs_input(&self) -> bool {
        matches!(
            self.state,
            TaskState::InputRequired | TaskState::AuthRequired
        )
    }

    /// The text of the status message, then of every text part of the artifacts, one per line.
    pub fn text(&self) -> String {
        let mut texts: Vec<String> = Vec::new();
        if let Some(m) = &self.message {
            let t = m.joined_texts();
            if !t.is_empty() {
                texts.push(t);
            }
        }
        for artifact in &self.artifacts {
            for part in &artifact.parts {
                if let Part::Text { text, .. } = part {
                    texts.push(text.clone());
                }
            }
        }
        texts.join("\n")
    }
}

/// A call that settled in a state the step did not ask for, or could not be made.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The callee's task failed.
    #[error("{callee} failed: {}", reason(.reply))]
    Failed {
        /// `agent \`planner\`` or `skill \`summarize\``.
        callee: String,
        /// Its task.
        reply: AgentReply,
    },
    /// The callee rejected the task.
    #[error("{callee} rejected the task: {}", reason(.reply))]
    Rejected {
        /// The callee.
        callee: String,
        /// Its task.
        reply: AgentReply,
    },
    /// The callee's task was canceled (by someone else than this task).
    #[error("{callee} canceled the task: {}", reason(.reply))]
    Canceled {
        /// The callee.
        callee: String,
        /// Its task.
        reply: AgentReply,
    },
    /// The call itself failed (the agent is unknown or unreachable, the step was canceled, ...).
    #[error(transparent)]
    Step(#[from] StepError),
}

fn reason(reply: &AgentReply) -> String {
    match reply.text() {
        t if t.is_empty() => "no reason given".to_owned(),
        t => t,
    }
}

impl From<AgentError> for StepError {
    fn from(e: AgentError) -> Self {
        match e {
            AgentError::Step(e) => e,
            AgentError::Rejected { .. } => StepError::Rejected(e.to_string()),
            other => StepError::Failed(other.to_string()),
        }
    }
}

/// A call to prepare; see [`StepCtx::agent`] and [`StepCtx::skill`].
#[must_use = "call `.send(message).await`"]
pub struct AgentCall<'a> {
    ctx: &'a StepCtx,
    callee: Callee,
    retry: Option<RetryPolicy>,
    stream: bool,
    timeout: Option<std::time::Duration>,
}

enum Callee {
    Agent(String),
    Skill(String),
}

impl<'a> AgentCall<'a> {
    pub(super) fn agent(ctx: &'a StepCtx, name: String) -> Self {
        AgentCall {
            ctx,
            callee: Callee::Agent(name),
            retry: None,
            stream: false,
            timeout: None,
        }
    }

    pub(super) fn skill(ctx: &'a StepCtx, id: String) -> Self {
        AgentCall {
            ctx,
            callee: Callee::Skill(id),
            retry: None,
            stream: false,
            timeout: None,
        }
    }

    /// With another retry policy for starting the call (the callee unreachable, a 5xx).
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Follow the callee while it works: its status messages reach this task's clients as this
    /// task's progress, live. The step stays in memory while the callee works (without `stream`
    /// the caller waits with none); after a crash the call follows the same callee task again.
    pub fn stream(mut self) -> Self {
        self.stream = true;
        self
    }

    /// Give up on the callee if it has not finished (ended or asked for input) this long after the
    /// call is issued: the step gets an error saying so and the callee's task is canceled. The
    /// deadline is fixed when the call is journaled, so a restart keeps it. Without this, the
    /// engine's default applies (`EngineBuilder::call_timeout`, a day unless set);
    /// `Duration::MAX` means no deadline.
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Send `message` (a `Message`, or text) as a new task of the callee and wait for it to end or
    /// ask for input. The call takes its position (and InvocationId) now.
    pub fn send(self, message: impl Into<Outgoing>) -> CallFuture<AgentReply, AgentError> {
        let mut message = message.into().0;
        message.role = Role::User;
        message.task_id = None;
        self.call(message)
    }

    /// Answer a callee that asked for input (`reply.needs_input()`): `message` goes to its task,
    /// and the call waits again. The call takes its position (and InvocationId) now.
    pub fn reply(
        self,
        to: &AgentReply,
        message: impl Into<Outgoing>,
    ) -> CallFuture<AgentReply, AgentError> {
        let mut message = message.into().0;
        message.role = Role::User;
        message.task_id = to.task_id.clone();
        message.context_id = to.context_id.clone();
        if to.task_id.is_none() {
            // Nothing to answer: the call takes no position, as its replay takes none.
            let error = StepError::Failed(format!(
                "{} made no task to reply to; send a new message instead",
                self.what()
            ));
            return CallFuture::new(async move { Err(error.into()) });
        }
        self.call(message)
    }

    fn what(&self) -> String {
        match &self.callee {
            Callee::Agent(a) => format!("agent `{a}`"),
            Callee::Skill(s) => format!("skill `{s}`"),
        }
    }

    fn call(self, message: Message) -> CallFuture<AgentReply, AgentError> {
        let what = self.what();
        let stream = self.stream;
        let timeout_ms = self
            .timeout
            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
        let kind = match self.callee {
            Callee::Agent(agent) => CmdKind::Agent {
                agent,
                message,
                stream,
                timeout_ms,
                deadline_ms: None,
            },
            Callee::Skill(skill) => CmdKind::Skill {
                skill,
                message,
                stream,
                timeout_ms,
                deadline_ms: None,
            },
        };
        let mut cmd = Cmd::new(kind);
        if let Some(retry) = self.retry {
            cmd = cmd.retry(retry);
        }
        let call = self.ctx.run(cmd);
        CallFuture::new(async move {
            let value = call.await?;
            let reply: AgentReply = serde_json::from_value(value)
                .map_err(|e| StepError::Decode(format!("{what}: the reply is not a task: {e}")))?;
            match reply.state {
                TaskState::Failed => Err(AgentError::Failed {
                    callee: what,
                    reply,
                }),
                TaskState::Rejected => Err(AgentError::Rejected {
                    callee: what,
                    reply,
                }),
                TaskState::Canceled => Err(AgentError::Canceled {
                    callee: what,
                    reply,
                }),
                _ => Ok(reply),
            }
        })
    }
}

/// What a call sends: a [`Message`], or text (a user message of one text part).
pub struct Outgoing(Message);

impl From<Message> for Outgoing {
    fn from(m: Message) -> Self {
        Outgoing(m)
    }
}

impl From<&str> for Outgoing {
    fn from(text: &str) -> Self {
        Outgoing(Message::user_text(text))
    }
}

impl From<String> for Outgoing {
    fn from(text: String) -> Self {
        Outgoing(Message::user_text(text))
    }
}

impl From<&String> for Outgoing {
    fn from(text: &String) -> Self {
        Outgoing(Message::user_text(text.as_str()))
    }
}
