//! `radkit tasks list|show <id>|versions|migrate|prune`: the tasks in a store (a SQLite file or a
//! Postgres database), one task's journal as a timeline, the unfinished tasks per skill version,
//! moving a skill's tasks at rest to a version this program serves, and pruning finished tasks
//! once (what `serve --retain-…` does all along).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use crate::journal::{Entry, JournalRecord};
use crate::store::{Store, TaskQuery};

/// Arguments of `radkit tasks`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
    /// Directory of the SQLite file (`radkit.sqlite`), as for `radkit serve`.
    #[arg(long, global = true, default_value = "data", env = "RADKIT_DATA_DIR")]
    data_dir: PathBuf,
    /// Store URL (`sqlite://<path>` or `postgres://…`), as for `radkit serve`.
    #[arg(long, global = true, env = "RADKIT_STORE")]
    store: Option<String>,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Newest tasks first.
    List {
        /// Only unfinished tasks.
        #[arg(long)]
        running: bool,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// One task's journal as a timeline.
    Show {
        /// Task id, or any prefix of it that names one task.
        id: String,
        /// Every record whole, one JSON object per line (`seq`, `at_ms`, `entry`), as stored: for
        /// `jq`, and since SQLite keeps long bodies compressed, what the `sqlite3` shell no longer
        /// shows.
        #[arg(long)]
        json: bool,
    },
    /// The unfinished tasks per skill, version, state and what they wait on, and whether this
    /// program serves the version.
    Versions,
    /// Move a skill's unfinished tasks to a version this program serves: each at rest whose step
    /// has the same shape there and whose state decodes there; every other one stays, with why.
    Migrate {
        /// The skill.
        #[arg(long)]
        skill: String,
        /// The version to move to (default: the newest this program serves).
        #[arg(long)]
        to: Option<String>,
        /// Say which tasks would move and why the others would not; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Prune finished tasks once, as a server with these retention options does all along: for a
    /// store no server prunes (serverless functions, a scheduled job). On SQLite, stop the server
    /// first (one process writes a file) or let it prune.
    Prune {
        /// How long finished tasks are kept (at least one of the two).
        #[command(flatten)]
        retention: super::retention::RetentionArgs,
    },
}

fn time(ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
        .unwrap_or_default()
}

fn short(value: &impl serde::Serialize) -> String {
    let text = serde_json::to_string(value).unwrap_or_default();
    if text.chars().count() > 80 {
        format!("{}…", text.chars().take(79).collect::<String>())
    } else {
        text
    }
}

/// One line describing a journal entry.
pub fn describe(record: &JournalRecord) -> String {
    match &record.entry {
        Entry::TaskCreated {
            skill_id,
            skill_version,
            principal,
            ..
        } => {
            format!(
                "created for skill `{skill_id}` version {skill_version}{}",
                principal
                    .as_ref()
                    .map(|p| format!(" by {p}"))
                    .unwrap_or_default()
            )
        }
        Entry::Migrated { from, to, .. } => format!("moved from version {from} to version {to}"),
        Entry::MessageReceived { message } => format!("user: {}", short(&message.joined_texts())),
        Entry::MessageQueued { message, interrupt } => format!(
            "user, while working ({}): {}",
            if *interrupt { "interrupts" } else { "queued" },
            short(&message.joined_texts())
        ),
        Entry::QueuedDelivered { message_id } => format!("delivered queued message {message_id}"),
        Entry::Activated {
            visit, step, event, ..
        } => format!("step `{step}` (visit {visit}) on {}", event.kind_name()),
        Entry::CommandIssued {
            id,
            cmd,
            transition,
        } => {
            format!(
                "issue {} [{:?}{}] {id}",
                cmd.kind.fingerprint(),
                cmd.policy,
                if *transition { ", from transition" } else { "" }
            )
        }
        Entry::AttemptFailed { id, attempt, error } => format!(
            "attempt {attempt} of {id} failed ({:?}): {}",
            error.kind, error.message
        ),
        Entry::ReceiptRecorded { receipt } => match &receipt.outcome {
            Ok(value) => format!(
                "receipt {} ok (attempt {}): {}",
                receipt.id,
                receipt.attempt,
                short(value)
            ),
            Err(e) => format!(
                "receipt {} error (attempt {}): {}",
                receipt.id, receipt.attempt, e.message
            ),
        },
        Entry::Transitioned { next, .. } => format!("transition: {next}"),
        Entry::TimerSet { id, fire_at_ms } => format!("timer {id} fires at {}", time(*fire_at_ms)),
        Entry::CallStarted { id, task_id, .. } => {
            format!("call {id} started callee task {task_id}")
        }
        Entry::AwaitingInput { slot, message, .. } => {
            format!("awaiting `{slot}`: {}", short(&message.joined_texts()))
        }
        Entry::MessageEmitted { message } => format!("agent: {}", short(&message.joined_texts())),
        Entry::Progress { message } => format!("progress: {}", message.joined_texts()),
        Entry::ArtifactEmitted {
            artifact,
            append,
            last_chunk,
        } => format!(
            "artifact `{}`{}{}",
            artifact.name.as_deref().unwrap_or(&artifact.artifact_id),
            if *append { " (append)" } else { "" },
            if *last_chunk { "" } else { " (more to come)" }
        ),
        Entry::StatusChanged { state } => format!("status: {}", state.as_str()),
        Entry::CancelRequested => "cancel requested".to_owned(),
        Entry::Checkpoint {
            visit, compensable, ..
        } => format!(
            "checkpoint after visit {visit} ({} compensable)",
            compensable.len()
        ),
        Entry::Compensated { id, outcome } => format!(
            "compensated {id}: {}",
            if outcome.is_ok() { "ok" } else { "failed" }
        ),
        Entry::Terminal { state, message } => {
            format!(
                "{}{}",
                state.as_str(),
                message
                    .as_ref()
                    .map(|m| format!(": {}", m.joined_texts()))
                    .unwrap_or_default()
            )
        }
    }
}

/// Most candidates an ambiguous prefix lists.
const CANDIDATES: usize = 20;

/// The task `id` names: the task with that exact id, else the only task whose id starts with it.
async fn find(
    store: &dyn Store,
    id: &str,
    location: &str,
) -> anyhow::Result<crate::store::TaskRecord> {
    if id.is_empty() {
        anyhow::bail!("give a task id or a prefix of one (`tasks list` shows them)");
    }
    if let Some(task) = store.task(id).await? {
        return Ok(task);
    }
    let mut matches = store
        .list(TaskQuery {
            id_prefix: Some(id.to_owned()),
            limit: Some(CANDIDATES + 1),
            ..TaskQuery::default()
        })
        .await?;
    match matches.len() {
        0 => anyhow::bail!("no task {id} in {location} (`tasks list` shows the tasks)"),
        1 => Ok(matches.remove(0)),
        n => {
            matches.sort_by(|a, b| a.id.cmp(&b.id));
            let shown: Vec<String> = matches
                .iter()
                .take(CANDIDATES)
                .map(|t| format!("  {}  {:<18}  {}", t.id, t.skill_id, t.state.as_str()))
                .collect();
            anyhow::bail!(
                "`{id}` is ambiguous: {} tasks in {location} start with it; give more characters\n{}{}",
                if n > CANDIDATES { format!("more than {CANDIDATES}") } else { n.to_string() },
                shown.join("\n"),
                if n > CANDIDATES { "\n  …" } else { "" }
            )
        }
    }
}

/// Run `tasks`.
pub async fn run(app: &super::App, args: Args) -> anyhow::Result<()> {
    let (store, location): (Arc<dyn Store>, String) = match args.store.as_deref() {
        #[cfg(feature = "postgres")]
        Some(url) if crate::cli::is_postgres(url) => (
            Arc::new(crate::store::PostgresStore::connect(url).await?),
            "the Postgres store".to_owned(),
        ),
        other => {
            let sqlite = crate::cli::serve::open_sqlite(other, &args.data_dir, "full")?;
            let location = sqlite.path().display().to_string();
            (Arc::new(sqlite), location)
        }
    };
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let printed = match args.command {
        Command::List { running, limit } => {
            let tasks = store
                .list(TaskQuery {
                    non_terminal: running,
                    limit: Some(limit),
                    ..TaskQuery::default()
                })
                .await?;
            print_list(&mut out, &tasks)
        }
        Command::Show { id, json } => {
            let task = find(store.as_ref(), &id, &location).await?;
            let journal = store.journal(&task.id, 0).await?;
            if json {
                print_records(&mut out, &journal)
            } else {
                print_show(&mut out, &task, &journal)
            }
        }
        // The engine is built, not started: nothing is recovered or run.
        Command::Versions => {
            let engine = app.builder(store).build()?;
            print_versions(&mut out, &engine.versions().await?)
        }
        Command::Migrate { skill, to, dry_run } => {
            let engine = app.builder(store).build()?;
            let moves = engine.migrate(&skill, to.as_deref(), dry_run).await?;
            print_moves(&mut out, &moves, dry_run)
        }
        Command::Prune { retention } => {
            if retention.retention().keeps_everything() {
                anyhow::bail!("say how long finished tasks are kept: --retain-journals <duration>, --retain-tasks <duration> or both");
            }
            let engine = retention.apply(app.builder(store)).build()?;
            let pruned = engine.prune_finished().await?;
            writeln!(
                out,
                "{} journal(s) compacted, {} task(s) deleted in {location}",
                pruned.compacted, pruned.deleted
            )
        }
    };
    match printed.and_then(|()| out.flush()) {
        // The reader went away (`radkit tasks show <id> | head`): that ends the output, not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// `tasks show --json`: each record on a line of its own.
fn print_records(
    out: &mut impl Write,
    journal: &[crate::journal::JournalRecord],
) -> std::io::Result<()> {
    for record in journal {
        serde_json::to_writer(&mut *out, record)?;
        writeln!(out)?;
    }
    Ok(())
}

fn print_versions(
    out: &mut impl Write,
    counts: &[crate::engine::VersionCount],
) -> std::io::Result<()> {
    if counts.is_empty() {
        return writeln!(out, "no unfinished tasks");
    }
    writeln!(
        out,
        "{:<18}  {:<18}  {:<7}  {:<14}  {:<7}  {:>7}",
        "skill", "version", "served", "state", "waits", "tasks"
    )?;
    for c in counts {
        writeln!(
            out,
            "{:<18}  {:<18}  {:<7}  {:<14}  {:<7}  {:>7}",
            c.skill_id,
            c.version,
            if c.served { "yes" } else { "no" },
            c.state.as_str(),
            c.waiting_on,
            c.tasks
        )?;
    }
    Ok(())
}

fn print_moves(
    out: &mut impl Write,
    moves: &[crate::engine::Move],
    dry_run: bool,
) -> std::io::Result<()> {
    use crate::engine::MoveOutcome;
    let mut moved = 0;
    for m in moves {
        let what = match &m.outcome {
            MoveOutcome::Moved => {
                moved += 1;
                "moved".to_owned()
            }
            MoveOutcome::WouldMove => {
                moved += 1;
                "would move".to_owned()
            }
            MoveOutcome::Stays(reason) => format!("stays: {reason}"),
        };
        writeln!(out, "{}  {} -> {}  {what}", m.task_id, m.from, m.to)?;
    }
    let verb = if dry_run { "would move" } else { "moved" };
    writeln!(
        out,
        "{moved} of {} task(s) {verb}; {} stay",
        moves.len(),
        moves.len() - moved
    )
}

fn print_list(out: &mut impl Write, tasks: &[crate::store::TaskRecord]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<36}  {:<18}  {:<14}  {:>5}  updated",
        "task", "skill", "state", "seq"
    )?;
    for t in tasks {
        writeln!(
            out,
            "{:<36}  {:<18}  {:<14}  {:>5}  {}",
            t.id,
            t.skill_id,
            t.state.as_str(),
            t.last_seq,
            time(t.updated_at_ms)
        )?;
    }
    Ok(())
}

fn print_show(
    out: &mut impl Write,
    task: &crate::store::TaskRecord,
    journal: &[JournalRecord],
) -> std::io::Result<()> {
    writeln!(
        out,
        "task {} — skill `{}` version {} — {}",
        task.id,
        task.skill_id,
        task.skill_version,
        task.state.as_str()
    )?;
    for record in journal {
        writeln!(
            out,
            "{:>5}  {}  {}",
            record.seq,
            time(record.at_ms),
            describe(record)
        )?;
    }
    Ok(())
}
