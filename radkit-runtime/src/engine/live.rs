//! The tasks this engine has in hand: per task, the broadcast its run publishes committed records on,
//! the gate that serializes whoever loads or drives the task here, and the run while a driver has it.
//! An entry exists only while something uses it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{broadcast, OwnedMutexGuard};

use super::run::TaskRun;
use crate::flow::InvocationId;
use crate::journal::{Entry, JournalRecord};

/// Appends buffered per live subscriber before it lags (a lagging subscriber re-reads the store).
const LIVE_CAPACITY: usize = 64;

/// Pieces of streamed model text buffered per subscriber before it lags (and misses the oldest:
/// they are not journaled, the answer they make up is).
const TOKEN_CAPACITY: usize = 256;

/// What a run tells the subscribers of its task (always behind an `Arc`).
#[derive(Debug)]
pub(crate) enum Published {
    /// An append's committed records: `entries[i]` at seq `first_seq + i`, all written at `at_ms`.
    /// The entries are the ones the store was given, shared: a subscriber that only looks at them
    /// (a blocking send folding its task) copies nothing.
    Records {
        first_seq: u64,
        at_ms: i64,
        entries: Arc<[Entry]>,
    },
    /// An append failed: the run stopped, and the task is reloaded when the store accepts writes.
    WriteFailed,
}

impl Published {
    /// The committed records, seq and entry, in order (none for a failed append).
    pub(crate) fn records(&self) -> impl Iterator<Item = (u64, &Entry)> {
        let (first_seq, entries) = match self {
            Published::Records {
                first_seq, entries, ..
            } => (*first_seq, &entries[..]),
            Published::WriteFailed => (0, &[][..]),
        };
        (first_seq..).zip(entries)
    }

    /// The committed records after `seq`, copied as journal records.
    pub(crate) fn records_after(&self, seq: u64) -> impl Iterator<Item = JournalRecord> + '_ {
        let at_ms = match self {
            Published::Records { at_ms, .. } => *at_ms,
            Published::WriteFailed => 0,
        };
        self.records()
            .filter(move |(s, _)| *s > seq)
            .map(move |(seq, entry)| JournalRecord {
                seq,
                at_ms,
                entry: entry.clone(),
            })
    }
}

/// A task's broadcast of committed records.
pub(crate) type Records = broadcast::Sender<Arc<Published>>;

/// A task's streamed model text (`TokenChunk`s), made when first used: the broadcast, and the
/// pieces each call streaming now sent so far, so that a subscriber that comes in mid-call (a
/// `message/stream` whose task started streaming before the stream was followed, a resubscribe)
/// gets them first, in order, and then what follows — never a gap.
pub(crate) struct TokenStream {
    tx: broadcast::Sender<Arc<super::TokenChunk>>,
    /// Per call streaming now: its attempt and its pieces so far (the last [`TOKEN_CAPACITY`]).
    so_far: Mutex<SoFar>,
}

impl TokenStream {
    fn new() -> Self {
        TokenStream {
            tx: broadcast::channel(TOKEN_CAPACITY).0,
            so_far: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SoFar> {
        self.so_far.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Relay `chunk` to the subscribers, and keep it for those still to come while its call
    /// streams (an attempt's first piece replaces what an earlier attempt sent).
    pub fn send(&self, chunk: super::TokenChunk) {
        let chunk = Arc::new(chunk);
        let mut so_far = self.lock();
        let (attempt, pieces) = so_far
            .entry(chunk.invocation_id.clone())
            .or_insert_with(|| (chunk.attempt, VecDeque::new()));
        if *attempt != chunk.attempt {
            (*attempt, *pieces) = (chunk.attempt, VecDeque::new());
        }
        if pieces.len() == TOKEN_CAPACITY {
            pieces.pop_front();
        }
        pieces.push_back(chunk.clone());
        // Under the lock: a subscriber takes the pieces so far and its receiver at one instant.
        // Nobody listening is not an error: the answer is journaled all the same.
        let _ = self.tx.send(chunk);
    }

    /// Attempt `attempt` of call `id` streams no more: forget its pieces.
    pub fn ended(&self, id: &InvocationId, attempt: u32) {
        let mut so_far = self.lock();
        if so_far.get(id).is_some_and(|(a, _)| *a == attempt) {
            so_far.remove(id);
        }
    }

    /// A new subscriber: the pieces the calls streaming now sent so far, then a receiver of what
    /// follows.
    pub fn subscribe(
        &self,
    ) -> (
        VecDeque<Arc<super::TokenChunk>>,
        broadcast::Receiver<Arc<super::TokenChunk>>,
    ) {
        let so_far = self.lock();
        let caught_up = so_far
            .values()
            .flat_map(|(_, p)| p.iter().cloned())
            .collect();
        (caught_up, self.tx.subscribe())
    }
}

/// Per call streaming now: its attempt and its pieces so far.
type SoFar = HashMap<InvocationId, (u32, VecDeque<Arc<super::TokenChunk>>)>;

/// A task's gate: held by whoever loads, answers, cancels or drives it in this engine.
pub(crate) type Gate = Arc<tokio::sync::Mutex<()>>;

struct Live {
    tx: Records,
    tokens: Option<Arc<TokenStream>>,
    gate: Gate,
    run: Option<Arc<TaskRun>>,
}

/// The live entries of the tasks in hand.
#[derive(Default)]
pub(crate) struct LiveTasks {
    map: Mutex<HashMap<String, Live>>,
}

/// The task's entry, made on first use.
fn entry<'a>(live: &'a mut HashMap<String, Live>, task_id: &str) -> &'a mut Live {
    live.entry(task_id.to_owned()).or_insert_with(|| Live {
        tx: broadcast::channel(LIVE_CAPACITY).0,
        tokens: None,
        gate: Arc::new(tokio::sync::Mutex::new(())),
        run: None,
    })
}

impl LiveTasks {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Live>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The task's broadcast and gate (its entry is made on first use).
    pub fn handles(&self, task_id: &str) -> (Records, Gate) {
        let mut live = self.lock();
        let entry = entry(&mut live, task_id);
        (entry.tx.clone(), entry.gate.clone())
    }

    /// A new subscriber of the task's broadcast. Taken under the map's lock, so that the entry
    /// cannot be forgotten between finding it and subscribing (`release` counts receivers under
    /// the same lock): a receiver of a forgotten entry's channel would be closed at once, and its
    /// subscription would end before the task settled.
    pub fn subscribe(&self, task_id: &str) -> broadcast::Receiver<Arc<Published>> {
        entry(&mut self.lock(), task_id).tx.subscribe()
    }

    /// The task's broadcast of streamed model text (made on first use; its entry lives while a
    /// driver or a subscriber has it).
    pub fn tokens(&self, task_id: &str) -> Arc<TokenStream> {
        entry(&mut self.lock(), task_id)
            .tokens
            .get_or_insert_with(|| Arc::new(TokenStream::new()))
            .clone()
    }

    /// How many tasks have an entry.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// The task's run, while a driver has it.
    pub fn running(&self, task_id: &str) -> Option<Arc<TaskRun>> {
        self.lock().get(task_id).and_then(|l| l.run.clone())
    }

    /// A driver takes the task's run.
    pub fn start(&self, run: &Arc<TaskRun>) {
        if let Some(live) = self.lock().get_mut(&*run.task_id) {
            live.run = Some(run.clone());
        }
    }

    /// The driver is done: deregister its run and open the gate it held, under one lock (so whoever
    /// takes the gate next finds no run), then forget the entry if nothing else uses it.
    pub fn stop(&self, task_id: &str, gate: OwnedMutexGuard<()>) {
        {
            let mut live = self.lock();
            if let Some(entry) = live.get_mut(task_id) {
                entry.run = None;
            }
            drop(gate);
        }
        self.release(task_id, 0);
    }

    /// Forget a task's live entry once nothing uses it: no driver, no subscriber (other than
    /// `own_receivers` of the caller, which is going away) and nobody waiting on its gate.
    pub fn release(&self, task_id: &str, own_receivers: usize) {
        let mut live = self.lock();
        let unused = live.get(task_id).is_some_and(|e| {
            e.run.is_none()
                && e.tx.receiver_count() <= own_receivers
                && Arc::strong_count(&e.gate) == 1
        });
        if unused {
            live.remove(task_id);
        }
    }
}
