//! Skills hosted by Restate (the `restate` feature, on the official `restate-sdk` crate): each task
//! is one instance of the Restate workflow `RadkitTask`, whose `run` handler drives the task
//! machine ([`TaskMachine`](crate::machine::TaskMachine)) on Restate's distributed journal.
//!
//! * Each effect the machine asks for (a model, a tool, a compensation) is one Restate `ctx.run`
//!   named by its InvocationId: Restate journals its outcome, and a replay returns it without
//!   running it again. An effect whose policy forbids reissue (`AtMostOnce`) is preceded by a
//!   `ctx.run` of its own (`begin <id>`): when Restate replays that marker but holds no outcome for
//!   the effect, an earlier attempt may have started it, and its receipt says its outcome is
//!   unknown, exactly as the long-running engine says after a crash.
//! * The time the machine is given is taken inside `ctx.run` too, so a replay sees the same times.
//! * A wait for input is a durable promise named `input-<seq>` (the seq of the journal's last
//!   record when the task settled); the workflow's shared handler `reply` resolves it. A timer (a
//!   `ctx.sleep` step, a question's deadline, a retry's backoff) is a Restate durable sleep. A
//!   cancel is the promise `cancel`, resolved by the shared handler `cancel` and looked at before
//!   each batch of effects and while the task waits.
//! * What the machine journals is appended to radkit's store inside `ctx.run` (named
//!   `append <first seq>`), so the A2A server in front reads tasks, history and streams there as
//!   always; an append an earlier attempt made already is recognised by its seq and not made twice.
//!
//! The A2A server in front is an engine built with
//! [`EngineBuilder::restate`](crate::engine::EngineBuilder::restate) over the same store: a send
//! starts the workflow through Restate's ingress, a reply and a cancel resolve its promises, and
//! every read comes from the store. A call to another agent (`ctx.agent`) is stepped as in a
//! serverless pass: each start or ask of the callee one `ctx.run`, each recheck a durable sleep
//! after which the workflow resumes the machine from the journal it persisted (as after any timer:
//! a sleep, a question's deadline). A child skill (`ctx.skill`) is a workflow of its own, started
//! (and, when its parent ends canceled or failed or its call times out, canceled) through the
//! parent's Restate context, so the send is journaled and made once; the parent reads the child's
//! task from the store at each recheck.

mod host;

pub use crate::engine::hosted::{register_deployment, Ingress, Start, TaskReply, WORKFLOW};
pub use host::RestateHost;
