//! `bench console`: the web console's task list over a store of many tasks (10,000 by default),
//! each page timed as the server answers it over loopback HTTP: the first page, a state filter, a
//! skill filter, an id-prefix search and a page deep in the list. The floor is the same page of
//! tasks through A2A 1.0 `ListTasks` (JSON-RPC) in the same run: the ratio is what rendering the
//! console costs over reading the tasks. The target is under 200 ms for a page.

use std::time::{Duration, Instant};

use serde_json::json;

use super::bench_reads::percentiles;

use futures::future::BoxFuture;

use crate::engine::{Caller, Engine, Request};
use crate::flow::step_table::{await_input, Step, StepInput, StepTable};
use crate::flow::{SkillInfo, StepCtx, StepResult};
use crate::model::{Message, TaskState};
use crate::store::{SqliteStore, ViewQuery};

/// The target of one page, in ms.
const TARGET_MS: f64 = 200.0;

/// The bench's two skills: `done` completes at once, `waits` waits for an answer.
struct Seeded;

fn done<'a>(_: &'a Seeded, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(
        async move { ctx.complete(format!("done: {}", input.message().joined_texts()), vec![]) },
    )
}

fn waits<'a>(_: &'a Seeded, _: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { await_input("answer", "Which one?", ()) })
}

fn answered<'a>(_: &'a Seeded, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { ctx.complete(input.message().joined_texts(), vec![]) })
}

static DONE: &[Step<Seeded>] = &[Step::new("start", done).start().takes_user_message()];

static WAITS: &[Step<Seeded>] = &[
    Step::new("start", waits).start().takes_user_message(),
    Step::new("answered", answered).resume_from("start"),
];

/// `tasks` tasks, three in ten waiting for input, the rest completed; when it returns every task
/// is settled.
async fn seed(engine: &Engine, tasks: u64) -> anyhow::Result<()> {
    let mut pending = Vec::new();
    for i in 0..tasks {
        let skill = if i % 10 < 3 { "waits" } else { "done" };
        let mut request = Request::operator(Message::user_text(format!("task {i}")));
        request.skill = Some(skill.to_owned());
        pending.push(engine.send(request));
        if pending.len() == 256 {
            futures::future::try_join_all(pending.drain(..)).await?;
        }
    }
    futures::future::try_join_all(pending).await?;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let working = engine
            .list_views(
                &Caller::Operator,
                ViewQuery {
                    state: Some(TaskState::Working),
                    ..ViewQuery::default()
                },
            )
            .await?
            .total
            + engine
                .list_views(
                    &Caller::Operator,
                    ViewQuery {
                        state: Some(TaskState::Submitted),
                        ..ViewQuery::default()
                    },
                )
                .await?
                .total;
        if working == 0 {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{working} tasks still run after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `n` timed GETs of `url`, each answered 200 with a page that lists tasks.
async fn time_page(client: &reqwest::Client, url: &str, n: u64) -> anyhow::Result<Vec<Duration>> {
    let mut samples = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let answer = client.get(url).send().await?;
        let status = answer.status();
        let body = answer.text().await?;
        samples.push(t.elapsed());
        anyhow::ensure!(
            status == 200 && body.contains("data-task="),
            "{url}: {status}"
        );
    }
    Ok(samples)
}

/// `n` timed `ListTasks` of 50 tasks (the floor).
async fn time_list(client: &reqwest::Client, url: &str, n: u64) -> anyhow::Result<Vec<Duration>> {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "ListTasks",
        "params": { "pageSize": 50, "historyLength": 0 }
    });
    let mut samples = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let reply: serde_json::Value = client
            .post(url)
            .header("A2A-Version", "1.0")
            .json(&body)
            .send()
            .await?
            .json()
            .await?;
        samples.push(t.elapsed());
        anyhow::ensure!(
            reply["result"]["tasks"]
                .as_array()
                .is_some_and(|t| t.len() == 50),
            "unexpected reply: {reply}"
        );
    }
    Ok(samples)
}

/// Run `bench console`.
pub async fn console(tasks: u64, reads: u64) -> anyhow::Result<()> {
    // The floor reads a full page of 50 tasks through `ListTasks`.
    anyhow::ensure!(
        tasks >= 50,
        "bench console needs --tasks 50 or more (its floor reads a page of 50 tasks); got {tasks}"
    );
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open_default(dir.path().join("console.sqlite"))?;
    let engine = Engine::builder(store)
        .without_registered_skills()
        .skill(
            StepTable::new(SkillInfo::new("done", "Done"), Seeded, DONE)
                .map_err(anyhow::Error::msg)?,
        )
        .skill(
            StepTable::new(SkillInfo::new("waits", "Waits"), Seeded, WAITS)
                .map_err(anyhow::Error::msg)?,
        )
        .start()
        .await?;
    let seeded = Instant::now();
    seed(&engine, tasks).await?;
    let seed_s = seeded.elapsed().as_secs_f64();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let server = tokio::spawn(crate::server::serve(
        listener,
        engine.clone(),
        crate::server::ServerConfig::new(format!("{base}/")),
    ));
    let client = reqwest::Client::new();
    // A page deep in the list: follow `next` 20 times.
    let mut deep = format!("{base}/console");
    for _ in 0..20 {
        let page = client.get(&deep).send().await?.text().await?;
        let Some(next) = page.split("rel=\"next\" href=\"").nth(1) else {
            break;
        };
        deep = format!(
            "{base}{}",
            next[..next.find('"').unwrap_or(0)].replace("&amp;", "&")
        );
    }
    let some_id = engine
        .list_views(
            &Caller::Operator,
            ViewQuery {
                limit: 1,
                ..ViewQuery::default()
            },
        )
        .await?
        .views
        .first()
        .map(|v| v.record.id.clone())
        .unwrap_or_default();
    let pages = [
        ("first_page", format!("{base}/console")),
        (
            "state_filter",
            format!("{base}/console?state=input-required"),
        ),
        ("skill_filter", format!("{base}/console?skill=waits")),
        (
            "id_prefix",
            format!("{base}/console?q={}", &some_id[..some_id.len().min(2)]),
        ),
        ("page_21", deep),
    ];
    let rpc = format!("{base}/");
    // Warm every page, then alternate rounds so that drift hits all alike.
    time_list(&client, &rpc, 5).await?;
    for (_, url) in &pages {
        time_page(&client, url, 5).await?;
    }
    let rounds = 10;
    let per_round = reads.div_ceil(rounds).max(1);
    let mut floor = Vec::new();
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); pages.len()];
    for _ in 0..rounds {
        floor.extend(time_list(&client, &rpc, per_round).await?);
        for (i, (_, url)) in pages.iter().enumerate() {
            samples[i].extend(time_page(&client, url, per_round).await?);
        }
    }
    server.abort();
    engine.shutdown().await;
    let (floor_p50, floor_p99) = percentiles(floor);
    let mut line = serde_json::Map::new();
    line.insert("workload".into(), json!("console"));
    line.insert("tasks".into(), json!(tasks));
    line.insert("seed_s".into(), json!(seed_s));
    line.insert("reads_each".into(), json!(per_round * rounds));
    line.insert("floor_list_tasks_p50_ms".into(), json!(floor_p50));
    line.insert("floor_list_tasks_p99_ms".into(), json!(floor_p99));
    let mut worst: f64 = 0.0;
    for ((name, _), samples) in pages.iter().zip(samples) {
        let (p50, p99) = percentiles(samples);
        worst = worst.max(p99);
        line.insert(format!("{name}_p50_ms"), json!(p50));
        line.insert(format!("{name}_p99_ms"), json!(p99));
        line.insert(
            format!("{name}_p50_ratio_to_floor"),
            json!(p50 / floor_p50.max(1e-9)),
        );
    }
    line.insert("target_ms".into(), json!(TARGET_MS));
    line.insert("worst_p99_ms".into(), json!(worst));
    line.insert("within_target".into(), json!(worst < TARGET_MS));
    // The first page against one durable commit on the same disk (W1).
    let floor = super::bench_floor::sqlite_default()?;
    let first_p50 = line
        .get("first_page_p50_ms")
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0);
    let mut line = serde_json::Value::Object(line);
    floor.attach_latency(&mut line, first_p50);
    println!("{line}");
    Ok(())
}
