//! The engine contract: what a skill may say (`Transition`, `Cmd`) and hear (`Event`), whichever of the
//! three authoring surfaces wrote it. Nothing here performs I/O; the engine implements [`Invoker`].

pub(crate) mod approval;
mod call;
mod cmd;
mod ctx;
mod error;
mod event;
mod permission;
pub(crate) mod race;
pub mod rules;
mod skill;
pub mod step_table;
pub mod tool_calls;
mod transition;

pub use approval::{Approval, ApprovalRequest, Decision, MAX_UNCLEAR_REPLIES};
pub use call::{AgentCall, AgentError, AgentReply, Outgoing};
pub use cmd::{Cmd, CmdKind, EffectPolicy, InvocationId, RetryPolicy, StreamTo};
pub use ctx::{ArtifactStream, CallFuture, Invoker, LlmCall, RaceFuture, Raced, StepCtx, ToolCall};
pub use error::{EffectError, ErrorKind, StepError};
pub use event::{Event, Outcome, Receipt};
pub use permission::PermissionMode;
pub use skill::{erase, ErasedSkill, FlowSkill, SkillInfo, StepInfo, StepShapes, WhileWorking};
pub use tool_calls::{ToolCallRequest, Turn};
pub use transition::{Next, StepResult, StepState, Transition};
