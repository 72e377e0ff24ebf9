//! Hooks and the permission gate. Hooks observe step visits and commands, may modify a command before it
//! is journaled, or deny it (the denial is journaled as the command's receipt, so replay agrees). The
//! built-in permission gate compares the task's mode with the minimum mode a tool declares: below it,
//! a `plan` task is refused the tool and other modes ask a human first.

use async_trait::async_trait;

use crate::flow::{Cmd, InvocationId, Receipt};

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

/// A call to a host's hooks from the task machine ([`Output::Hook`](crate::machine::Output::Hook)),
/// when it runs with hooks ([`MachineConfig::hooks`](crate::machine::MachineConfig::hooks)): the
/// question or notice the long-running engine puts to its hooks at the same point of a run. A
/// host answers it with [`HookCall::ask`] (or its own hooks) and hands the answer to
/// [`TaskMachine::hooked`](crate::machine::TaskMachine::hooked).
#[derive(Debug, Clone, PartialEq)]
pub struct HookCall {
    /// Where it is called.
    pub context: HookContext,
    /// What is asked or told.
    pub kind: HookKind,
}

/// What a [`HookCall`] asks or tells.
#[derive(Debug, Clone, PartialEq)]
pub enum HookKind {
    /// [`Hook::before_step`]: the visit runs only on [`HookAnswer::Continue`].
    BeforeStep,
    /// [`Hook::after_step`] (a notice: the answer is not read).
    AfterStep {
        /// The transition's kind, or the step's error.
        outcome: String,
    },
    /// [`Hook::before_command`], before command `id` is journaled for the first time: go on with
    /// it, with the command as the hooks changed it, or refuse it.
    BeforeCommand {
        /// The command's id.
        id: InvocationId,
        /// The command as the step issued it.
        cmd: Cmd,
    },
    /// [`Hook::after_command`] (a notice: the answer is not read).
    AfterCommand {
        /// The command.
        cmd: Cmd,
        /// Its receipt.
        receipt: Receipt,
    },
}

/// What a host's hooks answered a [`HookCall`]. Serializable, so a host on a durable journal
/// (Restate) records it and a replay takes the same decision.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum HookAnswer {
    /// Go on (the answer to every notice).
    Continue,
    /// Go on with this command (the hooks changed it).
    Command(Box<Cmd>),
    /// Refuse, with the reason.
    Deny(String),
}

impl HookCall {
    /// Put this call to `hooks`, in order, as the long-running engine does: the first refusal
    /// wins, each `before_command` sees the command as the hooks before it left it.
    pub async fn ask(&self, hooks: &[std::sync::Arc<dyn Hook>]) -> HookAnswer {
        let ctx = &self.context;
        match &self.kind {
            HookKind::BeforeStep => {
                for hook in hooks {
                    if let HookDecision::Deny(reason) = hook.before_step(ctx).await {
                        return HookAnswer::Deny(reason);
                    }
                }
                HookAnswer::Continue
            }
            HookKind::AfterStep { outcome } => {
                for hook in hooks {
                    hook.after_step(ctx, outcome).await;
                }
                HookAnswer::Continue
            }
            HookKind::BeforeCommand { cmd, .. } => {
                let mut changed = cmd.clone();
                for hook in hooks {
                    if let HookDecision::Deny(reason) = hook.before_command(ctx, &mut changed).await
                    {
                        return HookAnswer::Deny(reason);
                    }
                }
                if changed == *cmd {
                    HookAnswer::Continue
                } else {
                    HookAnswer::Command(Box::new(changed))
                }
            }
            HookKind::AfterCommand { cmd, receipt } => {
                for hook in hooks {
                    hook.after_command(ctx, cmd, receipt).await;
                }
                HookAnswer::Continue
            }
        }
    }
}
