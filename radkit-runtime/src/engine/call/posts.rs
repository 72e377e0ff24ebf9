//! Posts to the call webhook, turned into wakes of the calling task: coalesced and spaced, so
//! how often a callee posts (or anyone holding one of its tokens replays a post) changes neither
//! the caller's journal nor the load on the callee.
//!
//! A post says only "look now". Posts that arrive while a wake of the task is queued merge into
//! it; posts that arrive while one runs owe one more wake after it (the running one may have asked
//! the callee before the news); and a task's wakes are spaced by a token bucket ([`BURST`] at
//! once, then one per [`EVERY`]). No post is refused for its number (each good one is answered
//! `204`): a wake it cannot have now is owed and comes when the bucket allows, so a callee's last
//! post is never lost to a flood before it. This module owns that bookkeeping, the loop that
//! wakes the task (`Inner::answer_posts`) and the rule for which loaded task a post may move
//! ([`waits_on_any`]: none whose posted calls all settled); loading is the runner's
//! (`Inner::wake_for_posts`), and what a wake journals the call's (`Inner::wait`: nothing while
//! the callee still works). It never writes the journal.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::engine::fold::Folded;
use crate::engine::Inner;

/// Wakes a task may have at once from posts...
pub(crate) const BURST: u32 = 3;
/// ...and then one per this long.
pub(crate) const EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A wake is owed: it runs when the bucket has a token.
    Queued,
    /// A wake runs; posts arriving now owe another.
    Running,
    /// No wake is owed; the entry stays until the bucket is full again (so posts spaced just
    /// beyond a wake's length cannot each have a fresh bucket).
    Cooling,
}

struct Pending {
    phase: Phase,
    /// The calls (their names in the webhook URL) posted about since the last wake began.
    calls: HashSet<String>,
    /// Wakes left in the bucket, and when they were last counted.
    tokens: u32,
    counted: Instant,
    /// Tells the task's answering loop that a post came while it waits.
    notify: Arc<Notify>,
}

impl Pending {
    fn refill(&mut self, now: Instant) {
        if self.tokens >= BURST {
            self.counted = now;
            return;
        }
        let elapsed = now.saturating_duration_since(self.counted);
        let gained = elapsed.as_nanos() / EVERY.as_nanos().max(1);
        if gained == 0 {
            return;
        }
        let gained = u32::try_from(gained).unwrap_or(u32::MAX);
        self.tokens = self.tokens.saturating_add(gained).min(BURST);
        self.counted = if self.tokens >= BURST {
            now
        } else {
            self.counted + EVERY * gained
        };
    }

    /// How long until the bucket gains a token.
    fn until_token(&self, now: Instant) -> Duration {
        EVERY.saturating_sub(now.saturating_duration_since(self.counted))
    }
}

/// What a task's answering loop does next.
#[derive(Debug)]
pub(crate) enum Next {
    /// Wake the task for these calls' posts, then ask again.
    Wake(HashSet<String>),
    /// Wait this long (or until a post comes), then ask again.
    Wait(Duration, Arc<Notify>),
    /// Nothing is owed and the bucket is full: the loop ends (the task's entry is gone).
    Done,
}

/// The tasks whose posts are being answered.
#[derive(Default)]
pub(crate) struct Posts(Mutex<HashMap<String, Pending>>);

impl Posts {
    /// A good post about call `call` of `task_id` came at `now`. True when no loop answers the
    /// task's posts yet: the caller starts one, which asks [`Posts::next`] until it is done.
    pub fn post(&self, task_id: &str, call: &str, now: Instant) -> bool {
        let mut tasks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = tasks.get_mut(task_id) {
            p.calls.insert(call.to_owned());
            if p.phase == Phase::Cooling {
                p.phase = Phase::Queued;
                p.notify.notify_one();
            }
            return false;
        }
        tasks.insert(
            task_id.to_owned(),
            Pending {
                phase: Phase::Queued,
                calls: HashSet::from([call.to_owned()]),
                tokens: BURST,
                counted: now,
                notify: Arc::new(Notify::new()),
            },
        );
        true
    }

    /// What the answering loop of `task_id` does next, at `now` (after a wake it asked for ran).
    pub fn next(&self, task_id: &str, now: Instant) -> Next {
        let mut tasks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let Some(p) = tasks.get_mut(task_id) else {
            return Next::Done;
        };
        p.refill(now);
        if p.phase == Phase::Running {
            p.phase = match p.calls.is_empty() {
                true => Phase::Cooling,
                false => Phase::Queued,
            };
        }
        match p.phase {
            Phase::Queued if p.tokens > 0 => {
                p.tokens -= 1;
                p.phase = Phase::Running;
                Next::Wake(std::mem::take(&mut p.calls))
            }
            Phase::Cooling if p.tokens >= BURST => {
                tasks.remove(task_id);
                Next::Done
            }
            _ => Next::Wait(p.until_token(now), p.notify.clone()),
        }
    }
}

/// True when a post about one of `calls` (their names in the call webhook's URLs) may find news:
/// the task has not ended, and a call of it still waits (started, no receipt) on the callee task
/// one of them started. That is the posted call itself, or a later one that continues the same
/// callee task (`.reply(..)`: a callee that keeps posting with the first call's config still
/// wakes it). A post about a callee no call waits on any more has nothing to wake.
pub(crate) fn waits_on_any(fold: &Folded, calls: &HashSet<String>) -> bool {
    if fold.status().is_terminal() {
        return false;
    }
    let commands = fold.commands();
    let posted: HashSet<&str> = commands
        .iter()
        .filter(|(id, _)| calls.contains(&super::webhook::call_name(id)))
        .filter_map(|(_, rec)| Some(rec.callee.as_ref()?.task_id.as_str()))
        .collect();
    commands.values().any(|rec| {
        rec.receipt.is_none()
            && rec
                .callee
                .as_ref()
                .is_some_and(|c| posted.contains(c.task_id.as_str()))
    })
}

impl Inner {
    /// A post with a good token about call `call` (its name in the webhook URL) of `task_id`:
    /// wake the task, coalesced and spaced with the task's other posts (in the background).
    pub(crate) fn call_posted(self: &Arc<Self>, task_id: &str, call: &str) {
        if !self.posts.post(task_id, call, Instant::now()) {
            return;
        }
        let engine = self.clone();
        let task_id = task_id.to_owned();
        tokio::spawn(async move { engine.answer_posts(&task_id).await });
    }

    /// The answering loop of one task's posts: wake it when a wake is owed and the bucket allows,
    /// until nothing is owed and the bucket is full.
    async fn answer_posts(self: &Arc<Self>, task_id: &str) {
        loop {
            if self.halted.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            match self.posts.next(task_id, Instant::now()) {
                Next::Done => return,
                Next::Wait(delay, notify) => {
                    let _ = tokio::time::timeout(delay, notify.notified()).await;
                }
                Next::Wake(calls) => {
                    if let Err(e) = self.wake_for_posts(task_id, &calls).await {
                        tracing::warn!(task = %task_id, error = %e, "a callee's notification could not wake the task; its recheck will");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{Cmd, InvocationId, Receipt};
    use crate::journal::Entry;
    use crate::model::{Message, TaskState};

    fn wake(next: Next) -> HashSet<String> {
        match next {
            Next::Wake(calls) => calls,
            other => panic!("expected a wake, got {other:?}"),
        }
    }

    fn wait(next: Next) -> Duration {
        match next {
            Next::Wait(d, _) => d,
            other => panic!("expected a wait, got {other:?}"),
        }
    }

    #[test]
    fn posts_while_a_wake_is_queued_merge_into_it_and_posts_while_it_runs_owe_one_more() {
        let posts = Posts::default();
        let t0 = Instant::now();
        assert!(posts.post("t", "a", t0), "the first post starts the loop");
        for _ in 0..500 {
            assert!(!posts.post("t", "a", t0));
        }
        assert!(!posts.post("t", "b", t0));
        assert_eq!(
            wake(posts.next("t", t0)),
            HashSet::from(["a".into(), "b".into()])
        );
        // While that wake runs: 500 more posts owe exactly one more wake.
        for _ in 0..500 {
            assert!(!posts.post("t", "a", t0));
        }
        assert_eq!(wake(posts.next("t", t0)), HashSet::from(["a".into()]));
        // Nothing came during the second: the loop cools down until the bucket is full.
        let cooling = wait(posts.next("t", t0));
        assert_eq!(cooling, EVERY);
        assert!(matches!(posts.next("t", t0 + EVERY), Next::Wait(..)));
        assert!(matches!(posts.next("t", t0 + EVERY * 2), Next::Done));
        assert!(posts.post("t", "a", t0 + EVERY * 2), "a new loop");
    }

    #[test]
    fn a_flood_has_burst_wakes_at_once_then_one_per_interval_and_its_last_post_is_not_lost() {
        let posts = Posts::default();
        let t0 = Instant::now();
        let mut wakes = 0;
        let mut now = t0;
        assert!(posts.post("t", "a", now));
        // Posts keep coming, 100 between two looks, for 10 s.
        while now < t0 + Duration::from_secs(10) {
            for _ in 0..100 {
                posts.post("t", "a", now);
            }
            match posts.next("t", now) {
                Next::Wake(_) => wakes += 1,
                Next::Wait(d, _) => now += d,
                Next::Done => panic!("posts are owed"),
            }
        }
        assert!(
            wakes <= BURST as usize + 10,
            "{wakes} wakes in 10 s of posts"
        );
        assert!(wakes >= 10, "{wakes}: posts still wake the task");
        // The flood stops: the wake owed comes, then the loop ends.
        posts.post("t", "last", now);
        let mut last = false;
        for _ in 0..20 {
            match posts.next("t", now) {
                Next::Wake(calls) => last |= calls.contains("last"),
                Next::Wait(d, _) => now += d,
                Next::Done => break,
            }
        }
        assert!(last, "the last post's wake came");
        assert!(matches!(posts.next("t", now), Next::Done));
    }

    #[test]
    fn a_post_while_cooling_queues_a_wake_and_tells_the_waiting_loop() {
        let posts = Posts::default();
        let t0 = Instant::now();
        posts.post("t", "a", t0);
        wake(posts.next("t", t0));
        let Next::Wait(_, notify) = posts.next("t", t0) else {
            panic!("cooling");
        };
        assert!(!posts.post("t", "b", t0));
        // The permit is stored: a loop that had not started waiting yet still returns at once.
        let notified = notify.notified();
        futures::pin_mut!(notified);
        assert!(futures::FutureExt::now_or_never(notified).is_some());
        assert_eq!(wake(posts.next("t", t0)), HashSet::from(["b".into()]));
    }

    /// Calls `a` (settled) and `b` (its reply, waiting) on callee task `t1`, `c` (settled) on
    /// `t2`: posts about `a` or `b` may find news, posts about `c` none, and none once the task
    /// ended.
    #[test]
    fn a_post_wakes_only_for_a_callee_task_a_call_still_waits_on() {
        let mut fold = Folded::new(serde_json::Value::Null);
        let mut seq = 0;
        let mut apply = |fold: &mut Folded, entry: Entry| {
            seq += 1;
            fold.apply(seq, &entry);
        };
        let id = |n| InvocationId::derive("task", 1, n);
        for (n, callee, settled) in [(1, "t1", true), (2, "t1", false), (3, "t2", true)] {
            let message = Message::user_text("x");
            apply(
                &mut fold,
                Entry::CommandIssued {
                    id: id(n),
                    cmd: Cmd::agent("peer", message),
                    transition: false,
                },
            );
            apply(
                &mut fold,
                Entry::CallStarted {
                    id: id(n),
                    task_id: callee.into(),
                    context_id: None,
                    webhook: true,
                },
            );
            if settled {
                apply(
                    &mut fold,
                    Entry::ReceiptRecorded {
                        receipt: Receipt {
                            id: id(n),
                            attempt: 1,
                            outcome: Ok(serde_json::Value::Null),
                            usage: None,
                        },
                    },
                );
            }
        }
        let posted = |n: u32| HashSet::from([super::super::webhook::call_name(&id(n))]);
        assert!(
            waits_on_any(&fold, &posted(1)),
            "b continues a's callee task"
        );
        assert!(waits_on_any(&fold, &posted(2)));
        assert!(!waits_on_any(&fold, &posted(3)), "nothing waits on t2");
        assert!(!waits_on_any(&fold, &posted(4)), "no such call");
        apply(
            &mut fold,
            Entry::Terminal {
                state: TaskState::Completed,
                message: None,
            },
        );
        assert!(!waits_on_any(&fold, &posted(2)), "the task ended");
    }

    #[test]
    fn tasks_are_spaced_apart_independently() {
        let posts = Posts::default();
        let t0 = Instant::now();
        for task in ["t1", "t2"] {
            for _ in 0..BURST {
                posts.post(task, "a", t0);
                wake(posts.next(task, t0));
            }
        }
        posts.post("t1", "a", t0);
        assert!(matches!(posts.next("t1", t0), Next::Wait(..)));
        assert!(posts.post("t3", "a", t0));
        wake(posts.next("t3", t0));
    }
}
