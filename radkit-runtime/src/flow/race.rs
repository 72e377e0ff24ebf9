//! `ctx.race`: run calls at once and keep the first to finish, with the winner journaled.
//!
//! `tokio::select!` over ctx calls lets the scheduler pick the winner, and a replay after a crash
//! may pick another one. A race takes a position of its own (when `race` is called, after its
//! calls were made) and journals there which call won; a replay reads the winner back and polls
//! only that call, whose receipt returns at once. The losers are dropped where they stand, and
//! every command they had journaled gets an `abandoned` receipt in the same append as the winner,
//! so none is ever reissued (an effect already in flight may still have taken place).
//!
//! A call that waits durably (a question, a sleep) does not end the race: another call may still
//! win while it waits. When every call waits, the step suspends and the race runs again when one
//! of them is answered or fires.
//!
//! The calls of a race are made before it (its arguments, or `.map(..)` of them): a call made
//! while the race runs (inside an `async` block passed to it) would take a position on the live
//! run that a replay, which polls only the winner, never takes, and every later position would
//! shift. Such a call fails the step, saying so.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use super::{Cmd, CmdKind, Invoker, StepError};

/// What the calls polled inside one race element did, gathered while that element is polled.
#[derive(Default)]
struct Frame {
    /// The position of the outermost race being polled: a call made now takes one at or past it.
    floor: u32,
    /// The positions of the ctx calls the element made.
    positions: Vec<u32>,
    /// One of its calls waits durably (it would have suspended the step outside a race).
    waits: bool,
}

thread_local! {
    /// The innermost race element being polled on this thread, if any. Set only for the length
    /// of one synchronous `poll`, so it never leaks to another task.
    static FRAME: RefCell<Option<Frame>> = const { RefCell::new(None) };
}

/// Called by every ctx call when first polled: a race element polling it learns its position.
/// A call made while a race runs (its position at or past the race's) is refused with the reason.
pub(crate) fn enlist(position: u32) -> Result<(), String> {
    FRAME.with(|f| match f.borrow_mut().as_mut() {
        Some(frame) if position >= frame.floor => Err(made_inside()),
        Some(frame) => {
            frame.positions.push(position);
            Ok(())
        }
        None => Ok(()),
    })
}

/// Called when a race is made: one made while another race runs (inside one of its calls) is
/// refused like a call made there.
pub(crate) fn check_made_outside(position: u32) -> Result<(), String> {
    FRAME.with(|f| match f.borrow().as_ref() {
        Some(frame) if position >= frame.floor => Err(made_inside()),
        _ => Ok(()),
    })
}

fn made_inside() -> String {
    "a ctx call was made while `ctx.race` ran (inside one of the futures it races, such as an `async` block): a replay, which runs only the winner, would give the calls after it other InvocationIds; make each raced call before the race and pass it, or `.map(..)` of it, to `ctx.race`".to_owned()
}

/// Called by the engine when a call would suspend the step: inside a race element it only marks
/// that element as waiting (true), and the race decides; outside one it returns false.
pub fn defer_suspension() -> bool {
    FRAME.with(|f| match f.borrow_mut().as_mut() {
        Some(frame) => {
            frame.waits = true;
            true
        }
        None => false,
    })
}

/// Poll `f` as an element of the race at `position`: the positions its calls take, and whether
/// one of them waits, are added to `frame` (and to the enclosing race's element, for a race inside
/// a race).
fn poll_in<R>(frame: &mut Frame, position: u32, f: impl FnOnce() -> R) -> R {
    let floor = FRAME.with(|cell| {
        cell.borrow()
            .as_ref()
            .map_or(position, |outer| outer.floor.min(position))
    });
    let outer = FRAME.with(|cell| {
        cell.replace(Some(Frame {
            floor,
            ..Frame::default()
        }))
    });
    let result = f();
    let inner = FRAME.with(|cell| cell.replace(outer)).unwrap_or_default();
    FRAME.with(|cell| {
        if let Some(outer) = cell.borrow_mut().as_mut() {
            outer.positions.extend(&inner.positions);
            outer.waits |= inner.waits;
        }
    });
    frame.positions.extend(inner.positions);
    frame.waits |= inner.waits;
    result
}

/// The winner a race journals, as its command's receipt value.
fn winner_of(value: &serde_json::Value) -> Option<usize> {
    value
        .get("winner")
        .and_then(serde_json::Value::as_u64)
        .and_then(|w| usize::try_from(w).ok())
}

type Element<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

/// See [`super::StepCtx::race`].
pub(super) async fn race<T, E>(
    invoker: Arc<dyn Invoker>,
    position: u32,
    mut calls: Vec<Element<T, E>>,
) -> (usize, Result<T, E>)
where
    E: From<StepError>,
{
    let count = calls.len();
    let cmd = Cmd::new(CmdKind::Race {
        calls: u32::try_from(count).unwrap_or(u32::MAX),
    });
    if count == 0 {
        let e = StepError::Failed("`ctx.race` was given no calls: it needs at least one".into());
        return (0, Err(e.into()));
    }
    match invoker.recorded(position, &cmd) {
        Err(e) => return (0, Err(e.into())),
        Ok(Some(value)) => {
            let Some(winner) = winner_of(&value).filter(|w| *w < count) else {
                let e = StepError::Failed(format!(
                    "the race at position {position} journaled {value} as its winner, which is not one of its {count} calls: was the step changed while the task waited?"
                ));
                return (0, Err(e.into()));
            };
            // The winner's calls are all receipted: it returns at once. The others never start.
            let call = calls.swap_remove(winner);
            drop(calls);
            return (winner, call.await);
        }
        Ok(None) => {}
    }
    let mut frames: Vec<Frame> = (0..count).map(|_| Frame::default()).collect();
    let mut live: Vec<Option<Element<T, E>>> = calls.into_iter().map(Some).collect();
    let decided = std::future::poll_fn(|cx| {
        // Every element is polled in each pass, also after one won in it: an element a replay
        // would otherwise never poll (its command journaled by an earlier run) is enlisted, and
        // so abandoned with the others. The first element to finish in index order wins.
        let mut won = None;
        for (i, slot) in live.iter_mut().enumerate() {
            let Some(call) = slot.as_mut() else { continue };
            let frame = &mut frames[i];
            if let Poll::Ready(output) = poll_in(frame, position, || call.as_mut().poll(cx)) {
                *slot = None;
                // One that waits durably does not win: the others may still.
                if won.is_none() && !frames[i].waits {
                    won = Some((i, output));
                }
            }
        }
        if won.is_some() || live.iter().all(Option::is_none) {
            return Poll::Ready(won);
        }
        Poll::Pending
    })
    .await;
    // The losers stop here; whatever they journaled is abandoned with the winner's record.
    drop(live);
    let Some((winner, output)) = decided else {
        // Every call waits: the step suspends, and the race runs again when one is answered.
        let waiting = StepError::Suspended;
        invoker.stop(&waiting);
        return (0, Err(waiting.into()));
    };
    let abandoned: Vec<u32> = frames
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != winner)
        .flat_map(|(_, f)| f.positions.iter().copied())
        .collect();
    let value = serde_json::json!({ "winner": winner });
    if let Err(e) = invoker.record(position, cmd, value, &abandoned).await {
        return (winner, Err(e.into()));
    }
    (winner, output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_polled_inside_a_nested_race_count_for_both_races() {
        let mut outer = Frame::default();
        poll_in(&mut outer, 10, || {
            assert_eq!(enlist(1), Ok(()));
            let mut inner = Frame::default();
            poll_in(&mut inner, 12, || {
                assert_eq!(enlist(2), Ok(()));
                assert!(defer_suspension());
            });
            assert_eq!(inner.positions, vec![2]);
            assert!(inner.waits);
        });
        assert_eq!(outer.positions, vec![1, 2]);
        assert!(outer.waits);
        assert!(!defer_suspension(), "no race is polled any more");
    }

    #[test]
    fn a_call_or_a_race_made_while_a_race_runs_is_refused() {
        let mut outer = Frame::default();
        poll_in(&mut outer, 3, || {
            assert!(enlist(3).is_err(), "made after the race took its position");
            assert!(check_made_outside(4).is_err());
            let mut inner = Frame::default();
            // An inner race whose position came before the outer's (made with the outer's
            // calls): its calls are checked against the outer race too.
            poll_in(&mut inner, 2, || assert!(enlist(2).is_err()));
            assert_eq!(enlist(1), Ok(()));
        });
        assert_eq!(outer.positions, vec![1]);
        assert_eq!(enlist(7), Ok(()), "outside any race");
    }

    #[test]
    fn a_journaled_winner_is_read_back_only_when_it_is_an_index() {
        assert_eq!(winner_of(&serde_json::json!({"winner": 1})), Some(1));
        assert_eq!(winner_of(&serde_json::json!({"winner": -1})), None);
        assert_eq!(winner_of(&serde_json::json!(1)), None);
    }
}
