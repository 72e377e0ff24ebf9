//! The probe: the one tool the matrix's skills call (`effect`), which counts every raw call of its
//! function and of its compensation with the key each got, and the pauses where a cell crashes the
//! engine from outside (inside the tool, inside the compensation, or where the skill is about to issue
//! or has just received the effect). A pause tells the test it was reached and waits to be released;
//! the test halts the engine in between, so whatever the paused code does next meets a dead engine.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use radkit_runtime::engine::{Boundary, Fault};
use radkit_runtime::flow::{EffectError, EffectPolicy, RetryPolicy};
use radkit_runtime::tools::FnTool;
use tokio::sync::Notify;

use super::{Point, Tail};

/// The tool's name.
pub const EFFECT: &str = "effect";
/// The tool the parallel form calls beside `effect` (idempotent, not counted).
pub const SIBLING: &str = "sibling";

/// The `sibling` tool: answers its arguments.
pub fn sibling() -> FnTool {
    FnTool::new(
        EffectPolicy::Idempotent,
        |args, _key| async move { Ok(args) },
    )
}

/// Retries fast enough for a test (the default backoff starts at 100 ms).
pub const FAST_RETRY: RetryPolicy = RetryPolicy {
    max_attempts: 3,
    initial_backoff_ms: 1,
    max_backoff_ms: 2,
};

/// Where a skill may pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spot {
    /// About to issue the effect.
    BeforeIssue,
    /// The effect's result just arrived.
    ResultArrived,
}

/// Where this cell pauses, if it crashes from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pause {
    None,
    /// The n-th raw call of the tool (from 1, counted across engines).
    Call(usize),
    /// The n-th raw call of the compensation.
    Undo(usize),
    /// A spot in the skill (once).
    Skill(Spot),
}

/// Counts and pauses shared by the tool, the skill and the test, across the crashed and the fresh
/// engine (like a remote service that outlives the process).
pub struct Probe {
    pub tail: Tail,
    pause: Pause,
    /// The first raw call fails with a transient error.
    fail_first: bool,
    calls: AtomicUsize,
    keys: Mutex<Vec<String>>,
    undos: AtomicUsize,
    undo_keys: Mutex<Vec<String>>,
    skill_paused: AtomicBool,
    reached: Notify,
    release: Notify,
}

impl Probe {
    /// The probe for a cell crashing at `point`.
    pub fn new(point: Point) -> Arc<Probe> {
        let pause = match point {
            Point::BeforeJournaled => Pause::Skill(Spot::BeforeIssue),
            Point::ResultArrived => Pause::Skill(Spot::ResultArrived),
            Point::DuringEffect => Pause::Call(1),
            Point::RetryAfterTransient => Pause::Call(2),
            Point::CompensationAfterCancel | Point::CompensationAfterFailure => Pause::Undo(1),
            _ => Pause::None,
        };
        Arc::new(Probe {
            tail: point.tail(),
            pause,
            fail_first: point == Point::RetryAfterTransient,
            calls: AtomicUsize::new(0),
            keys: Mutex::new(Vec::new()),
            undos: AtomicUsize::new(0),
            undo_keys: Mutex::new(Vec::new()),
            skill_paused: AtomicBool::new(false),
            reached: Notify::new(),
            release: Notify::new(),
        })
    }

    /// True when the test crashes the engine itself (at a pause) rather than through a fault hook.
    pub fn pauses(&self) -> bool {
        self.pause != Pause::None
    }

    /// Raw calls of the tool so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Raw calls of the compensation so far.
    pub fn undos(&self) -> usize {
        self.undos.load(Ordering::SeqCst)
    }

    /// The key of every raw call, in order.
    pub fn keys(&self) -> Vec<String> {
        self.keys.lock().unwrap().clone()
    }

    /// The key of every raw compensation call, in order.
    pub fn undo_keys(&self) -> Vec<String> {
        self.undo_keys.lock().unwrap().clone()
    }

    /// Wait until the crash point was reached (a pause, or the fault hook said "crash").
    pub async fn reached(&self, limit: Duration, cell: &str) {
        if tokio::time::timeout(limit, self.reached.notified())
            .await
            .is_err()
        {
            panic!("{cell}: the crash point was not reached within {limit:?}");
        }
    }

    /// Let the paused code go on (into a halted engine).
    pub fn release(&self) {
        self.release.notify_one();
    }

    async fn pause_if(&self, here: Pause) {
        if self.pause == here {
            self.reached.notify_one();
            self.release.notified().await;
        }
    }

    /// A skill passes `spot`: pause there if this cell crashes there (once).
    pub async fn spot(&self, spot: Spot) {
        if self.pause == Pause::Skill(spot) && !self.skill_paused.swap(true, Ordering::SeqCst) {
            self.pause_if(Pause::Skill(spot)).await;
        }
    }

    /// The fault hook crashing once at `boundary` (for the effect's command, at command boundaries).
    pub fn fault_hook(
        self: &Arc<Self>,
        boundary: Boundary,
    ) -> impl Fn(&Fault) -> bool + Send + Sync + 'static {
        let probe = self.clone();
        let fired = AtomicBool::new(false);
        move |fault: &Fault| {
            let ours = fault.boundary == boundary
                && fault
                    .what
                    .as_deref()
                    .is_none_or(|what| what == format!("tool `{EFFECT}`"));
            if ours && !fired.swap(true, Ordering::SeqCst) {
                probe.reached.notify_one();
                return true;
            }
            false
        }
    }

    /// The tool `effect` declaring `policy`, with a compensation (which the engine runs only for
    /// `Compensate`).
    pub fn tool(self: &Arc<Self>, policy: EffectPolicy) -> FnTool {
        let (call, undo) = (self.clone(), self.clone());
        FnTool::new(policy, move |args, key| {
            let probe = call.clone();
            async move {
                let n = probe.calls.fetch_add(1, Ordering::SeqCst) + 1;
                probe.keys.lock().unwrap().push(key.as_str().to_owned());
                if probe.fail_first && n == 1 {
                    return Err(EffectError::transient("the service is busy"));
                }
                probe.pause_if(Pause::Call(n)).await;
                Ok(serde_json::json!({ "call": n, "args": args }))
            }
        })
        .compensate_with(move |_args, _output, key| {
            let probe = undo.clone();
            async move {
                let n = probe.undos.fetch_add(1, Ordering::SeqCst) + 1;
                probe
                    .undo_keys
                    .lock()
                    .unwrap()
                    .push(key.as_str().to_owned());
                probe.pause_if(Pause::Undo(n)).await;
                Ok(serde_json::Value::Null)
            }
        })
    }
}
