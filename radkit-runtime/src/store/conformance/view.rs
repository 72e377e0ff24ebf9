//! The conformance check of `Store::task_view`: after every append of many random tasks, the view a
//! store keeps equals the fold of the task's whole journal (`view::fold_journal`), for every history
//! window. The tasks are written the way the engine writes them (a question and its `input-required`
//! status in one append; a status change only when the state changes; the row's state with it), with
//! artifacts emitted whole, in chunks and replaced, several per append.

use super::{created, fresh_id, record};
use crate::journal::Entry;
use crate::model::{Artifact, Message, TaskState};
use crate::store::view::fold_journal;
use crate::store::{Append, Store};

/// Tasks written, and appends per task at most.
const TASKS: usize = 64;
const APPENDS: usize = 14;

/// A task being written: its next seq and the state the engine would hold.
struct Writer {
    id: String,
    next: u64,
    state: TaskState,
    ended: bool,
}

impl Writer {
    /// The engine's `set_status`: a status change only when the state changes.
    fn set_status(&mut self, entries: &mut Vec<Entry>, state: TaskState) {
        if self.state != state {
            entries.push(Entry::StatusChanged { state });
            self.state = state;
        }
    }

    /// One random append's entries.
    fn entries(&mut self, rng: &mut fastrand::Rng) -> Vec<Entry> {
        let mut entries = Vec::new();
        if self.next == 1 {
            entries.push(created(&self.id));
            entries.push(Entry::MessageReceived {
                message: Message::user_text("go"),
            });
            self.set_status(&mut entries, TaskState::Working);
        }
        for _ in 0..rng.usize(1..=4) {
            if self.ended {
                break;
            }
            let text = format!("m{}", rng.u32(..1000));
            match rng.u8(..11) {
                0 | 1 => entries.push(Entry::Progress {
                    message: Message::agent_text(&text),
                }),
                2 => entries.push(Entry::MessageEmitted {
                    message: Message::agent_text(&text),
                }),
                3 => {
                    // A question: journaled with its status, as the engine does.
                    entries.push(Entry::AwaitingInput {
                        slot: "s".into(),
                        message: Message::agent_text(&text),
                        resume: None,
                        ask: None,
                    });
                    self.set_status(&mut entries, TaskState::InputRequired);
                }
                4 => {
                    // A reply (or an expired question) and the task works again.
                    entries.push(Entry::MessageReceived {
                        message: Message::user_text(&text),
                    });
                    self.set_status(&mut entries, TaskState::Working);
                }
                5..=8 => {
                    let id = format!("a{}", rng.u8(..3));
                    let artifact = Artifact::from_text(format!("name-{text}"), &text).with_id(id);
                    entries.push(Entry::ArtifactEmitted {
                        artifact,
                        append: rng.bool(),
                        last_chunk: rng.bool(),
                    });
                }
                9 if rng.bool() => entries.push(Entry::CancelRequested),
                // A new visit (a cancel's compensations, say) answers a question without a status
                // change: the task is no longer settled though its state stays `input-required`.
                9 => entries.push(Entry::Activated {
                    visit: self.next,
                    step: "s".into(),
                    state: serde_json::Value::Null,
                    event: crate::flow::Event::Cancel,
                }),
                _ if rng.u8(..3) == 0 => {
                    let state = [TaskState::Completed, TaskState::Failed, TaskState::Canceled]
                        [rng.usize(..3)];
                    entries.push(Entry::Terminal {
                        state,
                        message: rng.bool().then(|| Message::agent_text(&text)),
                    });
                    self.state = state;
                    self.ended = true;
                }
                _ => self.set_status(&mut entries, TaskState::Working),
            }
        }
        entries
    }
}

/// Every append of random tasks, then the view and the journal's fold, with windows of 0, 1, 2 and
/// all history messages.
pub async fn task_views_match_the_journals_fold(store: &dyn Store) {
    let mut rng = fastrand::Rng::with_seed(0x5eed_u64 ^ TASKS as u64);
    for _ in 0..TASKS {
        let mut task = Writer {
            id: fresh_id("view"),
            next: 1,
            state: TaskState::Submitted,
            ended: false,
        };
        for _ in 0..rng.usize(1..=APPENDS) {
            if task.ended {
                break;
            }
            let before = task.state;
            let entries = task.entries(&mut rng);
            if entries.is_empty() {
                continue;
            }
            let count = entries.len() as u64;
            let mut append = Append::new(task.id.as_str(), task.next, entries);
            if task.next == 1 {
                append.create = Some(record(&task.id, None));
            }
            append.state = (task.state != before || task.next == 1).then_some(task.state);
            store.append(append).await.expect("append");
            task.next += count;
            let journal = store.journal(&task.id, 0).await.expect("journal");
            for window in [Some(0), Some(1), Some(2), None] {
                let view = store
                    .task_view(&task.id, window)
                    .await
                    .expect("task view")
                    .expect("the task exists");
                let expected = fold_journal(view.record.clone(), &journal, window);
                assert_eq!(
                    view,
                    expected,
                    "task {} after seq {}, history window {window:?}: the stored view is not the \
                     journal's fold",
                    task.id,
                    task.next - 1
                );
            }
        }
    }
    assert!(
        store
            .task_view("no-such-task", None)
            .await
            .expect("view")
            .is_none(),
        "an unknown task has no view"
    );
}

/// `Store::list_views` pages through the tasks its filters match, newest status first (ties by id,
/// descending), each task once, with the same total on every page.
pub async fn list_views_pages_newest_status_first(store: &dyn Store) {
    use crate::store::{TaskView, ViewQuery};
    let principal = fresh_id("lister");
    let mut ids = Vec::new();
    for i in 0..7u64 {
        let id = fresh_id("listed");
        let mut row = record(&id, Some(&principal));
        row.context_id = if i % 2 == 0 { "ctx-even" } else { "ctx-odd" }.to_owned();
        row.skill_id = if i % 3 == 0 {
            "skill-three"
        } else {
            "skill-other"
        }
        .to_owned();
        let mut entries = vec![
            created(&id),
            Entry::MessageReceived {
                message: Message::user_text(format!("task {i}")),
            },
            Entry::StatusChanged {
                state: TaskState::Working,
            },
        ];
        if i % 3 == 0 {
            entries.push(Entry::Terminal {
                state: TaskState::Completed,
                message: None,
            });
        }
        let mut append = Append::new(id.as_str(), 1, entries);
        append.state = Some(if i % 3 == 0 {
            TaskState::Completed
        } else {
            TaskState::Working
        });
        append.create = Some(row);
        store.append(append).await.expect("create a listed task");
        ids.push(id);
        // Distinct status times for some, equal ones (ordered by id) for others.
        if i % 2 == 1 {
            tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        }
    }
    let mut all: Vec<TaskView> = Vec::new();
    for id in &ids {
        all.push(
            store
                .task_view(id, Some(1))
                .await
                .expect("view")
                .expect("a task"),
        );
    }
    let queries = [
        ViewQuery {
            principal: Some(principal.clone()),
            ..ViewQuery::default()
        },
        ViewQuery {
            principal: Some(principal.clone()),
            context_id: Some("ctx-odd".into()),
            ..ViewQuery::default()
        },
        ViewQuery {
            principal: Some(principal.clone()),
            state: Some(TaskState::Completed),
            ..ViewQuery::default()
        },
        ViewQuery {
            principal: Some(fresh_id("nobody")),
            ..ViewQuery::default()
        },
        ViewQuery {
            principal: Some(principal.clone()),
            skill_id: Some("skill-three".into()),
            ..ViewQuery::default()
        },
        ViewQuery {
            principal: Some(principal.clone()),
            id_prefix: Some(ids[3][..ids[3].len() - 2].to_owned()),
            ..ViewQuery::default()
        },
        ViewQuery {
            principal: Some(principal.clone()),
            status_before_ms: Some(all[3].status_at_ms),
            ..ViewQuery::default()
        },
    ];
    for base in queries {
        let mut expected: Vec<&TaskView> = all
            .iter()
            .filter(|v| crate::store::view_matches(v, &base))
            .collect();
        expected
            .sort_by(|a, b| (b.status_at_ms, &b.record.id).cmp(&(a.status_at_ms, &a.record.id)));
        let expected: Vec<&str> = expected.iter().map(|v| v.record.id.as_str()).collect();
        let mut got: Vec<String> = Vec::new();
        let mut query = ViewQuery {
            limit: 2,
            history: Some(1),
            ..base.clone()
        };
        loop {
            let page = store.list_views(&query).await.expect("list views");
            assert_eq!(
                page.total,
                expected.len() as u64,
                "{base:?}: the total counts every match, on every page"
            );
            assert!(page.views.len() <= 2, "{base:?}: at most the limit");
            for view in &page.views {
                assert!(view.history.len() <= 1, "{base:?}: the history window");
            }
            let Some(last) = page.views.last() else { break };
            query.after = Some((last.status_at_ms, last.record.id.clone()));
            got.extend(page.views.iter().map(|v| v.record.id.clone()));
        }
        assert_eq!(
            got, expected,
            "{base:?}: every match once, newest status first"
        );
    }
}

/// [`Store::state_counts`] counts the tasks its query's filters match, by state: the same tasks
/// [`Store::list_views`] lists for the query, and no state without tasks.
pub async fn state_counts_count_the_views_the_filters_match(store: &dyn Store) {
    use crate::store::ViewQuery;
    let principal = fresh_id("counted");
    let states = [
        TaskState::Working,
        TaskState::Completed,
        TaskState::Working,
        TaskState::Failed,
        TaskState::Completed,
        TaskState::Completed,
    ];
    let mut ids = Vec::new();
    for (i, state) in states.iter().enumerate() {
        let id = fresh_id("counted");
        ids.push(id.clone());
        let mut row = record(&id, Some(&principal));
        row.context_id = if i % 2 == 0 { "ctx-even" } else { "ctx-odd" }.to_owned();
        let mut entries = vec![
            created(&id),
            Entry::StatusChanged {
                state: TaskState::Working,
            },
        ];
        if state.is_terminal() {
            entries.push(Entry::Terminal {
                state: *state,
                message: None,
            });
        }
        let mut append = Append::new(id.as_str(), 1, entries);
        append.state = Some(*state);
        append.create = Some(row);
        store.append(append).await.expect("create a counted task");
    }
    let sorted = |mut counts: Vec<(TaskState, u64)>| {
        counts.sort_by_key(|(s, _)| s.as_str());
        counts
    };
    let mine = ViewQuery {
        principal: Some(principal.clone()),
        ..ViewQuery::default()
    };
    assert_eq!(
        sorted(store.state_counts(&mine).await.expect("state counts")),
        sorted(vec![
            (TaskState::Working, 2),
            (TaskState::Completed, 3),
            (TaskState::Failed, 1)
        ]),
        "every task of the principal, by state"
    );
    let queries = [
        ViewQuery {
            context_id: Some("ctx-odd".into()),
            ..mine.clone()
        },
        ViewQuery {
            state: Some(TaskState::Completed),
            ..mine.clone()
        },
        ViewQuery {
            principal: Some(fresh_id("nobody")),
            ..ViewQuery::default()
        },
        ViewQuery {
            id_prefix: Some(ids[1].clone()),
            ..mine.clone()
        },
        ViewQuery {
            skill_id: Some(fresh_id("no-such-skill")),
            ..mine.clone()
        },
    ];
    for query in queries {
        let listed = store
            .list_views(&ViewQuery {
                limit: usize::MAX,
                history: Some(0),
                ..query.clone()
            })
            .await
            .expect("list views");
        let mut expected: Vec<(TaskState, u64)> = Vec::new();
        for view in listed.views {
            match expected.iter_mut().find(|(s, _)| *s == view.record.state) {
                Some((_, n)) => *n += 1,
                None => expected.push((view.record.state, 1)),
            }
        }
        let got = store.state_counts(&query).await.expect("state counts");
        assert_eq!(sorted(got), sorted(expected), "{query:?}");
    }
}
