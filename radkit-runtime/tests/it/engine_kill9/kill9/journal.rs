//! What a journal holds, as the assertions and failure messages of the `kill -9` tests read it.

use radkit_runtime::flow::{CmdKind, InvocationId};
use radkit_runtime::journal::{Entry, JournalRecord};

/// The id of `record` when it issues tool `tool`.
pub fn issued<'a>(record: &'a JournalRecord, tool: &str) -> Option<&'a InvocationId> {
    match &record.entry {
        Entry::CommandIssued { id, cmd, .. } => match &cmd.kind {
            CmdKind::Tool { tool: t, .. } if t == tool => Some(id),
            _ => None,
        },
        _ => None,
    }
}

/// The id of the first command that calls tool `tool`.
pub fn command_of(journal: &[JournalRecord], tool: &str) -> Option<InvocationId> {
    journal.iter().find_map(|r| issued(r, tool)).cloned()
}

/// How many receipts command `id` has.
pub fn receipts_of(journal: &[JournalRecord], id: &InvocationId) -> usize {
    journal
        .iter()
        .filter(|r| matches!(&r.entry, Entry::ReceiptRecorded { receipt } if receipt.id == *id))
        .count()
}

/// Whether each journaled compensation of command `id` succeeded, in order.
pub fn compensations_of(journal: &[JournalRecord], id: &InvocationId) -> Vec<bool> {
    journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::Compensated { id: c, outcome } if c == id => Some(outcome.is_ok()),
            _ => None,
        })
        .collect()
}

/// The journal as one line per entry (`seq kind`, with the command's id and tool), for failure
/// messages.
pub fn timeline(journal: &[JournalRecord]) -> String {
    let mut out = String::new();
    for record in journal {
        let detail = match &record.entry {
            Entry::CommandIssued { id, cmd, .. } => match &cmd.kind {
                CmdKind::Tool { tool, .. } => format!(" {id} tool `{tool}`"),
                other => format!(" {id} {}", other.kind_name()),
            },
            Entry::ReceiptRecorded { receipt } => format!(" {}", receipt.id),
            Entry::Compensated { id, outcome } => format!(" {id} ok: {}", outcome.is_ok()),
            Entry::Activated { visit, step, .. } => format!(" visit {visit} step `{step}`"),
            Entry::StatusChanged { state } | Entry::Terminal { state, .. } => format!(" {state:?}"),
            _ => String::new(),
        };
        out.push_str(&format!(
            "  {} {}{detail}\n",
            record.seq,
            record.entry.kind_name()
        ));
    }
    out
}
