//! Stores persist task rows and journals. They know nothing of skills, steps or HTTP: an append is a
//! batch of opaque entries for one task at an expected position, plus the task row's new summary.
//!
//! Every store passes the same conformance suite (`store::conformance`).

use std::borrow::Cow;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::journal::{Entry, JournalRecord};
use crate::model::TaskState;

#[cfg(feature = "testing")]
pub mod conformance;
pub mod lease;
pub mod memory;
pub mod postgres;
pub mod sqlite;

pub use lease::{Lease, Leases, NewLease, CREATION_TOKEN};
pub use memory::MemoryStore;
pub use postgres::PostgresStore;
pub use sqlite::{Durability, SqliteStore};

/// The summary row of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// Task id.
    pub id: String,
    /// Context id.
    pub context_id: String,
    /// Skill id.
    pub skill_id: String,
    /// Skill version at creation.
    pub skill_version: String,
    /// Creator (tasks are visible only to it when auth is on).
    pub principal: Option<String>,
    /// Current state (a projection of the journal, kept for queries).
    pub state: TaskState,
    /// Creation time, ms since the epoch.
    pub created_at_ms: i64,
    /// Last append time, ms since the epoch.
    pub updated_at_ms: i64,
    /// When a timer of this task fires, if one is pending.
    pub wake_at_ms: Option<i64>,
    /// Seq of the last journal entry (0 when empty).
    pub last_seq: u64,
}

/// One atomic append to one task's journal.
#[derive(Debug, Clone, PartialEq)]
pub struct Append {
    /// The task.
    pub task_id: String,
    /// Seq of the first entry; must be the task's `last_seq + 1`, else [`StoreError::Conflict`].
    pub first_seq: u64,
    /// The entries, in order.
    pub entries: Vec<Entry>,
    /// The task row to create (with `first_seq == 1`), if this append creates the task.
    pub create: Option<TaskRecord>,
    /// New state for the row, if it changed.
    pub state: Option<TaskState>,
    /// New timer for the row: `Some(None)` clears it.
    pub wake_at_ms: Option<Option<i64>>,
    /// Lease fencing token the writer holds; stores with leases refuse stale tokens.
    pub fence: Option<u64>,
    /// With `create`: take the new task's lease for this owner (token [`CREATION_TOKEN`]). Stores
    /// without leases ignore it.
    pub lease: Option<NewLease>,
}

impl Append {
    /// An append of `entries` to `task_id` at `first_seq`, changing nothing else.
    pub fn new(task_id: impl Into<String>, first_seq: u64, entries: Vec<Entry>) -> Self {
        Append {
            task_id: task_id.into(),
            first_seq,
            entries,
            create: None,
            state: None,
            wake_at_ms: None,
            fence: None,
            lease: None,
        }
    }
}

/// An append with its entries serialized on the caller's thread (not the writer's): `(kind, JSON)`.
pub(crate) struct Encoded {
    pub append: Append,
    pub rows: Vec<(&'static str, String)>,
}

impl Encoded {
    pub fn new(append: Append) -> Result<Self, StoreError> {
        let rows = append
            .entries
            .iter()
            .map(|entry| {
                let body = serde_json::to_string(entry)
                    .map_err(|e| StoreError::Backend(format!("entry does not serialize: {e}")))?;
                Ok((entry.kind_name(), body))
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(Encoded { append, rows })
    }
}

/// Write statistics: how many appends were committed in how many transactions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Committed transactions.
    pub batches: u64,
    /// Appends committed.
    pub appends: u64,
}

impl Encoded {
    /// The append as one journal row `(kinds, body, last seq)`: one entry is stored as itself, several
    /// as a JSON array of the already encoded entries with the last one's seq (read back by
    /// [`decode_row`]).
    pub(crate) fn journal_row(&self) -> (Cow<'_, str>, Cow<'_, str>, Option<i64>) {
        match self.rows.as_slice() {
            // The common case on the append path: no copy.
            [(kind, body)] => (Cow::Borrowed(*kind), Cow::Borrowed(body.as_str()), None),
            rows => {
                let kinds: Vec<&str> = rows.iter().map(|(k, _)| *k).collect();
                let mut body =
                    String::with_capacity(rows.iter().map(|(_, b)| b.len() + 1).sum::<usize>() + 1);
                body.push('[');
                for (i, (_, entry)) in rows.iter().enumerate() {
                    if i > 0 {
                        body.push(',');
                    }
                    body.push_str(entry);
                }
                body.push(']');
                let last = self.append.first_seq + rows.len() as u64 - 1;
                (
                    Cow::Owned(kinds.join(",")),
                    Cow::Owned(body),
                    Some(last as i64),
                )
            }
        }
    }
}

/// Decode a journal row written by [`Encoded::journal_row`] (or an older one-entry row) into `out`,
/// keeping the entries after `after_seq`.
pub(crate) fn decode_row(
    task_id: &str,
    seq: u64,
    at_ms: i64,
    body: &str,
    after_seq: u64,
    out: &mut Vec<JournalRecord>,
) -> Result<(), StoreError> {
    let corrupt = |e: serde_json::Error| StoreError::Corrupt {
        task_id: task_id.to_owned(),
        seq,
        reason: e.to_string(),
    };
    if body.starts_with('[') {
        let entries: Vec<Entry> = serde_json::from_str(body).map_err(corrupt)?;
        out.extend(
            (seq..)
                .zip(entries)
                .filter(|(seq, _)| *seq > after_seq)
                .map(|(seq, entry)| JournalRecord { seq, at_ms, entry }),
        );
    } else if seq > after_seq {
        let entry = serde_json::from_str(body).map_err(corrupt)?;
        out.push(JournalRecord { seq, at_ms, entry });
    }
    Ok(())
}

/// Which tasks to list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskQuery {
    /// Only tasks not in a terminal state.
    pub non_terminal: bool,
    /// Only tasks of this principal.
    pub principal: Option<String>,
    /// Only tasks whose timer is due at or before this time.
    pub wake_due_ms: Option<i64>,
    /// Only tasks whose id starts with this prefix: compared character by character, case-sensitive,
    /// with no wildcards (`%`, `_` and `\` are plain characters); `Some("")` matches every task.
    /// Stores answer it with an index range over the ids, so a prefix is as cheap as an exact id.
    pub id_prefix: Option<String>,
    /// At most this many (newest first when set; all when `None`).
    pub limit: Option<usize>,
}

/// The least string above every string that starts with `prefix`, in code point order (which is
/// UTF-8 byte order, SQLite's `BINARY` and Postgres's `"C"` collation): the ids with that prefix are
/// exactly those in `prefix..upper`. `None` when there is no such string (the empty prefix, or one of
/// only `char::MAX`): then every id at or above `prefix` has it.
pub(crate) fn prefix_upper_bound(prefix: &str) -> Option<String> {
    let mut upper = prefix.to_owned();
    while let Some(last) = upper.pop() {
        // The next scalar value: surrogates are not `char`s, so `\u{D7FF}` is followed by `\u{E000}`.
        let next = match last as u32 + 1 {
            0xD800 => Some('\u{E000}'),
            n => char::from_u32(n),
        };
        if let Some(next) = next {
            upper.push(next);
            return Some(upper);
        }
    }
    None
}

/// Store failures.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The append's `first_seq` is not the task's next seq (a gap or a duplicate), or the task to
    /// create exists already, or the task to append to does not exist.
    #[error("journal conflict on task {task_id}: expected seq {expected}, got {got}")]
    Conflict {
        /// Task.
        task_id: String,
        /// The seq the store expected.
        expected: u64,
        /// The seq the append carried.
        got: u64,
    },
    /// The writer's lease was taken over (fencing token is stale).
    #[error("lease on task {task_id} lost: fencing token {token} is stale")]
    Fenced {
        /// Task.
        task_id: String,
        /// The stale token.
        token: u64,
    },
    /// A stored entry could not be decoded.
    #[error("corrupt journal entry for task {task_id} at seq {seq}: {reason}")]
    Corrupt {
        /// Task.
        task_id: String,
        /// Position.
        seq: u64,
        /// Why.
        reason: String,
    },
    /// The backend failed (I/O, connection, SQL).
    #[error("store backend error: {0}")]
    Backend(String),
    /// The store is shut down.
    #[error("store is closed")]
    Closed,
}

/// Persistence of tasks and journals.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Atomically append entries (and create or update the task row). Appends from many tasks may be
    /// committed together (group commit); each caller learns its own result.
    async fn append(&self, append: Append) -> Result<(), StoreError>;

    /// The task row.
    async fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError>;

    /// Journal entries of a task with `seq > after_seq`, in order.
    async fn journal(
        &self,
        task_id: &str,
        after_seq: u64,
    ) -> Result<Vec<JournalRecord>, StoreError>;

    /// Task rows matching `query`.
    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError>;

    /// What replay needs: the first entry (`task_created`) and every entry from the last
    /// `checkpoint` on, in order (all entries when there is no checkpoint). Replay restarts at the
    /// last checkpoint it sees, so the default (the whole journal) is correct but slow for long
    /// tasks; the conformance suite requires a store to override it and return nothing between the
    /// first append and the last checkpoint's append.
    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        self.journal(task_id, 0).await
    }

    /// Leases, when many engines share this store; `None` (the default) when one engine owns it.
    fn leases(&self) -> Option<&dyn Leases> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::prefix_upper_bound;

    #[test]
    fn prefix_upper_bound_is_the_next_string_past_every_extension() {
        assert_eq!(prefix_upper_bound("ab").as_deref(), Some("ac"));
        assert_eq!(prefix_upper_bound("a%").as_deref(), Some("a&"));
        assert_eq!(prefix_upper_bound("é").as_deref(), Some("ê"));
        assert_eq!(prefix_upper_bound("\u{7F}").as_deref(), Some("\u{80}"));
        assert_eq!(
            prefix_upper_bound("x\u{D7FF}").as_deref(),
            Some("x\u{E000}")
        );
        assert_eq!(prefix_upper_bound("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_upper_bound("\u{10FFFF}\u{10FFFF}"), None);
        assert_eq!(prefix_upper_bound(""), None);
        for id in ["ab", "ab\u{10FFFF}", "abzzz", "ab\u{0}"] {
            assert!(("ab".."ac").contains(&id), "{id:?}");
            // Rust compares `str` by bytes, the order the stores' indexes use.
            assert!(id.as_bytes() < "ac".as_bytes());
        }
    }
}
