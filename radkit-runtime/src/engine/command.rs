//! Each command kind in one place: what issuing it journals, and what one that is journaled without a
//! receipt needs now — for commands a step issues and those a transition issues, on the live path and
//! after a replay. The driver, the step invoker and replay's plan all ask here.

use super::fold::CmdRec;
use super::run::{after_ms, RunState, Work};
use crate::flow::{Cmd, CmdKind, Event, InvocationId, Receipt};
use crate::journal::Entry;
use crate::model::{Message, TaskState};

/// What issuing a command journaled, and what it needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Issued {
    /// Carried out by journaling it (an emitted message, progress, an artifact): its receipt is
    /// written too.
    Journaled,
    /// A timer or a question: the task waits, to be woken at this time (a sleep's end, a question's
    /// deadline) if any.
    Waits(Option<i64>),
    /// An effect (model or tool call) to perform, or a call to start or to resume.
    Perform,
    /// A question answered at once by a message kept while the task worked: its receipt (this
    /// value) is journaled.
    Answered(serde_json::Value),
}

/// Journal `cmd` as command `id`, issued at `now_ms` by a transition or (`transition` false) inside a
/// step.
pub(crate) fn issue(
    st: &mut RunState,
    id: &InvocationId,
    cmd: Cmd,
    transition: bool,
    now_ms: i64,
) -> Issued {
    if let Some(entry) = emitted(&cmd.kind) {
        // Its result is never an event, whoever issued it.
        st.issue(id, cmd, false);
        st.push(entry);
        st.record_receipt(ok(id, serde_json::Value::Null));
        return Issued::Journaled;
    }
    match &cmd.kind {
        CmdKind::Sleep { millis } => {
            let fire_at = after_ms(now_ms, *millis);
            st.issue(id, cmd, transition);
            st.set_timer(id, fire_at);
            Issued::Waits(Some(fire_at))
        }
        CmdKind::AskUser {
            slot,
            message,
            expires_in_ms,
            ..
        } => {
            // A question's deadline is a durable timer, like a sleep's end.
            let deadline = expires_in_ms.map(|ms| after_ms(now_ms, ms));
            let asked = Entry::AwaitingInput {
                slot: slot.clone(),
                message: message.clone(),
                resume: None,
                ask: Some(id.clone()),
            };
            st.issue(id, cmd, transition);
            if let Some(message) = take_queued(st) {
                // A message kept while the task worked answers the question at once.
                st.push(asked);
                let value = reply_value(&message);
                st.record_receipt(ok(id, value.clone()));
                return Issued::Answered(value);
            }
            if let Some(at) = deadline {
                st.set_timer(id, at);
            }
            st.push(asked);
            st.set_status(TaskState::InputRequired);
            // An effect issued before it (by the same transition) is still to be performed.
            st.rewake_if_waiting();
            Issued::Waits(deadline)
        }
        CmdKind::Agent { .. } | CmdKind::Skill { .. } => {
            let cmd = with_deadline(cmd, st.call_timeout, now_ms);
            st.issue(id, cmd, transition);
            // Beside a question or a timer the row would hide it.
            st.rewake_if_waiting();
            Issued::Perform
        }
        CmdKind::Llm { .. } | CmdKind::Tool { .. } => {
            st.issue(id, cmd, transition);
            // Beside a question or a timer the row would hide it.
            st.rewake_if_waiting();
            Issued::Perform
        }
        // Emissions were journaled above.
        CmdKind::EmitMessage { .. } | CmdKind::Progress { .. } | CmdKind::EmitArtifact { .. } => {
            Issued::Journaled
        }
        // Only `ctx.race` journals a race, with its winner: issued any other way it settles as an
        // error at once (and so the same way on replay).
        CmdKind::Race { .. } => {
            st.issue(id, cmd, transition);
            st.record_receipt(Receipt {
                id: id.clone(),
                attempt: 1,
                outcome: Err(crate::flow::EffectError::permanent(
                    "a race is journaled by `ctx.race` with its winner; it cannot be issued as a command",
                )),
                usage: None,
            });
            Issued::Journaled
        }
    }
}

/// A call (`agent`, `skill`) as it is journaled: with its deadline fixed now, `now_ms` plus its own
/// timeout or else the engine's `default` (and that timeout written in, so the journal says which
/// applied). A timeout beyond what the clock can count (`Duration::MAX`) is no deadline. A replay
/// or a restart reads the journaled deadline, never makes a new one.
fn with_deadline(mut cmd: Cmd, default: std::time::Duration, now_ms: i64) -> Cmd {
    if let CmdKind::Agent {
        timeout_ms,
        deadline_ms,
        ..
    }
    | CmdKind::Skill {
        timeout_ms,
        deadline_ms,
        ..
    } = &mut cmd.kind
    {
        if deadline_ms.is_none() {
            let timeout = timeout_ms
                .get_or_insert_with(|| u64::try_from(default.as_millis()).unwrap_or(u64::MAX));
            *deadline_ms = i64::try_from(*timeout)
                .ok()
                .and_then(|t| now_ms.checked_add(t));
        }
    }
    cmd
}

/// The entry that carries out an emission (a message, progress, an artifact); `None` for the rest.
fn emitted(kind: &CmdKind) -> Option<Entry> {
    Some(match kind {
        CmdKind::EmitMessage { message } => Entry::MessageEmitted {
            message: message.clone(),
        },
        CmdKind::Progress { text } => Entry::Progress {
            message: Message::agent_text(text.clone()),
        },
        CmdKind::EmitArtifact {
            artifact,
            append,
            last_chunk,
        } => Entry::ArtifactEmitted {
            artifact: artifact.clone(),
            append: *append,
            last_chunk: *last_chunk,
        },
        _ => return None,
    })
}

/// What a command journaled without a receipt needs at `now_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outstanding {
    /// A sleep whose time has come, or a question past its deadline: [`settle_due`] writes its
    /// receipt.
    Due,
    /// A sleep until this time.
    Timer(i64),
    /// A question waiting for its reply, until its deadline if any.
    Question(Option<i64>),
    /// An effect to perform (again, under the same id); a call to start (again, with the same
    /// `messageId`) or to resume by its callee's task id.
    Perform,
    /// An effect journaled by an earlier run whose policy forbids reissuing it: its outcome is
    /// unknown.
    Unknown,
}

/// What command `rec` needs at `now_ms`; `recovered` when an earlier run of the engine journaled it.
pub(crate) fn outstanding(rec: &CmdRec, recovered: bool, now_ms: i64) -> Outstanding {
    match &rec.cmd.kind {
        CmdKind::Sleep { .. } => match rec.fire_at_ms {
            Some(at) if at > now_ms => Outstanding::Timer(at),
            _ => Outstanding::Due,
        },
        CmdKind::AskUser { .. } if rec.question_expired(now_ms) => Outstanding::Due,
        CmdKind::AskUser { .. } => Outstanding::Question(rec.fire_at_ms),
        // A call whose callee answered is resumed by the journaled task id (never sent again), at
        // once: whatever woke the task (the callee settling, a restart, the recheck time) asks the
        // callee where it stands.
        CmdKind::Agent { .. } | CmdKind::Skill { .. } if rec.callee.is_some() => {
            Outstanding::Perform
        }
        // Handed to an executor (a model or tool call with a timer: its recheck): it waits for
        // the executor's receipt until then; past it, it is reissued (dispatched again) or, if its
        // policy forbids that, its outcome is unknown — as after a crash.
        CmdKind::Llm { .. } | CmdKind::Tool { .. }
            if rec.fire_at_ms.is_some_and(|at| at > now_ms) =>
        {
            Outstanding::Timer(rec.fire_at_ms.unwrap_or(now_ms))
        }
        _ if recovered && !rec.cmd.policy.reissue_allowed() => Outstanding::Unknown,
        _ => Outstanding::Perform,
    }
}

/// Write the receipt of a [due](Outstanding::Due) command `id`: a sleep's (the timer fired) or an
/// expired question's, which takes its declared default and lets the task work again. Returns the
/// receipt's value.
pub(crate) fn settle_due(st: &mut RunState, id: &InvocationId, cmd: &Cmd) -> serde_json::Value {
    let value = match &cmd.kind {
        CmdKind::AskUser { on_expiry, .. } => on_expiry.clone().unwrap_or_default(),
        _ => serde_json::Value::Null,
    };
    st.record_receipt(ok(id, value.clone()));
    st.rewake();
    if matches!(cmd.kind, CmdKind::AskUser { .. }) {
        st.set_status(TaskState::Working);
    }
    value
}

/// Journal a user's reply to a task waiting for input, and queue what it wakes: the question `ask`
/// gets the message as its receipt (a transition's question delivers it as an event; a step's
/// re-runs the step's `open_visit`, where the question returns it), or, after an `await_input`, the
/// message is delivered to the waiting state.
pub(crate) fn receive_reply(
    st: &mut RunState,
    message: Message,
    ask: Option<InvocationId>,
    open_visit: Option<(u64, Event)>,
) {
    st.push(Entry::MessageReceived {
        message: message.clone(),
    });
    st.set_status(TaskState::Working);
    let Some(id) = ask else {
        st.queue.push_back(Work::Activate {
            event: Event::UserMessage { message },
            rerun: None,
        });
        return;
    };
    let transition = st.command(&id).is_some_and(|c| c.transition);
    st.record_receipt(ok(&id, reply_value(&message)));
    st.rewake();
    if transition {
        st.queue.push_front(Work::Execute(id));
    } else if let Some((visit, event)) = open_visit {
        st.queue.push_front(Work::Activate {
            event,
            rerun: Some(visit),
        });
    }
}

/// Take the oldest message kept for the task's next question (`WhileWorking::Queue`), journaling
/// its delivery: the question just journaled gets it as its answer.
pub(crate) fn take_queued(st: &mut RunState) -> Option<Message> {
    let queued = st.inbox().iter().find(|q| !q.interrupt)?.message.clone();
    st.push(Entry::QueuedDelivered {
        message_id: queued.message_id.clone(),
    });
    Some(queued)
}

/// The reply to a question as its receipt's value.
fn reply_value(message: &Message) -> serde_json::Value {
    serde_json::to_value(message).unwrap_or(serde_json::Value::Null)
}

/// The event that delivers the result of transition command `id` to the skill.
pub(crate) fn result_event(id: InvocationId, cmd: &Cmd, receipt: &Receipt) -> Event {
    match cmd.kind {
        CmdKind::Sleep { .. } => Event::TimerFired { id },
        _ => Event::CommandResult {
            id,
            outcome: receipt.outcome.clone(),
        },
    }
}

fn ok(id: &InvocationId, value: serde_json::Value) -> Receipt {
    Receipt {
        id: id.clone(),
        attempt: 1,
        outcome: Ok(value),
        usage: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(cmd: &Cmd) -> (Option<u64>, Option<i64>) {
        match &cmd.kind {
            CmdKind::Agent {
                timeout_ms,
                deadline_ms,
                ..
            }
            | CmdKind::Skill {
                timeout_ms,
                deadline_ms,
                ..
            } => (*timeout_ms, *deadline_ms),
            _ => (None, None),
        }
    }

    fn timed(mut cmd: Cmd, ms: u64) -> Cmd {
        if let CmdKind::Agent { timeout_ms, .. } | CmdKind::Skill { timeout_ms, .. } = &mut cmd.kind
        {
            *timeout_ms = Some(ms);
        }
        cmd
    }

    #[test]
    fn a_calls_deadline_is_fixed_when_it_is_issued_from_its_timeout_or_else_the_default() {
        let day = Duration::from_secs(86_400);
        let now = 1_000;
        let plain = Cmd::skill("child", Message::user_text("hi"));
        assert_eq!(
            limits(&with_deadline(plain.clone(), day, now)),
            (Some(86_400_000), Some(86_401_000)),
            "the engine's default, written in"
        );
        let own = timed(Cmd::agent("peer", Message::user_text("hi")), 2_000);
        assert_eq!(
            limits(&with_deadline(own, day, now)),
            (Some(2_000), Some(3_000)),
            "the call's own timeout"
        );
        assert_eq!(
            limits(&with_deadline(plain.clone(), Duration::MAX, now)),
            (Some(u64::MAX), None),
            "Duration::MAX: no deadline"
        );
        let issued = with_deadline(plain, day, now);
        assert_eq!(
            with_deadline(issued.clone(), Duration::from_secs(1), 5_000),
            issued,
            "a deadline once fixed is kept"
        );
        let tool = Cmd::tool("t", serde_json::Value::Null);
        assert_eq!(with_deadline(tool.clone(), day, now), tool);
    }
}
