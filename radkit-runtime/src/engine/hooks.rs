//! Hooks and the permission gate. Hooks observe step visits and commands, may modify a command before it
//! is journaled, or deny it (the denial is journaled as the command's receipt, so replay agrees). The
//! built-in permission gate compares the task's mode with the minimum mode a tool declares: below it,
//! a `plan` task is refused the tool and other modes ask a human first.

use async_trait::async_trait;

use crate::flow::{Cmd, Receipt};

use crate::flow::PermissionMode;

/// Where a hook is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookContext {
    /// Task.
    pub task_id: String,
    /// Skill.
    pub skill_id: String,
    /// Step.
    pub step: String,
    /// Step visit.
    pub visit: u64,
    /// The task's permission mode.
    pub mode: PermissionMode,
}

/// What a hook decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookDecision {
    /// Go on.
    Continue,
    /// Refuse, with a reason (a denied step fails its task; a denied command fails with this reason).
    Deny(String),
}

/// Observe, modify or deny steps and commands. Every method has a default that does nothing.
#[async_trait]
pub trait Hook: Send + Sync + 'static {
    /// Before a step visit runs (also when a visit is re-run on replay).
    async fn before_step(&self, ctx: &HookContext) -> HookDecision {
        let _ = ctx;
        HookDecision::Continue
    }

    /// After a step visit returned (`outcome` is the transition kind or the error).
    async fn after_step(&self, ctx: &HookContext, outcome: &str) {
        let _ = (ctx, outcome);
    }

    /// Before a command is journaled for the first time (never on replay): may change it or deny it.
    async fn before_command(&self, ctx: &HookContext, cmd: &mut Cmd) -> HookDecision {
        let _ = (ctx, cmd);
        HookDecision::Continue
    }

    /// After a command's receipt is recorded.
    async fn after_command(&self, ctx: &HookContext, cmd: &Cmd, receipt: &Receipt) {
        let _ = (ctx, cmd, receipt);
    }
}
