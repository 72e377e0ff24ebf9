//! `StepCtx`: a step's only door to the world. Every call becomes a journaled command through the
//! engine's [`Invoker`], so a step re-run on replay gets the recorded outcome instead of a second effect.
//!
//! A call takes its position in the step visit, and so its InvocationId, when it is made — when
//! `ctx.tool(..).call(..)`, `ctx.llm(..).run(..)`, `ctx.agent(..).send(..)` ... is evaluated, in
//! program order — not when it is first polled: the ids of calls run together (`ctx.all`,
//! `join!`, `ctx.race`) never depend on the order in which a scheduler polls them. A call must be
//! awaited inside its step's own future (not in a spawned task) and finish before the step
//! returns; the engine fails the step otherwise.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
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
    /// Run `cmd`, the call made at `position` of the visit (0, 1, ... in the order the step made
    /// its calls), or return its recorded outcome on replay, and return the outcome's value.
    async fn invoke(&self, position: u32, cmd: Cmd) -> Result<serde_json::Value, StepError>;

    /// The value journaled by [`Invoker::record`] at `position` for `cmd` (a decision the step
    /// made, such as the winner of a race), if any. An invoker that journals nothing has none.
    fn recorded(&self, position: u32, cmd: &Cmd) -> Result<Option<serde_json::Value>, StepError> {
        let _ = (position, cmd);
        Ok(None)
    }

    /// Run `cmd` at `position`, a position the step took before it knew the command (a streamed
    /// model call takes the next one for the journaled answer that follows it): its InvocationId
    /// never depends on which effect returned first, so it may start while other calls of a batch
    /// (`ctx.all`, `join!`) run. The default runs it as [`invoke`](Self::invoke) does.
    async fn invoke_reserved(
        &self,
        position: u32,
        cmd: Cmd,
    ) -> Result<serde_json::Value, StepError> {
        self.invoke(position, cmd).await
    }

    /// Journal `cmd` at `position` with `value` as its outcome, performing nothing, and give the
    /// commands made at the `abandoned` positions that have no outcome yet an `abandoned` one (the
    /// losers of a race), in one durable write.
    async fn record(
        &self,
        position: u32,
        cmd: Cmd,
        value: serde_json::Value,
        abandoned: &[u32],
    ) -> Result<(), StepError> {
        let _ = (position, cmd, value, abandoned);
        Ok(())
    }

    /// Stop the visit with `error` whatever the step does with it (every call of a race waits; a
    /// call made where its id would not be replayed fails the visit).
    fn stop(&self, error: &StepError) {
        let _ = error;
    }
}

/// The context handed to every step and reducer call.
#[derive(Clone)]
pub struct StepCtx {
    task_id: Arc<str>,
    context_id: Arc<str>,
    step: String,
    invoker: Arc<dyn Invoker>,
    /// The next position a call takes (shared by the clones of one visit's context).
    positions: Arc<AtomicU32>,
    /// How many calls made by the step are still alive (made, and neither finished nor dropped).
    alive: Arc<AtomicU32>,
}

/// Counts one call as alive until its future is dropped (see [`StepCtx::calls_alive`]).
struct Alive(Arc<AtomicU32>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A ctx call (`ctx.tool(..).call(..)`, `ctx.llm(..).run(..)`, `ctx.ask(..)`, ...): it took its
/// position in the step, and so its InvocationId, when it was made; its effect starts when it is
/// first polled. Calls of one output type are one type, so they can be stored, put in a `Vec` or
/// an array, and raced (`ctx.race`) without boxing.
#[must_use = "a ctx call does nothing until it is awaited"]
pub struct CallFuture<T, E = StepError>(
    std::pin::Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'static>>,
);

impl<T, E> CallFuture<T, E> {
    /// A call that runs `future` (for wrappers around ctx calls).
    pub fn new(future: impl Future<Output = Result<T, E>> + Send + 'static) -> Self {
        CallFuture(Box::pin(future))
    }
}

impl<T, E> Future for CallFuture<T, E> {
    type Output = Result<T, E>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

impl<T, E> std::fmt::Debug for CallFuture<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallFuture")
    }
}

/// The winner's index in the calls raced, and its result.
pub type Raced<T, E> = (usize, Result<T, E>);

/// A race of ctx calls (see [`StepCtx::race`]): the winner's index and result.
#[must_use = "a race does nothing until it is awaited"]
pub struct RaceFuture<T, E = StepError>(
    std::pin::Pin<Box<dyn Future<Output = Raced<T, E>> + Send + 'static>>,
);

impl<T, E> Future for RaceFuture<T, E> {
    type Output = Raced<T, E>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

impl<T, E> std::fmt::Debug for RaceFuture<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RaceFuture")
    }
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
            positions: Arc::new(AtomicU32::new(0)),
            alive: Arc::new(AtomicU32::new(0)),
        }
    }

    /// How many calls the step made whose futures are still alive. A step's locals are dropped
    /// when it returns, so a call alive after that was moved where the step no longer owns it (a
    /// spawned task, a static): the engine fails such a step.
    pub fn calls_alive(&self) -> u32 {
        self.alive.load(Ordering::SeqCst)
    }

    /// How many positions the step's calls have taken (the next call takes this one).
    pub fn positions_taken(&self) -> u32 {
        self.positions.load(Ordering::SeqCst)
    }

    fn take_position(&self) -> u32 {
        self.positions.fetch_add(1, Ordering::SeqCst)
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

    /// Run any command through the journal and return its outcome value. The command takes its
    /// position (and InvocationId) now, when `run` is called; the effect starts when the returned
    /// future is first polled.
    pub fn run(&self, cmd: Cmd) -> CallFuture<serde_json::Value> {
        self.reserve().run(cmd)
    }

    /// Take the next position now for a command made later (one that depends on an earlier
    /// call's answer but must keep its place when calls run in parallel).
    fn reserve(&self) -> Reserved {
        Reserved {
            position: self.take_position(),
            invoker: self.invoker.clone(),
            alive: self.alive.clone(),
        }
    }

    /// Call the model registered as `model`: `ctx.llm("critic").run::<Critique>(input).await?`.
    pub fn llm(&self, model: impl Into<String>) -> LlmCall<'_> {
        LlmCall {
            ctx: self,
            model: model.into(),
            retry: None,
            tools: Vec::new(),
            max_rounds: DEFAULT_TOOL_ROUNDS,
            stream: None,
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
    pub fn progress(&self, text: impl Into<String>) -> CallFuture<()> {
        let call = self.run(Cmd::new(CmdKind::Progress { text: text.into() }));
        CallFuture::new(async move { call.await.map(drop) })
    }

    /// Send a message to the client now, journaled.
    pub fn emit_message(&self, message: Message) -> CallFuture<()> {
        let call = self.run(Cmd::emit_message(message));
        CallFuture::new(async move { call.await.map(drop) })
    }

    /// Send a whole artifact now, journaled.
    pub fn emit_artifact(&self, artifact: Artifact) -> CallFuture<()> {
        let call = self.run(Cmd::emit_artifact(artifact));
        CallFuture::new(async move { call.await.map(drop) })
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
    pub fn sleep(&self, duration: Duration) -> CallFuture<()> {
        let call = self.run(Cmd::sleep(duration));
        CallFuture::new(async move { call.await.map(drop) })
    }

    /// Ask the user and wait (durably) for the answer, returned as `Content`.
    pub fn ask(&self, slot: impl Into<String>, question: impl Into<String>) -> CallFuture<Content> {
        let call = self.run(Cmd::ask_user(slot, Message::agent_text(question)));
        CallFuture::new(async move {
            let message: Message = serde_json::from_value(call.await?)?;
            Ok(Content::from(message))
        })
    }

    /// Run several calls at once and return their results in the order given:
    /// `ctx.all(cities.iter().map(|c| ctx.tool("weather").call::<_, Forecast>(c)))`.
    ///
    /// Every call waits until all have finished, whatever their results. The calls are journaled
    /// together (one append for the batch), then performed in parallel, at most
    /// `EngineBuilder::max_parallel_effects` at once. Their InvocationIds follow the order in which
    /// the calls were made (each takes its id when made), so a replay returns each recorded receipt
    /// to the same call and reissues only those that have none. A call inside the batch that suspends the step (a question, a sleep) lets the others
    /// finish and keep their receipts; the step then suspends when it propagates that error.
    ///
    /// Each element should be one `ctx` call (or computation followed by one): a second `ctx` call
    /// made after an `.await` in the same element is made when that await ends, which depends on
    /// timing, and the engine fails the step — chain calls after the batch instead.
    ///
    /// Any futures will do (calls of other agents and skills, `ctx.agent(..).send(..)`, return
    /// `Result<AgentReply, AgentError>`); the bound counts model and tool calls.
    pub fn all<I>(&self, calls: I) -> futures::future::JoinAll<I::Item>
    where
        I: IntoIterator,
        I::Item: Future,
    {
        // The calls are made now, in order (an iterator's `map` runs here), so each takes its
        // position before `all` returns; the future returned names only the calls' type, so a
        // closure that borrows (`xs.iter().map(|x| ..)`) is not held across the step's awaits.
        // `join_all` polls in order: up to 30 futures it polls a list front to back; past that a
        // `FuturesOrdered`, whose queue runs newly pushed futures in push order (pinned by the
        // engine's test of a 40-call batch).
        futures::future::join_all(calls.into_iter().collect::<Vec<_>>())
    }

    /// [`StepCtx::all`], then the first error in the order given, or every value. All calls finish
    /// first, so none is cut off mid-effect and every receipt is kept.
    #[allow(clippy::type_complexity)]
    pub fn try_all<I, T, E>(
        &self,
        calls: I,
    ) -> futures::future::Map<
        futures::future::JoinAll<I::Item>,
        fn(Vec<Result<T, E>>) -> Result<Vec<T>, E>,
    >
    where
        I: IntoIterator,
        I::Item: Future<Output = Result<T, E>>,
    {
        fn first_error<T, E>(results: Vec<Result<T, E>>) -> Result<Vec<T>, E> {
            results.into_iter().collect()
        }
        futures::FutureExt::map(self.all(calls), first_error::<T, E> as fn(_) -> _)
    }

    /// Run several calls at once and keep the first to finish: its index in `calls` and its
    /// result. Use it where `tokio::select!` would race ctx calls (whose winner a replay could
    /// pick differently):
    /// `let (i, answer) = ctx.race([ctx.llm("fast").run::<String>(q), ctx.llm("slow").run(q)]).await;`
    ///
    /// The winner is journaled (the race takes the position after its calls): a replay reads it
    /// back and runs only the winner, whose receipt returns at once. The losers are dropped where
    /// they stand; each command they journaled gets an `abandoned` receipt and is never reissued
    /// (an effect already in flight, such as a tool call, may still have taken place — race
    /// effects that are safe to abandon). When several calls finish in the same poll, the first in
    /// `calls` wins. A call that waits durably (`ctx.ask`, `ctx.sleep`) does not end the race; when
    /// every call waits, the step suspends and runs again when one of them is answered or fires,
    /// so `ctx.race([ctx.ask("ok", "Go?").map(|r| r.map(|c| c.joined_texts())).boxed(),
    /// ctx.sleep(d).map(|r| r.map(|_| "timeout".to_owned())).boxed()])` bounds a question by a
    /// durable timer.
    ///
    /// The calls are made before the race (its arguments, or `.map(..)` of them): a call made
    /// while the race runs (in an `async` block given to it) fails the step, as a replay, which
    /// runs only the winner, would not make it and every later call's id would shift.
    pub fn race<I, T, E>(&self, calls: I) -> RaceFuture<T, E>
    where
        I: IntoIterator,
        I::Item: Future<Output = Result<T, E>> + Send + 'static,
        E: From<StepError> + Send + 'static,
        T: Send + 'static,
    {
        // The calls are made (and take their positions) before the race takes its own.
        let calls: Vec<_> = calls
            .into_iter()
            .map(|c| Box::pin(c) as std::pin::Pin<Box<dyn Future<Output = Result<T, E>> + Send>>)
            .collect();
        let position = self.take_position();
        if let Err(why) = super::race::check_made_outside(position) {
            let misuse = StepError::Failed(why);
            self.invoker.stop(&misuse);
            return RaceFuture(Box::pin(async move { (0, Err(misuse.into())) }));
        }
        RaceFuture(Box::pin(super::race::race(
            self.invoker.clone(),
            position,
            calls,
        )))
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

/// A position taken for a command made later (see `StepCtx::reserve`).
struct Reserved {
    position: u32,
    invoker: Arc<dyn Invoker>,
    alive: Arc<AtomicU32>,
}

impl Reserved {
    /// Run `cmd` at the reserved position, taken when the call was made.
    fn run(self, cmd: Cmd) -> CallFuture<serde_json::Value> {
        self.start(cmd, false)
    }

    /// Run `cmd` at the reserved position, taken before an earlier call it depends on finished
    /// ([`Invoker::invoke_reserved`]).
    fn run_later(self, cmd: Cmd) -> CallFuture<serde_json::Value> {
        self.start(cmd, true)
    }

    fn start(self, cmd: Cmd, later: bool) -> CallFuture<serde_json::Value> {
        let Reserved {
            position,
            invoker,
            alive,
        } = self;
        alive.fetch_add(1, Ordering::SeqCst);
        let alive = Alive(alive);
        CallFuture::new(async move {
            let _alive = alive;
            if let Err(why) = super::race::enlist(position) {
                let misuse = StepError::Failed(why);
                invoker.stop(&misuse);
                return Err(misuse);
            }
            match later {
                true => invoker.invoke_reserved(position, cmd).await,
                false => invoker.invoke(position, cmd).await,
            }
        })
    }
}

/// A pending model call; see [`StepCtx::llm`].
#[must_use = "call `.run(input).await`"]
pub struct LlmCall<'a> {
    ctx: &'a StepCtx,
    model: String,
    retry: Option<RetryPolicy>,
    tools: Vec<String>,
    max_rounds: u32,
    stream: Option<super::StreamTo>,
}

/// How many times a model offering tools may ask for tools before it must answer.
pub(crate) const DEFAULT_TOOL_ROUNDS: u32 = 8;

impl LlmCall<'_> {
    /// With another retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Offer the model these registered tools (tool calling): each round is one journaled `llm`
    /// command, and each tool call the model asks for is its own journaled `tool` command with its
    /// own InvocationId, its policy and approval gate, run in the order the model gave them; its
    /// result (or its error, which the model is told) goes back to the model in the next round. A
    /// tool needs a description for models: an MCP server's tools have theirs,
    /// `Effects::describe` gives one to others.
    pub fn tools<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.tools = tools.into_iter().map(Into::into).collect();
        self
    }

    /// The most rounds of tool calls before the model must answer (default
    /// `DEFAULT_TOOL_ROUNDS`, 8); one more fails the step.
    pub fn max_rounds(mut self, rounds: u32) -> Self {
        self.max_rounds = rounds;
        self
    }

    /// Stream the answer's text to the task's clients while the model generates it, as `working`
    /// status updates each carrying the next piece in an agent message (metadata
    /// `radkit/tokens`: the call's `invocationId`, `attempt`, `index`). The pieces are not
    /// journaled; the answer is the call's receipt, and is then sent once more, whole, as a
    /// journaled agent message (metadata `radkit/tokens` with `final: true`), which every client
    /// sees, a resubscribed one too. A replay sends nothing again. Pieces already sent are not
    /// withdrawn: those of an attempt that failed, and, with [`tools`](Self::tools), what each
    /// round said before it asked for tools, stay in the client's view.
    pub fn stream_status(mut self) -> Self {
        self.stream = Some(super::StreamTo::Status);
        self
    }

    /// Stream the answer's text to the task's clients while the model generates it, as chunks of
    /// the artifact `name` (id `{task}-{step}-{name}`): each attempt's first chunk replaces what an
    /// earlier attempt sent, the next ones append. The chunks are not journaled; the answer is the
    /// call's receipt, and is then journaled as the artifact's whole content (its last chunk,
    /// replacing the streamed ones), which every client sees, a resubscribed one too. A replay
    /// sends nothing again. With [`tools`](Self::tools), each round streams what the model says,
    /// the next round starting the artifact over.
    pub fn stream_artifact(mut self, name: impl Into<String>) -> Self {
        let name = name.into();
        self.stream = Some(super::StreamTo::Artifact {
            artifact_id: format!("{}-{}-{}", self.ctx.task_id, self.ctx.step, name),
            name,
        });
        self
    }

    /// Run the model on `input` and decode its answer as `T`. A `String` asks for text; any other type
    /// sends its JSON Schema and asks for structured output.
    ///
    /// The call takes its position when `run` is called (see [`StepCtx::run`]).
    pub fn run<T: DeserializeOwned + JsonSchema + 'static>(
        self,
        input: impl Serialize,
    ) -> CallFuture<T> {
        let what = format!("model `{}`", self.model);
        let input = serde_json::to_value(input);
        if !self.tools.is_empty() {
            return self.run_with_tools(what, input);
        }
        let mut cmd = Cmd::new(CmdKind::Llm {
            model: self.model,
            input: input.as_ref().cloned().unwrap_or_default(),
            schema: schema_of::<T>(),
            tools: Vec::new(),
            turns: Vec::new(),
            stream: self.stream.clone(),
        });
        if let Some(retry) = self.retry {
            cmd = cmd.retry(retry);
        }
        // The position is taken whether or not the input serializes: a replay takes the same.
        let call = self.ctx.run(cmd);
        // A streamed answer is journaled whole at the next position, taken now.
        let sent = self.stream.map(|to| (to, self.ctx.reserve()));
        CallFuture::new(async move {
            input?;
            let answer = call.await?;
            if let Some((to, at)) = sent {
                at.run_later(streamed(to, &answer)).await?;
            }
            decode(&what, answer)
        })
    }

    /// The tool-calling loop: a model round, then each tool call it asks for, until it answers.
    fn run_with_tools<T: DeserializeOwned + JsonSchema + 'static>(
        self,
        what: String,
        input: Result<serde_json::Value, serde_json::Error>,
    ) -> CallFuture<T> {
        let ctx = self.ctx.clone();
        let (model, tools, retry, max_rounds, stream) = (
            self.model,
            self.tools,
            self.retry,
            self.max_rounds,
            self.stream,
        );
        let schema = schema_of::<T>();
        CallFuture::new(async move {
            let input = input?;
            let mut turns: Vec<crate::flow::Turn> = Vec::new();
            for _ in 0..=max_rounds {
                let mut cmd = Cmd::new(CmdKind::Llm {
                    model: model.clone(),
                    input: input.clone(),
                    schema: schema.clone(),
                    tools: tools.clone(),
                    turns: turns.clone(),
                    stream: stream.clone(),
                });
                if let Some(retry) = retry {
                    cmd = cmd.retry(retry);
                }
                let mut said = ctx.run(cmd).await?;
                if let Some(answer) = said.get_mut("answer") {
                    let answer = answer.take();
                    if let Some(to) = stream {
                        ctx.run(streamed(to, &answer)).await?;
                    }
                    return decode(&what, answer);
                }
                let calls: Vec<crate::flow::ToolCallRequest> =
                    serde_json::from_value(said.get("tool_calls").cloned().unwrap_or_default())
                        .map_err(|e| {
                            StepError::Decode(format!("{what}: its tool calls do not decode: {e}"))
                        })?;
                let text = said
                    .get("text")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                turns.push(crate::flow::Turn::Calls {
                    calls: calls.clone(),
                    text,
                });
                for call in calls {
                    let result = if tools.contains(&call.name) {
                        ctx.tool(call.name.clone())
                            .call::<_, serde_json::Value>(call.arguments.clone())
                            .await
                    } else {
                        // Only the tools offered: the model is told, never the registry's others.
                        Err(StepError::Effect {
                            what: format!("tool `{}`", call.name),
                            error: crate::flow::EffectError::permanent(format!(
                                "tool `{}` was not offered to this model",
                                call.name
                            )),
                        })
                    };
                    let (output, error) = match result {
                        Ok(output) => (output, false),
                        // A failed call is the model's to handle: it is told what went wrong.
                        Err(StepError::Effect { error, .. }) => {
                            (serde_json::Value::String(error.message), true)
                        }
                        Err(other) => return Err(other),
                    };
                    turns.push(crate::flow::Turn::Result {
                        id: call.id,
                        name: call.name,
                        output,
                        error,
                    });
                }
            }
            Err(StepError::Failed(format!(
                "{what} asked for tools {} times without answering (max_rounds)",
                max_rounds + 1
            )))
        })
    }
}

/// The journaled command that sends a streamed call's whole `answer` where its text was streamed:
/// the artifact's content (a text part; a data part for a structured object), replacing the
/// streamed chunks, or an agent message marked as the stream's end.
fn streamed(to: super::StreamTo, answer: &serde_json::Value) -> Cmd {
    let part = match answer {
        serde_json::Value::String(text) => Part::text(text.clone()),
        serde_json::Value::Object(data) => Part::data(data.clone()),
        other => Part::text(other.to_string()),
    };
    match to {
        super::StreamTo::Artifact { artifact_id, name } => Cmd::emit_artifact(Artifact {
            artifact_id,
            name: Some(name),
            description: None,
            parts: vec![part],
            metadata: None,
            extensions: Vec::new(),
        }),
        super::StreamTo::Status => {
            let mut message = Message::new(crate::model::Role::Agent, vec![part]);
            message.metadata = Some(
                [(
                    "radkit/tokens".to_owned(),
                    serde_json::json!({ "final": true }),
                )]
                .into_iter()
                .collect(),
            );
            Cmd::emit_message(message)
        }
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
    ///
    /// The call takes its position when `call` is called (see [`StepCtx::run`]).
    pub fn call<A: Serialize, O: DeserializeOwned + 'static>(self, args: A) -> CallFuture<O> {
        let what = format!("tool `{}`", self.tool);
        let args = serde_json::to_value(args);
        let mut cmd = Cmd::tool(self.tool, args.as_ref().cloned().unwrap_or_default());
        if let Some(retry) = self.retry {
            cmd = cmd.retry(retry);
        }
        // The position is taken whether or not the arguments serialize: a replay takes the same.
        let call = self.ctx.run(cmd);
        CallFuture::new(async move {
            args?;
            decode(&what, call.await?)
        })
    }
}

/// An artifact streamed in chunks; see [`StepCtx::partial_artifact`].
pub struct ArtifactStream<'a> {
    ctx: &'a StepCtx,
    id: String,
    name: String,
    sent: bool,
}

impl<'a> ArtifactStream<'a> {
    fn chunk(&self, text: String) -> Artifact {
        Artifact {
            artifact_id: self.id.clone(),
            name: Some(self.name.clone()),
            description: None,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: Vec::new(),
        }
    }

    /// Send one chunk.
    pub fn send<'s, S: Into<String>>(
        &'s mut self,
        text: S,
    ) -> impl Future<Output = Result<(), StepError>> + Send + use<'s, 'a, S> {
        let kind = CmdKind::EmitArtifact {
            artifact: self.chunk(text.into()),
            append: self.sent,
            last_chunk: false,
        };
        let call = self.ctx.run(Cmd::new(kind));
        async move {
            call.await?;
            self.sent = true;
            Ok(())
        }
    }

    /// Send the last chunk.
    pub fn finish(self, text: impl Into<String>) -> CallFuture<()> {
        let kind = CmdKind::EmitArtifact {
            artifact: self.chunk(text.into()),
            append: self.sent,
            last_chunk: true,
        };
        let call = self.ctx.run(Cmd::new(kind));
        CallFuture::new(async move { call.await.map(drop) })
    }
}
