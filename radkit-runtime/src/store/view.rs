//! The task as A2A shows it — its status message, its history and its artifacts — kept current by
//! every store with every append, so that reading a task costs the same however long its journal.
//!
//! `ViewDelta::of` says what one append changes, from its entries alone; a store applies it in the
//! append's own transaction: the status message and its time on the task row, history messages and
//! artifact pieces in two tables keyed by the seq of the entry that made them. `MemView` holds the
//! same rows in memory (the memory store; folding a journal written before the view existed). The
//! reference is [`fold_journal`], the fold of the whole journal, entry by entry, with no deltas: the
//! conformance suite and `EngineBuilder::check_fold` hold every store to it.
//!
//! The one rule that needs the task's state before the append (a status change clears the status
//! message unless the state stays the same) is left to the store as `StatusChange::unless_state_was`,
//! which SQL evaluates against the row's old `state` in the same `UPDATE`. The row's state is the
//! state the view would fold to at every append's end: a question is journaled with its
//! `input-required` status change in one append.
//!
//! The view also says whether the task is settled at its last entry (ended, or waiting for input
//! with nothing after the question that answers it): where a stream for a client ends. That is not
//! the row's state: a task canceled while it waited for input stays `input-required` while its
//! compensations run, but it is not settled.

#[cfg(any(feature = "sqlite", feature = "postgres"))]
use super::StoreError;
use super::TaskRecord;
use crate::journal::{Entry, JournalRecord};
use crate::model::{Artifact, Message, TaskState};

/// A task's row and what A2A shows of it, read in one consistent snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskView {
    /// The task row (its `state` is the status's state, `last_seq` the journal position shown).
    pub record: TaskRecord,
    /// The status message, if any.
    pub status_message: Option<Message>,
    /// When the status last changed (ms since the epoch).
    pub status_at_ms: i64,
    /// The newest history messages asked for, oldest first, as journaled (not yet scoped to the task).
    pub history: Vec<Message>,
    /// The artifacts, in order of first emission, chunks joined.
    pub artifacts: Vec<Artifact>,
    /// The task is settled at `record.last_seq`: ended, or waiting for input with nothing committed
    /// after the question that answers it. A stream for a client ends here.
    pub settled: bool,
}

/// True for an entry that answers a question asked before it: a reply, a new visit, the task working
/// again (a question that expired takes its default and the step goes on), the end.
pub(crate) fn answers(entry: &Entry) -> bool {
    matches!(
        entry,
        Entry::MessageReceived { .. }
            | Entry::QueuedDelivered { .. }
            | Entry::Activated { .. }
            | Entry::StatusChanged {
                state: TaskState::Working
            }
            | Entry::Terminal { .. }
    )
}

/// True when `journal` (from its start) leaves the task settled: its last question or end is an end,
/// or a question that nothing after it answers.
pub(crate) fn settled(journal: &[JournalRecord]) -> bool {
    let last = journal.iter().rposition(|r| {
        matches!(
            r.entry,
            Entry::AwaitingInput { .. } | Entry::Terminal { .. }
        )
    });
    match last {
        Some(i) => {
            matches!(journal[i].entry, Entry::Terminal { .. })
                || !journal[i + 1..].iter().any(|r| answers(&r.entry))
        }
        None => false,
    }
}

impl TaskView {
    /// The view of `record`'s task folded from its whole `journal` (from its first entry), with the
    /// newest `history` history messages (all when `None`): what a store's view must equal.
    pub fn from_journal(
        record: TaskRecord,
        journal: &[JournalRecord],
        history: Option<usize>,
    ) -> TaskView {
        fold_journal(record, journal, history)
    }
}

/// The reference: the view of `record`'s task folded from its whole `journal` (from its first
/// entry), with the newest `history` history messages (all when `None`). Its state and `last_seq`
/// are the journal's; the rest of `record` is kept.
pub(crate) fn fold_journal(
    mut record: TaskRecord,
    journal: &[JournalRecord],
    history: Option<usize>,
) -> TaskView {
    let mut state = TaskState::Submitted;
    let mut status_message: Option<&Message> = None;
    let mut status_at_ms = 0;
    let mut messages: Vec<&Message> = Vec::new();
    let mut artifacts: Vec<Artifact> = Vec::new();
    for r in journal {
        match &r.entry {
            Entry::TaskCreated { .. } => status_at_ms = r.at_ms,
            Entry::MessageReceived { message }
            | Entry::MessageQueued { message, .. }
            | Entry::MessageEmitted { message } => messages.push(message),
            Entry::Progress { message } => {
                status_message = Some(message);
                status_at_ms = r.at_ms;
            }
            Entry::StatusChanged { state: s } => {
                if *s != state {
                    status_message = None;
                }
                state = *s;
                status_at_ms = r.at_ms;
            }
            Entry::AwaitingInput { message, .. } => {
                messages.push(message);
                state = TaskState::InputRequired;
                status_message = Some(message);
                status_at_ms = r.at_ms;
            }
            Entry::Terminal { state: s, message } => {
                state = *s;
                status_message = message.as_ref();
                messages.extend(message);
                status_at_ms = r.at_ms;
            }
            Entry::ArtifactEmitted {
                artifact, append, ..
            } => match artifacts
                .iter_mut()
                .find(|a| a.artifact_id == artifact.artifact_id)
            {
                Some(existing) if *append => existing.parts.extend(artifact.parts.iter().cloned()),
                Some(existing) => *existing = artifact.clone(),
                None => artifacts.push(artifact.clone()),
            },
            _ => {}
        }
    }
    let skip = history.map_or(0, |n| messages.len().saturating_sub(n));
    record.state = state;
    record.last_seq = journal.last().map_or(0, |r| r.seq);
    TaskView {
        record,
        status_message: status_message.cloned(),
        status_at_ms,
        history: messages[skip..].iter().map(|m| (*m).clone()).collect(),
        artifacts,
        settled: settled(journal),
    }
}

/// What one append changes in its task's view.
#[derive(Debug, Default)]
pub(crate) struct ViewDelta<'a> {
    /// The status, when an entry touches it (its time is then the append's).
    pub status: Option<StatusChange<'a>>,
    /// The state the view is in after the append, when an entry of it says.
    pub state: Option<TaskState>,
    /// Messages added to the history, with their entries' seqs.
    pub history: Vec<(u64, &'a Message)>,
    /// Artifact pieces: one per artifact the append emits, in order of first emission in it.
    pub artifacts: Vec<ArtifactPiece>,
    /// Whether the task is settled after the append, when an entry of it says: a question or the end
    /// settles it, an answer ([`answers`]) unsettles it.
    pub settled: Option<bool>,
}

/// A change of the status message.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct StatusChange<'a> {
    /// The message is cleared unless the task's state before the append was this one (a status
    /// change whose previous state this append does not know).
    pub unless_state_was: Option<TaskState>,
    /// The message the append sets (`Some(None)`: none); `None` keeps the current one.
    pub set: Option<Option<&'a Message>>,
}

impl StatusChange<'_> {
    /// The status message after the append, given the state and message before it.
    pub fn resolve(&self, state_before: TaskState, before: Option<&Message>) -> Option<Message> {
        if self.unless_state_was.is_some_and(|s| s != state_before) {
            return None;
        }
        match self.set {
            Some(message) => message.cloned(),
            None => before.cloned(),
        }
    }
}

/// What one append adds to one artifact.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ArtifactPiece {
    /// The seq of the append's first entry emitting the artifact: its position when it is new.
    pub seq: u64,
    /// Whether the artifact's earlier pieces go (the append emits it whole, not as a chunk to add).
    pub replaces: bool,
    /// The whole artifact when it replaces or is new, else the parts to add (the other fields of an
    /// added chunk are not shown).
    pub artifact: Artifact,
}

impl<'a> ViewDelta<'a> {
    /// What an append of `entries`, the first at `first_seq`, changes.
    pub fn of(first_seq: u64, entries: &'a [Entry]) -> Self {
        let mut delta = ViewDelta::default();
        for (seq, entry) in (first_seq..).zip(entries) {
            delta.push(seq, entry);
        }
        delta
    }

    fn push(&mut self, seq: u64, entry: &'a Entry) {
        match entry {
            Entry::AwaitingInput { .. } | Entry::Terminal { .. } => self.settled = Some(true),
            entry if answers(entry) => self.settled = Some(false),
            _ => {}
        }
        match entry {
            Entry::TaskCreated { .. } => {
                self.status.get_or_insert_default();
                self.state = Some(TaskState::Submitted);
            }
            Entry::MessageReceived { message }
            | Entry::MessageQueued { message, .. }
            | Entry::MessageEmitted { message } => {
                self.history.push((seq, message));
            }
            Entry::Progress { message } => self.set_message(Some(message)),
            Entry::StatusChanged { state } => {
                let status = self.status.get_or_insert_default();
                match self.state {
                    Some(now) if now != *state => {
                        *status = StatusChange {
                            unless_state_was: None,
                            set: Some(None),
                        }
                    }
                    Some(_) => {}
                    None => status.unless_state_was = Some(*state),
                }
                self.state = Some(*state);
            }
            Entry::AwaitingInput { message, .. } => {
                self.history.push((seq, message));
                self.set_message(Some(message));
                self.state = Some(TaskState::InputRequired);
            }
            Entry::Terminal { state, message } => {
                if let Some(message) = message {
                    self.history.push((seq, message));
                }
                self.set_message(message.as_ref());
                self.state = Some(*state);
            }
            Entry::ArtifactEmitted {
                artifact, append, ..
            } => match self
                .artifacts
                .iter_mut()
                .find(|p| p.artifact.artifact_id == artifact.artifact_id)
            {
                Some(piece) if *append => {
                    piece.artifact.parts.extend(artifact.parts.iter().cloned())
                }
                Some(piece) => {
                    piece.artifact = artifact.clone();
                    piece.replaces = true;
                }
                None => self.artifacts.push(ArtifactPiece {
                    seq,
                    replaces: !append,
                    artifact: artifact.clone(),
                }),
            },
            _ => {}
        }
    }

    fn set_message(&mut self, message: Option<&'a Message>) {
        *self.status.get_or_insert_default() = StatusChange {
            unless_state_was: None,
            set: Some(message),
        };
    }
}

/// One stored artifact piece: `pos` is the artifact's position (the seq of its first emission),
/// `seq` the piece's own.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ArtifactRow {
    pub pos: u64,
    pub seq: u64,
    pub artifact: Artifact,
}

/// The artifacts that rows of pieces make, the rows in `(pos, seq)` order: the first piece of each
/// position is the artifact, the later ones add their parts.
pub(crate) fn join_pieces(rows: impl IntoIterator<Item = (u64, Artifact)>) -> Vec<Artifact> {
    let mut out: Vec<(u64, Artifact)> = Vec::new();
    for (pos, piece) in rows {
        match out.last_mut() {
            Some((last, artifact)) if *last == pos => artifact.parts.extend(piece.parts),
            _ => out.push((pos, piece)),
        }
    }
    out.into_iter().map(|(_, artifact)| artifact).collect()
}

/// A view's rows in memory, changed by [`ViewDelta`]s with the stores' rules.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MemView {
    /// The state the view folded to (the prior state of the next append's status change).
    pub state: TaskState,
    pub status_message: Option<Message>,
    pub status_at_ms: i64,
    pub history: Vec<(u64, Message)>,
    pub artifacts: Vec<ArtifactRow>,
    pub settled: bool,
}

impl Default for MemView {
    fn default() -> Self {
        MemView {
            state: TaskState::Submitted,
            status_message: None,
            status_at_ms: 0,
            history: Vec::new(),
            artifacts: Vec::new(),
            settled: false,
        }
    }
}

impl MemView {
    /// The view of a journal (from its first entry), folded one record at a time.
    pub fn fold(records: &[JournalRecord]) -> Self {
        let mut view = MemView::default();
        for record in records {
            view.apply(
                &ViewDelta::of(record.seq, std::slice::from_ref(&record.entry)),
                record.at_ms,
            );
        }
        view
    }

    /// The view a store read, with its whole history, to fold on from: its artifacts keep their
    /// order (a later piece of one of them joins it; a new one comes after them all, as its
    /// first seq is past every position they had).
    pub fn from_view(view: &TaskView) -> Self {
        MemView {
            state: view.record.state,
            status_message: view.status_message.clone(),
            status_at_ms: view.status_at_ms,
            history: view.history.iter().map(|m| (0, m.clone())).collect(),
            artifacts: (0u64..)
                .zip(&view.artifacts)
                .map(|(pos, artifact)| ArtifactRow {
                    pos,
                    seq: 0,
                    artifact: artifact.clone(),
                })
                .collect(),
            settled: view.settled,
        }
    }

    /// Apply an append's delta, committed at `at_ms`.
    pub fn apply(&mut self, delta: &ViewDelta<'_>, at_ms: i64) {
        if let Some(status) = &delta.status {
            self.status_message = status.resolve(self.state, self.status_message.as_ref());
            self.status_at_ms = at_ms;
        }
        if let Some(state) = delta.state {
            self.state = state;
        }
        if let Some(settled) = delta.settled {
            self.settled = settled;
        }
        self.history
            .extend(delta.history.iter().map(|(seq, m)| (*seq, (*m).clone())));
        for piece in &delta.artifacts {
            let id = &piece.artifact.artifact_id;
            let pos = self
                .artifacts
                .iter()
                .filter(|r| &r.artifact.artifact_id == id)
                .map(|r| r.pos)
                .min();
            if piece.replaces {
                self.artifacts.retain(|r| &r.artifact.artifact_id != id);
            }
            self.artifacts.push(ArtifactRow {
                pos: pos.unwrap_or(piece.seq),
                seq: piece.seq,
                artifact: piece.artifact.clone(),
            });
        }
    }

    /// The view of `record` with the newest `history` messages (all when `None`).
    pub fn view(&self, record: TaskRecord, history: Option<usize>) -> TaskView {
        let skip = history.map_or(0, |n| self.history.len().saturating_sub(n));
        let mut rows: Vec<&ArtifactRow> = self.artifacts.iter().collect();
        rows.sort_by_key(|r| (r.pos, r.seq));
        TaskView {
            record,
            status_message: self.status_message.clone(),
            status_at_ms: self.status_at_ms,
            history: self.history[skip..]
                .iter()
                .map(|(_, m)| m.clone())
                .collect(),
            artifacts: join_pieces(rows.into_iter().map(|r| (r.pos, r.artifact.clone()))),
            settled: self.settled,
        }
    }
}

/// An append's delta as the SQL stores bind it (encoded on the caller's thread, with the journal
/// row's body).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[derive(Debug, Default)]
pub(crate) struct EncodedView {
    /// Whether the status changes (its time is then the append's).
    pub touched: bool,
    /// [`StatusChange::unless_state_was`], as stored.
    pub unless_state_was: Option<&'static str>,
    /// Whether the append sets the message, and to what (JSON; `None` clears it).
    pub set: bool,
    pub message: Option<String>,
    /// `(seq, message JSON)`.
    pub history: Vec<(i64, String)>,
    /// `(seq, artifact id, replaces, artifact JSON)`.
    pub artifacts: Vec<(i64, String, bool, String)>,
    /// [`ViewDelta::settled`].
    pub settled: Option<bool>,
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl EncodedView {
    pub fn new(first_seq: u64, entries: &[Entry]) -> Result<Self, StoreError> {
        let delta = ViewDelta::of(first_seq, entries);
        let seq = |s: u64| super::to_sql_int("seq", s);
        let mut encoded = EncodedView {
            settled: delta.settled,
            ..EncodedView::default()
        };
        if let Some(status) = &delta.status {
            encoded.touched = true;
            encoded.unless_state_was = status.unless_state_was.map(TaskState::as_str);
            if let Some(message) = status.set {
                encoded.set = true;
                encoded.message = message.map(json).transpose()?;
            }
        }
        for (s, message) in &delta.history {
            encoded.history.push((seq(*s)?, json(*message)?));
        }
        for piece in &delta.artifacts {
            encoded.artifacts.push((
                seq(piece.seq)?,
                piece.artifact.artifact_id.clone(),
                piece.replaces,
                json(&piece.artifact)?,
            ));
        }
        Ok(encoded)
    }
}

/// `value` as the JSON the view stores (its messages and artifacts, in both SQL stores).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::backend("a task view value does not serialize", e))
}

/// Decode a stored JSON value of the view of `task_id`.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    task_id: &str,
    what: &str,
    body: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(body).map_err(|e| StoreError::Corrupt {
        task_id: task_id.to_owned(),
        seq: 0,
        reason: format!("{what} in the task view: {e}"),
    })
}
