//! Stores persist task rows and journals. They know nothing of skills, steps or HTTP: an append is a
//! batch of opaque entries for one task at an expected position, plus the task row's new summary.
//!
//! Every store passes the same conformance suite (`store::conformance`). The memory store is always
//! compiled; `SqliteStore` comes with the `sqlite` cargo feature, `PostgresStore` with `postgres`.

use std::borrow::Cow;
use std::error::Error;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::journal::{Entry, JournalRecord};
use crate::model::TaskState;

#[cfg(feature = "testing")]
pub mod conformance;
mod dispatch;
mod lease;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
mod push;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;
mod stats;
pub(crate) mod view;

pub use dispatch::{DispatchStore, Dispatched};
pub use lease::{older_than, Lease, LeaseChange, LeaseHolder, Leases, NewLease, CREATION_TOKEN};
pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use postgres::PostgresStore;
/// The statements a [`PostgresStore`] reads one task's journal and appends with, for the tests
/// that check their plans; not part of the API.
#[cfg(feature = "postgres")]
#[doc(hidden)]
pub use postgres::{APPEND_SQL, JOURNAL_FOR_REPLAY, JOURNAL_PAGE};
pub use push::{PushAuth, PushClaim, PushConfig, PushDelivery, PushFormat, PushStore};
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use sqlite::{Durability, SqliteStore};
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use stats::Commits;
pub use stats::{StoreStats, BATCH_SIZE_BOUNDS};
pub use view::TaskView;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use sql::{decode_row, prefix_upper_bound, sql_terminal_states, to_sql_int, Encoded};
#[cfg(feature = "postgres")]
pub(crate) use sql::{from_sql_int, sql_state_list};

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
    /// The task waits on a call bound to its callee's task (a callee that may settle while no
    /// engine watches it): an engine that starts asks such a callee at once rather than at the
    /// row's wake time (the call's recheck).
    #[serde(default)]
    pub waits_on_call: bool,
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
    /// The entries, in order (shared: the engine publishes them to subscribers after the commit
    /// without copying them for the store).
    pub entries: Arc<[Entry]>,
    /// The task row to create (with `first_seq == 1`), if this append creates the task.
    pub create: Option<TaskRecord>,
    /// New state for the row, if it changed.
    pub state: Option<TaskState>,
    /// New timer for the row: `Some(None)` clears it.
    pub wake_at_ms: Option<Option<i64>>,
    /// New [`TaskRecord::waits_on_call`] for the row (written with the wake time).
    pub waits_on_call: Option<bool>,
    /// Lease fencing token the writer holds; stores with leases refuse stale tokens.
    pub fence: Option<u64>,
    /// With `create`: take the new task's lease for this owner (token [`CREATION_TOKEN`]). Stores
    /// without leases ignore it.
    pub lease: Option<NewLease>,
    /// When the entries happened (ms since the epoch): their journal time, and the task's status
    /// time when they change it. Chosen once by the writer, so that what it publishes live and what
    /// the store reads back later say the same time.
    pub at_ms: i64,
}

impl Append {
    /// The version its task moves to, when it holds a `migrated` entry: the row's
    /// [`TaskRecord::skill_version`] from then on.
    pub fn migrated_to(&self) -> Option<&str> {
        self.entries.iter().rev().find_map(|entry| match entry {
            crate::journal::Entry::Migrated { to, .. } => Some(to.as_str()),
            _ => None,
        })
    }

    /// An append of `entries` to `task_id` at `first_seq`, changing nothing else.
    pub fn new(
        task_id: impl Into<String>,
        first_seq: u64,
        entries: impl Into<Arc<[Entry]>>,
    ) -> Self {
        Append {
            task_id: task_id.into(),
            first_seq,
            entries: entries.into(),
            create: None,
            state: None,
            wake_at_ms: None,
            waits_on_call: None,
            fence: None,
            lease: None,
            at_ms: crate::journal::now_ms(),
        }
    }
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
    /// Only tasks that wait on a call ([`TaskRecord::waits_on_call`]).
    pub waits_on_call: bool,
    /// Leave out tasks waiting for input with no timer: nothing runs for them until a reply comes,
    /// so a restart need not read them (`Engine::recover`, a sweep). The store skips them before it
    /// reads anything else of their rows.
    pub skip_idle_input: bool,
    /// Only tasks whose id starts with this prefix: compared character by character, case-sensitive,
    /// with no wildcards (`%`, `_` and `\` are plain characters); `Some("")` matches every task.
    /// Stores answer it with an index range over the ids, so a prefix is as cheap as an exact id.
    pub id_prefix: Option<String>,
    /// At most this many (newest first when set; all when `None`).
    pub limit: Option<usize>,
}

/// What one [`Store::prune`] call removes of tasks that finished (ended in a terminal state) before
/// a cutoff. A task whose push configs have not all finished delivering keeps its whole journal
/// (its sender reads it) until they have, or until it is deleted: a webhook that has not
/// acknowledged the end by the task's own cutoff never will, and its config goes with the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prune {
    /// Compact the journal of every task that finished before this time (ms since the epoch, its
    /// status time): the rows of its journal between its first append (the task's creation and the
    /// message that made it) and its last (its end) go; its row, its view (status, history,
    /// artifacts) and those two appends stay. `None`: compact nothing.
    pub journals_before_ms: Option<i64>,
    /// Delete every task that finished before this time: its row, view, journal and push configs.
    /// `tasks/get` then finds no such task. `None`: delete nothing.
    pub tasks_before_ms: Option<i64>,
    /// At most this many tasks compacted, and this many deleted, in one call (one transaction, so
    /// that appends committed beside it wait for a bounded time), oldest first.
    pub limit: usize,
}

/// What one [`Store::prune`] call did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Tasks whose journals were compacted.
    pub compacted: u64,
    /// Tasks deleted.
    pub deleted: u64,
}

impl Pruned {
    /// True when either count reached `limit`: more may be due.
    pub fn more(&self, limit: usize) -> bool {
        let limit = limit as u64;
        self.compacted >= limit || self.deleted >= limit
    }
}

/// Which task views to list (A2A 1.0 `ListTasks`), newest status first: by status time descending,
/// then id descending.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ViewQuery {
    /// Only tasks of this principal (`None`: every task).
    pub principal: Option<String>,
    /// Only tasks of this context.
    pub context_id: Option<String>,
    /// Only tasks in this state.
    pub state: Option<TaskState>,
    /// Only tasks whose status changed at or after this time (ms since the epoch).
    pub status_since_ms: Option<i64>,
    /// Only tasks whose status changed before this time (ms since the epoch).
    pub status_before_ms: Option<i64>,
    /// Only tasks of this skill.
    pub skill_id: Option<String>,
    /// Only tasks whose id starts with this prefix (as [`TaskQuery::id_prefix`]: case-sensitive, no
    /// wildcards).
    pub id_prefix: Option<String>,
    /// Only tasks after this one in the order: `(status time, id)` of the previous page's last task.
    pub after: Option<(i64, String)>,
    /// At most this many.
    pub limit: usize,
    /// History messages per task (all when `None`).
    pub history: Option<usize>,
}

/// A page of [`ViewQuery`]'s answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewPage {
    /// The views, in order.
    pub views: Vec<TaskView>,
    /// How many tasks match the query's filters, on every page (the cursor aside).
    pub total: u64,
}

/// Whether `view` passes `query`'s filters (the cursor aside).
pub(crate) fn view_matches(view: &TaskView, query: &ViewQuery) -> bool {
    query
        .principal
        .as_ref()
        .is_none_or(|p| view.record.principal.as_ref() == Some(p))
        && query
            .context_id
            .as_ref()
            .is_none_or(|c| &view.record.context_id == c)
        && query.state.is_none_or(|s| view.record.state == s)
        && query.status_since_ms.is_none_or(|t| view.status_at_ms >= t)
        && query.status_before_ms.is_none_or(|t| view.status_at_ms < t)
        && query
            .skill_id
            .as_ref()
            .is_none_or(|s| &view.record.skill_id == s)
        && query
            .id_prefix
            .as_ref()
            .is_none_or(|p| view.record.id.starts_with(p.as_str()))
}

/// A backend's error, kept whole as the source of a [`StoreError`].
pub type BoxError = Box<dyn Error + Send + Sync>;

/// Store failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// The backend failed (I/O, connection, SQL): what the store was doing, and the backend's own
    /// error as the source (its text, causes included, is part of this error's message).
    #[error("store backend error: {context}: {}", describe(.source.as_ref()))]
    Backend {
        /// What failed: `sqlite`, `postgres`, or the operation (`connecting to …`).
        context: Cow<'static, str>,
        /// The backend's error.
        #[source]
        source: BoxError,
    },
    /// A stored value is not what its column holds by the schema: `NULL`, another type, or a number
    /// out of range (a negative seq). The row was written by something other than this store, or
    /// the schema was changed by hand.
    #[error("store column `{column}` holds an unreadable value: {}", describe(.source.as_ref()))]
    Column {
        /// The column.
        column: Cow<'static, str>,
        /// Why it could not be read.
        #[source]
        source: BoxError,
    },
    /// A seq or token does not fit the stores' signed 64-bit integers.
    #[error("{what} {value} is out of range: a store holds at most {}", i64::MAX)]
    OutOfRange {
        /// What the number is.
        what: &'static str,
        /// The number.
        value: u64,
    },
    /// The task an operation names (a push config's) does not exist.
    #[error("task {task_id} does not exist")]
    UnknownTask {
        /// Task.
        task_id: String,
    },
    /// The store is shut down.
    #[error("store is closed")]
    Closed,
    /// The store does not do what was asked of it (a store that keeps every task was asked to
    /// prune finished ones: [`Store::prune`]).
    #[error("this store does not support {what}")]
    Unsupported {
        /// What it does not do.
        what: &'static str,
    },
}

impl StoreError {
    /// A [`StoreError::Backend`]: `source` failed while the store was doing `context`.
    pub fn backend(context: impl Into<Cow<'static, str>>, source: impl Into<BoxError>) -> Self {
        StoreError::Backend {
            context: context.into(),
            source: source.into(),
        }
    }

    /// True when the operation was rolled back whole because it lost a deadlock or a serialization
    /// conflict against a concurrent one (Postgres SQLSTATE `40P01`, `40001`): it changed nothing, and
    /// doing it again is safe and will likely succeed. Such an error says nothing about leases (a
    /// renewal that failed this way did not find them taken over) and costs no step (an append that
    /// failed this way wrote nothing, so the same append may be made again).
    pub fn is_retryable(&self) -> bool {
        match self {
            #[cfg(feature = "postgres")]
            StoreError::Backend { source, .. } => postgres::rolled_back(source.as_ref()),
            // Only Postgres reports such conflicts.
            _ => false,
        }
    }
}

#[cfg(feature = "sqlite")]
impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::backend("sqlite", e)
    }
}

#[cfg(feature = "postgres")]
impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        StoreError::backend("postgres", e)
    }
}

#[cfg(feature = "postgres")]
impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        StoreError::backend("postgres connection pool", e)
    }
}

/// An error and its causes, `outer: inner: …`. A Postgres server error shows its severity, SQLSTATE,
/// message, and its detail, hint and context when it has them (tokio-postgres's own text for it is
/// just "db error").
pub(crate) fn describe(error: &(dyn Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        #[cfg(feature = "postgres")]
        let text = postgres::error_text(e).unwrap_or_else(|| e.to_string());
        #[cfg(not(feature = "postgres"))]
        let text = e.to_string();
        // Wrappers often repeat their cause's text (`Arc`, `rusqlite::Error`).
        if !text.is_empty() && parts.last() != Some(&text) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
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

    /// The task row with what A2A shows of the task (status message, the newest `history` history
    /// messages or all of them, artifacts), read in one snapshot. Stores keep the view current with
    /// each append (see [`TaskView`]), so this costs the same however long the journal is. The default
    /// folds the whole journal, which is correct but costs its length.
    async fn task_view(
        &self,
        task_id: &str,
        history: Option<usize>,
    ) -> Result<Option<TaskView>, StoreError> {
        let Some(record) = self.task(task_id).await? else {
            return Ok(None);
        };
        // The journal may be newer than the row read before it: the view shows the journal.
        let journal = self.journal(task_id, 0).await?;
        Ok(Some(view::fold_journal(record, &journal, history)))
    }

    /// Task rows matching `query`.
    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError>;

    /// A page of task views matching `query` (A2A 1.0 `ListTasks`). The default reads every task
    /// row and view: correct, but it costs the number of tasks; the SQL stores answer from an index.
    async fn list_views(&self, query: &ViewQuery) -> Result<ViewPage, StoreError> {
        let rows = self
            .list(TaskQuery {
                principal: query.principal.clone(),
                ..TaskQuery::default()
            })
            .await?;
        let mut views = Vec::new();
        for row in rows {
            if let Some(view) = self.task_view(&row.id, query.history).await? {
                if view_matches(&view, query) {
                    views.push(view);
                }
            }
        }
        views.sort_by(|a, b| (b.status_at_ms, &b.record.id).cmp(&(a.status_at_ms, &a.record.id)));
        let total = views.len() as u64;
        let views = views
            .into_iter()
            .filter(|v| {
                query
                    .after
                    .as_ref()
                    .is_none_or(|(at, id)| (v.status_at_ms, &v.record.id) < (*at, id))
            })
            .take(query.limit)
            .collect();
        Ok(ViewPage { views, total })
    }

    /// How many tasks match `query`'s filters, by state (the cursor, `limit` and `history` aside):
    /// one pair per state that has tasks, in no particular order. `/metrics` reads it at scrape
    /// time. The default lists every matching view ([`Store::list_views`]), so it costs the number
    /// of tasks; the SQL stores count with one `GROUP BY` over the same filters as their
    /// `list_views`.
    async fn state_counts(&self, query: &ViewQuery) -> Result<Vec<(TaskState, u64)>, StoreError> {
        let all = ViewQuery {
            after: None,
            limit: usize::MAX,
            history: Some(0),
            ..query.clone()
        };
        let mut counts: Vec<(TaskState, u64)> = Vec::new();
        for view in self.list_views(&all).await?.views {
            match counts.iter_mut().find(|(s, _)| *s == view.record.state) {
                Some((_, n)) => *n += 1,
                None => counts.push((view.record.state, 1)),
            }
        }
        Ok(counts)
    }

    /// The skill versions unfinished tasks run on: each `(skill_id, skill_version)` once, in
    /// order (what a starting engine checks against the versions it serves). The default lists
    /// the unfinished tasks, so it costs their number; SQLite walks an index of them, one seek
    /// per pair, whatever their number.
    async fn unfinished_versions(&self) -> Result<Vec<(String, String)>, StoreError> {
        let query = TaskQuery {
            non_terminal: true,
            ..TaskQuery::default()
        };
        let pairs: std::collections::BTreeSet<(String, String)> = self
            .list(query)
            .await?
            .into_iter()
            .map(|row| (row.skill_id, row.skill_version))
            .collect();
        Ok(pairs.into_iter().collect())
    }

    /// What the store's writer committed so far ([`StoreStats`]: transactions, appends, batch
    /// sizes), for `/metrics` and the benchmarks; `None` (the default) for a store without a
    /// group-committing writer.
    fn commit_stats(&self) -> Option<StoreStats> {
        None
    }

    /// The next part of a task's journal after `after_seq`: the entries of about `appends` appends
    /// (all of each append; none when there is nothing after `after_seq`), in order. A reader that
    /// follows a long journal (a stream, a resubscribe) holds one page at a time. The default reads
    /// the whole rest, which is correct but holds it all.
    async fn journal_page(
        &self,
        task_id: &str,
        after_seq: u64,
        appends: usize,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        let _ = appends;
        self.journal(task_id, after_seq).await
    }

    /// What replay needs: the first entry (`task_created`) and every entry from the last
    /// `checkpoint` on, in order (all entries when there is no checkpoint). Replay restarts at the
    /// last checkpoint it sees, so the default (the whole journal) is correct but slow for long
    /// tasks; the conformance suite requires a store to override it and return nothing between the
    /// first append and the last checkpoint's append.
    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        self.journal(task_id, 0).await
    }

    /// Compact the journals of tasks that finished before [`Prune::journals_before_ms`], and
    /// delete the tasks that finished before [`Prune::tasks_before_ms`], each at most
    /// [`Prune::limit`], oldest first (see [`Prune`]). Running tasks and tasks waiting for input are
    /// never touched, nor the journals of tasks whose push deliveries are not finished; calling it
    /// again, or from several engines at once, is safe. The default answers [`StoreError::Unsupported`]: such a
    /// store keeps every task.
    async fn prune(&self, prune: &Prune) -> Result<Pruned, StoreError> {
        let _ = prune;
        Err(StoreError::Unsupported {
            what: "pruning finished tasks",
        })
    }

    /// Leases, when many engines share this store; `None` (the default) when one engine owns it.
    fn leases(&self) -> Option<&dyn Leases> {
        None
    }

    /// Push-notification configs and delivery cursors ([`PushStore`]); `None` (the default) for a
    /// store without them, whose agent answers the push methods with `PushNotificationNotSupported`.
    fn push(&self) -> Option<&dyn PushStore> {
        None
    }

    /// The executors' to-do list ([`DispatchStore`]); `None` (the default) for a store executors
    /// cannot share.
    fn dispatch(&self) -> Option<&dyn DispatchStore> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backend_error_keeps_its_source_and_says_what_failed() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "no access");
        let e = StoreError::backend("creating directory /x", io);
        assert_eq!(
            e.to_string(),
            "store backend error: creating directory /x: no access"
        );
        let source = e.source().expect("a source");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn a_sqlite_error_is_a_backend_error_with_its_text() {
        let sqlite: StoreError = rusqlite::Connection::open_in_memory()
            .unwrap()
            .execute("SELECT * FROM missing", [])
            .unwrap_err()
            .into();
        assert!(
            sqlite.to_string().contains("no such table: missing"),
            "{sqlite}"
        );
        assert!(sqlite.source().is_some_and(|s| s.is::<rusqlite::Error>()));
    }
}
