//! The pieces of the `kill -9` tests (`engine_kill9.rs` holds their table and the parent's run):
//! what a case is, the skill and its tools over the SQLite file (`skill`), the calls file the tools
//! append to (`calls`), the child process (`child`) and what the journal holds (`journal`).

pub mod calls;
pub mod child;
pub mod journal;
pub mod skill;

use radkit_runtime::flow::EffectPolicy;

/// The environment variables that make the test binary the child: its directory and its case.
pub const DIR_VAR: &str = "RADKIT_KILL9_DIR";
pub const CASE_VAR: &str = "RADKIT_KILL9_CASE";
/// The child's entry point (an ignored test of the suite, named by its path).
pub const CHILD_TEST: &str = "engine_kill9::child_process_runs_until_killed";

/// The tool whose policy a case tests, and a plain tool the step calls before it (its receipt is
/// durable at the kill, so it must never run again).
pub const EFFECT: &str = "effect";
pub const PREPARE: &str = "prepare";
/// The name the compensation of `effect` records its calls under.
pub const UNDO: &str = "undo";
pub const DONE: &str = "order placed";

/// Where the child is killed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kill {
    /// Inside the call of `effect` (it recorded the call, then hangs).
    DuringEffect,
    /// The task waits for a reply after `effect`; it is canceled and killed inside the compensation
    /// of `effect` (it recorded the call, then hangs).
    DuringCompensation,
}

impl Kill {
    /// The function that writes the marker and hangs in the child: `effect` or its compensation.
    pub fn function(self) -> &'static str {
        match self {
            Kill::DuringEffect => EFFECT,
            Kill::DuringCompensation => UNDO,
        }
    }

    /// What the parent waits for, in failure messages.
    pub fn point(self) -> &'static str {
        match self {
            Kill::DuringEffect => "the child to be inside the call of `effect`",
            Kill::DuringCompensation => "the child to be inside the compensation of `effect`",
        }
    }
}

/// How the recovered task ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum End {
    Completed,
    /// Failed "outcome unknown", naming the command.
    OutcomeUnknown,
    Canceled,
}

/// What the step does after `effect`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Then {
    /// Complete the task.
    Complete,
    /// Ask for a confirmation inside the step (`ctx.ask`), then complete.
    Ask,
    /// Wait for a confirmation with an `await_input` transition (resumed by `confirmed`).
    AwaitInput,
}

/// One row: a policy, where the child dies, and what the calls file and the task look like at the
/// kill and after recovery. Calls are raw calls of the tool functions as `<process> <function>`
/// (`effect`, its compensation `undo`, `prepare`), in order.
pub struct Case {
    pub name: &'static str,
    pub policy: EffectPolicy,
    pub then: Then,
    pub kill: Kill,
    pub at_kill: &'static [&'static str],
    pub in_all: &'static [&'static str],
    pub end: End,
}

/// Which process a tool runs in: only the child's tool hangs at the kill point.
#[derive(Clone, Copy, PartialEq)]
pub enum Process {
    Child,
    Parent,
}

impl Process {
    pub fn name(self) -> &'static str {
        match self {
            Process::Child => "child",
            Process::Parent => "parent",
        }
    }
}
