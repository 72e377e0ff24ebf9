//! Following a task: its journal so far, then every record as it is committed (live from this process,
//! polled from a shared store), as typed [`Update`]s that say when the task settled. Finality is
//! decided here, once, for every subscriber (the server's streams, `wait_settled`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use super::live::Published;
use super::{Engine, EngineError};
use crate::journal::{Entry, JournalRecord};
use crate::model::TaskId;
use crate::store::{view, StoreError};

/// Appends read from the store at a time: what a subscriber holds of a long journal.
pub(crate) const PAGE_APPENDS: usize = 4;

/// Store reads in a row that may fail while polling a shared store (it may be restarting) before the
/// subscriber gets the error.
const POLL_FAILURES: u32 = 5;

/// True for a record that answers a question asked before it (see [`view::answers`]).
fn answers(record: &JournalRecord) -> bool {
    view::answers(&record.entry)
}

/// True for an entry that settles its task: an end, or a question.
fn settles(entry: &Entry) -> bool {
    matches!(entry, Entry::Terminal { .. } | Entry::AwaitingInput { .. })
}

/// The task as A2A shows it at one point of its journal.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The task.
    pub task: crate::model::Task,
    /// The seq of the last journal entry it reflects (follow it with `Engine::subscribe_from`).
    pub last_seq: u64,
    /// The task is settled there: ended, or waiting for input (a stream for a client ends here).
    pub is_final: bool,
}

/// One journal record as a subscriber sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// The record; its `seq` orders the stream (each is seen once, in order).
    pub record: JournalRecord,
    /// The task settled with this record: it ended (`terminal`), or it waits for input
    /// (`awaiting_input`) and nothing already committed answers it. A stream for a client ends here.
    pub is_final: bool,
}

impl Update {
    /// The record's position in the journal.
    pub fn seq(&self) -> u64 {
        self.record.seq
    }
}

/// A piece of a streamed model call's text, as the engine running the task relays it while the
/// model generates it (`ctx.llm(..).stream_status()` / `.stream_artifact(..)`). Not journaled:
/// only subscribers in the process that runs the call see it, a subscriber that lags misses some,
/// and a replay sends none; the call's answer reaches every subscriber as a journaled message or
/// artifact after its receipt.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenChunk {
    /// The model call's id.
    pub invocation_id: crate::flow::InvocationId,
    /// The attempt of the call that generates it (a retried or reissued call starts over).
    pub attempt: u32,
    /// Its place in the attempt's text (0, 1, ...).
    pub index: u32,
    /// The text.
    pub text: String,
    /// Where the step streams it.
    pub to: crate::flow::StreamTo,
}

/// What a subscription that follows streamed text ([`Subscription::with_tokens`]) yields.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // records are the common case: moved, never boxed
pub enum Followed {
    /// A journal record.
    Update(Update),
    /// A piece of a streamed model call's text (not journaled).
    Tokens(Arc<TokenChunk>),
}

/// What waiting on the live channels gave.
enum Live {
    Published(Result<Arc<Published>, broadcast::error::RecvError>),
    Tokens(Arc<TokenChunk>),
}

/// What the subscription has next.
#[allow(clippy::large_enum_variant)] // records are the common case: moved, never boxed
enum Next {
    Record(JournalRecord),
    Tokens(Arc<TokenChunk>),
}

/// A live view of one task: its journal so far, then every record as it is committed, until the
/// terminal entry.
pub struct Subscription {
    /// Task id.
    pub task_id: TaskId,
    /// Context id.
    pub context_id: String,
    backlog: VecDeque<JournalRecord>,
    rx: broadcast::Receiver<Arc<Published>>,
    last_seq: u64,
    engine: Engine,
    /// The terminal entry was returned, or an error: nothing follows.
    ended: bool,
    /// Store reads in a row that found nothing new (shared stores).
    quiet_polls: u32,
    /// Store reads in a row that failed (shared stores).
    failed_polls: u32,
    /// The task's run said an append failed (seen while draining the live channel).
    write_failed: bool,
    /// The last page read from the store was not empty: the store may hold more after the backlog.
    paging: bool,
    /// Streamed model text, when the subscriber follows it ([`Subscription::with_tokens`]).
    tokens: Option<broadcast::Receiver<Arc<TokenChunk>>>,
    /// The pieces the calls streaming when it began following sent before: they go first.
    caught_up: VecDeque<Arc<TokenChunk>>,
    /// The record to return next (`last_seq` is its seq): held while queued text goes first, or
    /// while the store is read to tell whether it is final.
    pending: Option<JournalRecord>,
}

/// A task followed from before its creating append: its receiver (every record its run commits,
/// from seq 1) and its row as created. The live entry is kept while it lives.
pub(crate) struct Follow {
    engine: Engine,
    task_id: String,
    rx: broadcast::Receiver<Arc<Published>>,
    record: crate::store::TaskRecord,
    /// The task's view before the first record the receiver gets.
    folded: view::MemView,
}

impl Follow {
    /// Follow `task_id`, created as `record`, from now on.
    pub(super) fn new(engine: &Engine, task_id: &str, record: crate::store::TaskRecord) -> Self {
        Self::with(engine, task_id, record, view::MemView::default())
    }

    /// Follow `task_id` from `view` (read with its whole history; nothing committed since): the
    /// records its run publishes next are folded on from there.
    pub(super) fn resumed(engine: &Engine, task_id: &str, view: crate::store::TaskView) -> Self {
        let folded = view::MemView::from_view(&view);
        Self::with(engine, task_id, view.record, folded)
    }

    fn with(
        engine: &Engine,
        task_id: &str,
        record: crate::store::TaskRecord,
        folded: view::MemView,
    ) -> Self {
        Follow {
            engine: engine.clone(),
            task_id: task_id.to_owned(),
            rx: engine.inner.live.subscribe(task_id),
            record,
            folded,
        }
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        self.engine.inner.live.release(&self.task_id, 1);
    }
}

/// [`settled_live`] for a task followed from its start: the task's view is folded from the records
/// its run publishes, one at a time as they come (nothing of them is kept but what the view keeps),
/// and returned without reading the store once one of them settles it. A follower that falls
/// behind (a lagging receiver), a gap or a failed append makes it wait as [`settled_live`] does.
pub(super) async fn settled_followed(
    engine: &Engine,
    caller: &super::Caller,
    task_id: &TaskId,
    mut follow: Follow,
    history_length: Option<usize>,
) -> Result<Snapshot, EngineError> {
    let mut folded = std::mem::take(&mut follow.folded);
    let (mut last_seq, mut last_at) = (follow.record.last_seq, follow.record.updated_at_ms);
    let mut settling = false;
    loop {
        let next = if settling {
            // Appends committed right after the settling one, already published.
            match follow.rx.try_recv() {
                Ok(published) => Ok(published),
                Err(broadcast::error::TryRecvError::Empty) if folded.settled => {
                    let mut record = follow.record.clone();
                    (record.state, record.last_seq, record.updated_at_ms) =
                        (folded.state, last_seq, last_at);
                    let view = folded.view(record, history_length);
                    return Ok(Snapshot {
                        last_seq,
                        is_final: true,
                        task: super::projection::project_task(view),
                    });
                }
                Err(broadcast::error::TryRecvError::Empty) => {
                    settling = false;
                    continue;
                }
                Err(_) => break,
            }
        } else {
            // On a shared store another process may take the task on (after a timer, say), whose
            // records are not published here: quiet for a poll, the wait reads the task instead.
            match recv_within(&mut follow.rx, quiet_wait(engine, 0)).await {
                Some(next) => next.map_err(|_| ()),
                // Its run here publishes what it commits: a slow effect, nothing to read.
                None if engine.inner.live.running(task_id).is_some() => continue,
                None => break,
            }
        };
        match next.as_deref() {
            Ok(Published::Records {
                first_seq,
                at_ms,
                entries,
            }) if *first_seq == last_seq + 1 => {
                settling = settling || entries.iter().any(settles);
                folded.apply(&view::ViewDelta::of(*first_seq, entries), *at_ms);
                last_seq += u64::try_from(entries.len()).unwrap_or(0);
                last_at = *at_ms;
            }
            _ => break,
        }
    }
    drop(follow);
    settled_live(engine, caller, task_id, history_length).await
}

/// The task once it settled: the task's view is read (one row, however long its journal), then
/// again each time a published record may have settled it (an end, a question) or the wait lagged
/// behind the records — never the records in between, which a waiter has no use for (a
/// [`Subscription`] would read every one it missed from the store, a page at a time, and a waiter
/// that lagged on a busy machine then spent its CPU reading, and lagged more). Every commit of a
/// task this engine drives is published here; on a shared store, where another process may drive
/// it, the view is also read again when nothing was published for a while ([`quiet_wait`]).
pub(super) async fn settled_live(
    engine: &Engine,
    caller: &super::Caller,
    task_id: &TaskId,
    history_length: Option<usize>,
) -> Result<Snapshot, EngineError> {
    /// The live entry is kept while the wait holds its receiver, and let go when it ends or is
    /// dropped (a client that went away).
    struct Listening<'a> {
        engine: &'a Engine,
        task_id: &'a TaskId,
        rx: broadcast::Receiver<Arc<Published>>,
    }
    impl Drop for Listening<'_> {
        fn drop(&mut self) {
            self.engine.inner.live.release(self.task_id, 1);
        }
    }
    let mut listening = Listening {
        engine,
        task_id,
        rx: engine.inner.live.subscribe(task_id),
    };
    let mut quiet_rounds = 0;
    loop {
        // Read after subscribing: whatever commits after this read is published to `rx`, and a run
        // marks its task stalled before it tells its subscribers of a failed append.
        let stalled = engine.inner.stalled.is_stalled(task_id);
        let snapshot = engine.snapshot(caller, task_id, history_length).await?;
        if snapshot.is_final {
            return Ok(snapshot);
        }
        if stalled {
            return Err(EngineError::StorageUnavailable {
                task_id: task_id.to_string(),
            });
        }
        loop {
            let Some(received) =
                recv_within(&mut listening.rx, quiet_wait(engine, quiet_rounds)).await
            else {
                quiet_rounds += 1;
                if engine.inner.live.running(task_id).is_some() {
                    // Its run here publishes what it commits: a slow effect, nothing to read.
                    continue;
                }
                break;
            };
            quiet_rounds = 0;
            match received.as_deref() {
                Ok(published @ Published::Records { .. })
                    if published
                        .records()
                        .any(|(seq, entry)| seq > snapshot.last_seq && settles(entry)) =>
                {
                    break
                }
                Ok(Published::Records { .. }) => continue,
                Ok(Published::WriteFailed) | Err(broadcast::error::RecvError::Lagged(_)) => break,
                // The entry is kept while a receiver lives, so this does not happen; as a
                // subscription ends there, the task is read once more and returned as it is.
                Err(broadcast::error::RecvError::Closed) => {
                    return engine.snapshot(caller, task_id, history_length).await
                }
            }
        }
    }
}

/// How long a wait on a shared store listens for this process's records before it reads the task
/// again, unless a run of the task is live here (which publishes what it commits): `poll`,
/// doubled for each quiet round before (to 16 times), at most 2 s — as a [`Subscription`] polls.
/// `None` on a store no other process writes: every commit is published here.
fn quiet_wait(engine: &Engine, quiet_rounds: u32) -> Option<Duration> {
    engine.inner.shared().then(|| {
        (engine.inner.config.poll * (1 << quiet_rounds.min(4))).min(Duration::from_secs(2))
    })
}

/// The next published record, or `None` when `within` passed first.
async fn recv_within<T: Clone>(
    rx: &mut broadcast::Receiver<T>,
    within: Option<Duration>,
) -> Option<Result<T, broadcast::error::RecvError>> {
    match within {
        None => Some(rx.recv().await),
        Some(within) => tokio::time::timeout(within, rx.recv()).await.ok(),
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.engine.inner.live.release(&self.task_id, 1);
    }
}

impl Subscription {
    pub(super) fn new(
        engine: Engine,
        task_id: TaskId,
        context_id: String,
        backlog: Vec<JournalRecord>,
        rx: broadcast::Receiver<Arc<Published>>,
        after_seq: u64,
    ) -> Self {
        Subscription {
            task_id,
            context_id,
            backlog: backlog.into(),
            rx,
            last_seq: after_seq,
            engine,
            ended: false,
            quiet_polls: 0,
            failed_polls: 0,
            write_failed: false,
            paging: true,
            tokens: None,
            caught_up: VecDeque::new(),
            pending: None,
        }
    }

    /// The task's last run here stopped on a failed append that nothing has written since: once
    /// the store's records are read, the subscriber is told the store is unavailable.
    pub(super) fn stalled(mut self, stalled: bool) -> Self {
        self.write_failed |= stalled;
        self
    }

    /// Also follow the text of the task's streamed model calls as this engine generates it: read
    /// with [`next_followed`](Self::next_followed). Each piece comes before the journal record
    /// that follows it was committed. A call streaming already gives the pieces it sent so far
    /// first, so a subscriber that comes in mid-call misses none of them.
    pub fn with_tokens(mut self) -> Self {
        let (caught_up, rx) = self.engine.inner.live.tokens(&self.task_id).subscribe();
        (self.caught_up, self.tokens) = (caught_up, Some(rx));
        self
    }

    /// The next record, in seq order, each exactly once; `None` after the terminal entry. A store
    /// that cannot be read is an error (after which the subscription ends), never a silent end.
    pub async fn next(&mut self) -> Option<Result<Update, EngineError>> {
        loop {
            match self.next_followed().await? {
                Ok(Followed::Update(update)) => return Some(Ok(update)),
                Ok(Followed::Tokens(_)) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// The next record as [`next`](Self::next) returns it, or a piece of streamed text (with
    /// [`with_tokens`](Self::with_tokens)); `None` after the terminal entry.
    pub async fn next_followed(&mut self) -> Option<Result<Followed, EngineError>> {
        if self.ended {
            return None;
        }
        if self.pending.is_none() {
            match self.next_record().await {
                Ok(Some(Next::Record(record))) => {
                    self.last_seq = record.seq;
                    self.pending = Some(record);
                }
                Ok(Some(Next::Tokens(chunk))) => return Some(Ok(Followed::Tokens(chunk))),
                Ok(None) => {
                    self.ended = true;
                    return None;
                }
                Err(e) => {
                    self.ended = true;
                    return Some(Err(e));
                }
            }
        }
        // Every piece of text sent before the record was committed is queued by now (the record
        // may have come from the store, not the live channel): the pieces go first.
        if let Some(chunk) = self.queued_tokens() {
            return Some(Ok(Followed::Tokens(chunk)));
        }
        let (terminal, asks) = match self.pending.as_ref().map(|r| &r.entry) {
            Some(Entry::Terminal { .. }) => (true, false),
            Some(Entry::AwaitingInput { .. }) => (false, true),
            Some(_) => (false, false),
            None => return None,
        };
        let is_final = if terminal {
            self.ended = true;
            true
        } else if asks {
            // The record stays pending while the store is read: a caller that drops this future
            // gets it from the next call.
            match self.answered().await {
                Ok(answered) => !answered,
                Err(e) => {
                    self.ended = true;
                    self.pending = None;
                    return Some(Err(e.into()));
                }
            }
        } else {
            false
        };
        let record = self.pending.take()?;
        Some(Ok(Followed::Update(Update { record, is_final })))
    }

    /// A piece of streamed text already queued, if the subscriber follows them (lagged pieces are
    /// skipped).
    fn queued_tokens(&mut self) -> Option<Arc<TokenChunk>> {
        if let Some(chunk) = self.caught_up.pop_front() {
            return Some(chunk);
        }
        let tokens = self.tokens.as_mut()?;
        loop {
            match tokens.try_recv() {
                Ok(chunk) => return Some(chunk),
                Err(broadcast::error::TryRecvError::Lagged(_)) => continue,
                Err(_) => return None,
            }
        }
    }

    /// True when a record already committed after the current one answers the question it asked (a
    /// past question in a replay is not where the story ends). On a shared store another engine may
    /// have committed the answer: the store is read when nothing is known locally.
    async fn answered(&mut self) -> Result<bool, StoreError> {
        self.drain_live();
        // A lag leaves a gap, which may hide the answer: what was published is in the store.
        let gap = (self.last_seq + 1..)
            .zip(self.backlog.iter().filter(|r| r.seq > self.last_seq))
            .any(|(expected, r)| r.seq != expected);
        if gap || (self.backlog.is_empty() && self.engine.inner.shared()) {
            self.backlog = self.unseen().await?.into();
        }
        loop {
            let last = self.last_seq;
            if self.backlog.iter().filter(|r| r.seq > last).any(answers) {
                return Ok(true);
            }
            if !self.paging {
                return Ok(false);
            }
            // More may be committed than the backlog holds: read on, a page at a time.
            let newest = self.backlog.back().map_or(last, |r| r.seq.max(last));
            let page = self.page_after(newest).await?;
            self.backlog.extend(page);
        }
    }

    /// The next record after `last_seq`; `None` when the live channel closed; an error when the
    /// store cannot be read or the task's run could not write.
    async fn next_record(&mut self) -> Result<Option<Next>, EngineError> {
        loop {
            match self.backlog.front().map(|r| r.seq) {
                Some(seq) if seq <= self.last_seq => {
                    self.backlog.pop_front();
                    continue;
                }
                Some(seq) if seq == self.last_seq + 1 => {
                    return Ok(self.backlog.pop_front().map(Next::Record))
                }
                // A gap (the live channel lagged while records were drained into the backlog):
                // everything published was committed first, so the store has what is missing.
                Some(_) => {
                    let records = self.unseen().await?;
                    match records.first().map(|r| r.seq) {
                        Some(seq) if seq == self.last_seq + 1 => {}
                        // Retention compacted the journal of the finished task: nothing between
                        // its first and last appends is kept, and what follows is all there is.
                        Some(seq) if self.compacted().await? => self.last_seq = seq - 1,
                        _ => {
                            return Err(StoreError::Corrupt {
                                task_id: self.task_id.to_string(),
                                seq: self.last_seq + 1,
                                reason: "a published record is missing from the store".to_owned(),
                            }
                            .into())
                        }
                    }
                    self.backlog = records.into();
                    continue;
                }
                // The store may hold more than one page: read it before following live records
                // (or saying the task's run stopped: what was committed is read all the same).
                None if self.paging => {
                    let page = self.unseen().await?;
                    self.backlog.extend(page);
                    continue;
                }
                None if self.write_failed => return Err(self.storage_unavailable()),
                None => {}
            }
            // Serverless mode: nothing runs between requests, so what the journal holds is all
            // this invocation can send; a client resumes with `Last-Event-ID` in a later one.
            if self.engine.inner.passes.is_some() {
                return Ok(None);
            }
            // Restate mode: the workflows append in other processes (or beside the engine, not
            // through it): the store is followed as on a shared store.
            let received = if self.engine.inner.shared() || self.engine.inner.restate().is_some() {
                match self.poll_shared().await? {
                    Some(Live::Published(received)) => received,
                    Some(Live::Tokens(chunk)) => return Ok(Some(Next::Tokens(chunk))),
                    None => continue,
                }
            } else {
                match self.recv_live().await {
                    Live::Published(received) => received,
                    Live::Tokens(chunk) => return Ok(Some(Next::Tokens(chunk))),
                }
            };
            match received.as_deref() {
                Ok(Published::WriteFailed) => return Err(self.storage_unavailable()),
                Ok(published @ Published::Records { .. }) => {
                    let mut unseen = published.records_after(self.last_seq).peekable();
                    match unseen.peek().map(|r| r.seq) {
                        None => continue,
                        // The next records: the backlog hands them out from the next turn.
                        Some(seq) if seq == self.last_seq + 1 => self.backlog.extend(unseen),
                        // A gap (records were committed by another process): read the store.
                        Some(_) => {
                            let records = self.unseen().await?;
                            self.backlog.extend(records);
                        }
                    }
                }
                // We lagged: read the store.
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let records = self.unseen().await?;
                    self.backlog.extend(records);
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(None),
            }
        }
    }

    /// On a shared store other engines commit this task's records too: wait for a live record, and
    /// read the store when it is quiet, less and less often while nothing happens (a task may wait a
    /// day for a human). `None` when the store was read (the backlog holds what it had).
    async fn poll_shared(&mut self) -> Result<Option<Live>, StoreError> {
        let quiet = self.engine.inner.config.poll * (1 << self.quiet_polls.min(4));
        if let Ok(received) =
            tokio::time::timeout(quiet.min(Duration::from_secs(2)), self.recv_live()).await
        {
            if matches!(received, Live::Published(_)) {
                self.quiet_polls = 0;
            }
            return Ok(Some(received));
        }
        self.quiet_polls += 1;
        match self.unseen().await {
            Ok(records) => {
                self.failed_polls = 0;
                if !records.is_empty() {
                    self.quiet_polls = 0;
                }
                self.backlog.extend(records);
                Ok(None)
            }
            // The database may be restarting: keep following a while, then tell the subscriber.
            Err(e) if self.failed_polls + 1 < POLL_FAILURES => {
                self.failed_polls += 1;
                tracing::warn!(task = %self.task_id, error = %e, attempt = self.failed_polls, "subscription cannot read the store; retrying");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The next live record, or piece of streamed text when the subscriber follows it. Text is
    /// taken first: every piece sent before a record was published is returned before it (the
    /// answer's journaled artifact never comes before the text it replaces). A subscriber that
    /// lagged on text skips what it missed.
    async fn recv_live(&mut self) -> Live {
        if let Some(chunk) = self.caught_up.pop_front() {
            return Live::Tokens(chunk);
        }
        loop {
            let Some(tokens) = self.tokens.as_mut() else {
                return Live::Published(self.rx.recv().await);
            };
            tokio::select! {
                biased;
                chunk = tokens.recv() => match chunk {
                    Ok(chunk) => return Live::Tokens(chunk),
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => self.tokens = None,
                },
                received = self.rx.recv() => return Live::Published(received),
            }
        }
    }

    /// True when a gap in what the store holds of the task is retention's: only a finished
    /// task's journal is ever compacted (`engine::Retention`).
    async fn compacted(&self) -> Result<bool, StoreError> {
        let row = self.engine.inner.store.task(&self.task_id).await?;
        Ok(row.is_some_and(|row| row.state.is_terminal()))
    }

    fn storage_unavailable(&self) -> EngineError {
        EngineError::StorageUnavailable {
            task_id: self.task_id.to_string(),
        }
    }

    /// The next page the store holds after the last record returned.
    async fn unseen(&mut self) -> Result<Vec<JournalRecord>, StoreError> {
        self.page_after(self.last_seq).await
    }

    /// The page the store holds after `seq`; an empty one ends paging (live records follow).
    async fn page_after(&mut self, seq: u64) -> Result<Vec<JournalRecord>, StoreError> {
        let page = self
            .engine
            .inner
            .store
            .journal_page(&self.task_id, seq, PAGE_APPENDS)
            .await?;
        self.paging = !page.is_empty();
        Ok(page)
    }

    /// Move already-published live records into the backlog, dropping ones we have seen. After a lag
    /// the backlog has a gap, which [`Subscription::next_record`] fills from the store.
    fn drain_live(&mut self) {
        loop {
            match self.rx.try_recv().as_deref() {
                Ok(published @ Published::Records { .. }) => {
                    let newest = self.backlog.back().map(|r| r.seq).unwrap_or(self.last_seq);
                    self.backlog.extend(published.records_after(newest));
                }
                Ok(Published::WriteFailed) => self.write_failed = true,
                Err(broadcast::error::TryRecvError::Lagged(_)) => continue,
                Err(_) => break,
            }
        }
    }
}
