//! The conformance checks of `Store::journal_for_replay`, the read that makes a reload cost what
//! follows the last checkpoint: exactly which records come back, so a store that never compacts (and
//! answers with the whole journal, as the trait's default does) fails.

use std::ops::RangeInclusive;

use super::{created, fresh_id, record};
use crate::journal::Entry;
use crate::model::TaskState;
use crate::store::{Append, Store};

/// Create task `id` from `appends` (the first starts with `task_created`).
async fn write_appends(store: &dyn Store, id: &str, appends: &[Vec<Entry>]) {
    let mut next = 1;
    for entries in appends {
        let mut append = Append::new(id, next, entries.clone());
        if next == 1 {
            append.create = Some(record(id, None));
        }
        store.append(append).await.expect("append");
        next += entries.len() as u64;
    }
}

/// What `journal_for_replay` of a task written as `appends` must return and may return: it must hold
/// the first entry and every entry from the last checkpoint on (all of them without a checkpoint); it
/// may also hold the rest of the first append and the entries of the last checkpoint's own append that
/// precede it (a store that keeps one row per append reads whole rows); nothing else.
fn replay_read_bounds(appends: &[Vec<Entry>]) -> (Vec<u64>, Vec<u64>) {
    let mut rows: Vec<RangeInclusive<u64>> = Vec::new();
    let mut last = 0;
    let mut checkpoint = 1;
    for entries in appends {
        let start = last + 1;
        for entry in entries {
            last += 1;
            if matches!(entry, Entry::Checkpoint { .. }) {
                checkpoint = last;
            }
        }
        rows.push(start..=last);
    }
    let row = rows
        .iter()
        .find(|r| r.contains(&checkpoint))
        .map_or(checkpoint, |r| *r.start());
    let first = rows.first().map_or(1, |r| *r.end());
    let must = (1..=last).filter(|&s| s == 1 || s >= checkpoint).collect();
    let may = (2..checkpoint)
        .filter(|&s| s <= first || s >= row)
        .collect();
    (must, may)
}

/// Write `appends` to a fresh task and check its `journal_for_replay` against [`replay_read_bounds`]:
/// the records are the journal's own, in order, and a store that returns the whole journal fails.
async fn check_replay_read(store: &dyn Store, what: &str, appends: Vec<Vec<Entry>>) -> Vec<u64> {
    let id = fresh_id("cp");
    write_appends(store, &id, &appends).await;
    let all = store.journal(&id, 0).await.expect("journal");
    let replay = store
        .journal_for_replay(&id)
        .await
        .expect("journal for replay");
    let seqs: Vec<u64> = replay.iter().map(|r| r.seq).collect();
    let (must, may) = replay_read_bounds(&appends);
    let missing: Vec<u64> = must.iter().copied().filter(|s| !seqs.contains(s)).collect();
    assert!(
        missing.is_empty(),
        "journal_for_replay ({what}) misses seqs {missing:?}: it returned {seqs:?}, which must hold {must:?}"
    );
    let extra: Vec<u64> = seqs
        .iter()
        .copied()
        .filter(|s| !must.contains(s) && !may.contains(s))
        .collect();
    assert!(
        extra.is_empty(),
        "journal_for_replay ({what}) returned seqs {extra:?} from before the last checkpoint: it \
         returned {seqs:?}, which must hold {must:?} and may hold {may:?}, nothing between (a store \
         that returns the whole journal never compacts)"
    );
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "journal_for_replay ({what}) is not in seq order: {seqs:?}"
    );
    for record in &replay {
        assert_eq!(
            Some(record),
            all.iter().find(|r| r.seq == record.seq),
            "journal_for_replay ({what}) returns the journal's own records"
        );
    }
    seqs
}

/// `journal_for_replay` holds the first entry and everything from the last checkpoint on, in order,
/// and nothing between (see `replay_read_bounds` for the slack a row-per-append store has). A store
/// that answers with the whole journal fails here.
pub async fn replay_reads_from_the_last_checkpoint(store: &dyn Store) {
    let checkpoint = |visit| Entry::Checkpoint {
        visit,
        state: serde_json::json!({ "visit": visit }),
        status: TaskState::Working,
        compensable: Vec::new(),
        runs_on: None,
    };
    let status = || Entry::StatusChanged {
        state: TaskState::Working,
    };
    // A neighbour whose last checkpoint comes later than any other task's: a store that looks for
    // the last checkpoint across tasks drops what the tasks below must get.
    let mut long = vec![vec![created("cp")], vec![status(); 12]];
    long.push(vec![checkpoint(9), status()]);
    check_replay_read(store, "a neighbour with a late checkpoint", long).await;

    // Seqs 1, 2..=3, then 4..=6 with a checkpoint at 5, then 7..=8 with one at 7, then 9: the last
    // checkpoint starts its append, so every store returns exactly this.
    let seqs = check_replay_read(
        store,
        "the last checkpoint starts its append",
        vec![
            vec![created("cp")],
            vec![status(), status()],
            vec![status(), checkpoint(1), status()],
            vec![checkpoint(2), status()],
            vec![status()],
        ],
    )
    .await;
    assert_eq!(
        seqs,
        vec![1, 7, 8, 9],
        "the first entry, then the last checkpoint and what follows it, nothing between"
    );
    // The last checkpoint in the middle of its append (as the engine writes it, after the
    // transition), after another in the same append; a first append of two entries. Seqs 3..=4 lie
    // between and must not come back.
    check_replay_read(
        store,
        "the last checkpoint in the middle of its append",
        vec![
            vec![created("cp"), status()],
            vec![status(), status()],
            vec![checkpoint(1), status(), checkpoint(2), status()],
            vec![status()],
        ],
    )
    .await;
    // No checkpoint: everything.
    let seqs = check_replay_read(
        store,
        "no checkpoint",
        vec![
            vec![created("cp")],
            vec![status(), status()],
            vec![status()],
        ],
    )
    .await;
    assert_eq!(
        seqs,
        vec![1, 2, 3, 4],
        "without a checkpoint, the whole journal"
    );
    let missing = store
        .journal_for_replay("no-such-task")
        .await
        .expect("read");
    assert!(missing.is_empty());
}
