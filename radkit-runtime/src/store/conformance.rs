//! The store conformance suite: the promises every `Store` must keep, as async test functions. The
//! memory, SQLite and Postgres stores run it from their tests (`tests/it/store_conformance.rs`). It panics
//! on the first broken promise, like any test.

use std::collections::HashSet;
use std::sync::Arc;

use super::{Append, Store, StoreError, TaskQuery, TaskRecord};
use crate::flow::{Cmd, EffectError, Event, InvocationId, Receipt};
use crate::journal::{now_ms, Entry};
use crate::model::{Artifact, Message, TaskState};

mod checkpoint;
mod push;
mod retention;
mod view;
pub use checkpoint::replay_reads_from_the_last_checkpoint;
pub use push::push_configs_keep_cursors_and_leases;
pub use retention::prune_compacts_then_deletes_finished_tasks_only;
pub use view::{
    list_views_pages_newest_status_first, state_counts_count_the_views_the_filters_match,
    task_views_match_the_journals_fold,
};

fn record(id: &str, principal: Option<&str>) -> TaskRecord {
    TaskRecord {
        id: id.to_owned(),
        context_id: format!("ctx-{id}"),
        skill_id: "skill".to_owned(),
        skill_version: "1".to_owned(),
        principal: principal.map(str::to_owned),
        state: TaskState::Submitted,
        created_at_ms: now_ms(),
        updated_at_ms: now_ms(),
        wake_at_ms: None,
        waits_on_call: false,
        last_seq: 0,
    }
}

fn created(id: &str) -> Entry {
    Entry::TaskCreated {
        skill_id: "skill".into(),
        skill_version: "1".into(),
        context_id: format!("ctx-{id}"),
        principal: None,
        permission_mode: Default::default(),
        steps: Default::default(),
    }
}

fn create(id: &str, principal: Option<&str>) -> Append {
    let mut append = Append::new(id, 1, vec![created(id)]);
    append.create = Some(record(id, principal));
    append
}

fn fresh_id(prefix: &str) -> String {
    format!("{prefix}-{}", crate::model::new_id())
}

/// One of every entry kind, to check that entries round-trip exactly.
pub fn every_entry() -> Vec<Entry> {
    let id = InvocationId::derive("t", 1, 0);
    vec![
        Entry::MessageReceived {
            message: Message::user_text("hi"),
        },
        Entry::Activated {
            visit: 1,
            step: "s".into(),
            state: serde_json::json!({"a": [1, 2]}),
            event: Event::UserMessage {
                message: Message::user_text("hi"),
            },
        },
        Entry::CommandIssued {
            id: id.clone(),
            cmd: Cmd::tool("charge", serde_json::json!({"amount": 5})),
            transition: true,
        },
        Entry::AttemptFailed {
            id: id.clone(),
            attempt: 1,
            error: EffectError::transient("timeout"),
        },
        Entry::ReceiptRecorded {
            receipt: Receipt {
                id: id.clone(),
                attempt: 2,
                outcome: Ok(serde_json::json!("ok")),
                usage: Some(serde_json::json!({"tokens": 3})),
            },
        },
        Entry::ReceiptRecorded {
            receipt: Receipt {
                id: id.clone(),
                attempt: 1,
                outcome: Err(EffectError::permanent("no")),
                usage: None,
            },
        },
        Entry::Transitioned {
            visit: 1,
            next: crate::journal::TransitionKind::Goto,
            state: Some(serde_json::json!(null)),
        },
        Entry::TimerSet {
            id: id.clone(),
            fire_at_ms: 42,
        },
        Entry::AwaitingInput {
            slot: "note".into(),
            message: Message::agent_text("?"),
            resume: Some(serde_json::json!(1)),
            ask: None,
        },
        Entry::MessageEmitted {
            message: Message::agent_text("hello"),
        },
        Entry::Progress {
            message: Message::agent_text("working"),
        },
        Entry::ArtifactEmitted {
            artifact: Artifact::from_text("a.txt", "x"),
            append: true,
            last_chunk: false,
        },
        Entry::StatusChanged {
            state: TaskState::Working,
        },
        Entry::CancelRequested,
        Entry::Compensated {
            id,
            outcome: Ok(serde_json::Value::Null),
        },
        Entry::Terminal {
            state: TaskState::Completed,
            message: Some(Message::agent_text("done")),
        },
    ]
}

/// Create, append, read back: every entry kind round-trips, seqs are 1..n, the row follows.
pub async fn round_trip(store: &dyn Store) {
    let id = fresh_id("rt");
    store
        .append(create(&id, Some("alice")))
        .await
        .expect("create");
    let entries = every_entry();
    let mut append = Append::new(&id, 2, entries.clone());
    append.state = Some(TaskState::Working);
    append.wake_at_ms = Some(Some(1234));
    append.waits_on_call = Some(true);
    store.append(append).await.expect("append");
    let journal = store.journal(&id, 0).await.expect("journal");
    assert_eq!(journal.len(), entries.len() + 1);
    assert_eq!(
        journal.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (1..=journal.len() as u64).collect::<Vec<_>>()
    );
    assert_eq!(
        journal[1..]
            .iter()
            .map(|r| r.entry.clone())
            .collect::<Vec<_>>(),
        entries
    );
    let tail = store.journal(&id, 5).await.expect("tail");
    assert_eq!(tail.first().map(|r| r.seq), Some(6));
    let row = store.task(&id).await.expect("task").expect("row exists");
    assert_eq!(row.state, TaskState::Working);
    assert_eq!(row.wake_at_ms, Some(1234));
    assert!(row.waits_on_call);
    let waiting = TaskQuery {
        waits_on_call: true,
        ..TaskQuery::default()
    };
    let listed = |rows: Vec<TaskRecord>| rows.iter().any(|t| t.id == id);
    assert!(
        listed(store.list(waiting.clone()).await.expect("list")),
        "listed as waiting on a call"
    );
    assert_eq!(row.last_seq, journal.len() as u64);
    assert_eq!(row.principal.as_deref(), Some("alice"));
    let mut clear = Append::new(
        &id,
        row.last_seq + 1,
        vec![Entry::StatusChanged {
            state: TaskState::InputRequired,
        }],
    );
    clear.wake_at_ms = Some(None);
    clear.waits_on_call = Some(false);
    store.append(clear).await.expect("clear timer");
    let row = store.task(&id).await.expect("task").expect("row");
    assert_eq!(row.wake_at_ms, None);
    assert!(!row.waits_on_call);
    assert!(
        !listed(store.list(waiting).await.expect("list")),
        "no longer waiting"
    );
    // A task waiting for input with no timer is left out when asked (`skip_idle_input`); one
    // whose question has a deadline is not.
    let idle = TaskQuery {
        non_terminal: true,
        skip_idle_input: true,
        ..TaskQuery::default()
    };
    let mut ask = Append::new(
        &id,
        row.last_seq + 1,
        vec![Entry::StatusChanged {
            state: TaskState::InputRequired,
        }],
    );
    ask.state = Some(TaskState::InputRequired);
    store.append(ask).await.expect("ask");
    assert!(
        !listed(store.list(idle.clone()).await.expect("list")),
        "a question without a deadline is skipped"
    );
    let all = TaskQuery {
        non_terminal: true,
        ..TaskQuery::default()
    };
    assert!(
        listed(store.list(all).await.expect("list")),
        "and listed without the filter"
    );
    let mut deadline = Append::new(
        &id,
        row.last_seq + 2,
        vec![Entry::StatusChanged {
            state: TaskState::InputRequired,
        }],
    );
    deadline.wake_at_ms = Some(Some(99));
    store.append(deadline).await.expect("deadline");
    assert!(
        listed(store.list(idle).await.expect("list")),
        "a question with a deadline is listed"
    );
    assert!(store.task("no-such-task").await.expect("task").is_none());
    assert!(store
        .journal("no-such-task", 0)
        .await
        .expect("journal")
        .is_empty());
}

/// A gap, a duplicate seq, a second create and an append to a missing task are refused, and nothing
/// of a refused append is written.
pub async fn refuses_gaps_and_duplicates(store: &dyn Store) {
    let id = fresh_id("gap");
    store.append(create(&id, None)).await.expect("create");
    for bad_seq in [1, 3, 7] {
        match store
            .append(Append::new(&id, bad_seq, vec![Entry::CancelRequested]))
            .await
        {
            Err(StoreError::Conflict {
                expected: 2, got, ..
            }) => assert_eq!(got, bad_seq),
            other => panic!("seq {bad_seq} must conflict, got {other:?}"),
        }
    }
    assert!(
        matches!(
            store.append(create(&id, None)).await,
            Err(StoreError::Conflict { .. })
        ),
        "second create"
    );
    assert!(matches!(
        store
            .append(Append::new(
                fresh_id("missing"),
                1,
                vec![Entry::CancelRequested]
            ))
            .await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(
        store.journal(&id, 0).await.expect("journal").len(),
        1,
        "refused appends left no trace"
    );
    store
        .append(Append::new(&id, 2, vec![Entry::CancelRequested]))
        .await
        .expect("the right seq still works");
}

/// Many tasks appending at once: everything is committed, every journal is contiguous.
pub async fn concurrent_appends(store: Arc<dyn Store>) {
    let tasks = 40;
    let appends = 15;
    let mut handles = Vec::new();
    for t in 0..tasks {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            let id = fresh_id(&format!("conc{t}"));
            store.append(create(&id, None)).await.expect("create");
            for seq in 2..=appends + 1 {
                let entries = vec![
                    Entry::StatusChanged {
                        state: TaskState::Working,
                    },
                    Entry::CancelRequested,
                ];
                let first = 2 + (seq - 2) * 2;
                store
                    .append(Append::new(&id, first, entries))
                    .await
                    .expect("append");
            }
            id
        }));
    }
    for handle in handles {
        let id = handle.await.expect("task");
        let journal = store.journal(&id, 0).await.expect("journal");
        let seqs: Vec<u64> = journal.iter().map(|r| r.seq).collect();
        assert_eq!(
            seqs,
            (1..=(1 + 2 * appends)).collect::<Vec<_>>(),
            "contiguous journal for {id}"
        );
    }
}

/// Within one batch, a conflicting append fails alone: the others commit.
pub async fn a_failed_append_does_not_sink_others(store: Arc<dyn Store>) {
    let good = fresh_id("good");
    let bad = fresh_id("bad");
    store.append(create(&good, None)).await.expect("create");
    store.append(create(&bad, None)).await.expect("create");
    let (a, b) = tokio::join!(
        store.append(Append::new(&good, 2, vec![Entry::CancelRequested])),
        store.append(Append::new(&bad, 9, vec![Entry::CancelRequested]))
    );
    a.expect("the good append commits");
    assert!(matches!(b, Err(StoreError::Conflict { .. })));
    assert_eq!(store.journal(&good, 0).await.expect("journal").len(), 2);
}

/// `list` filters by non-terminal state, principal and due timers.
pub async fn list_filters(store: &dyn Store) {
    let owner = fresh_id("owner");
    let open = fresh_id("open");
    let done = fresh_id("done");
    let sleeping = fresh_id("sleep");
    store
        .append(create(&open, Some(&owner)))
        .await
        .expect("create");
    store
        .append(create(&done, Some(&owner)))
        .await
        .expect("create");
    store
        .append(create(&sleeping, Some(&owner)))
        .await
        .expect("create");
    let mut finish = Append::new(
        &done,
        2,
        vec![Entry::Terminal {
            state: TaskState::Completed,
            message: None,
        }],
    );
    finish.state = Some(TaskState::Completed);
    store.append(finish).await.expect("finish");
    let mut nap = Append::new(
        &sleeping,
        2,
        vec![Entry::TimerSet {
            id: InvocationId::derive(&sleeping, 1, 0),
            fire_at_ms: 1_000,
        }],
    );
    nap.wake_at_ms = Some(Some(1_000));
    store.append(nap).await.expect("timer");

    let mine = TaskQuery {
        principal: Some(owner.clone()),
        ..TaskQuery::default()
    };
    let ids: HashSet<String> = store
        .list(mine.clone())
        .await
        .expect("list")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        ids,
        HashSet::from([open.clone(), done.clone(), sleeping.clone()])
    );
    let running: HashSet<String> = store
        .list(TaskQuery {
            non_terminal: true,
            ..mine.clone()
        })
        .await
        .expect("list")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(running, HashSet::from([open.clone(), sleeping.clone()]));
    let due: Vec<String> = store
        .list(TaskQuery {
            wake_due_ms: Some(2_000),
            ..mine.clone()
        })
        .await
        .expect("list")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(due, vec![sleeping.clone()]);
    let not_yet = store
        .list(TaskQuery {
            wake_due_ms: Some(500),
            ..mine.clone()
        })
        .await
        .expect("list");
    assert!(not_yet.is_empty());
    let newest = store
        .list(TaskQuery {
            limit: Some(2),
            ..mine
        })
        .await
        .expect("list");
    assert_eq!(newest.len(), 2);
}

/// `list` with `id_prefix` finds the tasks whose id starts with it: exactly (no wildcards, case and
/// every character significant), together with the other filters and `limit`.
pub async fn list_by_id_prefix(store: &dyn Store) {
    // Ids in a namespace of their own (the suite shares one store). The decoys catch an
    // implementation that is a `LIKE` without escaping (`%x`, `_y`, `\z` match more), ignores case
    // (`B`), or stops the index range at the wrong place (`ê` follows `é`; `-` follows `,`).
    let base = fresh_id("prefix");
    let owner = fresh_id("owner");
    let other = fresh_id("other");
    let suffixes = [
        "a1",
        "a2",
        "b",
        "B",
        "%x",
        "_y",
        "\\z",
        "é1",
        "é2",
        "ê",
        "\u{10FFFF}",
        ",",
        "-x",
    ];
    let id = |suffix: &str| format!("{base}{suffix}");
    for suffix in suffixes {
        let principal = if suffix == "a2" { &other } else { &owner };
        store
            .append(create(&id(suffix), Some(principal)))
            .await
            .expect("create");
    }
    let ids = |query: TaskQuery| async move {
        let mut ids: Vec<String> = store
            .list(query)
            .await
            .expect("list")
            .into_iter()
            .map(|r| r.id)
            .collect();
        ids.sort();
        ids
    };
    let prefixed = |prefix: &str| TaskQuery {
        id_prefix: Some(prefix.to_owned()),
        ..TaskQuery::default()
    };
    let sorted = |mut ids: Vec<String>| {
        ids.sort();
        ids
    };
    let cases: &[(&str, &[&str])] = &[
        // Unique: the whole id, and a part of it.
        ("b", &["b"]),
        ("B", &["B"]),
        ("a1", &["a1"]),
        ("é2", &["é2"]),
        // Ambiguous.
        ("a", &["a1", "a2"]),
        ("é", &["é1", "é2"]),
        // Wildcards and escapes of `LIKE` and `GLOB` are plain characters.
        ("%", &["%x"]),
        ("_", &["_y"]),
        ("\\", &["\\z"]),
        ("%x", &["%x"]),
        // The last character is the largest there is: the range ends past `base` itself.
        ("\u{10FFFF}", &["\u{10FFFF}"]),
        (",", &[","]),
        // No match.
        ("c", &[]),
        ("a3", &[]),
        ("b1", &[]),
        ("é3", &[]),
        ("\0", &[]),
    ];
    for (suffix, expected) in cases {
        assert_eq!(
            ids(prefixed(&id(suffix))).await,
            sorted(expected.iter().map(|s| id(s)).collect()),
            "prefix {:?}",
            id(suffix)
        );
    }
    assert_eq!(
        ids(prefixed(&base)).await,
        sorted(suffixes.iter().map(|s| id(s)).collect()),
        "the namespace itself"
    );
    assert!(ids(prefixed(&fresh_id("prefix"))).await.is_empty());

    // The empty prefix is every task, in `list`'s order.
    let all = store.list(TaskQuery::default()).await.expect("list");
    assert_eq!(store.list(prefixed("")).await.expect("list"), all);
    let newest = |limit| TaskQuery {
        limit: Some(limit),
        ..TaskQuery::default()
    };
    assert_eq!(
        store
            .list(TaskQuery {
                id_prefix: Some(String::new()),
                ..newest(3)
            })
            .await
            .expect("list"),
        store.list(newest(3)).await.expect("list")
    );

    // With `limit`: the newest of the matches (`a2` was created after `a1`, or in the same
    // millisecond and then second by id).
    let limited = TaskQuery {
        limit: Some(1),
        ..prefixed(&id("a"))
    };
    assert_eq!(ids(limited).await, vec![id("a2")]);
    let limited = TaskQuery {
        limit: Some(5),
        ..prefixed(&id("é"))
    };
    assert_eq!(ids(limited).await, vec![id("é1"), id("é2")]);

    // With the principal filter: another principal's task is not a candidate.
    let mine = |prefix: &str| TaskQuery {
        principal: Some(owner.clone()),
        ..prefixed(prefix)
    };
    assert_eq!(ids(mine(&id("a"))).await, vec![id("a1")]);
    assert!(ids(mine(&id("a2"))).await.is_empty());
    assert_eq!(
        ids(TaskQuery {
            principal: Some(other.clone()),
            ..prefixed(&base)
        })
        .await,
        vec![id("a2")]
    );

    // With the state filter.
    let mut finish = Append::new(
        id("b"),
        2,
        vec![Entry::Terminal {
            state: TaskState::Completed,
            message: None,
        }],
    );
    finish.state = Some(TaskState::Completed);
    store.append(finish).await.expect("finish");
    let running = |prefix: &str| TaskQuery {
        non_terminal: true,
        ..mine(prefix)
    };
    assert!(ids(running(&id("b"))).await.is_empty());
    assert_eq!(ids(running(&id("é"))).await, vec![id("é1"), id("é2")]);
    assert_eq!(ids(mine(&id("b"))).await, vec![id("b")]);
}

/// Run every conformance test against `store`.
pub async fn run_all(store: Arc<dyn Store>) {
    round_trip(store.as_ref()).await;
    replay_reads_from_the_last_checkpoint(store.as_ref()).await;
    refuses_gaps_and_duplicates(store.as_ref()).await;
    concurrent_appends(store.clone()).await;
    a_failed_append_does_not_sink_others(store.clone()).await;
    list_filters(store.as_ref()).await;
    list_by_id_prefix(store.as_ref()).await;
    task_views_match_the_journals_fold(store.as_ref()).await;
    list_views_pages_newest_status_first(store.as_ref()).await;
    state_counts_count_the_views_the_filters_match(store.as_ref()).await;
    push_configs_keep_cursors_and_leases(store.as_ref()).await;
    a_migrated_entry_sets_the_rows_version(store.as_ref()).await;
    unfinished_versions_name_each_version_of_unfinished_tasks_once(store.as_ref()).await;
    prune_compacts_then_deletes_finished_tasks_only(store.as_ref()).await;
}

async fn row_version(store: &dyn Store, id: &str) -> String {
    store
        .task(id)
        .await
        .expect("read")
        .expect("row")
        .skill_version
}

/// An append that holds a `migrated` entry sets the row's `skill_version` to its `to` (what
/// Postgres claims filter on and `Engine::versions` counts); any other append leaves it.
pub async fn a_migrated_entry_sets_the_rows_version(store: &dyn Store) {
    let id = fresh_id("mig");
    store.append(create(&id, None)).await.expect("create");
    assert_eq!(row_version(store, &id).await, "1");
    let moved = Append::new(
        &id,
        2,
        vec![Entry::Migrated {
            from: "1".into(),
            to: "2".into(),
            steps: Default::default(),
            state: None,
        }],
    );
    store.append(moved).await.expect("migrated");
    assert_eq!(row_version(store, &id).await, "2");
    let other = Append::new(
        &id,
        3,
        vec![Entry::StatusChanged {
            state: TaskState::Working,
        }],
    );
    store.append(other).await.expect("another append");
    assert_eq!(row_version(store, &id).await, "2", "kept by later appends");
}

/// `unfinished_versions` lists each `(skill_id, skill_version)` of an unfinished task once, in
/// order, and leaves out a version whose tasks all ended (the check a starting engine makes).
pub async fn unfinished_versions_name_each_version_of_unfinished_tasks_once(store: &dyn Store) {
    let skill = fresh_id("versions");
    let create_on = |id: &str, version: &str| {
        let mut append = create(id, None);
        if let Some(row) = &mut append.create {
            row.skill_id = skill.clone();
            row.skill_version = version.to_owned();
        }
        append
    };
    let (a, b, c) = (fresh_id("v1a"), fresh_id("v1b"), fresh_id("v2"));
    for (id, version) in [(&a, "1"), (&b, "1"), (&c, "2")] {
        store.append(create_on(id, version)).await.expect("create");
    }
    let mine = |pairs: Vec<(String, String)>| -> Vec<String> {
        let mut sorted = pairs.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(pairs, sorted, "in order, each once");
        pairs
            .into_iter()
            .filter(|(s, _)| *s == skill)
            .map(|(_, v)| v)
            .collect()
    };
    let listed = store.unfinished_versions().await.expect("versions");
    assert_eq!(mine(listed), ["1", "2"]);
    let mut finish = Append::new(
        &c,
        2,
        vec![Entry::Terminal {
            state: TaskState::Failed,
            message: None,
        }],
    );
    finish.state = Some(TaskState::Failed);
    store.append(finish).await.expect("finish");
    let listed = store.unfinished_versions().await.expect("versions");
    assert_eq!(
        mine(listed),
        ["1"],
        "a version whose tasks all ended is left out"
    );
}
