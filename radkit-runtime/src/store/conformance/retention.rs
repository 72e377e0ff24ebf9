//! The conformance check of `Store::prune` (retention): the journals of tasks that finished before
//! the cutoff are compacted to their first and last appends, oldest first and at most the limit at
//! a time, with their row and view as they were, except those whose push deliveries are not
//! finished; tasks that finished before the other cutoff are deleted whole, push configs and all;
//! running and waiting tasks and tasks that finished after the cutoffs are never touched; pruners
//! running at once share the work.
//!
//! The tasks here finished in 1970 (their appends' `at_ms`), so the cutoffs, also in 1970, reach
//! none of the other checks' tasks in a shared store.

use std::collections::HashMap;

use super::{created, fresh_id, record};
use crate::journal::{now_ms, Entry, JournalRecord};
use crate::model::{Artifact, Message, TaskState};
use crate::store::{Append, Prune, Pruned, Store, TaskRecord, TaskView};

/// Write a task the way the engine does, every append at `at_ms`: created with its first message,
/// three steps that each emit a message, then `end` in one last append with an artifact (or a
/// question: `input-required`; or nothing: it still works). Its first append ends at [`FIRST_ENDS`].
async fn write(store: &dyn Store, id: &str, end: Option<TaskState>, at_ms: i64) {
    let mut first = Append::new(
        id,
        1,
        vec![
            created(id),
            Entry::MessageReceived {
                message: Message::user_text(format!("go {id}")),
            },
            Entry::StatusChanged {
                state: TaskState::Working,
            },
        ],
    );
    first.create = Some(record(id, None));
    first.state = Some(TaskState::Working);
    first.at_ms = at_ms;
    store.append(first).await.expect("create");
    let mut next = 4;
    for visit in 1..=3u64 {
        let mut step = Append::new(
            id,
            next,
            vec![
                Entry::Activated {
                    visit,
                    step: format!("step{visit}"),
                    state: serde_json::json!({ "visit": visit }),
                    event: crate::flow::Event::Enter,
                },
                Entry::MessageEmitted {
                    message: Message::agent_text(format!("step {visit}")),
                },
            ],
        );
        step.at_ms = at_ms;
        store.append(step).await.expect("step");
        next += 2;
    }
    let last = match end {
        Some(TaskState::InputRequired) => {
            let mut ask = Append::new(
                id,
                next,
                vec![
                    Entry::AwaitingInput {
                        slot: "s".into(),
                        message: Message::agent_text("which?"),
                        resume: None,
                        ask: None,
                    },
                    Entry::StatusChanged {
                        state: TaskState::InputRequired,
                    },
                ],
            );
            ask.state = Some(TaskState::InputRequired);
            Some(ask)
        }
        Some(state) => {
            let mut done = Append::new(
                id,
                next,
                vec![
                    Entry::ArtifactEmitted {
                        artifact: Artifact::from_text("answer", format!("the answer of {id}")),
                        append: false,
                        last_chunk: true,
                    },
                    Entry::Terminal {
                        state,
                        message: Some(Message::agent_text("done")),
                    },
                ],
            );
            done.state = Some(state);
            Some(done)
        }
        None => None,
    };
    if let Some(mut last) = last {
        last.at_ms = at_ms;
        store.append(last).await.expect("last append");
    }
}

/// The seq a task's first append ends at (see [`write`]).
const FIRST_ENDS: u64 = 3;

/// What a task looks like from outside: its row, its whole view, its journal.
#[derive(Debug, PartialEq)]
struct Seen {
    row: TaskRecord,
    view: TaskView,
    journal: Vec<JournalRecord>,
}

async fn seen(store: &dyn Store, id: &str) -> Option<Seen> {
    let row = store.task(id).await.expect("task")?;
    let view = store
        .task_view(id, None)
        .await
        .expect("view")
        .expect("a task with a row has a view");
    let journal = store.journal(id, 0).await.expect("journal");
    Some(Seen { row, view, journal })
}

fn prune(journals_before_ms: Option<i64>, tasks_before_ms: Option<i64>, limit: usize) -> Prune {
    Prune {
        journals_before_ms,
        tasks_before_ms,
        limit,
    }
}

/// Retention keeps the promises above. A store that keeps every task (`prune` answers
/// `Unsupported`) passes: its engine refuses a retention setting.
pub async fn prune_compacts_then_deletes_finished_tasks_only(store: &dyn Store) {
    let probe = store.prune(&prune(None, None, 1)).await;
    if matches!(probe, Err(crate::store::StoreError::Unsupported { .. })) {
        return;
    }
    assert_eq!(probe.expect("a prune with no cutoff"), Pruned::default());
    let id = |name: &str| fresh_id(&format!("retained-{name}"));
    let (canceled, completed, failed) = (id("canceled"), id("completed"), id("failed"));
    let (recent, running, waiting) = (id("recent"), id("running"), id("waiting"));
    let delivering = id("delivering");
    write(store, &canceled, Some(TaskState::Canceled), 800).await;
    write(store, &completed, Some(TaskState::Completed), 1_000).await;
    write(store, &failed, Some(TaskState::Failed), 1_500).await;
    write(store, &recent, Some(TaskState::Completed), now_ms()).await;
    write(store, &running, None, 500).await;
    write(store, &waiting, Some(TaskState::InputRequired), 500).await;
    write(store, &delivering, Some(TaskState::Completed), 700).await;
    // A webhook that has not acknowledged the end yet: its sender still reads the journal.
    let push = store.push();
    if let Some(push) = push {
        let config = crate::store::PushConfig {
            id: "hook".to_owned(),
            url: "https://hook.test/".to_owned(),
            token: None,
            authentication: None,
            format: crate::store::PushFormat::V1_0,
        };
        push.put_push_config(&delivering, &config, 0)
            .await
            .expect("put a push config");
    }
    let all = [
        &canceled,
        &completed,
        &failed,
        &recent,
        &running,
        &waiting,
        &delivering,
    ];
    let mut before: HashMap<String, Seen> = HashMap::new();
    for task in all {
        before.insert(task.clone(), seen(store, task).await.expect("written"));
    }
    let untouched = |task: &str, after: &Option<Seen>, why: &str| {
        assert_eq!(
            after.as_ref(),
            before.get(task),
            "{task} ({why}) must not be touched by a prune"
        );
    };

    // Compaction, oldest first, at most the limit; the limit reached says more may be due.
    let first = store
        .prune(&prune(Some(2_000), None, 2))
        .await
        .expect("compact");
    assert_eq!(first.compacted, 2, "two finished journals compacted");
    assert!(first.more(2), "a pass that reached its limit says so");
    let rest = store
        .prune(&prune(Some(2_000), None, 10))
        .await
        .expect("compact the rest");
    // Without push configs, the task that would wait on its delivery is finished work too.
    let no_push = u64::from(store.push().is_none());
    assert_eq!(
        rest.compacted,
        1 + no_push,
        "the third finished journal, once"
    );
    assert!(!rest.more(10));
    let again = store
        .prune(&prune(Some(2_000), None, 10))
        .await
        .expect("compact again");
    assert_eq!(again, Pruned::default(), "a compacted journal is done");
    for task in [&canceled, &completed, &failed] {
        let was = &before[task.as_str()];
        let now = seen(store, task).await.expect("a compacted task is kept");
        assert_eq!(now.row, was.row, "{task}: the row is as it was");
        assert_eq!(now.view, was.view, "{task}: the view is as it was");
        // Kept: the first append (seq 1..=3) and the last (its artifact and its end).
        let kept: Vec<JournalRecord> = was
            .journal
            .iter()
            .filter(|r| r.seq <= FIRST_ENDS || r.seq >= was.row.last_seq - 1)
            .cloned()
            .collect();
        assert_eq!(now.journal, kept, "{task}: the first and last appends stay");
        let after_gap = store.journal(task, FIRST_ENDS + 2).await.expect("journal");
        assert_eq!(
            after_gap,
            kept[kept.len() - 2..],
            "{task}: a read from inside the pruned part gives what follows it"
        );
    }
    for (task, why) in [
        (&recent, "finished after the cutoff"),
        (&running, "still working"),
        (&waiting, "waiting for input"),
    ] {
        untouched(task, &seen(store, task).await, why);
    }
    if push.is_some() {
        untouched(
            &delivering,
            &seen(store, &delivering).await,
            "a push delivery is not finished",
        );
    }

    // Deletion: the oldest finished tasks go whole, the one whose webhook never acknowledged its
    // end too (it never will), with its push config.
    let deleted = store
        .prune(&prune(None, Some(1_200), 10))
        .await
        .expect("delete");
    assert_eq!(
        deleted.deleted, 3,
        "the tasks that finished before the cutoff"
    );
    for task in [&canceled, &completed, &delivering] {
        assert!(seen(store, task).await.is_none(), "{task} is deleted");
        assert!(store.journal(task, 0).await.expect("journal").is_empty());
        let listed = store
            .list(crate::store::TaskQuery {
                id_prefix: Some(task.clone()),
                ..Default::default()
            })
            .await
            .expect("list");
        assert!(listed.is_empty(), "{task} is listed no more");
    }
    if let Some(push) = push {
        assert!(
            push.push_deliveries(&delivering)
                .await
                .expect("deliveries")
                .is_empty(),
            "a deleted task's push configs go with it"
        );
    }

    // Two pruners at once share the work: each task is deleted once.
    let both = prune(Some(2_000), Some(2_000), 10);
    let (a, b) = futures::join!(store.prune(&both), store.prune(&both));
    let (a, b) = (a.expect("prune a"), b.expect("prune b"));
    assert_eq!(
        a.deleted + b.deleted,
        1,
        "the failed task, once: {a:?} {b:?}"
    );
    assert!(seen(store, &failed).await.is_none());
    for (task, why) in [
        (&recent, "finished after the cutoff"),
        (&running, "still working"),
        (&waiting, "waiting for input"),
    ] {
        untouched(task, &seen(store, task).await, why);
    }
}
