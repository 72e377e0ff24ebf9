//! Replay: rebuild a task's run state from its journal. Pure: records in, state and next work out.
//! Receipts become table entries (so re-run steps short-circuit), the open visit is re-run, outstanding
//! transition commands are queued, and waits (input, timers) are recognised.

use std::collections::HashSet;

use super::run::{CmdRec, RunState, Work};
use crate::flow::{CmdKind, EffectPolicy, Event, InvocationId};
use crate::journal::{now_ms, Entry, JournalRecord};
use crate::model::{Message, TaskState};

/// The transitions that end a task.
const FINAL: [&str; 3] = ["complete", "fail", "reject"];

/// Who the task is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Header {
    pub skill_id: String,
    pub skill_version: String,
    pub context_id: String,
    pub principal: Option<String>,
    pub permission_mode: super::PermissionMode,
}

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
    /// The visit interrupted before its transition, if any (to re-run when a wait ends).
    pub open_visit: Option<(u64, Event)>,
}

/// Replay `records`; `initial` gives the skill's initial state when no visit happened yet.
pub(crate) fn replay(
    records: &[JournalRecord],
    initial: impl FnOnce() -> serde_json::Value,
) -> Result<Replayed, String> {
    let mut header = None;
    let mut status = TaskState::Submitted;
    let mut cancel_requested = false;
    // The skill was told of the cancel (its `cancel` visit is journaled).
    let mut cancel_delivered = false;
    let mut commands = std::collections::HashMap::new();
    let mut compensable: Vec<InvocationId> = Vec::new();
    let mut transition_order: Vec<InvocationId> = Vec::new();
    let mut delivered: HashSet<InvocationId> = HashSet::new();
    let mut state: Option<serde_json::Value> = None;
    let mut visit = 0u64;
    let mut open: Option<(u64, serde_json::Value, Event)> = None;
    // The last visit, when it ended the task (`complete`, `fail`, `reject`): its terminal entry comes
    // after the compensations a failure owes, so a crash can fall in between.
    let mut ended: Option<(u64, serde_json::Value, Event, String)> = None;
    let mut pending_goto = false;
    let mut awaiting: Option<(Option<serde_json::Value>, Option<InvocationId>)> = None;
    let mut unconsumed: Option<Message> = None;
    let mut activated = false;
    let mut last_seq = 0;

    for record in records {
        last_seq = record.seq;
        match &record.entry {
            Entry::TaskCreated {
                skill_id,
                skill_version,
                context_id,
                principal,
                permission_mode,
            } => {
                header = Some(Header {
                    skill_id: skill_id.clone(),
                    skill_version: skill_version.clone(),
                    context_id: context_id.clone(),
                    principal: principal.clone(),
                    permission_mode: *permission_mode,
                });
            }
            Entry::MessageReceived { message } => unconsumed = Some(message.clone()),
            Entry::Activated {
                visit: v,
                state: s,
                event,
                ..
            } => {
                visit = visit.max(*v);
                open = Some((*v, s.clone(), event.clone()));
                ended = None;
                state = Some(s.clone());
                pending_goto = false;
                activated = true;
                match event {
                    Event::UserMessage { .. } => {
                        unconsumed = None;
                        awaiting = None;
                    }
                    Event::CommandResult { id, .. } | Event::TimerFired { id } => {
                        delivered.insert(id.clone());
                    }
                    Event::Cancel => cancel_delivered = true,
                    _ => {}
                }
            }
            Entry::CommandIssued {
                id,
                cmd,
                transition,
            } => {
                if *transition {
                    transition_order.push(id.clone());
                }
                commands.insert(
                    id.clone(),
                    CmdRec {
                        cmd: cmd.clone(),
                        receipt: None,
                        attempts: 0,
                        transition: *transition,
                        fire_at_ms: None,
                        recovered: true,
                    },
                );
            }
            Entry::AttemptFailed { id, attempt, .. } => {
                if let Some(rec) = commands.get_mut(id) {
                    rec.attempts = *attempt;
                }
            }
            Entry::ReceiptRecorded { receipt } => {
                if let Some(rec) = commands.get_mut(&receipt.id) {
                    if rec.cmd.policy == EffectPolicy::Compensate && receipt.outcome.is_ok() {
                        compensable.push(receipt.id.clone());
                    }
                    if matches!(rec.cmd.kind, CmdKind::AskUser { .. }) {
                        awaiting = None;
                    }
                    rec.attempts = receipt.attempt;
                    rec.receipt = Some(receipt.clone());
                }
            }
            Entry::Transitioned {
                visit: v,
                next,
                state: s,
            } => {
                if let Some((ov, os, oe)) = open.take() {
                    if ov == *v && FINAL.contains(&next.as_str()) {
                        ended = Some((ov, os, oe, next.clone()));
                    }
                }
                if let Some(s) = s {
                    state = Some(s.clone());
                }
                pending_goto = next == "goto";
            }
            Entry::TimerSet { id, fire_at_ms } => {
                if let Some(rec) = commands.get_mut(id) {
                    rec.fire_at_ms = Some(*fire_at_ms);
                }
            }
            Entry::AwaitingInput { resume, ask, .. } => {
                awaiting = Some((resume.clone(), ask.clone()))
            }
            Entry::StatusChanged { state } | Entry::Terminal { state, .. } => status = *state,
            Entry::CancelRequested => cancel_requested = true,
            Entry::Compensated { id, .. } => compensable.retain(|c| c != id),
            Entry::Checkpoint {
                visit: v,
                state: s,
                status: st,
                compensable: kept,
            } => {
                // Written right after a `goto` transition with nothing outstanding: what came before
                // matters only through these fields.
                commands = kept
                    .iter()
                    .map(|c| {
                        let rec = CmdRec {
                            cmd: c.cmd.clone(),
                            receipt: Some(c.receipt.clone()),
                            attempts: c.receipt.attempt,
                            transition: false,
                            fire_at_ms: None,
                            recovered: true,
                        };
                        (c.id.clone(), rec)
                    })
                    .collect();
                compensable = kept.iter().map(|c| c.id.clone()).collect();
                transition_order.clear();
                delivered.clear();
                state = Some(s.clone());
                visit = *v;
                status = *st;
                open = None;
                ended = None;
                pending_goto = true;
                awaiting = None;
                unconsumed = None;
                activated = true;
            }
            Entry::MessageEmitted { .. }
            | Entry::Progress { .. }
            | Entry::ArtifactEmitted { .. } => {}
        }
    }

    let header = header.ok_or_else(|| "journal has no task_created entry".to_owned())?;
    let mut run = RunState::new(last_seq + 1, status, state.unwrap_or_else(initial));
    run.visit = visit;
    run.compensable = compensable;
    run.cancel_requested = cancel_requested;
    run.cancel_delivered = cancel_delivered;
    let mut wait = Wait::Runnable;
    let mut open_visit = None;

    if status.is_terminal() {
        wait = Wait::Terminal(status);
    } else if let Some((v, s, event, next)) = ended {
        // A cancel journaled after the task decided its end is ignored, as on the live path (which
        // finishes a final transition without looking at cancels).
        run.cancel_requested = false;
        // The visit's final transition is journaled, its terminal entry is not: re-run the visit
        // (its commands return their receipts) to get the transition's reason and message back, and
        // finish the task as the live path would (compensations still owed run first). The driver
        // journals the transition only once.
        run.state = s;
        run.journaled_end = Some((v, next));
        run.queue.push_back(Work::Activate {
            event,
            rerun: Some(v),
        });
    } else if cancel_requested {
        // A journaled cancel whose compensations or terminal entry are not: the task is runnable
        // whatever it waited for before (the cancel's own visit does not clear an earlier wait), and
        // the driver's first act is to finish the cancel (compensations still owed, then terminal).
        // The state to tell the skill of the cancel (if it was not told yet) is the last journaled.
    } else if let Some((v, s, event)) = open {
        // A visit without its transition: interrupted by a crash, or suspended by an in-step wait.
        run.state = s;
        let now = now_ms();
        let mut in_step_wait = None;
        for (id, rec) in commands
            .iter()
            .filter(|(_, c)| !c.transition && c.receipt.is_none())
        {
            match rec.cmd.kind {
                CmdKind::AskUser { .. } => {
                    if let Some(w) = question_wait(id, rec, now) {
                        in_step_wait = Some(w);
                    }
                }
                CmdKind::Sleep { .. } => match rec.fire_at_ms {
                    Some(at) if at > now && in_step_wait.is_none() => {
                        in_step_wait = Some(Wait::Timer(at))
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        match in_step_wait {
            Some(w) => wait = w,
            None => run.queue.push_back(Work::Activate {
                event: event.clone(),
                rerun: Some(v),
            }),
        }
        open_visit = Some((v, event));
    } else if !activated {
        if let Some(message) = unconsumed.take() {
            run.queue.push_back(Work::Activate {
                event: Event::UserMessage { message },
                rerun: None,
            });
        }
    } else {
        if pending_goto {
            run.queue.push_back(Work::Activate {
                event: Event::Enter,
                rerun: None,
            });
        }
        if let Some((Some(_), _)) = awaiting {
            match unconsumed.take() {
                Some(message) => run.queue.push_back(Work::Activate {
                    event: Event::UserMessage { message },
                    rerun: None,
                }),
                None => {
                    wait = Wait::Input {
                        ask: None,
                        expires_at_ms: None,
                    }
                }
            }
        }
        for id in transition_order
            .into_iter()
            .filter(|id| !delivered.contains(id))
        {
            let Some(rec) = commands.get(&id) else {
                continue;
            };
            match (&rec.cmd.kind, &rec.receipt) {
                (CmdKind::AskUser { .. }, None) => match question_wait(&id, rec, now_ms()) {
                    Some(w) => wait = w,
                    // Expired while nobody drove the task: `execute` records its default.
                    None => run.queue.push_back(Work::Execute(id.clone())),
                },
                (CmdKind::Sleep { .. }, None) if rec.fire_at_ms.unwrap_or(0) > now_ms() => {
                    if wait == Wait::Runnable {
                        wait = Wait::Timer(rec.fire_at_ms.unwrap_or(0));
                    }
                }
                _ => run.queue.push_back(Work::Execute(id.clone())),
            }
        }
        if !run.queue.is_empty() {
            wait = Wait::Runnable;
        }
    }
    run.commands = commands;
    Ok(Replayed {
        header,
        run,
        wait,
        open_visit,
    })
}

/// What an unanswered question `id` waits for: a reply until its deadline (if any), or `None` once
/// the deadline has passed (the question takes its default when the task runs). Shared by questions
/// asked inside a step and those a transition issued.
fn question_wait(id: &InvocationId, rec: &CmdRec, now_ms: i64) -> Option<Wait> {
    (!rec.question_expired(now_ms)).then(|| Wait::Input {
        ask: Some(id.clone()),
        expires_at_ms: rec.fire_at_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
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
                permission_mode: super::super::PermissionMode::Default,
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
                next: "await_input".to_owned(),
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
                next: "cancel".to_owned(),
                state: None,
            },
        ]
    }

    #[test]
    fn waiting_task_waits_for_input() {
        let replayed = replay(&asked_then(vec![]), || json!(null)).unwrap();
        assert!(matches!(replayed.wait, Wait::Input { ask: None, .. }));
        assert!(!replayed.run.cancel_requested);
    }

    #[test]
    fn crash_during_cancel_compensation_leaves_the_cancel_runnable() {
        let replayed = replay(&asked_then(cancel_visit()), || json!(null)).unwrap();
        assert_eq!(replayed.wait, Wait::Runnable);
        assert!(replayed.run.cancel_requested && replayed.run.cancel_delivered);
        assert!(replayed.run.queue.is_empty(), "the driver cancels first");
        assert_eq!(replayed.run.visit, 2);
    }

    #[test]
    fn cancel_journaled_before_its_visit_is_delivered_on_recovery() {
        let replayed = replay(&asked_then(vec![Entry::CancelRequested]), || json!(null)).unwrap();
        assert_eq!(replayed.wait, Wait::Runnable);
        assert!(replayed.run.cancel_requested && !replayed.run.cancel_delivered);
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
                next: "fail".to_owned(),
                state: None,
            },
        ];
        more.push(Entry::CancelRequested);
        let replayed = replay(&asked_then(more), || json!(null)).unwrap();
        assert_eq!(replayed.wait, Wait::Runnable);
        assert!(!replayed.run.cancel_requested);
        assert_eq!(replayed.run.journaled_end, Some((2, "fail".to_owned())));
    }
}
