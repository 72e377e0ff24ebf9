//! What the SQL stores (`sqlite`, `postgres`) share and the memory store does not need: an append
//! encoded as the one journal row it is stored as, the integer conversions between the API's `u64`
//! and SQL's signed 64-bit integers, state lists written as SQL, and an id prefix as an index range.
//! Compiled with either store's feature; it never touches a connection.

use super::view;
use super::{Append, StoreError};
use crate::journal::{Entry, JournalRecord};
use crate::model::TaskState;

/// An append encoded on the caller's thread (not the writer's) as the one journal row it is stored
/// as: one entry is stored as itself, several as a JSON array of the entries `first_seq..=last_seq`
/// (read back by [`decode_row`]). Seqs are checked to fit the stores' signed 64-bit integers here,
/// once, so the writers bind them without casts.
pub(crate) struct Encoded {
    pub append: Append,
    /// The row's `body`.
    pub body: String,
    /// `append.first_seq`, as stored.
    pub first_seq: i64,
    /// The seq of the append's last entry (`first_seq - 1` when it has none).
    pub last_seq: i64,
    /// Whether the append holds an [`Entry::Checkpoint`]: the row's `checkpoint` column, which
    /// [`super::Store::journal_for_replay`] finds the last checkpoint by.
    pub checkpoint: bool,
    /// What the append changes in the task's view, as stored.
    pub view: view::EncodedView,
    /// The bodies as the SQLite store writes them, compressed where that pays
    /// (`sqlite::packed`): set on the caller's thread by its `append`; the default (nothing
    /// compressed) writes them as text.
    #[cfg(feature = "sqlite")]
    pub packed: super::sqlite::packed::Packed,
}

impl Encoded {
    pub fn new(append: Append) -> Result<Self, StoreError> {
        let body = match &*append.entries {
            [entry] => serde_json::to_string(entry),
            entries => serde_json::to_string(entries),
        }
        .map_err(|e| StoreError::backend("a journal entry does not serialize", e))?;
        let first_seq = to_sql_int("seq", append.first_seq)?;
        let count = i64::try_from(append.entries.len()).map_err(|_| StoreError::OutOfRange {
            what: "entries in one append",
            value: append.entries.len() as u64,
        })?;
        let last_seq = first_seq
            .checked_add(count - 1)
            .ok_or_else(|| StoreError::OutOfRange {
                what: "last seq of the append",
                value: append
                    .first_seq
                    .saturating_add(append.entries.len() as u64)
                    .saturating_sub(1),
            })?;
        let checkpoint = append
            .entries
            .iter()
            .any(|entry| matches!(entry, Entry::Checkpoint { .. }));
        let view = view::EncodedView::new(append.first_seq, &append.entries)?;
        Ok(Encoded {
            append,
            body,
            first_seq,
            last_seq,
            checkpoint,
            view,
            #[cfg(feature = "sqlite")]
            packed: Default::default(),
        })
    }

    /// The row's `last_seq` column: set for a row of several entries (an array), `NULL` for one.
    pub fn last_seq_column(&self) -> Option<i64> {
        (self.append.entries.len() != 1).then_some(self.last_seq)
    }
}

/// `value` as the stores' signed 64-bit integer (`INTEGER`, `BIGINT`): seqs and fencing tokens are
/// `u64` in the API, and one past `i64::MAX` is refused rather than stored negative.
pub(crate) fn to_sql_int(what: &'static str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::OutOfRange { what, value })
}

/// A stored signed integer as the `u64` the API speaks: a negative one is an unreadable value of
/// `column`, never wrapped to a huge seq or token. (SQLite's columns are read as `u64` directly.)
#[cfg(feature = "postgres")]
pub(crate) fn from_sql_int(column: &'static str, value: i64) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|e| StoreError::Column {
        column: column.into(),
        source: format!("{value} is negative: {e}").into(),
    })
}

/// `states` as an SQL list of string literals, `('completed', 'canceled', …)`: the stores build their
/// state filters from [`TaskState::TERMINAL`] with it rather than spelling the names again. The wire
/// names are fixed identifiers without quotes, so they are safe to inline.
pub(crate) fn sql_state_list(states: &[TaskState]) -> String {
    let names: Vec<String> = states.iter().map(|s| format!("'{}'", s.as_str())).collect();
    format!("({})", names.join(", "))
}

/// [`TaskState::TERMINAL`] as SQL, built once.
pub(crate) fn sql_terminal_states() -> &'static str {
    static LIST: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| sql_state_list(&TaskState::TERMINAL));
    &LIST
}

/// Decode a journal row written from an [`Encoded`] (or an older one-entry row) into `out`,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sql_terminal_list_is_task_states_definition() {
        let listed: Vec<TaskState> = sql_terminal_states()
            .strip_prefix('(')
            .and_then(|l| l.strip_suffix(')'))
            .expect("a parenthesized list")
            .split(", ")
            .map(|name| {
                let name = name.strip_prefix('\'').and_then(|n| n.strip_suffix('\''));
                name.and_then(TaskState::parse)
                    .expect("a quoted state name")
            })
            .collect();
        let terminal: Vec<TaskState> = TaskState::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(listed, terminal);
        assert_eq!(listed, TaskState::TERMINAL);
    }

    #[test]
    fn a_seq_past_i64_max_is_refused_not_wrapped() {
        let append = Append::new("t", u64::MAX, vec![Entry::CancelRequested]);
        assert!(matches!(
            Encoded::new(append),
            Err(StoreError::OutOfRange { what: "seq", .. })
        ));
        let at_the_edge = Append::new("t", i64::MAX as u64, vec![Entry::CancelRequested; 2]);
        assert!(matches!(
            Encoded::new(at_the_edge),
            Err(StoreError::OutOfRange { .. })
        ));
        #[cfg(feature = "postgres")]
        assert!(matches!(
            from_sql_int("seq", -1),
            Err(StoreError::Column { column, .. }) if column == "seq"
        ));
    }

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
