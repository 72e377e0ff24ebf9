//! A task's journal as a timeline: each visit and the step it ran, each command with its kind,
//! policy and InvocationId, its failed attempts with their errors and the backoff its retry policy
//! allows, its receipt with how many attempts it took and how long after it was issued, timers
//! with their due time, checkpoints, compensations, calls and what the task said — read from the
//! journal, so it says what a replay will do — and, on a store with leases, each lease the task was
//! given (owner, fencing token, takeovers, releases) from the store's lease log, in time order.

use std::collections::HashMap;

use maud::{html, Markup};

use super::layout;
use crate::flow::{Cmd, CmdKind, Event, InvocationId};
use crate::journal::{Entry, JournalRecord};
use crate::store::LeaseChange;

/// What the timeline knows of an issued command when its later entries come.
struct Issued<'a> {
    at_ms: i64,
    cmd: &'a Cmd,
}

/// A serde name (`"at_least_once"`) of a value that serializes as a string.
fn name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_owned(),
    }
}

fn anchor(id: &InvocationId) -> String {
    format!("inv-{id}")
}

fn id_link(id: &InvocationId) -> Markup {
    html! { a.inv href=(format!("#{}", anchor(id))) { code { (id) } } }
}

/// What a command does, in a few words.
fn what(kind: &CmdKind) -> Markup {
    match kind {
        CmdKind::Llm { model, stream, .. } => html! {
            "LLM " code { (model) } @if stream.is_some() { " (streamed)" }
        },
        CmdKind::Tool { tool, .. } => html! { "tool " code { (tool) } },
        CmdKind::AskUser {
            slot,
            expires_in_ms,
            ..
        } => html! {
            "ask the user (slot " code { (slot) } ")"
            @if let Some(ms) = expires_in_ms { ", expires after " (layout::duration(i64::try_from(*ms).unwrap_or(i64::MAX))) }
        },
        CmdKind::Agent { agent, .. } => html! { "call agent " code { (agent) } },
        CmdKind::Skill { skill, .. } => html! { "call skill " code { (skill) } },
        CmdKind::Sleep { millis } => {
            html! { "sleep " (layout::duration(i64::try_from(*millis).unwrap_or(i64::MAX))) }
        }
        other => html! { (other.kind_name()) },
    }
}

/// The backoff the retry policy allows before `attempt` (its jitter's range), in words.
fn backoff(cmd: &Cmd, next_attempt: u32, retry_after_ms: Option<u64>) -> String {
    if next_attempt > cmd.retry.max_attempts {
        return "no attempt left".to_owned();
    }
    let exp = next_attempt.saturating_sub(2).min(32);
    let base = cmd
        .retry
        .initial_backoff_ms
        .saturating_mul(1u64 << exp)
        .min(cmd.retry.max_backoff_ms);
    let low = i64::try_from(base - base / 2).unwrap_or(i64::MAX);
    let high = i64::try_from(base).unwrap_or(i64::MAX);
    let mut text = format!(
        "attempt {next_attempt} of {} after a backoff of {}–{}",
        cmd.retry.max_attempts,
        layout::duration(low),
        layout::duration(high)
    );
    if let Some(ms) = retry_after_ms {
        text.push_str(&format!(
            " (the service asked for {})",
            layout::duration(i64::try_from(ms).unwrap_or(i64::MAX))
        ));
    }
    text
}

fn event_name(event: &Event) -> Markup {
    match event {
        Event::CommandResult { id, .. } => html! { "the result of " (id_link(id)) },
        Event::TimerFired { id } => html! { "the timer of " (id_link(id)) },
        other => html! { (other.kind_name().replace('_', " ")) },
    }
}

/// The lease changes as timeline items, in time order: each claim, and each release.
fn lease_items(leases: &[LeaseChange]) -> Vec<(i64, Markup)> {
    let mut items = Vec::new();
    for change in leases {
        let taken = html! {
            li.entry.lease data-kind="lease_claimed" data-token=(change.token) {
                (layout::time(change.claimed_at_ms))
                div.what {
                    @if change.is_takeover() {
                        "lease taken over by " code.owner { (change.owner) }
                        " from " code { (change.prior_owner.as_deref().unwrap_or_default()) }
                        @if let Some(until) = change.prior_expires_ms {
                            ", whose lease ran out " (layout::time(until))
                        }
                    } @else {
                        "lease taken by " code.owner { (change.owner) }
                    }
                    " · fencing token " code { (change.token) }
                }
            }
        };
        items.push((change.claimed_at_ms, taken));
        if let Some(at) = change.released_at_ms {
            let given = html! {
                li.entry.lease data-kind="lease_released" data-token=(change.token) {
                    (layout::time(at))
                    div.what { "lease given back by " code { (change.owner) } " · fencing token " code { (change.token) } }
                }
            };
            items.push((at, given));
        }
    }
    items.sort_by_key(|(at, _)| *at);
    items
}

/// The timeline of `journal` (in seq order) with the `leases` the task was given placed among
/// its entries by time.
pub(super) fn render(journal: &[JournalRecord], leases: &[LeaseChange]) -> Markup {
    let mut issued: HashMap<&InvocationId, Issued<'_>> = HashMap::new();
    let mut leases = lease_items(leases).into_iter().peekable();
    // The seq before each record: a gap is the part retention pruned (`engine::Retention`).
    let seen = std::cell::Cell::new(0u64);
    html! {
        ol.timeline #timeline data-last-seq=(journal.last().map_or(0, |r| r.seq)) {
            @for record in journal {
                @let at = record.at_ms;
                @while let Some((_, lease)) = leases.next_if(|(lease_at, _)| *lease_at <= at) {
                    (lease)
                }
                @let from = seen.replace(record.seq) + 1;
                @if record.seq > from {
                    li.entry.pruned data-seq=(from) {
                        div.what {
                            "entries " (from) "–" (record.seq - 1)
                            " were pruned by retention once the task had finished: its first and last appends are kept"
                        }
                    }
                }
                @match &record.entry {
                    Entry::TaskCreated { skill_id, skill_version, principal, permission_mode, .. } => {
                        (item(record, "created", html! {
                            "task created for skill " code { (skill_id) } " (version " code { (skill_version) } ")"
                            @if let Some(p) = principal { ", principal " code { (p) } }
                            ", permission mode " (name(permission_mode))
                        }, None))
                    }
                    Entry::Migrated { from, to, .. } => {
                        (item(record, "migrated", html! {
                            "moved from version " code { (from) } " to version " code { (to) }
                        }, None))
                    }
                    Entry::MessageReceived { message } => {
                        (item(record, "message user", html! { "user: " (message.joined_texts()) }, None))
                    }
                    Entry::Activated { visit, step, state, event } => {
                        (item(record, "visit", html! {
                            "visit " (visit) " · step " strong { code { (step) } } " on " (event_name(event))
                        }, Some(state)))
                    }
                    Entry::CommandIssued { id, cmd, transition } => {
                        @let _ = issued.insert(id, Issued { at_ms: at, cmd });
                        li.entry.command id=(anchor(id)) data-seq=(record.seq) {
                            (layout::time(at))
                            div.what {
                                "issued " (what(&cmd.kind)) " · policy " span.policy { (name(&cmd.policy)) }
                                " · id " code.invocation { (id) }
                                @if *transition { " · by the transition" }
                                @if cmd.retry.max_attempts > 1 { " · up to " (cmd.retry.max_attempts) " attempts" }
                            }
                            (details(&cmd_body(&cmd.kind)))
                        }
                    }
                    Entry::AttemptFailed { id, attempt, error } => {
                        (item(record, "attempt", html! {
                            "attempt " (attempt) " of " (id_link(id)) " failed (" (name(&error.kind)) "): " span.error { (error.message) }
                            @if let Some(issued) = issued.get(id) {
                                " · " (backoff(issued.cmd, attempt + 1, error.retry_after_ms))
                            }
                        }, None))
                    }
                    Entry::ReceiptRecorded { receipt } => {
                        (item(record, if receipt.outcome.is_ok() { "receipt" } else { "receipt failed" }, html! {
                            "receipt of " (id_link(&receipt.id)) " · "
                            @match &receipt.outcome {
                                Ok(_) => span.ok { "ok" },
                                Err(e) => span.error { (name(&e.kind)) ": " (e.message) },
                            }
                            " after " (receipt.attempt) @if receipt.attempt == 1 { " attempt" } @else { " attempts" }
                            @if let Some(issued) = issued.get(&receipt.id) {
                                " · " span.duration { (layout::duration(at - issued.at_ms)) } " after it was issued"
                            }
                        }, receipt.outcome.as_ref().ok()))
                    }
                    Entry::Transitioned { visit, next, state } => {
                        (item(record, "transition", html! {
                            "visit " (visit) " ended: " (name(next))
                        }, state.as_ref()))
                    }
                    Entry::TimerSet { id, fire_at_ms } => {
                        (item(record, "timer", html! {
                            "timer of " (id_link(id)) " due " (layout::time(*fire_at_ms))
                        }, None))
                    }
                    Entry::AwaitingInput { slot, message, .. } => {
                        (item(record, "awaiting", html! {
                            "waits for input (slot " code { (slot) } "): " (message.joined_texts())
                        }, None))
                    }
                    Entry::MessageEmitted { message } => {
                        (item(record, "message agent", html! { "agent: " (message.joined_texts()) }, None))
                    }
                    Entry::Progress { message } => {
                        (item(record, "progress", html! { "progress: " (message.joined_texts()) }, None))
                    }
                    Entry::ArtifactEmitted { artifact, append, last_chunk } => {
                        (item(record, "artifact", html! {
                            "artifact " code { (artifact.name.as_deref().unwrap_or(&artifact.artifact_id)) }
                            @if *append { " (appended)" }
                            @if !*last_chunk { " (more to come)" }
                        }, None))
                    }
                    Entry::StatusChanged { state } => {
                        (item(record, "status", html! { "status " (layout::state(*state)) }, None))
                    }
                    Entry::CancelRequested => {
                        (item(record, "cancel", html! { "cancel requested" }, None))
                    }
                    Entry::MessageQueued { message, interrupt } => {
                        (item(record, "message user", html! {
                            "queued while working" @if *interrupt { " (interrupts)" } ": " (message.joined_texts())
                        }, None))
                    }
                    Entry::QueuedDelivered { message_id } => {
                        (item(record, "queued", html! { "queued message " code { (message_id) } " delivered" }, None))
                    }
                    Entry::Compensated { id, outcome } => {
                        (item(record, "compensation", html! {
                            "compensated " (id_link(id)) ": "
                            @match outcome {
                                Ok(_) => span.ok { "ok" },
                                Err(e) => span.error { (e.message) },
                            }
                        }, outcome.as_ref().ok()))
                    }
                    Entry::Checkpoint { visit, status, compensable, .. } => {
                        (item(record, "checkpoint", html! {
                            "checkpoint after visit " (visit) " · status " (status.as_str())
                            " · " (compensable.len()) " compensable"
                        }, None))
                    }
                    Entry::CallStarted { id, task_id, context_id, webhook } => {
                        (item(record, "call", html! {
                            "call " (id_link(id)) " accepted: callee task " code.callee { (task_id) }
                            @if let Some(c) = context_id { " in context " code { (c) } }
                            @if *webhook { " · updates posted to the call webhook" }
                        }, None))
                    }
                    Entry::Terminal { state, message } => {
                        (item(record, "terminal", html! {
                            "ended " (layout::state(*state))
                            @if let Some(m) = message { ": " (m.joined_texts()) }
                        }, None))
                    }
                }
            }
            @for (_, lease) in leases { (lease) }
        }
    }
}

/// What a command carries, shown folded: its input, arguments or message.
fn cmd_body(kind: &CmdKind) -> serde_json::Value {
    serde_json::to_value(kind).unwrap_or(serde_json::Value::Null)
}

fn details(value: &serde_json::Value) -> Markup {
    html! { details { summary { "details" } (layout::json(value)) } }
}

fn item(
    record: &JournalRecord,
    class: &str,
    what: Markup,
    body: Option<&serde_json::Value>,
) -> Markup {
    html! {
        li class=(format!("entry {class}")) data-seq=(record.seq) data-kind=(record.entry.kind_name()) {
            (layout::time(record.at_ms))
            div.what { (what) }
            @if let Some(body) = body.filter(|b| !b.is_null()) { (details(body)) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{EffectError, EffectPolicy, Receipt, RetryPolicy};

    fn at(seq: u64, at_ms: i64, entry: Entry) -> JournalRecord {
        JournalRecord { seq, at_ms, entry }
    }

    #[test]
    fn a_retried_command_shows_its_attempts_backoff_and_receipt_duration() {
        let id = InvocationId::derive("t", 1, 0);
        let mut cmd = Cmd::new(CmdKind::Tool {
            tool: "charge_card".into(),
            args: serde_json::json!({"cents": 100}),
        });
        cmd.policy = EffectPolicy::Idempotent;
        cmd.retry = RetryPolicy {
            max_attempts: 3,
            initial_backoff_ms: 200,
            max_backoff_ms: 1_000,
        };
        let journal = [
            at(
                1,
                1_000,
                Entry::CommandIssued {
                    id: id.clone(),
                    cmd,
                    transition: false,
                },
            ),
            at(
                2,
                1_100,
                Entry::AttemptFailed {
                    id: id.clone(),
                    attempt: 1,
                    error: EffectError::transient("gateway <timeout>"),
                },
            ),
            at(
                3,
                1_450,
                Entry::ReceiptRecorded {
                    receipt: Receipt {
                        id: id.clone(),
                        attempt: 2,
                        outcome: Ok(serde_json::json!("ch_1")),
                        usage: None,
                    },
                },
            ),
        ];
        let html = render(&journal, &[]).into_string();
        assert!(html.contains("charge_card"), "{html}");
        assert!(html.contains("idempotent"), "{html}");
        assert!(html.contains("t:1:0"), "{html}");
        assert!(html.contains("gateway &lt;timeout&gt;"), "escaped: {html}");
        assert!(
            html.contains("attempt 2 of 3 after a backoff of 100 ms–200 ms"),
            "{html}"
        );
        assert!(html.contains("after 2 attempts"), "{html}");
        assert!(html.contains("450 ms"), "{html}");
    }

    #[test]
    fn a_compacted_journal_shows_what_retention_pruned_between_its_appends() {
        let journal = [
            at(1, 1_000, Entry::CancelRequested),
            at(2, 1_000, Entry::CancelRequested),
            at(9, 2_000, Entry::CancelRequested),
        ];
        let html = render(&journal, &[]).into_string();
        assert!(
            html.contains("entries 3–8 were pruned by retention"),
            "{html}"
        );
        assert_eq!(html.matches("pruned by retention").count(), 1, "{html}");
    }

    #[test]
    fn lease_changes_are_placed_among_the_entries_by_time() {
        let journal = [
            at(1, 1_000, Entry::CancelRequested),
            at(2, 3_000, Entry::CancelRequested),
        ];
        let leases = [
            LeaseChange {
                token: 1,
                owner: "worker-a".into(),
                claimed_at_ms: 1_000,
                prior_owner: None,
                prior_expires_ms: None,
                released_at_ms: None,
            },
            LeaseChange {
                token: 2,
                owner: "worker-b".into(),
                claimed_at_ms: 2_500,
                prior_owner: Some("worker-a".into()),
                prior_expires_ms: Some(2_000),
                released_at_ms: Some(4_000),
            },
        ];
        let html = render(&journal, &leases).into_string();
        let order: Vec<usize> = [
            "lease taken by <code class=\"owner\">worker-a",
            "data-seq=\"1\"",
            "lease taken over by <code class=\"owner\">worker-b</code> from <code>worker-a",
            "data-seq=\"2\"",
            "lease given back by <code>worker-b",
        ]
        .iter()
        .map(|needle| {
            html.find(needle)
                .unwrap_or_else(|| panic!("{needle} in {html}"))
        })
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?} {html}");
    }
}
