//! The conformance check of `Store::push` (`store::push`): configs round-trip, list in id order a
//! page at a time, keep their cursor when set again; a claim takes only configs whose task has
//! records after their cursor, honours another owner's lease until it expires (unless the claimer
//! is exclusive) and the retry schedule, and only the task it names when it names one; a cursor
//! moves forward only for the lease holder.

use super::{create, fresh_id};
use crate::journal::{now_ms, Entry};
use crate::model::{Message, TaskState};
use crate::store::push::{PushAuth, PushClaim, PushConfig, PushFormat};
use crate::store::{Append, Store, StoreError};

fn config(id: &str, url: &str) -> PushConfig {
    PushConfig {
        id: id.to_owned(),
        url: url.to_owned(),
        token: Some(format!("token-{id}")),
        authentication: Some(PushAuth {
            schemes: vec!["Bearer".to_owned()],
            credentials: Some("secret".to_owned()),
        }),
        format: PushFormat::V1_0,
    }
}

/// The claims of `task` among `claims` (a shared store may hold other tests' configs), as
/// `(config id, cursor, attempts)`.
fn of(task: &str, claims: Vec<PushClaim>) -> Vec<(String, u64, u32)> {
    let mut mine: Vec<_> = claims
        .into_iter()
        .filter(|c| c.task_id == task)
        .map(|c| (c.config.id, c.delivered_seq, c.attempts))
        .collect();
    mine.sort();
    mine
}

/// Push configs and their delivery cursors keep the promises above. A store without push
/// (`Store::push` is `None`) passes: its agent refuses the push methods.
pub async fn push_configs_keep_cursors_and_leases(store: &dyn Store) {
    let Some(push) = store.push() else {
        return;
    };
    let task = fresh_id("push");
    store.append(create(&task, None)).await.expect("create");
    let unknown = push
        .put_push_config(&fresh_id("none"), &config("c", "https://x.test/"), 0)
        .await;
    assert!(
        matches!(unknown, Err(StoreError::UnknownTask { .. })),
        "a config of a task that does not exist must be refused: {unknown:?}"
    );
    let (c1, c2) = (
        config("c1", "https://a.test/"),
        config("c2", "https://b.test/"),
    );
    push.put_push_config(&task, &c1, 1).await.expect("put c1");
    push.put_push_config(&task, &c2, 0).await.expect("put c2");
    assert_eq!(
        push.push_config(&task, "c1").await.expect("get"),
        Some(c1.clone())
    );
    assert_eq!(push.push_config(&task, "nope").await.expect("get"), None);
    let all = push.push_configs(&task, None, 10).await.expect("list");
    assert_eq!(
        all,
        vec![c1.clone(), c2.clone()],
        "configs list in id order"
    );
    let page = push.push_configs(&task, None, 1).await.expect("page 1");
    assert_eq!(page, vec![c1.clone()]);
    let page = push
        .push_configs(&task, Some("c1"), 1)
        .await
        .expect("page 2");
    assert_eq!(page, vec![c2.clone()]);
    // Set again with another cursor: the body changes, the cursor stays.
    let c1b = config("c1", "https://a2.test/");
    push.put_push_config(&task, &c1b, 0)
        .await
        .expect("put c1 again");
    assert_eq!(push.push_config(&task, "c1").await.expect("get"), Some(c1b));

    let now = now_ms();
    let claimed = of(
        &task,
        push.claim_push("a", now, 1_000, 100, false, None)
            .await
            .expect("claim"),
    );
    assert_eq!(
        claimed,
        vec![("c2".to_owned(), 0, 0)],
        "only a config behind its task's journal is claimed (c1's cursor is at the last seq)"
    );
    let again = of(
        &task,
        push.claim_push("b", now, 1_000, 100, false, None)
            .await
            .expect("claim"),
    );
    assert!(
        again.is_empty(),
        "a leased config is not claimed by another owner: {again:?}"
    );
    let later = now + 5_000;
    let taken = of(
        &task,
        push.claim_push("b", later, 1_000, 100, false, None)
            .await
            .expect("claim"),
    );
    assert_eq!(
        taken,
        vec![("c2".to_owned(), 0, 0)],
        "an expired lease is claimed"
    );
    assert!(
        !push
            .push_delivered(&task, "c2", "a", 1, false, later)
            .await
            .expect("delivered"),
        "the owner that lost the lease cannot move the cursor"
    );
    assert!(push
        .push_delivered(&task, "c2", "b", 1, false, later + 1_000)
        .await
        .expect("delivered"));
    push.release_push(&task, "c2", "b", 0, later)
        .await
        .expect("release");

    // Two more records: both configs are behind now.
    let mut more = Append::new(
        task.as_str(),
        2,
        vec![
            Entry::MessageReceived {
                message: Message::user_text("more"),
            },
            Entry::StatusChanged {
                state: TaskState::Working,
            },
        ],
    );
    more.state = Some(TaskState::Working);
    store.append(more).await.expect("append");
    let both = of(
        &task,
        push.claim_push("b", later, 1_000, 100, false, None)
            .await
            .expect("claim"),
    );
    assert_eq!(both, vec![("c1".to_owned(), 1, 0), ("c2".to_owned(), 1, 0)]);
    // c2 failed twice: not due before its next attempt.
    push.release_push(&task, "c2", "b", 2, later + 60_000)
        .await
        .expect("release");
    push.release_push(&task, "c1", "b", 0, later)
        .await
        .expect("release");
    let deliveries: Vec<_> = push
        .push_deliveries(&task)
        .await
        .expect("deliveries")
        .into_iter()
        .map(|d| {
            (
                d.config.id,
                d.delivered_seq,
                d.attempts,
                d.next_at_ms,
                d.finished,
                d.sender,
            )
        })
        .collect();
    assert_eq!(
        deliveries,
        vec![
            ("c1".to_owned(), 1, 0, later, false, None),
            ("c2".to_owned(), 1, 2, later + 60_000, false, None),
        ],
        "each config's delivery as it stands, in id order, with no sender once given back"
    );
    let due = of(
        &task,
        push.claim_push("c", later, 1_000, 100, false, None)
            .await
            .expect("claim"),
    );
    assert_eq!(
        due,
        vec![("c1".to_owned(), 1, 0)],
        "a config waiting to retry is not due"
    );
    let exclusive = of(
        &task,
        push.claim_push("d", later + 60_000, 1_000, 100, true, None)
            .await
            .expect("claim"),
    );
    assert_eq!(
        exclusive,
        vec![("c1".to_owned(), 1, 0), ("c2".to_owned(), 1, 2)],
        "an exclusive claimer ignores leases of earlier processes; failures are kept"
    );
    assert!(push
        .push_delivered(&task, "c1", "d", 3, false, later)
        .await
        .expect("delivered"));
    assert!(push
        .push_delivered(&task, "c1", "d", 2, false, later)
        .await
        .expect("delivered"));
    push.release_push(&task, "c1", "d", 0, later)
        .await
        .expect("release");
    let done = of(
        &task,
        push.claim_push("e", later + 120_000, 1_000, 100, true, None)
            .await
            .expect("claim"),
    );
    assert_eq!(
        done,
        vec![("c2".to_owned(), 1, 2)],
        "a cursor never moves back"
    );
    // c2 reaches the task's end: finished, it is never claimed again, even past new records.
    assert!(push
        .push_delivered(&task, "c2", "e", 2, true, later)
        .await
        .expect("delivered"));
    push.release_push(&task, "c2", "e", 0, later)
        .await
        .expect("release");
    let mut tail = Append::new(
        task.as_str(),
        4,
        vec![Entry::StatusChanged {
            state: TaskState::Completed,
        }],
    );
    tail.state = Some(TaskState::Completed);
    store.append(tail).await.expect("append");
    let live = of(
        &task,
        push.claim_push("f", later + 240_000, 1_000, 100, true, None)
            .await
            .expect("claim"),
    );
    assert_eq!(
        live,
        vec![("c1".to_owned(), 3, 0)],
        "a finished config is not claimed"
    );

    assert!(push.delete_push_config(&task, "c1").await.expect("delete"));
    assert!(!push
        .delete_push_config(&task, "c1")
        .await
        .expect("delete twice"));
    assert_eq!(push.push_config(&task, "c1").await.expect("get"), None);
    assert_eq!(
        push.push_configs(&task, None, 10).await.expect("list"),
        vec![c2]
    );

    // A claim for one task takes that task's configs and no other's.
    let (one, other) = (fresh_id("push-one"), fresh_id("push-other"));
    for t in [&one, &other] {
        store.append(create(t, None)).await.expect("create");
        push.put_push_config(t, &config("w", "https://w.test/"), 0)
            .await
            .expect("put");
    }
    let now = now_ms();
    let only = push
        .claim_push("g", now, 1_000, 100, false, Some(&one))
        .await
        .expect("claim one task's");
    assert_eq!(
        only.iter()
            .map(|c| (c.task_id.as_str(), c.config.id.as_str()))
            .collect::<Vec<_>>(),
        vec![(one.as_str(), "w")],
        "a claim for one task takes only its configs"
    );
    assert_eq!(
        of(
            &other,
            push.claim_push("g", now, 1_000, 100, false, None)
                .await
                .expect("claim the rest"),
        ),
        vec![("w".to_owned(), 0, 0)],
        "the other task's config was left for a later claim"
    );
}
