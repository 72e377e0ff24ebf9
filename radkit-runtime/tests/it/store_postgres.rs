//! The Postgres store against the real local PostgreSQL: the conformance suite every store passes, and
//! lease fencing. The server is `RADKIT_TEST_POSTGRES_URL`, else the local one (see `services`);
//! when it does not answer these tests are reported ignored. Each test works in a fresh schema.

use std::sync::Arc;

use radkit_runtime::journal::Entry;
use radkit_runtime::model::TaskState;
use radkit_runtime::store::{
    conformance, Append, NewLease, PostgresStore, Store, StoreError, TaskRecord, CREATION_TOKEN,
};

use crate::support::common::within;
use crate::support::services;

/// A store in a fresh schema on the test server.
async fn fresh_store() -> PostgresStore {
    let (_, scoped) = fresh_schema().await;
    PostgresStore::connect(&scoped)
        .await
        .expect("connect the store")
}

/// A fresh schema for a test that also works on its tables behind the store's back: its name (for
/// [`drop_schema`] at the end) and a URL whose sessions work in it.
async fn fresh_schema() -> (String, String) {
    radkit_runtime::store::PostgresStore::create_schema(&services::postgres_url(), "radkit_test")
        .await
        .expect("create a test schema")
}

async fn drop_schema(schema: &str) {
    radkit_runtime::store::PostgresStore::drop_schema(&services::postgres_url(), schema)
        .await
        .ok();
}

#[test(multi_thread, needs = Postgres)]
async fn postgres_store_passes_the_conformance_suite() {
    let store = fresh_store().await;
    conformance::run_all(Arc::new(store)).await;
}

/// The skill every test task belongs to.
fn skills() -> Vec<(String, String)> {
    vec![("s".to_owned(), "1".to_owned())]
}

#[test(multi_thread, needs = Postgres)]
async fn postgres_group_commit_batches_concurrent_appends() {
    let store = fresh_store().await;
    conformance::concurrent_appends(Arc::new(store.clone())).await;
    let stats = store.stats();
    assert!(
        stats.batches < stats.appends,
        "appends of many tasks share statements: {stats:?}"
    );
}

pub(crate) fn task_row(id: &str, state: TaskState, wake_at_ms: Option<i64>) -> TaskRecord {
    TaskRecord {
        id: id.into(),
        context_id: "c".into(),
        skill_id: "s".into(),
        skill_version: "1".into(),
        principal: None,
        state,
        created_at_ms: 0,
        updated_at_ms: 0,
        wake_at_ms,
        waits_on_call: false,
        last_seq: 0,
    }
}

async fn create(store: &PostgresStore, id: &str, state: TaskState, wake: Option<i64>) {
    let mut append = Append::new(id, 1, vec![Entry::CancelRequested]);
    append.create = Some(task_row(id, state, wake));
    store.append(append).await.unwrap();
}

#[test(multi_thread, needs = Postgres)]
async fn a_worker_whose_lease_was_taken_over_cannot_append() {
    let store = fresh_store().await;
    let id = "fenced-task";
    create(&store, id, TaskState::Working, None).await;
    let leases = store.leases().expect("postgres has leases");

    let a = leases
        .claim("worker-a", &skills(), &[], 1, 10)
        .await
        .unwrap();
    assert_eq!(a.len(), 1);
    let token_a = a[0].token;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert!(
        leases
            .claim("worker-a", &skills(), &[id.to_owned()], 60_000, 10)
            .await
            .unwrap()
            .is_empty(),
        "a claimer skips the tasks it says it holds, even with an expired lease"
    );
    let b = leases
        .claim("worker-b", &skills(), &[], 60_000, 10)
        .await
        .unwrap();
    assert_eq!(
        b.iter()
            .map(|l| (l.task_id.as_str(), l.token))
            .collect::<Vec<_>>(),
        vec![(id, token_a + 1)],
        "the expired lease is taken over with a new token"
    );
    assert_eq!(
        leases
            .renew("worker-a", &[(id.to_owned(), token_a)], 60_000)
            .await
            .unwrap(),
        vec![id.to_owned()],
        "the old owner learns on renewal that it lost the lease"
    );
    assert!(
        leases
            .claim("worker-c", &skills(), &[], 60_000, 10)
            .await
            .unwrap()
            .is_empty(),
        "a live lease is not claimable"
    );
    assert!(
        leases
            .acquire("worker-c", id, 60_000)
            .await
            .unwrap()
            .is_none(),
        "nor can it be acquired"
    );

    let mut stale = Append::new(id, 2, vec![Entry::CancelRequested]);
    stale.fence = Some(token_a);
    match store.append(stale).await {
        Err(StoreError::Fenced { token, .. }) => assert_eq!(token, token_a),
        other => panic!("a stale token must be fenced off, got {other:?}"),
    }
    let mut stale_and_behind = Append::new(id, 7, vec![Entry::CancelRequested]);
    stale_and_behind.fence = Some(token_a);
    assert!(
        matches!(
            store.append(stale_and_behind).await,
            Err(StoreError::Fenced { .. })
        ),
        "a stale writer learns it was fenced off, whatever seq it sends"
    );
    let mut current = Append::new(id, 2, vec![Entry::CancelRequested]);
    current.fence = Some(token_a + 1);
    store.append(current).await.unwrap();
    let journal = store.journal(id, 0).await.unwrap();
    assert_eq!(
        journal.iter().map(|r| r.seq).collect::<Vec<_>>(),
        vec![1, 2],
        "no gap, no duplicate"
    );
}

#[test(multi_thread, needs = Postgres)]
async fn every_lease_a_task_is_given_is_logged_with_its_token_owner_and_takeover() {
    let store = fresh_store().await;
    let leases = store.leases().expect("postgres has leases");
    let id = "logged-task";
    // Created leased, as an engine's `send` creates a task it runs at once.
    let mut append = Append::new(id, 1, vec![Entry::CancelRequested]);
    append.create = Some(task_row(id, TaskState::Working, None));
    append.lease = Some(NewLease {
        owner: "worker-a".into(),
        ttl_ms: 1,
    });
    store.append(append).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    // worker-a's lease ran out: worker-b takes the task over, works, gives it back; worker-a
    // acquires it again.
    let b = leases
        .claim("worker-b", &skills(), &[], 60_000, 10)
        .await
        .unwrap();
    assert_eq!(b.len(), 1);
    let mut step = Append::new(id, 2, vec![Entry::CancelRequested]);
    step.fence = Some(b[0].token);
    store.append(step).await.unwrap();
    leases.release("worker-b", id, b[0].token).await.unwrap();
    let a = leases
        .acquire("worker-a", id, 60_000)
        .await
        .unwrap()
        .unwrap();

    let log = leases.lease_log(id, 10).await.unwrap();
    let summary: Vec<_> = log
        .iter()
        .map(|c| {
            (
                c.token,
                c.owner.as_str(),
                c.prior_owner.as_deref(),
                c.is_takeover(),
                c.released_at_ms.is_some(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (CREATION_TOKEN, "worker-a", None, false, false),
            (b[0].token, "worker-b", Some("worker-a"), true, true),
            (a.token, "worker-a", None, false, false),
        ],
        "one row per token: created leased, taken over after expiry, released, acquired again"
    );
    assert!(log[1].prior_expires_ms.is_some(), "{log:?}");
    assert!(
        log.windows(2)
            .all(|w| w[0].claimed_at_ms <= w[1].claimed_at_ms),
        "{log:?}"
    );
    assert_eq!(
        leases
            .lease_log(id, 2)
            .await
            .unwrap()
            .iter()
            .map(|c| c.token)
            .collect::<Vec<_>>(),
        vec![b[0].token, a.token],
        "the newest `limit`, oldest first"
    );
    assert!(leases
        .lease_log("no-such-task", 10)
        .await
        .unwrap()
        .is_empty());
    // A step's append sets neither the token nor the owner: it logs nothing.
    let mut step = Append::new(id, 3, vec![Entry::CancelRequested]);
    step.fence = Some(a.token);
    store.append(step).await.unwrap();
    assert_eq!(leases.lease_log(id, 10).await.unwrap().len(), 3);
    // The append that finishes the task gives its lease back (no `release` follows it).
    let mut end = Append::new(id, 4, vec![Entry::CancelRequested]);
    end.fence = Some(a.token);
    end.state = Some(TaskState::Completed);
    store.append(end).await.unwrap();
    let holder = leases.holder(id).await.unwrap().expect("the task");
    assert_eq!(
        (holder.owner, holder.expires_ms),
        (None, None),
        "given back by the finishing append"
    );
    let log = leases.lease_log(id, 10).await.unwrap();
    assert_eq!(log.len(), 3, "{log:?}");
    assert!(
        log[2].released_at_ms.is_some(),
        "logged as given back: {log:?}"
    );
}

#[test(multi_thread, needs = Postgres)]
async fn concurrent_claimers_never_get_the_same_task() {
    let store = fresh_store().await;
    for i in 0..60 {
        create(&store, &format!("t{i:02}"), TaskState::Submitted, None).await;
    }
    let claimers = (0..4).map(|w| {
        let store = store.clone();
        tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let got = store
                    .leases()
                    .unwrap()
                    .claim(&format!("w{w}"), &skills(), &[], 60_000, 7)
                    .await
                    .unwrap();
                if got.is_empty() {
                    return mine;
                }
                mine.extend(got.into_iter().map(|l| l.task_id));
            }
        })
    });
    let mut all = Vec::new();
    for claimer in claimers {
        all.extend(claimer.await.unwrap());
    }
    all.sort();
    let before = all.len();
    all.dedup();
    assert_eq!(before, all.len(), "a task was claimed twice");
    assert_eq!(all.len(), 60, "every task was claimed");
}

#[test(multi_thread, needs = Postgres)]
async fn only_tasks_with_work_now_are_claimed() {
    let store = fresh_store().await;
    let now = radkit_runtime::journal::now_ms();
    create(&store, "waiting-for-input", TaskState::InputRequired, None).await;
    create(
        &store,
        "timer-later",
        TaskState::Working,
        Some(now + 60_000),
    )
    .await;
    create(&store, "timer-due", TaskState::Working, Some(now - 1)).await;
    create(
        &store,
        "input-expired",
        TaskState::InputRequired,
        Some(now - 1),
    )
    .await;
    create(&store, "done", TaskState::Completed, None).await;
    create(&store, "new", TaskState::Submitted, None).await;
    let mut lease_on_create = Append::new("created-leased", 1, vec![Entry::CancelRequested]);
    lease_on_create.create = Some(task_row("created-leased", TaskState::Submitted, None));
    lease_on_create.lease = Some(NewLease {
        owner: "creator".into(),
        ttl_ms: 60_000,
    });
    store.append(lease_on_create).await.unwrap();
    let leases = store.leases().unwrap();

    let other_version = [("s".to_owned(), "2".to_owned())];
    assert!(
        leases
            .claim("w", &other_version, &[], 60_000, 100)
            .await
            .unwrap()
            .is_empty(),
        "a worker claims only tasks of the skills and versions it runs"
    );
    let mut claimed: Vec<String> = leases
        .claim("w", &skills(), &[], 60_000, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.task_id)
        .collect();
    claimed.sort();
    assert_eq!(claimed, ["input-expired", "new", "timer-due"]);

    // The creator's lease carries the creation token, and renews like any other.
    assert!(leases
        .renew(
            "creator",
            &[("created-leased".into(), CREATION_TOKEN)],
            60_000
        )
        .await
        .unwrap()
        .is_empty());
    let mut append = Append::new("created-leased", 2, vec![Entry::CancelRequested]);
    append.fence = Some(CREATION_TOKEN);
    store.append(append).await.unwrap();

    // Released, a task with work is claimable again; one waiting for input is not.
    leases
        .release("creator", "created-leased", CREATION_TOKEN)
        .await
        .unwrap();
    let again = leases
        .claim("w2", &skills(), &[], 60_000, 100)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].task_id, "created-leased");
    assert_eq!(again[0].token, CREATION_TOKEN + 1);

    // A task waiting for input is acquired on demand (its answer arrived), and a cancel request
    // reaches whoever holds it.
    let lease = leases
        .acquire("w3", "waiting-for-input", 60_000)
        .await
        .unwrap()
        .expect("a free lease is acquired");
    assert!(!lease.cancel_requested);
    leases.request_cancel("waiting-for-input").await.unwrap();
    assert_eq!(
        leases.cancel_requests("w3").await.unwrap(),
        vec!["waiting-for-input".to_owned()]
    );
    assert!(
        leases
            .acquire("w3", "done", 60_000)
            .await
            .unwrap()
            .is_none(),
        "finished tasks take no lease"
    );
}

/// The check made right before an `AtMostOnce` effect (`Leases::holds`) says the lease is held only
/// while its owner, its token and its time are all current: a lease that ran out is not held, even
/// when nobody has claimed the task since (the owner's token is still the task's), so a worker paused
/// past its lease does not start the effect.
#[test(multi_thread, needs = Postgres)]
async fn a_lease_past_its_expiry_is_not_held_even_by_its_owner_with_its_token() {
    let store = fresh_store().await;
    create(&store, "long", TaskState::Working, None).await;
    create(&store, "short", TaskState::Working, None).await;
    let leases = store.leases().unwrap();
    let long = leases
        .acquire("w", "long", 600_000)
        .await
        .unwrap()
        .expect("a free lease is acquired");
    assert!(leases.holds("w", "long", long.token).await.unwrap());
    assert!(
        !leases.holds("w", "long", long.token + 1).await.unwrap(),
        "another token is not the lease"
    );
    assert!(
        !leases.holds("other", "long", long.token).await.unwrap(),
        "another owner does not hold it"
    );

    let ttl_ms = 50;
    let short = leases
        .acquire("w", "short", ttl_ms)
        .await
        .unwrap()
        .expect("a free lease is acquired");
    // The lease ran out at most `ttl_ms` after `acquire` returned (its expiry is the store's clock
    // at the acquire plus the ttl); wait until the clock is past that.
    let acquired = radkit_runtime::journal::now_ms();
    while radkit_runtime::journal::now_ms() <= acquired + ttl_ms {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        !leases.holds("w", "short", short.token).await.unwrap(),
        "an expired lease is not held, though no one took it over"
    );
    assert!(
        leases.holds("w", "long", long.token).await.unwrap(),
        "the live lease is still held"
    );
}

/// A session on `url` for changing rows behind the store's back.
async fn sql(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
}

/// The column a [`StoreError::Column`] names, or a panic saying what came instead.
#[track_caller]
fn column_of<T: std::fmt::Debug>(result: Result<T, StoreError>) -> String {
    match result {
        Err(StoreError::Column { column, .. }) => column.into_owned(),
        other => panic!("expected a column error, got {other:?}"),
    }
}

#[test(multi_thread, needs = Postgres)]
async fn a_null_or_mistyped_column_is_a_typed_error_naming_it() {
    let (schema, scoped) = fresh_schema().await;
    let store = PostgresStore::connect(&scoped).await.expect("connect");
    create(&store, "t", TaskState::Working, None).await;
    let admin = sql(&scoped).await;
    admin
        .batch_execute(
            "ALTER TABLE radkit_tasks ALTER COLUMN context_id DROP NOT NULL;
             UPDATE radkit_tasks SET context_id = NULL",
        )
        .await
        .unwrap();
    assert_eq!(column_of(store.task("t").await), "context_id");
    let listed = store.list(Default::default()).await;
    let error = listed.as_ref().expect_err("a NULL context_id");
    assert!(
        error.to_string().starts_with("store column `context_id`"),
        "{error}"
    );
    admin
        .batch_execute(
            "UPDATE radkit_tasks SET context_id = 'c';
             ALTER TABLE radkit_tasks ALTER COLUMN skill_version TYPE INTEGER USING 7",
        )
        .await
        .unwrap();
    assert_eq!(column_of(store.task("t").await), "skill_version");
    admin
        .batch_execute(
            "ALTER TABLE radkit_tasks ALTER COLUMN skill_version TYPE TEXT;
             UPDATE radkit_tasks SET last_seq = -3",
        )
        .await
        .unwrap();
    assert_eq!(column_of(store.task("t").await), "last_seq");
    admin
        .batch_execute(
            "UPDATE radkit_tasks SET last_seq = 1;
             ALTER TABLE radkit_journal ALTER COLUMN at_ms DROP NOT NULL;
             UPDATE radkit_journal SET at_ms = NULL",
        )
        .await
        .unwrap();
    assert!(store.task("t").await.unwrap().is_some());
    assert_eq!(column_of(store.journal("t", 0).await), "at_ms");
    assert_eq!(column_of(store.journal_for_replay("t").await), "at_ms");
    drop_schema(&schema).await;
}

/// The lines of the plan `client`'s session makes for `statement`.
async fn explain(client: &tokio_postgres::Client, statement: String) -> Vec<String> {
    client
        .query(&format!("EXPLAIN {statement}"), &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// A task's journal is read by index however young the statistics. The store prepares its
/// statements once per connection, and Postgres keeps a generic plan made while the journal was a
/// few pages: for the old join of tasks and journal that plan scanned the whole journal ever after
/// (7.7 ms a load on average, 53 ms at worst, in `bench concurrent --workers`). Checked for plans
/// made on a tiny journal and on a grown one not yet analyzed, generic and custom.
#[test(multi_thread, needs = Postgres)]
async fn a_task_journal_is_read_by_index_whatever_the_journal_was_when_planned() {
    let (schema, scoped) = fresh_schema().await;
    let _store = PostgresStore::connect(&scoped).await.expect("migrate");
    let admin = sql(&scoped).await;
    // Rows written behind the store's back: `tasks` tasks of `rows` journal rows from `from` on.
    let write = |tasks: std::ops::RangeInclusive<u32>, rows: u32| {
        format!(
            "INSERT INTO radkit_tasks (id, context_id, skill_id, skill_version, state,
                                       created_at_ms, updated_at_ms, last_seq)
             SELECT 't' || g, 'c', 's', '1', 'working', 0, 0, {rows}
             FROM generate_series({}, {}) g;
             INSERT INTO radkit_journal (tid, seq, at_ms, kind, body)
             SELECT t.tid, s, 0, 'cancel_requested', '\"' || repeat('x', 200) || '\"'
             FROM radkit_tasks t, generate_series(1, {rows}) s
             WHERE t.id IN (SELECT 't' || g FROM generate_series({}, {}) g);",
            tasks.start(),
            tasks.end(),
            tasks.start(),
            tasks.end()
        )
    };
    let statements = [
        (
            "replay",
            radkit_runtime::store::JOURNAL_FOR_REPLAY,
            "('t5')",
        ),
        (
            "page",
            radkit_runtime::store::JOURNAL_PAGE,
            "('t5', 40, 10)",
        ),
    ];
    let modes = ["force_generic_plan", "force_custom_plan"];
    let prepare = |when: &str| {
        let mut batch = String::new();
        for (name, statement, _) in statements {
            for mode in modes {
                batch.push_str(&format!(
                    "SET plan_cache_mode = {mode}; PREPARE {name}_{mode}_{when} AS {statement};\n"
                ));
            }
        }
        batch
    };
    // Planned at a statement's first execution: a generic plan is kept until the tables change
    // shape or are analyzed.
    let planned = |when: &'static str| {
        let admin = &admin;
        async move {
            for (name, _, args) in statements {
                for mode in modes {
                    let plan = explain(admin, format!("EXECUTE {name}_{mode}_{when}{args}"))
                        .await
                        .join("\n");
                    assert!(
                        !plan.contains("Seq Scan on radkit_journal"),
                        "{name}, {mode}, planned on a {when} journal:\n{plan}"
                    );
                }
            }
        }
    };
    admin.batch_execute(&write(1..=5, 3)).await.unwrap();
    admin.batch_execute(&prepare("tiny")).await.unwrap();
    planned("tiny").await;
    admin.batch_execute(&write(6..=200, 100)).await.unwrap();
    planned("tiny").await;
    admin.batch_execute(&prepare("grown")).await.unwrap();
    planned("grown").await;
    drop_schema(&schema).await;
}

/// The writers run one statement, the append, and plan it once per connection (a custom plan for
/// each execution cost the server 0.7–1 ms of CPU per append statement of a worker's small
/// batches): a generic plan, whose every lookup is by index whatever the tables held when it was
/// made, and whose update locks the batch's rows in `tid` order once, first (a join with the
/// locked rows was a nested loop over all of them for each row updated). Checked on plans made
/// on tiny tables and on grown ones not yet analyzed.
#[test(multi_thread, needs = Postgres)]
async fn the_append_statement_plans_once_and_reads_by_index() {
    let (schema, scoped) = fresh_schema().await;
    let _store = PostgresStore::connect(&scoped).await.expect("migrate");
    // A session as the store's writers have theirs.
    let admin = PostgresStore::writer_session(&scoped)
        .await
        .expect("a writer's session");
    let grow = |tasks: std::ops::RangeInclusive<u32>| {
        format!(
            "INSERT INTO radkit_tasks (id, context_id, skill_id, skill_version, state,
                                       created_at_ms, updated_at_ms, last_seq)
             SELECT 't' || g, 'c', 's', '1', 'working', 0, 0, 50
             FROM generate_series({0}, {1}) g;
             INSERT INTO radkit_journal (tid, seq, at_ms, kind, body)
             SELECT t.tid, s, 0, 'cancel_requested', '\"' || repeat('x', 200) || '\"'
             FROM radkit_tasks t, generate_series(1, 50) s
             WHERE t.id IN (SELECT 't' || g FROM generate_series({0}, {1}) g);
             INSERT INTO radkit_artifacts (tid, seq, pos, artifact_id, body)
             SELECT t.tid, 1, 1, 'a', 'x' FROM radkit_tasks t
             WHERE t.id IN (SELECT 't' || g FROM generate_series({0}, {1}) g);",
            tasks.start(),
            tasks.end()
        )
    };
    // The statement's 47 parameters as NULL arrays: a batch of nothing, which runs and plans
    // as any other.
    let nothing = format!("({})", vec!["NULL"; 47].join(", "));
    let plan_of = |name: &'static str| explain(&admin, format!("EXECUTE {name}{nothing}"));
    let check = |plan: Vec<String>, when: &str| {
        let text = plan.join("\n");
        assert!(
            !text.contains("Seq Scan"),
            "planned on {when} tables:\n{text}"
        );
        let locked: Vec<usize> = (0..plan.len())
            .filter(|&i| plan[i].contains("CTE Scan on locked"))
            .collect();
        assert_eq!(locked.len(), 1, "planned on {when} tables:\n{text}");
        assert!(
            plan[locked[0] - 1].contains("Aggregate") && text.contains("One-Time Filter"),
            "the locked rows are counted once, before the update, when planned on {when} \
             tables:\n{text}"
        );
    };
    admin.batch_execute(&grow(1..=3)).await.unwrap();
    admin
        .batch_execute(&format!(
            "PREPARE tiny AS {}",
            radkit_runtime::store::APPEND_SQL
        ))
        .await
        .unwrap();
    check(plan_of("tiny").await, "tiny");
    for _ in 0..8 {
        admin
            .batch_execute(&format!("EXECUTE tiny{nothing}"))
            .await
            .unwrap();
    }
    admin.batch_execute(&grow(4..=400)).await.unwrap();
    check(plan_of("tiny").await, "tiny, then grown,");
    admin
        .batch_execute(&format!(
            "PREPARE grown AS {}",
            radkit_runtime::store::APPEND_SQL
        ))
        .await
        .unwrap();
    check(plan_of("grown").await, "grown");
    let row = admin
        .query_one(
            "SELECT custom_plans, generic_plans FROM pg_prepared_statements WHERE name = 'tiny'",
            &[],
        )
        .await
        .unwrap();
    let (custom, generic): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!(custom, 0, "no execution planned anew");
    assert!(generic >= 8, "{generic} generic executions");
    drop_schema(&schema).await;
}

/// A writer waits for another writer's commit to end before committing a small batch of its own
/// (one statement of both is cheaper for the server), but only for so long: an append is not held
/// up behind a commit that stalls (here on a row lock another session holds).
#[test(multi_thread, needs = Postgres)]
async fn an_append_is_not_held_up_behind_another_writers_stalled_commit() {
    let (schema, scoped) = fresh_schema().await;
    let store = PostgresStore::connect(&scoped).await.expect("connect");
    create(&store, "stalled", TaskState::Working, None).await;
    create(&store, "free", TaskState::Working, None).await;
    let mut admin = sql(&scoped).await;
    let lock = admin.transaction().await.unwrap();
    lock.execute(
        "SELECT 1 FROM radkit_tasks WHERE id = 'stalled' FOR UPDATE",
        &[],
    )
    .await
    .unwrap();
    let xid: String = lock
        .query_one("SELECT pg_current_xact_id()::text", &[])
        .await
        .unwrap()
        .get(0);
    let stalled = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .append(Append::new("stalled", 2, vec![Entry::CancelRequested]))
                .await
        }
    });
    // The stalled append is in a writer's statement, waiting for the row lock.
    let watcher = sql(&scoped).await;
    within(
        std::time::Duration::from_secs(60),
        "the stalled append to reach the server",
        async {
            loop {
                let waiting: i64 = watcher
                    .query_one(
                        "SELECT COUNT(*) FROM pg_locks WHERE NOT granted
                           AND locktype = 'transactionid' AND transactionid = $1::text::xid",
                        &[&xid],
                    )
                    .await
                    .unwrap()
                    .get(0);
                if waiting > 0 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        },
    )
    .await;
    within(
        std::time::Duration::from_secs(60),
        "an append of another task beside the stalled one",
        store.append(Append::new("free", 2, vec![Entry::CancelRequested])),
    )
    .await
    .expect("the append commits");
    assert!(
        !stalled.is_finished(),
        "the stalled append waits for the lock"
    );
    lock.rollback().await.unwrap();
    stalled
        .await
        .unwrap()
        .expect("the stalled append commits once the lock is gone");
    drop_schema(&schema).await;
}

/// A column whose type changes under a statement the store prepared on a pooled connection (a
/// newer version's migration) makes Postgres refuse the cached plan; the store prepares the
/// statement again instead of failing every read on that connection.
#[test(multi_thread, needs = Postgres)]
async fn a_statement_prepared_before_a_column_changed_type_is_prepared_again() {
    let (schema, scoped) = fresh_schema().await;
    let store = PostgresStore::connect(&scoped).await.expect("connect");
    create(&store, "t", TaskState::Working, None).await;
    // Prepared on every pooled connection the reads come to.
    for _ in 0..16 {
        assert_eq!(store.task("t").await.unwrap().unwrap().context_id, "c");
    }
    sql(&scoped)
        .await
        .batch_execute("ALTER TABLE radkit_tasks ALTER COLUMN context_id TYPE VARCHAR(200)")
        .await
        .unwrap();
    for _ in 0..16 {
        let task = store.task("t").await.expect("read after the type change");
        assert_eq!(task.unwrap().context_id, "c");
    }
    drop_schema(&schema).await;
}

/// The schema name the root crate's fixture dump was written in (renamed when loaded).
const FIXTURE_SCHEMA: &str = "radkit_fixture_v0";

#[test(multi_thread, needs = Postgres)]
async fn the_migration_backfills_the_checkpoint_column_of_rows_the_previous_version_wrote() {
    let (schema, scoped) = fresh_schema().await;
    // The tables and rows the previous version wrote (the root crate's journal fixture).
    let dump = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/fixture.postgres.sql"),
    )
    .expect("the fixture dump");
    let old: String = dump
        .lines()
        .filter(|l| !l.starts_with('\\') && !l.starts_with("CREATE SCHEMA"))
        .filter(|l| !l.starts_with("ALTER SCHEMA") && !l.contains("OWNER TO"))
        .map(|l| l.replace(FIXTURE_SCHEMA, &schema) + "\n")
        .collect();
    let admin = sql(&scoped).await;
    admin.batch_execute(&old).await.expect("load the dump");
    admin
        .batch_execute(&format!("SET search_path = {schema}"))
        .await
        .unwrap();
    // A task whose last real checkpoint (seq 2) is followed by kinds that only look like one.
    admin
        .batch_execute(
            r#"WITH t AS (
                INSERT INTO radkit_tasks (id, context_id, skill_id, skill_version, state,
                                          created_at_ms, updated_at_ms, last_seq)
                VALUES ('lookalike', 'c', 's', '1', 'working', 0, 0, 7) RETURNING tid)
             INSERT INTO radkit_journal (tid, seq, at_ms, kind, body, last_seq)
             SELECT tid, seq, 0, kind, body, last FROM t, (VALUES
                (1, 'cancel_requested', '"cancel_requested"', NULL),
                (2, 'cancel_requested,checkpoint', '["cancel_requested","cancel_requested"]', 3),
                (4, 'cancel_requested', '"cancel_requested"', NULL),
                (5, 'no_checkpoint,cancel_requested', '["cancel_requested","cancel_requested"]', 6),
                (7, 'checkpoints', '"cancel_requested"', NULL)) AS v(seq, kind, body, last)"#,
        )
        .await
        .unwrap();
    let store = PostgresStore::connect(&scoped).await.expect("migrate");
    let rows = admin
        .query("SELECT kind, checkpoint FROM radkit_journal", &[])
        .await
        .unwrap();
    let mut checkpoints = 0;
    for row in &rows {
        let kind: String = row.get(0);
        let checkpoint: bool = row.get(1);
        assert_eq!(
            checkpoint,
            kind.split(',').any(|k| k == "checkpoint"),
            "{kind}"
        );
        checkpoints += usize::from(checkpoint);
    }
    // The fixture's checkpointed loop, and the look-alike's last row.
    assert!(checkpoints >= 2, "{checkpoints} checkpoint rows");
    let replayed: Vec<u64> = store
        .journal_for_replay("lookalike")
        .await
        .unwrap()
        .iter()
        .map(|r| r.seq)
        .collect();
    assert_eq!(replayed, [1, 2, 3, 4, 5, 6, 7]);
    // New rows: the flag from the entries, and no kind.
    create(&store, "new", TaskState::Working, None).await;
    let checkpoint = Entry::Checkpoint {
        visit: 1,
        state: serde_json::Value::Null,
        status: TaskState::Working,
        compensable: Vec::new(),
        runs_on: None,
    };
    store
        .append(Append::new(
            "new",
            2,
            vec![Entry::CancelRequested, checkpoint],
        ))
        .await
        .unwrap();
    let new: Vec<(i64, Option<String>, bool)> = admin
        .query(
            "SELECT j.seq, j.kind, j.checkpoint FROM radkit_journal j
             JOIN radkit_tasks t ON t.tid = j.tid WHERE t.id = 'new' ORDER BY j.seq",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(new, [(1, None, false), (2, None, true)]);
    drop_schema(&schema).await;
}

/// Stores connecting at once to a fresh schema (processes starting together on a new database) all
/// migrate it: the first applies the migrations, the others wait for it and find them applied. The
/// migrations table was once created before the migration lock was taken, and all but one starter
/// failed on a unique violation in `pg_type`.
#[test(multi_thread, needs = Postgres)]
async fn processes_connecting_to_a_fresh_schema_at_once_all_succeed() {
    let url = services::postgres_url();
    let (_, scoped) = radkit_runtime::store::PostgresStore::create_schema(&url, "radkit_test")
        .await
        .expect("create a test schema");
    let connects: Vec<_> = (0..8)
        .map(|_| {
            let scoped = scoped.clone();
            tokio::spawn(async move { PostgresStore::connect(&scoped).await })
        })
        .collect();
    let mut stores = Vec::new();
    for connect in connects {
        match connect.await.expect("the connect task") {
            Ok(store) => stores.push(store),
            Err(e) => panic!("a concurrent connect failed: {e}"),
        }
    }
    let row = sql(&scoped)
        .await
        .query_one(
            "SELECT count(*), max(version)::bigint FROM radkit_migrations",
            &[],
        )
        .await
        .unwrap();
    let (count, max): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!(count, max, "each migration applied once");
    create(&stores[7], "t", TaskState::Submitted, None).await;
    assert!(stores[0].task("t").await.unwrap().is_some());
}

/// What the server says when it refuses a statement reaches the store error's text: its message, its
/// detail, its hint and its SQLSTATE, both through the writer (an append) and through the pool (a
/// lease taken); tokio-postgres's own text for a server error is only "db error".
#[test(multi_thread, needs = Postgres)]
async fn a_postgres_server_error_keeps_its_message_detail_and_code() {
    let (schema, scoped) = fresh_schema().await;
    let store = PostgresStore::connect(&scoped).await.unwrap();
    create(&store, "t", TaskState::Submitted, None).await;
    // A trigger refuses every later change of a task row, with a message, a detail and a hint.
    sql(&scoped)
        .await
        .batch_execute(&format!(
            "CREATE FUNCTION {schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               RAISE EXCEPTION 'task rows are frozen'
                 USING DETAIL = 'an administrator froze them', HINT = 'ask the administrator',
                       ERRCODE = 'P0042';
             END $$;
             CREATE TRIGGER refuse BEFORE UPDATE ON {schema}.radkit_tasks
                FOR EACH ROW EXECUTE FUNCTION {schema}.refuse();"
        ))
        .await
        .unwrap();
    let appended = store
        .append(Append::new("t", 2, vec![Entry::CancelRequested]))
        .await
        .expect_err("the trigger refuses the append");
    let acquired = store
        .leases()
        .expect("postgres has leases")
        .acquire("w", "t", 1_000)
        .await
        .expect_err("the trigger refuses the lease");
    for error in [appended, acquired] {
        let text = error.to_string();
        for part in [
            "P0042",
            "task rows are frozen",
            "an administrator froze them",
            "ask the administrator",
        ] {
            assert!(text.contains(part), "`{part}` is missing from `{text}`");
        }
    }
    drop_schema(&schema).await;
}
