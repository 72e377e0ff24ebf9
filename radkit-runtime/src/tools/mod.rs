//! Tools: typed side effects with a declared [`EffectPolicy`]. A tool receives its command's
//! InvocationId as the idempotency key; `Compensate` tools also say how to undo themselves.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;

use crate::flow::{EffectError, EffectPolicy, InvocationId};

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
    fn min_mode(&self) -> crate::engine::PermissionMode {
        crate::engine::PermissionMode::Default
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

type BoxFut = Pin<Box<dyn Future<Output = Result<serde_json::Value, EffectError>> + Send>>;
type CallFn = dyn Fn(serde_json::Value, InvocationId) -> BoxFut + Send + Sync;
type UndoFn = dyn Fn(serde_json::Value, serde_json::Value, InvocationId) -> BoxFut + Send + Sync;

/// A tool made from an async closure.
#[derive(Clone)]
pub struct FnTool {
    policy: EffectPolicy,
    min_mode: crate::engine::PermissionMode,
    call: Arc<CallFn>,
    undo: Option<Arc<UndoFn>>,
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
            min_mode: crate::engine::PermissionMode::Default,
            call: Arc::new(move |a, k| Box::pin(call(a, k))),
            undo: None,
        }
    }

    /// The least permission mode in which the tool runs without asking.
    pub fn min_mode(mut self, mode: crate::engine::PermissionMode) -> Self {
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

    fn min_mode(&self) -> crate::engine::PermissionMode {
        self.min_mode
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
