//! `StepCtx`: a step's only door to the world. Every call becomes a journaled command through the
//! engine's [`Invoker`], so a step re-run on replay gets the recorded outcome instead of a second effect.
//!
//! Calls may run in parallel ([`StepCtx::all`], [`crate::join!`]). A call's InvocationId is taken
//! when the call is first polled, so the ids of a batch follow the order in which its calls are
//! first polled: `join!` and `ctx.all` poll their arguments in argument order, live and on replay.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{Cmd, CmdKind, RetryPolicy, StepError, StepResult, Transition};
use crate::model::{Artifact, Content, Message, Part};

/// Runs or replays commands for one step visit. Implemented by the engine; tests may implement it to
/// drive a skill without an engine.
#[async_trait]
pub trait Invoker: Send + Sync {
    /// Run `cmd` (or return its recorded outcome on replay) and return the outcome's value.
    async fn invoke(&self, cmd: Cmd) -> Result<serde_json::Value, StepError>;
}

/// The context handed to every step and reducer call.
#[derive(Clone)]
pub struct StepCtx {
    task_id: Arc<str>,
    context_id: Arc<str>,
    step: String,
    invoker: Arc<dyn Invoker>,
}

impl std::fmt::Debug for StepCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepCtx")
            .field("task_id", &self.task_id)
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

impl StepCtx {
    /// A context for one step visit of a task.
    pub fn new(
        task_id: Arc<str>,
        context_id: Arc<str>,
        step: String,
        invoker: Arc<dyn Invoker>,
    ) -> Self {
        StepCtx {
            task_id,
            context_id,
            step,
            invoker,
        }
    }

    /// The task's id.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The task's context id.
    pub fn context_id(&self) -> &str {
        &self.context_id
    }

    /// The running step's name.
    pub fn step(&self) -> &str {
        &self.step
    }

    /// Run any command through the journal and return its outcome value.
    pub async fn run(&self, cmd: Cmd) -> Result<serde_json::Value, StepError> {
        self.invoker.invoke(cmd).await
    }

    /// Call the model registered as `model`: `ctx.llm("critic").run::<Critique>(input).await?`.
    pub fn llm(&self, model: impl Into<String>) -> LlmCall<'_> {
        LlmCall {
            ctx: self,
            model: model.into(),
            retry: None,
        }
    }

    /// Call the tool registered as `tool`: `ctx.tool("charge_card").call::<Args, Out>(args).await?`.
    pub fn tool(&self, tool: impl Into<String>) -> ToolCall<'_> {
        ToolCall {
            ctx: self,
            tool: tool.into(),
            retry: None,
        }
    }

    /// Call the A2A agent declared as `name` (`EngineBuilder::agent`, `radkit serve --agent
    /// name=url`): `ctx.agent("planner").send("plan a trip").await?` returns its task's reply once it
    /// ends or asks for input. The call is journaled: after a crash it resumes the same remote task,
    /// and the caller waits without a step in memory.
    pub fn agent(&self, name: impl Into<String>) -> super::AgentCall<'_> {
        super::AgentCall::agent(self, name.into())
    }

    /// Start the skill `id` of this engine as a child task and wait for it like an agent call: the
    /// child has its own journal and task id (visible through `tasks/get`), and a cancel of this task
    /// cancels it.
    pub fn skill(&self, id: impl Into<String>) -> super::AgentCall<'_> {
        super::AgentCall::skill(self, id.into())
    }

    /// Report progress: a `working` status update carrying `text`, journaled.
    pub async fn progress(&self, text: impl Into<String>) -> Result<(), StepError> {
        self.run(Cmd::new(CmdKind::Progress { text: text.into() }))
            .await
            .map(drop)
    }

    /// Send a message to the client now, journaled.
    pub async fn emit_message(&self, message: Message) -> Result<(), StepError> {
        self.run(Cmd::emit_message(message)).await.map(drop)
    }

    /// Send a whole artifact now, journaled.
    pub async fn emit_artifact(&self, artifact: Artifact) -> Result<(), StepError> {
        self.run(Cmd::emit_artifact(artifact)).await.map(drop)
    }

    /// Stream an artifact named `name` in text chunks: `send` appends, `finish` sends the last chunk.
    pub fn partial_artifact(&self, name: impl Into<String>) -> ArtifactStream<'_> {
        let name = name.into();
        let id = format!("{}-{}-{}", self.task_id, self.step, name);
        ArtifactStream {
            ctx: self,
            id,
            name,
            sent: false,
        }
    }

    /// Sleep durably: the timer is journaled, the step suspends without holding memory, and it is re-run
    /// when the timer fires (also after a restart).
    pub async fn sleep(&self, duration: Duration) -> Result<(), StepError> {
        self.run(Cmd::sleep(duration)).await.map(drop)
    }

    /// Ask the user and wait (durably) for the answer, returned as `Content`.
    pub async fn ask(
        &self,
        slot: impl Into<String>,
        question: impl Into<String>,
    ) -> Result<Content, StepError> {
        let value = self
            .run(Cmd::ask_user(slot, Message::agent_text(question)))
            .await?;
        let message: Message = serde_json::from_value(value)?;
        Ok(Content::from(message))
    }

    /// Run several calls at once and return their results in the order given:
    /// `ctx.all(cities.iter().map(|c| ctx.tool("weather").call::<_, Forecast>(c)))`.
    ///
    /// Every call waits until all have finished, whatever their results. The calls are journaled
    /// together (one append for the batch), then performed in parallel, at most
    /// `EngineBuilder::max_parallel_effects` at once. Their InvocationIds follow the order of
    /// `calls` (each call takes its id when first polled, and they are first polled in that order),
    /// so a replay returns each recorded receipt to the same call and reissues only those that have
    /// none. A call inside the batch that suspends the step (a question, a sleep) lets the others
    /// finish and keep their receipts; the step then suspends when it propagates that error.
    ///
    /// Each element should be one `ctx` call (or computation followed by one): a second `ctx` call
    /// made after an `.await` in the same element takes its id when that await ends, which depends
    /// on timing — chain calls after the batch instead.
    ///
    /// Any futures will do (calls of other agents and skills, `ctx.agent(..).send(..)`, return
    /// `Result<AgentReply, AgentError>`); the bound counts model and tool calls.
    pub async fn all<I>(&self, calls: I) -> Vec<<I::Item as std::future::Future>::Output>
    where
        I: IntoIterator,
        I::Item: std::future::Future,
    {
        // `join_all` polls in order: up to 30 futures it polls a list front to back; past that a
        // `FuturesOrdered`, whose queue runs newly pushed futures in push order (pinned by the
        // engine's test of a 40-call batch).
        futures::future::join_all(calls).await
    }

    /// [`StepCtx::all`], then the first error in the order given, or every value. All calls finish
    /// first, so none is cut off mid-effect and every receipt is kept.
    pub async fn try_all<I, T, E>(&self, calls: I) -> Result<Vec<T>, E>
    where
        I: IntoIterator,
        I::Item: std::future::Future<Output = Result<T, E>>,
    {
        self.all(calls).await.into_iter().collect()
    }

    /// Finish the task successfully with a message and artifacts.
    pub fn complete<S>(
        &self,
        message: impl Into<String>,
        artifacts: Vec<Artifact>,
    ) -> StepResult<S> {
        Ok(Transition::complete(message).artifacts(artifacts))
    }

    /// Finish the task as failed.
    pub fn fail<S>(&self, reason: impl Into<String>) -> StepResult<S> {
        Ok(Transition::fail(reason))
    }

    /// Decline the task (a business outcome).
    pub fn reject<S>(&self, reason: impl Into<String>) -> StepResult<S> {
        Ok(Transition::reject(reason))
    }
}

fn schema_of<T: JsonSchema>() -> Option<serde_json::Value> {
    let schema = serde_json::to_value(schemars::schema_for!(T)).ok()?;
    match schema.get("type") {
        Some(serde_json::Value::String(t)) if t == "string" => None,
        _ => Some(schema),
    }
}

fn decode<T: DeserializeOwned>(what: &str, value: serde_json::Value) -> Result<T, StepError> {
    match serde_json::from_value::<T>(value.clone()) {
        Ok(t) => Ok(t),
        Err(first) => match &value {
            serde_json::Value::String(text) => serde_json::from_str(text.trim()).map_err(|e| {
                StepError::Decode(format!("{what}: the answer is not the expected type: {e}"))
            }),
            _ => Err(StepError::Decode(format!(
                "{what}: the answer is not the expected type: {first}"
            ))),
        },
    }
}

/// A pending model call; see [`StepCtx::llm`].
#[must_use = "call `.run(input).await`"]
pub struct LlmCall<'a> {
    ctx: &'a StepCtx,
    model: String,
    retry: Option<RetryPolicy>,
}

impl LlmCall<'_> {
    /// With another retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Run the model on `input` and decode its answer as `T`. A `String` asks for text; any other type
    /// sends its JSON Schema and asks for structured output.
    pub async fn run<T: DeserializeOwned + JsonSchema>(
        self,
        input: impl Serialize,
    ) -> Result<T, StepError> {
        let input = serde_json::to_value(input)?;
        let mut cmd = Cmd::new(CmdKind::Llm {
            model: self.model.clone(),
            input,
            schema: schema_of::<T>(),
        });
        if let Some(retry) = self.retry {
            cmd = cmd.retry(retry);
        }
        let value = self.ctx.run(cmd).await?;
        decode(&format!("model `{}`", self.model), value)
    }
}

/// A pending tool call; see [`StepCtx::tool`].
#[must_use = "call `.call(args).await`"]
pub struct ToolCall<'a> {
    ctx: &'a StepCtx,
    tool: String,
    retry: Option<RetryPolicy>,
}

impl ToolCall<'_> {
    /// With another retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Call the tool with `args` and decode its output as `O`.
    pub async fn call<A: Serialize, O: DeserializeOwned>(self, args: A) -> Result<O, StepError> {
        let mut cmd = Cmd::tool(self.tool.clone(), serde_json::to_value(args)?);
        if let Some(retry) = self.retry {
            cmd = cmd.retry(retry);
        }
        let value = self.ctx.run(cmd).await?;
        decode(&format!("tool `{}`", self.tool), value)
    }
}

/// An artifact streamed in chunks; see [`StepCtx::partial_artifact`].
pub struct ArtifactStream<'a> {
    ctx: &'a StepCtx,
    id: String,
    name: String,
    sent: bool,
}

impl ArtifactStream<'_> {
    fn chunk(&self, text: String) -> Artifact {
        Artifact {
            artifact_id: self.id.clone(),
            name: Some(self.name.clone()),
            description: None,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: None,
        }
    }

    /// Send one chunk.
    pub async fn send(&mut self, text: impl Into<String>) -> Result<(), StepError> {
        let kind = CmdKind::EmitArtifact {
            artifact: self.chunk(text.into()),
            append: self.sent,
            last_chunk: false,
        };
        self.ctx.run(Cmd::new(kind)).await?;
        self.sent = true;
        Ok(())
    }

    /// Send the last chunk.
    pub async fn finish(self, text: impl Into<String>) -> Result<(), StepError> {
        let kind = CmdKind::EmitArtifact {
            artifact: self.chunk(text.into()),
            append: self.sent,
            last_chunk: true,
        };
        self.ctx.run(Cmd::new(kind)).await.map(drop)
    }
}
