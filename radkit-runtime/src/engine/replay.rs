//! Replay: rebuild a task's run from its journal. Pure: records and the clock in, the run and its next
//! work out. The state is the fold of the records ([`Folded::apply`], the function the live path
//! applies as it journals); this module only plans what the run does next: the open visit is re-run
//! (its commands with receipts short-circuit), outstanding transition commands are queued, and waits
//! (input, timers) are recognised.

use std::collections::VecDeque;

use super::command::{outstanding, Outstanding};
use super::fold::{Folded, Header};
use super::run::{RunState, Work};
use crate::flow::{Event, InvocationId};
use crate::journal::{Entry, JournalRecord};
use crate::model::TaskState;

/// What the task waits for after replay.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Wait {
    /// Work is queued (or nothing is outstanding: the driver decides).
    Runnable,
    /// A user message; `ask` is the `ask_user` command to answer, if any, and `expires_at_ms` its
    /// deadline.
    Input {
        ask: Option<InvocationId>,
        expires_at_ms: Option<i64>,
    },
    /// A timer firing at this time.
    Timer(i64),
    /// Finished.
    Terminal(TaskState),
}

/// The result of replaying a journal.
pub(crate) struct Replayed {
    pub header: Header,
    pub run: RunState,
    pub wait: Wait,
    /// The visit whose transition is not journaled, with its event (re-run when an in-step wait ends).
    pub open_visit: Option<(u64, Event)>,
}

/// Fold `records` (a task's first entry and what follows its last checkpoint, in `seq` order) over
/// the skill's `initial` state, and plan the run at `now_ms`.
pub(crate) fn replay(
    records: &[JournalRecord],
    initial: serde_json::Value,
    now_ms: i64,
) -> Result<Replayed, String> {
    let mut fold = Folded::new(initial);
    for record in records {
        fold.apply(record.seq, &record.entry);
    }
    let header = fold
        .header()
        .cloned()
        .ok_or_else(|| "journal has no task_created entry".to_owned())?;
    let plan = Plan::new(&fold, records, now_ms)?;
    let open_visit = match fold.open() {
        Some(open) => Some((open.visit, event_at(records, open.seq)?)),
        None => None,
    };
    Ok(Replayed {
        header,
        run: RunState::resumed(fold, plan.queue, plan.journaled_end),
        wait: plan.wait,
        open_visit,
    })
}

/// The entry at `seq` (the fold points at entries it does not copy).
fn entry_at(records: &[JournalRecord], seq: u64) -> Result<&Entry, String> {
    records
        .binary_search_by_key(&seq, |r| r.seq)
        .map(|i| &records[i].entry)
        .map_err(|_| format!("entry {seq} is missing from the journal"))
}

/// The event of the visit whose `activated` entry is at `seq`.
fn event_at(records: &[JournalRecord], seq: u64) -> Result<Event, String> {
    match entry_at(records, seq)? {
        Entry::Activated { event, .. } => Ok(event.clone()),
        other => Err(format!(
            "entry {seq} is a {}, not a visit",
            other.kind_name()
        )),
    }
}

/// What a replayed run does next.
struct Plan {
    queue: VecDeque<Work>,
    wait: Wait,
    journaled_end: Option<(u64, crate::journal::TransitionKind)>,
}

impl Plan {
    fn new(fold: &Folded, records: &[JournalRecord], now_ms: i64) -> Result<Self, String> {
        let mut plan = Plan {
            queue: VecDeque::new(),
            wait: Wait::Runnable,
            journaled_end: None,
        };
        let entry_at = |seq: u64| entry_at(records, seq);
        let event_at = |seq: u64| event_at(records, seq);
        if fold.status().is_terminal() {
            plan.wait = Wait::Terminal(fold.status());
        } else if let Some((visit, kind)) = fold.ended() {
            // The visit's final transition is journaled, its terminal entry is not: re-run the visit
            // (its commands return their receipts) to get the transition's reason and message back,
            // and finish the task as the live path would (compensations still owed run first). The
            // driver journals the transition only once.
            plan.journaled_end = Some((visit.visit, kind));
            plan.queue.push_back(Work::Activate {
                event: event_at(visit.seq)?,
                rerun: Some(visit.visit),
            });
        } else if fold.cancel_requested() {
            // A journaled cancel whose compensations or terminal entry are not: the task is runnable
            // whatever it waited for before (the cancel's own visit does not clear an earlier wait),
            // and the driver's first act is to finish the cancel (compensations still owed, then
            // terminal). The state to tell the skill of the cancel (if it was not told yet) is the
            // last journaled.
        } else if let Some(open) = fold.open() {
            // A visit without its transition: interrupted by a crash, or suspended by an in-step wait.
            plan.open_visit(fold, open.visit, event_at(open.seq)?, now_ms);
        } else if !fold.has_activated() {
            if let Some(seq) = fold.unconsumed() {
                plan.deliver(entry_at(seq)?);
            }
        } else {
            plan.between_visits(fold, &entry_at, now_ms)?;
        }
        if !fold.status().is_terminal() && fold.ended().is_none() && !fold.cancel_requested() {
            plan.interrupt(fold, &entry_at)?;
        }
        Ok(plan)
    }

    /// Re-run the open visit, unless every outstanding command of it waits (a question, a timer not
    /// due yet). A command with something to do (a due timer, an expired question, an effect to
    /// perform) re-runs it even beside a question: the step's other calls (a `ctx.race` against
    /// the question, a tool of the same batch) must not wait for a reply. A waiting visit's alarm
    /// is its earliest timer (a sleep, a question's deadline).
    fn open_visit(&mut self, fold: &Folded, visit: u64, event: Event, now_ms: i64) {
        let mut question = None;
        let mut alarm: Option<i64> = None;
        let mut runnable = false;
        for (id, rec) in fold
            .commands()
            .iter()
            .filter(|(_, c)| !c.transition && c.receipt.is_none())
        {
            match outstanding(rec, true, now_ms) {
                Outstanding::Question(deadline) => {
                    question = Some(id.clone());
                    alarm = alarm.into_iter().chain(deadline).min();
                }
                Outstanding::Timer(at) => alarm = Some(alarm.map_or(at, |a| a.min(at))),
                Outstanding::Due | Outstanding::Perform | Outstanding::Unknown => runnable = true,
            }
        }
        self.wait = match (runnable, question, alarm) {
            (false, Some(ask), expires_at_ms) => Wait::Input {
                ask: Some(ask),
                expires_at_ms,
            },
            (false, None, Some(at)) => Wait::Timer(at),
            _ => {
                self.queue.push_back(Work::Activate {
                    event,
                    rerun: Some(visit),
                });
                return;
            }
        };
    }

    /// Between visits: a pending `goto`, a reply to deliver, transition commands outstanding.
    fn between_visits<'r>(
        &mut self,
        fold: &Folded,
        entry_at: &impl Fn(u64) -> Result<&'r Entry, String>,
        now_ms: i64,
    ) -> Result<(), String> {
        if fold.pending_goto() {
            self.queue.push_back(Work::Activate {
                event: Event::Enter,
                rerun: None,
            });
        }
        if fold.awaiting().is_some_and(|a| a.resumes_state) {
            match fold.unconsumed() {
                Some(seq) => self.deliver(entry_at(seq)?),
                None => {
                    self.wait = Wait::Input {
                        ask: None,
                        expires_at_ms: None,
                    }
                }
            }
        }
        for id in fold
            .transition_order()
            .iter()
            .filter(|id| !fold.delivered(id))
        {
            let Some(rec) = fold.command(id) else {
                continue;
            };
            let needs = match rec.receipt {
                Some(_) => Outstanding::Perform,
                None => outstanding(rec, true, now_ms),
            };
            match needs {
                Outstanding::Question(deadline) => {
                    self.wait = Wait::Input {
                        ask: Some(id.clone()),
                        expires_at_ms: deadline,
                    }
                }
                Outstanding::Timer(at) => {
                    if self.wait == Wait::Runnable {
                        self.wait = Wait::Timer(at);
                    }
                }
                // Delivered, settled (a due timer, an expired question takes its default),
                // performed or failed as unknown by the driver.
                Outstanding::Due | Outstanding::Perform | Outstanding::Unknown => {
                    self.queue.push_back(Work::Execute(id.clone()))
                }
            }
        }
        if !self.queue.is_empty() {
            self.wait = Wait::Runnable;
        }
        Ok(())
    }

    /// A message that interrupts the task: delivered (its step's visit not begun), it is queued
    /// first; kept, the driver's first look at its queue delivers it (`rules::next_work`). Either
    /// way the task is runnable, whatever it waited for.
    fn interrupt<'r>(
        &mut self,
        fold: &Folded,
        entry_at: &impl Fn(u64) -> Result<&'r Entry, String>,
    ) -> Result<(), String> {
        if let Some(seq) = fold.interrupt_delivered() {
            if let Entry::MessageQueued { message, .. } = entry_at(seq)? {
                self.queue.push_front(Work::Activate {
                    event: Event::Interrupted {
                        message: message.clone(),
                    },
                    rerun: None,
                });
            }
        }
        if fold.interrupt_delivered().is_some() || fold.interrupt_pending() {
            self.wait = Wait::Runnable;
        }
        Ok(())
    }

    /// Deliver the user message `entry` (a `message_received` entry, or a `message_queued` one
    /// delivered to a question) to the current state.
    fn deliver(&mut self, entry: &Entry) {
        if let Entry::MessageReceived { message } | Entry::MessageQueued { message, .. } = entry {
            self.queue.push_back(Work::Activate {
                event: Event::UserMessage {
                    message: message.clone(),
                },
                rerun: None,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Message;
    use serde_json::json;

    fn journal(entries: Vec<Entry>) -> Vec<JournalRecord> {
        entries
            .into_iter()
            .enumerate()
            .map(|(i, entry)| JournalRecord {
                seq: i as u64 + 1,
                at_ms: 0,
                entry,
            })
            .collect()
    }

    /// A task that asked for input (the reducer's `await_input`), then `more` entries.
    fn asked_then(more: Vec<Entry>) -> Vec<JournalRecord> {
        let mut entries = vec![
            Entry::TaskCreated {
                skill_id: "s".to_owned(),
                skill_version: "1".to_owned(),
                context_id: "c".to_owned(),
                principal: None,
                permission_mode: Default::default(),
                steps: Default::default(),
            },
            Entry::MessageReceived {
                message: Message::user_text("go"),
            },
            Entry::Activated {
                visit: 1,
                step: "start".to_owned(),
                state: json!("start"),
                event: Event::UserMessage {
                    message: Message::user_text("go"),
                },
            },
            Entry::Transitioned {
                visit: 1,
                next: crate::journal::TransitionKind::AwaitInput,
                state: Some(json!("ask")),
            },
            Entry::AwaitingInput {
                slot: "note".to_owned(),
                message: Message::agent_text("a note?"),
                resume: Some(json!("ask")),
                ask: None,
            },
            Entry::StatusChanged {
                state: TaskState::InputRequired,
            },
        ];
        entries.extend(more);
        journal(entries)
    }

    fn cancel_visit() -> Vec<Entry> {
        vec![
            Entry::CancelRequested,
            Entry::Activated {
                visit: 2,
                step: "ask".to_owned(),
                state: json!("ask"),
                event: Event::Cancel,
            },
            Entry::Transitioned {
                visit: 2,
                next: crate::journal::TransitionKind::Cancel,
                state: None,
            },
        ]
    }

    /// The regression the authoring-form proptest found: the reply to a question asked inside a step
    /// was left "unconsumed", and a later `await_input` re-delivered it as a new message on reload
    /// (so the task could not be answered).
    #[test]
    fn a_reply_to_an_in_step_question_is_not_delivered_again() {
        let ask = InvocationId::from_string("t:2:0".to_owned());
        let replayed = replay(
            &asked_then(vec![
                Entry::MessageReceived {
                    message: Message::user_text("ask"),
                },
                Entry::Activated {
                    visit: 2,
                    step: "ask".to_owned(),
                    state: json!("ask"),
                    event: Event::UserMessage {
                        message: Message::user_text("ask"),
                    },
                },
                Entry::CommandIssued {
                    id: ask.clone(),
                    cmd: crate::flow::Cmd::ask_user("extra", Message::agent_text("how much?")),
                    transition: false,
                },
                Entry::MessageReceived {
                    message: Message::user_text("three"),
                },
                Entry::ReceiptRecorded {
                    receipt: crate::flow::Receipt {
                        id: ask,
                        attempt: 1,
                        outcome: Ok(json!("three")),
                        usage: None,
                    },
                },
                Entry::Transitioned {
                    visit: 2,
                    next: crate::journal::TransitionKind::AwaitInput,
                    state: Some(json!("wait")),
                },
                Entry::AwaitingInput {
                    slot: "next".to_owned(),
                    message: Message::agent_text("next?"),
                    resume: Some(json!("wait")),
                    ask: None,
                },
            ]),
            json!(null),
            0,
        )
        .unwrap();
        assert!(matches!(replayed.wait, Wait::Input { ask: None, .. }));
        assert!(replayed.run.queue.is_empty());
    }

    /// The mirror of `cancel_after_a_final_transition_is_ignored_as_live`: a cancel asked while the
    /// visit ran, before it returned `fail`, is dropped by the final transition — live, the task
    /// ends `failed`, and so it does after a crash during the failure's compensations.
    #[test]
    fn cancel_before_a_final_transition_is_dropped_as_live() {
        let replayed = replay(
            &asked_then(vec![
                Entry::MessageReceived {
                    message: Message::user_text("note"),
                },
                Entry::Activated {
                    visit: 2,
                    step: "ask".to_owned(),
                    state: json!("ask"),
                    event: Event::UserMessage {
                        message: Message::user_text("note"),
                    },
                },
                Entry::CancelRequested,
                Entry::Transitioned {
                    visit: 2,
                    next: crate::journal::TransitionKind::Fail,
                    state: None,
                },
            ]),
            json!(null),
            0,
        )
        .unwrap();
        assert!(!replayed.run.cancel_requested());
        assert_eq!(
            replayed.run.journaled_end,
            Some((2, crate::journal::TransitionKind::Fail))
        );
        assert_eq!(replayed.run.queue.len(), 1, "the failing visit is re-run");
    }

    #[test]
    fn waiting_task_waits_for_input() {
        let replayed = replay(&asked_then(vec![]), json!(null), 0).unwrap();
        assert!(matches!(replayed.wait, Wait::Input { ask: None, .. }));
        assert!(!replayed.run.cancel_requested());
    }

    #[test]
    fn crash_during_cancel_compensation_leaves_the_cancel_runnable() {
        let replayed = replay(&asked_then(cancel_visit()), json!(null), 0).unwrap();
        assert_eq!(replayed.wait, Wait::Runnable);
        assert!(replayed.run.cancel_requested() && replayed.run.cancel_delivered());
        assert!(replayed.run.queue.is_empty(), "the driver cancels first");
        assert_eq!(replayed.run.visit(), 2);
    }

    #[test]
    fn cancel_journaled_before_its_visit_is_delivered_on_recovery() {
        let replayed = replay(&asked_then(vec![Entry::CancelRequested]), json!(null), 0).unwrap();
        assert_eq!(replayed.wait, Wait::Runnable);
        assert!(replayed.run.cancel_requested() && !replayed.run.cancel_delivered());
    }

    #[test]
    fn cancel_after_a_final_transition_is_ignored_as_live() {
        let mut more = vec![
            Entry::MessageReceived {
                message: Message::user_text("note"),
            },
            Entry::StatusChanged {
                state: TaskState::Working,
            },
            Entry::Activated {
                visit: 2,
                step: "ask".to_owned(),
                state: json!("ask"),
                event: Event::UserMessage {
                    message: Message::user_text("note"),
                },
            },
            Entry::Transitioned {
                visit: 2,
                next: crate::journal::TransitionKind::Fail,
                state: None,
            },
        ];
        more.push(Entry::CancelRequested);
        let replayed = replay(&asked_then(more), json!(null), 0).unwrap();
        assert_eq!(replayed.wait, Wait::Runnable);
        assert!(!replayed.run.cancel_requested());
        assert_eq!(
            replayed.run.journaled_end,
            Some((2, crate::journal::TransitionKind::Fail))
        );
    }
}
