//! Postgres announces claimable work (`Leases::wakeups`, `LISTEN`/`NOTIFY` on `radkit_work`): which
//! statements notify and which do not, and that a store's listener hears again after its connection
//! is killed. Notifications reach listeners in the order their transactions committed, so a marker
//! notified after a statement tells, once it arrives, everything that statement notified.

use std::time::Duration;

use futures::StreamExt;
use radkit_runtime::journal::Entry;
use radkit_runtime::model::TaskState;
use radkit_runtime::store::{Append, NewLease, PostgresStore, Store};
use tokio::sync::mpsc;

use crate::store_postgres::task_row;
use crate::support::common::within;
use crate::support::services;

/// Long enough for a loaded machine; the waits end as soon as what they wait for arrives.
const NEWS_PATIENCE: Duration = Duration::from_secs(60);

/// A fresh schema: its name and a URL whose sessions work in it, named `app` in `pg_stat_activity`.
async fn fresh_schema(app: &str) -> (String, String) {
    let (name, scoped) = PostgresStore::create_schema(&services::postgres_url(), "radkit_news")
        .await
        .expect("create a test schema");
    (name, format!("{scoped}&application_name={app}"))
}

/// `store`'s wakeups, once its listener has started (its first bump).
async fn listening(store: &PostgresStore) -> tokio::sync::watch::Receiver<u64> {
    let mut news = store
        .leases()
        .and_then(|l| l.wakeups())
        .expect("postgres announces work");
    within(NEWS_PATIENCE, "the listener to start", news.changed())
        .await
        .expect("the store is alive");
    news
}

fn creation(id: &str, state: TaskState, leased: bool) -> Append {
    let mut append = Append::new(id, 1, vec![Entry::CancelRequested]);
    append.create = Some(task_row(id, state, None));
    if leased {
        append.lease = Some(NewLease {
            owner: "creator".into(),
            ttl_ms: 60_000,
        });
    }
    append
}

/// The test's own listener on `radkit_work`: every payload, in order.
struct Heard {
    client: tokio_postgres::Client,
    payloads: mpsc::UnboundedReceiver<String>,
    schema: String,
    markers: u32,
}

impl Heard {
    async fn listen(url: &str, schema: &str) -> Heard {
        let (client, mut connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connect");
        let (tx, payloads) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(Ok(message)) = messages.next().await {
                if let tokio_postgres::AsyncMessage::Notification(n) = message {
                    let _ = tx.send(n.payload().to_owned());
                }
            }
        });
        client
            .batch_execute("LISTEN radkit_work")
            .await
            .expect("listen");
        Heard {
            client,
            payloads,
            schema: schema.to_owned(),
            markers: 0,
        }
    }

    /// How many notifications for the schema arrived since the last call: a marker is notified
    /// now, and everything committed before it has arrived when it does.
    async fn since_last(&mut self) -> usize {
        self.markers += 1;
        let marker = format!("{}-marker-{}", self.schema, self.markers);
        self.client
            .execute("SELECT pg_notify('radkit_work', $1)", &[&marker])
            .await
            .expect("notify the marker");
        let mut count = 0;
        within(NEWS_PATIENCE, "the marker notification", async {
            loop {
                let payload = self.payloads.recv().await.expect("the listener runs");
                if payload == marker {
                    return;
                }
                if payload == self.schema {
                    count += 1;
                }
            }
        })
        .await;
        count
    }
}

#[test(multi_thread, needs = Postgres)]
async fn postgres_notifies_claimers_exactly_when_a_statement_leaves_work_to_claim() {
    let (schema, url) = fresh_schema("radkit_news_which").await;
    let store = PostgresStore::connect(&url).await.expect("connect");
    let leases = store.leases().expect("postgres has leases");
    let mut heard = Heard::listen(&url, &schema).await;

    // Created with a lease, or waiting for input: nothing to claim.
    store
        .append(creation("leased", TaskState::Submitted, true))
        .await
        .unwrap();
    store
        .append(creation("asks", TaskState::InputRequired, false))
        .await
        .unwrap();
    assert_eq!(heard.since_last().await, 0, "no work was left to claim");

    // Created without a lease: work for a claimer.
    store
        .append(creation("free", TaskState::Submitted, false))
        .await
        .unwrap();
    assert_eq!(heard.since_last().await, 1, "an unleased task was created");

    // A claim, and a step by its holder: nothing new.
    let lease = leases
        .claim("w", &[("s".into(), "1".into())], &[], 60_000, 10)
        .await
        .unwrap()
        .into_iter()
        .find(|l| l.task_id == "free")
        .expect("the free task is claimed");
    let mut step = Append::new("free", 2, vec![Entry::CancelRequested]);
    step.fence = Some(lease.token);
    step.state = Some(TaskState::Working);
    store.append(step).await.unwrap();
    assert_eq!(heard.since_last().await, 0, "the holder's own step");

    // Given back while it still has work (its engine stops): news.
    leases.release("w", "free", lease.token).await.unwrap();
    assert_eq!(
        heard.since_last().await,
        1,
        "a runnable task was given back"
    );

    // Given back while it waits for input: none.
    let leased = leases
        .acquire("creator", "leased", 60_000)
        .await
        .unwrap()
        .expect("the creator takes its lease again");
    let mut asks = Append::new("leased", 2, vec![Entry::CancelRequested]);
    asks.fence = Some(leased.token);
    asks.state = Some(TaskState::InputRequired);
    store.append(asks).await.unwrap();
    leases
        .release("creator", "leased", leased.token)
        .await
        .unwrap();
    assert_eq!(heard.since_last().await, 0, "a waiting task was given back");

    // Answered by an engine that does not run it (no lease): work again.
    let mut answered = Append::new("asks", 2, vec![Entry::CancelRequested]);
    answered.state = Some(TaskState::Working);
    store.append(answered).await.unwrap();
    assert_eq!(
        heard.since_last().await,
        1,
        "an unleased task became runnable"
    );

    // A cancel asked: its holder (or a claimer) must hear of it.
    leases.request_cancel("leased").await.unwrap();
    assert_eq!(heard.since_last().await, 1, "a cancel was asked");
}

#[test(multi_thread, needs = Postgres)]
async fn a_stores_wakeups_move_when_work_is_left_to_claim_and_after_its_listener_is_killed() {
    let app = "radkit_news_reconnect";
    let (_, url) = fresh_schema(app).await;
    let store = PostgresStore::connect(&url).await.expect("connect");
    let mut news = listening(&store).await;

    store
        .append(creation("free", TaskState::Submitted, false))
        .await
        .unwrap();
    within(NEWS_PATIENCE, "news of the unleased task", news.changed())
        .await
        .expect("the store is alive");

    // Kill the listening session: the store opens another and says so (news sent meanwhile is
    // lost, so claimers look again).
    let (admin, connection) =
        tokio_postgres::connect(&services::postgres_url(), tokio_postgres::NoTls)
            .await
            .expect("connect");
    tokio::spawn(connection);
    let killed = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = $1 AND query LIKE 'LISTEN%'",
            &[&app],
        )
        .await
        .expect("terminate the listener");
    assert_eq!(killed.len(), 1, "one listening session");
    within(NEWS_PATIENCE, "the listener to come back", news.changed())
        .await
        .expect("the store is alive");
    // And it hears again (the value moves only when it starts listening or hears news).
    let before = *news.borrow_and_update();
    store
        .append(creation("free-again", TaskState::Submitted, false))
        .await
        .unwrap();
    within(NEWS_PATIENCE, "news after the reconnect", async {
        while *news.borrow_and_update() == before {
            news.changed().await.expect("the store is alive");
        }
    })
    .await;
}

#[test(multi_thread, needs = Postgres)]
async fn asking_for_wakeups_off_a_runtime_does_not_panic_and_a_later_ask_on_one_listens() {
    let (_, url) = fresh_schema("radkit_news_plain").await;
    let store = PostgresStore::connect(&url).await.expect("connect");
    let plain = store.clone();
    let news = std::thread::spawn(move || plain.leases().and_then(|l| l.wakeups()))
        .join()
        .expect("no panic off a runtime");
    assert!(news.is_some(), "postgres announces work");
    // A later ask on the runtime starts the listener (its first bump arrives).
    listening(&store).await;
}
