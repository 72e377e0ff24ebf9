//! Tools: side effects with a declared [`EffectPolicy`], called from steps as
//! `ctx.tool(name).call::<Args, Out>(args)`. A tool receives its command's InvocationId as the
//! idempotency key; it declares the least permission mode it runs in without asking, may demand a
//! human's approval for some arguments, and `Compensate` tools say how to undo themselves. Tools never
//! see the journal: the engine decides whether they run. A [`ToolSource`] offers tools whose set may
//! change while the engine runs (the tools of an MCP server, `mcp`, with the feature of that name).

#[cfg(feature = "mcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
pub mod mcp;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::flow::{Decision, EffectError, EffectPolicy, InvocationId, PermissionMode};

/// A tool's demand that a human approve a call before it runs (see [`Tool::needs_approval`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalNeed {
    /// Why; shown to the approver with the tool and its exact arguments.
    pub reason: String,
    /// How long to wait for an answer (`None`: forever).
    pub expires_in: Option<Duration>,
    /// The decision an unanswered request takes when it expires.
    pub default: Decision,
}

impl ApprovalNeed {
    /// Ask because of `reason`; wait forever (see [`expires`](Self::expires)).
    pub fn new(reason: impl Into<String>) -> Self {
        ApprovalNeed {
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

/// A tool the engine can call.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a radkit tool",
    note = "implement `radkit::tools::Tool` or wrap an async closure with `FnTool::new`"
)]
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// What may happen if the call is interrupted; decides replay after a crash.
    fn policy(&self) -> EffectPolicy;

    /// The least permission mode in which the tool runs without asking: `Plan` for read-only tools,
    /// `AcceptEdits` for tools that edit, `Bypass` for destructive ones. Default: `Default`.
    fn min_mode(&self) -> PermissionMode {
        PermissionMode::Default
    }

    /// Whether this call needs a human's approval first. The engine's built-in gate asks with the
    /// tool's name and these exact arguments before the call is journaled, in every permission mode
    /// (it is a business rule, not a permission); a rejection ends the task `rejected`. Default: never.
    fn needs_approval(&self, args: &serde_json::Value) -> Option<ApprovalNeed> {
        let _ = args;
        None
    }

    /// Perform the effect. `key` is stable across retries and replays: deduplicate on it.
    async fn call(
        &self,
        args: serde_json::Value,
        key: &InvocationId,
    ) -> Result<serde_json::Value, EffectError>;

    /// Undo a successful call (for `Compensate` tools), on failure or cancel of the task.
    async fn compensate(
        &self,
        args: serde_json::Value,
        output: serde_json::Value,
        key: &InvocationId,
    ) -> Result<serde_json::Value, EffectError> {
        let _ = (args, output, key);
        Err(EffectError::permanent("this tool has no compensation"))
    }
}

/// What a model needs to call a tool: its name, what it does and the JSON Schema of its arguments
/// (the shape of an MCP tool listing and of the providers' function declarations).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSchema {
    /// The name the tool is registered under (`ctx.tool(name)`).
    pub name: String,
    /// What the tool does, for a model choosing among tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of the tool's arguments (an object schema).
    pub input_schema: serde_json::Value,
}

/// Tools found by name when a command runs, from a set that may change while the engine runs (an MCP
/// server's tools follow its tools/list_changed notifications). Register one with
/// [`Effects::tools_from`](crate::effects::Effects::tools_from); tools registered by name win.
pub trait ToolSource: Send + Sync + 'static {
    /// The tool named `name` now, if the source has one.
    fn find(&self, name: &str) -> Option<Arc<dyn Tool>>;

    /// The schemas of the tools the source has now, sorted by name.
    fn schemas(&self) -> Vec<ToolSchema>;
}

/// A shared tool is a tool (register one instance and keep a handle to it).
#[async_trait]
impl<T: Tool> Tool for Arc<T> {
    fn policy(&self) -> EffectPolicy {
        (**self).policy()
    }

    fn min_mode(&self) -> PermissionMode {
        (**self).min_mode()
    }

    fn needs_approval(&self, args: &serde_json::Value) -> Option<ApprovalNeed> {
        (**self).needs_approval(args)
    }

    async fn call(
        &self,
        args: serde_json::Value,
        key: &InvocationId,
    ) -> Result<serde_json::Value, EffectError> {
        (**self).call(args, key).await
    }

    async fn compensate(
        &self,
        args: serde_json::Value,
        output: serde_json::Value,
        key: &InvocationId,
    ) -> Result<serde_json::Value, EffectError> {
        (**self).compensate(args, output, key).await
    }
}

type BoxFut = Pin<Box<dyn Future<Output = Result<serde_json::Value, EffectError>> + Send>>;
type CallFn = dyn Fn(serde_json::Value, InvocationId) -> BoxFut + Send + Sync;
type UndoFn = dyn Fn(serde_json::Value, serde_json::Value, InvocationId) -> BoxFut + Send + Sync;
type GateFn = dyn Fn(&serde_json::Value) -> Option<ApprovalNeed> + Send + Sync;

/// A tool made from an async closure.
#[derive(Clone)]
pub struct FnTool {
    policy: EffectPolicy,
    min_mode: PermissionMode,
    call: Arc<CallFn>,
    undo: Option<Arc<UndoFn>>,
    gate: Option<Arc<GateFn>>,
}

impl std::fmt::Debug for FnTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool")
            .field("policy", &self.policy)
            .field("min_mode", &self.min_mode)
            .field("compensates", &self.undo.is_some())
            .field("gated", &self.gate.is_some())
            .finish_non_exhaustive()
    }
}

/// Decode a tool's JSON arguments (or output) as `T`; a mismatch is permanent (retrying cannot fix it).
fn decode_as<T: DeserializeOwned>(what: &str, value: serde_json::Value) -> Result<T, EffectError> {
    serde_json::from_value(value).map_err(|e| {
        EffectError::permanent(format!(
            "{what} do not match `{}`: {e}",
            std::any::type_name::<T>()
        ))
    })
}

fn encode<T: Serialize>(what: &str, value: T) -> Result<serde_json::Value, EffectError> {
    serde_json::to_value(value).map_err(|e| EffectError::permanent(format!("{what}: {e}")))
}

impl FnTool {
    /// A tool with `policy` running `call(args, key)`.
    pub fn new<F, Fut>(policy: EffectPolicy, call: F) -> Self
    where
        F: Fn(serde_json::Value, InvocationId) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<serde_json::Value, EffectError>> + Send + 'static,
    {
        FnTool {
            policy,
            min_mode: PermissionMode::Default,
            call: Arc::new(move |a, k| Box::pin(call(a, k))),
            undo: None,
            gate: None,
        }
    }

    /// A tool with typed arguments and output: `call(args: A, key) -> Result<O, EffectError>`.
    /// Arguments that do not decode as `A` fail the call with a permanent error naming the type.
    ///
    /// ```
    /// # use radkit_runtime::{tools::FnTool, flow::{EffectError, EffectPolicy}};
    /// #[derive(serde::Deserialize)]
    /// struct Charge { customer: String, cents: u64 }
    /// #[derive(serde::Serialize)]
    /// struct Charged { id: String }
    ///
    /// let tool = FnTool::typed(EffectPolicy::Idempotent, |args: Charge, key| async move {
    ///     // `key` is the same on every retry and replay: the provider deduplicates on it.
    ///     Ok::<_, EffectError>(Charged { id: format!("{}-{}-{}", key, args.customer, args.cents) })
    /// });
    /// ```
    pub fn typed<A, O, F, Fut>(policy: EffectPolicy, call: F) -> Self
    where
        A: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(A, InvocationId) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, EffectError>> + Send + 'static,
    {
        let call = Arc::new(call);
        FnTool::new(policy, move |args, key| {
            let call = call.clone();
            async move {
                let args: A = decode_as("the arguments", args)?;
                encode("the tool's output", call(args, key).await?)
            }
        })
    }

    /// With a typed compensation `undo(args, output, key)` (see [`typed`](Self::typed)).
    pub fn compensate_typed<A, O, F, Fut>(self, undo: F) -> Self
    where
        A: DeserializeOwned + Send + 'static,
        O: DeserializeOwned + Send + 'static,
        F: Fn(A, O, InvocationId) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), EffectError>> + Send + 'static,
    {
        let undo = Arc::new(undo);
        self.compensate_with(move |args, output, key| {
            let undo = undo.clone();
            async move {
                let args: A = decode_as("the arguments", args)?;
                let output: O = decode_as("the recorded output", output)?;
                undo(args, output, key).await?;
                Ok(serde_json::Value::Null)
            }
        })
    }

    /// Ask a human before the calls for which `gate(args)` says so (see [`Tool::needs_approval`]).
    pub fn require_approval(
        mut self,
        gate: impl Fn(&serde_json::Value) -> Option<ApprovalNeed> + Send + Sync + 'static,
    ) -> Self {
        self.gate = Some(Arc::new(gate));
        self
    }

    /// The least permission mode in which the tool runs without asking.
    pub fn min_mode(mut self, mode: PermissionMode) -> Self {
        self.min_mode = mode;
        self
    }

    /// With a compensation `undo(args, output, key)`.
    pub fn compensate_with<F, Fut>(mut self, undo: F) -> Self
    where
        F: Fn(serde_json::Value, serde_json::Value, InvocationId) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<serde_json::Value, EffectError>> + Send + 'static,
    {
        self.undo = Some(Arc::new(move |a, o, k| Box::pin(undo(a, o, k))));
        self
    }
}

#[async_trait]
impl Tool for FnTool {
    fn policy(&self) -> EffectPolicy {
        self.policy
    }

    fn min_mode(&self) -> PermissionMode {
        self.min_mode
    }

    fn needs_approval(&self, args: &serde_json::Value) -> Option<ApprovalNeed> {
        self.gate.as_ref().and_then(|gate| gate(args))
    }

    async fn call(
        &self,
        args: serde_json::Value,
        key: &InvocationId,
    ) -> Result<serde_json::Value, EffectError> {
        (self.call)(args, key.clone()).await
    }

    async fn compensate(
        &self,
        args: serde_json::Value,
        output: serde_json::Value,
        key: &InvocationId,
    ) -> Result<serde_json::Value, EffectError> {
        match &self.undo {
            Some(undo) => undo(args, output, key.clone()).await,
            None => Err(EffectError::permanent("this tool has no compensation")),
        }
    }
}
