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
