//! `radkit bench concurrent --store postgres://…`: the concurrent workload on PostgreSQL, in this
//! process or shared by `--workers N` `worker --bench-skill` processes, in a fresh schema that is dropped
//! afterwards.

use crate::engine::Request;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::model::Message;
use crate::store::{PostgresStore, Store, TaskQuery};
use anyhow::{bail, Context};
use tokio::io::AsyncBufReadExt;

/// How `bench concurrent --store postgres://…` shares the work.
pub struct Cluster {
    /// `worker` processes (0: this process runs the tasks).
    pub workers: u64,
    /// Their lease lifetime, in ms.
    pub lease_ms: u64,
    /// Tasks each drives at once.
    pub max_tasks: usize,
    /// Steps run before the measured run, unmeasured (`--warmup-steps`).
    pub warmup_steps: u64,
}

/// Run the workload; prints one JSON line.
pub async fn concurrent(url: &str, flows: u64, steps: u64, cluster: Cluster) -> anyhow::Result<()> {
    let floor = super::bench_floor::postgres(url, 500, 20_000, 100).await?;
    let (schema, scoped) = create_schema(url, "radkit_bench").await?;
    let result = if cluster.workers == 0 {
        in_process(&scoped, flows, steps, cluster.warmup_steps)
            .await
            .map(|(measured, stats)| (measured, stats, None))
    } else {
        with_workers(&scoped, flows, steps, &cluster).await
    };
    if let Err(e) = drop_schema(url, &schema).await {
        eprintln!("warning: bench schema {schema} not dropped: {e:#}");
    }
    let (measured, stats, executions) = result?;
    let mut extra = serde_json::json!({
        "flows": flows,
        "store": "postgres",
        "durability": "synchronous_commit=on",
        "workers": cluster.workers,
        "statements": stats.statements,
        "appends": stats.appends,
        "warmup_steps": cluster.warmup_steps,
    });
    if let Some(server) = stats.server_cpu {
        extra["server_cpu_us_per_step"] =
            (server.as_secs_f64() * 1e6 / (flows * steps) as f64).into();
    }
    if let Some(executions) = executions {
        extra["lease_ms"] = cluster.lease_ms.into();
        extra["max_tasks"] = cluster.max_tasks.into();
        extra["executions"] = executions.total.into();
        extra["duplicate_executions"] = executions.duplicates.into();
    }
    let against = super::bench_floor::Against::Batched;
    super::bench::report(
        "concurrent",
        flows * steps,
        &measured,
        (&floor, against),
        extra,
    );
    Ok(())
}

async fn in_process(
    url: &str,
    flows: u64,
    steps: u64,
    warmup_steps: u64,
) -> anyhow::Result<(super::bench::Measured, Counted)> {
    let (skill, effects) = super::bench::engine_parts()?;
    let store = PostgresStore::connect(url).await?;
    // Started, not only built: on a shared store a send beyond the tasks this engine has room
    // for creates the task unleased, for a worker's claims — this engine's own, which only
    // `start` runs (with `build` alone a thousand flows left hundreds of tasks unrun).
    let engine = Engine::builder(store.clone())
        .without_registered_skills()
        .skill(skill)
        .effects(effects)
        .start()
        .await?;
    super::bench::warm_up(&engine, warmup_steps).await?;
    let (before, server) = (store.stats(), ServerCpu::start(url));
    let (measured, ()) =
        super::bench::Measured::of(super::bench::run_tasks(&engine, flows, steps)).await?;
    let after = store.stats();
    Ok((measured, counted(&after, &before, server.used())))
}

/// What this process committed between `before` and `after`, and the server's CPU meanwhile.
fn counted(
    after: &crate::store::StoreStats,
    before: &crate::store::StoreStats,
    server_cpu: Option<Duration>,
) -> Counted {
    Counted {
        statements: after.batches - before.batches,
        appends: after.appends - before.appends,
        server_cpu,
    }
}

/// Statements and appends this process committed in the measured run, and the CPU time the
/// PostgreSQL server used meanwhile (when it runs on this machine).
struct Counted {
    statements: u64,
    appends: u64,
    server_cpu: Option<Duration>,
}

/// The CPU time of the `postgres` processes on this machine from [`ServerCpu::start`] on: the
/// database's share of a durable step when the bench runs beside it, as it does here. `None`
/// when the URL names a server elsewhere (a local one's processes would not be its), or none is
/// visible (no `/proc`).
struct ServerCpu(Option<std::collections::HashMap<u32, Duration>>);

impl ServerCpu {
    fn start(url: &str) -> ServerCpu {
        ServerCpu(on_this_machine(url).then(|| super::proc_cpu::by_name("postgres")))
    }

    fn used(&self) -> Option<Duration> {
        let before = self.0.as_ref()?;
        let now = super::proc_cpu::by_name("postgres");
        (!now.is_empty()).then(|| super::proc_cpu::used_between(before, &now))
    }
}

/// Whether every host `url` names is this machine: a loopback address, `localhost` or a Unix
/// socket.
fn on_this_machine(url: &str) -> bool {
    use tokio_postgres::config::Host;
    let Ok(config) = url.parse::<tokio_postgres::Config>() else {
        return false;
    };
    let hosts = config.get_hosts();
    !hosts.is_empty()
        && hosts.iter().all(|host| match host {
            Host::Tcp(name) => {
                name == "localhost"
                    || name
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            }
            #[cfg(unix)]
            Host::Unix(_) => true,
        })
}

/// Effects the workers performed, the warm-up's included: in all, and beyond one per InvocationId.
struct Executions {
    total: u64,
    duplicates: u64,
}

/// Count the InvocationIds in the workers' execution log.
fn executions(log: &std::path::Path) -> anyhow::Result<Executions> {
    let text = std::fs::read_to_string(log).context("reading the workers' execution log")?;
    let mut seen = std::collections::HashSet::new();
    let mut total = 0u64;
    for id in text.lines() {
        total += 1;
        seen.insert(id);
    }
    Ok(Executions {
        total,
        duplicates: total - seen.len() as u64,
    })
}

/// `workers` `worker --bench-skill` processes share the tasks; this process only submits them (as the
/// `bench` skill, `steps` steps each) and waits until every one completed.
async fn with_workers(
    url: &str,
    flows: u64,
    steps: u64,
    cluster: &Cluster,
) -> anyhow::Result<(super::bench::Measured, Counted, Option<Executions>)> {
    let store = PostgresStore::connect(url).await?;
    let exe = std::env::current_exe()?;
    let dir = tempfile::tempdir().context("a directory for the execution log")?;
    let log = dir.path().join("executions.log");
    let mut children = Vec::new();
    for i in 0..cluster.workers {
        let mut child = tokio::process::Command::new(&exe)
            .args([
                "worker",
                "--bench-skill",
                "--store",
                url,
                "--lease-ms",
                &cluster.lease_ms.to_string(),
                "--max-tasks",
                &cluster.max_tasks.to_string(),
                "--worker-id",
            ])
            .arg(format!("bench-worker-{i}"))
            .env("RUST_LOG", "warn")
            .env(super::bench::EXECUTION_LOG, &log)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting a worker")?;
        // Ready once it prints its banner.
        let stdout = child.stdout.take().context("worker stdout")?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        if lines.next_line().await?.is_none() {
            bail!("worker {i} exited before it was ready");
        }
        children.push(child);
    }
    let (skill, _) = super::bench::engine_parts()?;
    let submit = Engine::builder(store.clone())
        .without_registered_skills()
        .skill(skill)
        .max_active_tasks(0)
        .build()?;
    if cluster.warmup_steps > 0 {
        let warmup_flows = super::bench::WARMUP_FLOWS.min(cluster.warmup_steps);
        let warmup_steps = cluster.warmup_steps.div_ceil(warmup_flows);
        submit_and_wait(&submit, &store, warmup_flows, warmup_steps).await?;
    }
    let workers_cpu = || {
        let pids = children.iter().map(|c| c.id());
        pids.map(|pid| super::proc_cpu::of_process(pid?))
            .sum::<Option<Duration>>()
    };
    let (before, server, workers_before) = (store.stats(), ServerCpu::start(url), workers_cpu());
    let elapsed = submit_and_wait(&submit, &store, flows, steps).await?;
    let (after, server, workers_after) = (store.stats(), server.used(), workers_cpu());
    // The work ran in the workers: their CPU time (this process only submits and polls).
    let measured = super::bench::Measured {
        elapsed,
        cpu: workers_after
            .zip(workers_before)
            .map(|(after, before)| after.saturating_sub(before)),
    };
    let failed = store
        .list(TaskQuery::default())
        .await?
        .into_iter()
        .filter(|t| t.state != crate::model::TaskState::Completed)
        .count();
    for child in &mut children {
        let _ = child.start_kill();
    }
    // Gone before the schema is dropped (their sessions then end as the server notices).
    for child in &mut children {
        let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    }
    if failed > 0 {
        bail!("{failed} bench tasks did not complete");
    }
    // This process wrote only the creations; the workers' statements are not counted here.
    let counted = counted(&after, &before, server);
    Ok((measured, counted, Some(executions(&log)?)))
}

/// Submit `flows` tasks of `steps` steps and wait until none is open: how long it took.
async fn submit_and_wait(
    submit: &Engine,
    store: &PostgresStore,
    flows: u64,
    steps: u64,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let sends = (0..flows).map(|_| {
        submit.send(Request::operator(Message::user_text(steps.to_string())).skill("bench"))
    });
    futures::future::try_join_all(sends).await?;
    loop {
        // One row at most: whether any task is still open (the poll shares the database with
        // the workers, and every open task's row read each 5 ms weighed on them).
        let open = store
            .list(TaskQuery {
                non_terminal: true,
                limit: Some(1),
                ..TaskQuery::default()
            })
            .await?;
        if open.is_empty() {
            return Ok(started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!("tasks still open after 10 minutes");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A client on the database `url` names, its connection driven in the background.
async fn admin_client(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("connecting to Postgres for the bench schema")?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("warning: bench schema connection ended: {e}");
        }
    });
    Ok(client)
}

/// Create a fresh schema in the database `url` names: returns its name and a URL whose sessions work
/// in it (`options=-csearch_path=<name>`). The CLI's own copy of the runtime's test helper, which sits
/// behind the `testing` feature.
pub(crate) async fn create_schema(url: &str, prefix: &str) -> anyhow::Result<(String, String)> {
    let client = admin_client(url).await?;
    let name = format!("{prefix}_{}", crate::model::new_id().replace('-', ""));
    client
        .batch_execute(&format!("CREATE SCHEMA {name}"))
        .await
        .with_context(|| format!("creating schema {name}"))?;
    let sep = if url.contains('?') { '&' } else { '?' };
    Ok((
        name.clone(),
        format!("{url}{sep}options=-csearch_path%3D{name}"),
    ))
}

/// Drop a schema made by [`create_schema`], with everything in it.
pub(crate) async fn drop_schema(url: &str, name: &str) -> anyhow::Result<()> {
    let client = admin_client(url).await?;
    // The workers were just killed: a statement one of their sessions was running holds its locks
    // until its backend notices, and can deadlock with the drop, which then runs again.
    let mut tries = 0;
    loop {
        tries += 1;
        match client
            .batch_execute(&format!("DROP SCHEMA {name} CASCADE"))
            .await
        {
            Ok(()) => return Ok(()),
            Err(e) if tries < 5 => {
                tracing::debug!(error = %e, "dropping the bench schema again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e).with_context(|| format!("dropping schema {name}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::on_this_machine;

    #[test]
    fn only_a_server_on_this_machine_has_its_cpu_counted() {
        assert!(on_this_machine("postgres://u@127.0.0.1:5432/test"));
        assert!(on_this_machine(
            "postgres://u@localhost/test?options=-csearch_path%3Dx"
        ));
        assert!(on_this_machine("postgres://u@[::1]:5432/test"));
        assert!(on_this_machine(
            "postgres://u@%2Fvar%2Frun%2Fpostgresql/test"
        ));
        assert!(!on_this_machine("postgres://u@db.example.com/test"));
        assert!(!on_this_machine("postgres://u@127.0.0.1,10.0.0.2/test"));
        assert!(!on_this_machine("not a url"));
    }
}
