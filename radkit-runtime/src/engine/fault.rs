//! Crash injection for tests: the engine asks a hook at every durability boundary whether to "die"
//! there. Dying halts the whole engine at once: nothing more is journaled, exactly like `kill -9`.
//!
//! The engine always asks (the boundaries are part of its code), but only the `testing` feature makes
//! these types public and lets a builder install a hook (`EngineBuilder::fault_hook`); without it
//! nobody can, and the question is always "no".
#![cfg_attr(not(feature = "testing"), doc(hidden))]

#[cfg(feature = "testing")]
pub use self::types::{Boundary, Fault, FaultHook};
// Without `testing` the engine still names them; nobody outside the crate can.
#[cfg(not(feature = "testing"))]
pub(crate) use self::types::{Boundary, Fault, FaultHook};

mod types {
    use std::sync::Arc;

    use crate::flow::InvocationId;

    /// A point where a crash is interesting.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Boundary {
        /// The command is durably journaled; the effect has not started.
        CommandJournaled,
        /// The effect is running (it may still complete after the crash).
        DuringEffect,
        /// The effect returned; its receipt is not written yet.
        EffectReturned,
        /// The receipt is durably written.
        ReceiptWritten,
        /// The task has durably entered `input-required`.
        AwaitingInput,
        /// A reply was taken, and the step it resumes has not run yet. A reply to a waiting task is
        /// not durable here (it commits with that step's first append, and its sender has no
        /// acknowledgement); one taken by a run still going, or kept for a task that works, is.
        Resuming,
        /// A timer is durably set; the task sleeps.
        TimerWait,
    }

    /// Where the engine is when it asks the hook.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Fault {
        /// The boundary.
        pub boundary: Boundary,
        /// The task.
        pub task_id: String,
        /// The command, for command boundaries.
        pub command: Option<InvocationId>,
        /// The command's fingerprint (`tool \`charge_card\``), for command boundaries.
        pub what: Option<String>,
    }

    /// Decides whether to crash at a boundary.
    pub type FaultHook = Arc<dyn Fn(&Fault) -> bool + Send + Sync>;
}
