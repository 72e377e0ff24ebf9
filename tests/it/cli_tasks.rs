//! `radkit tasks list|show` read a SQLite file and print tasks and a journal timeline.

use radkit::engine::{Caller, Request};
use std::process::Command;

#[allow(dead_code)] // each test uses part of the demo
use crate::support::demo;

use radkit::model::{Message, TaskState};
use radkit::store::{Durability, SqliteStore};

/// `radkit tasks --data-dir <dir> <args>`, run to its end.
fn tasks_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_radkit"))
        .arg("tasks")
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap()
}

#[test]
async fn tasks_list_and_show_print_the_journal_as_a_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let store = SqliteStore::open(dir.path().join("radkit.sqlite"), Durability::Full).unwrap();
        let engine = demo::engine(radkit::engine::Engine::builder(store))
            .start()
            .await
            .unwrap();
        let id = engine
            .send(Request::operator(Message::user_text("Durable agents")))
            .await
            .unwrap();
        engine.wait_settled(&Caller::Operator, &id).await.unwrap();
        id
    };
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_radkit"))
            .arg("tasks")
            .arg("--data-dir")
            .arg(dir.path())
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let list = run(&["list"]);
    assert!(
        list.contains(id.as_str())
            && list.contains("research_loop_v2")
            && list.contains("input-required"),
        "{list}"
    );
    let show = run(&["show", &id]);
    assert!(
        show.contains("step `research` (visit 1) on user_message"),
        "{show}"
    );
    assert!(show.contains("issue llm `critic` [AtLeastOnce]"), "{show}");
    assert!(
        show.contains("awaiting `human_note`: \"Critic needs human input.\""),
        "{show}"
    );
    // --json: every record whole, one per line, as the store reads it (the file keeps long
    // bodies compressed, so this is how an operator sees them).
    let lines: Vec<radkit::journal::JournalRecord> = run(&["show", &id, "--json"])
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect();
    let seqs: Vec<u64> = lines.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=lines.len() as u64).collect::<Vec<_>>());
    assert!(
        matches!(&lines[0].entry, radkit::journal::Entry::TaskCreated { skill_id, .. } if skill_id == "research_loop_v2"),
        "{:?}",
        lines[0]
    );
    assert!(
        lines.iter().any(|r| matches!(&r.entry, radkit::journal::Entry::AwaitingInput { slot, .. } if slot == "human_note")),
        "{lines:?}"
    );
    let missing = Command::new(env!("CARGO_BIN_EXE_radkit"))
        .args(["tasks", "--data-dir"])
        .arg(dir.path())
        .args(["show", "nope"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).starts_with("error: no task nope"));
}

#[test]
async fn tasks_show_takes_a_unique_prefix_and_lists_the_candidates_of_an_ambiguous_one() {
    let dir = tempfile::tempdir().unwrap();
    // 17 random ids: by the pigeonhole principle two of them share their first hex digit.
    let ids: Vec<String> = {
        let store = SqliteStore::open(dir.path().join("radkit.sqlite"), Durability::Full).unwrap();
        let engine = demo::engine(radkit::engine::Engine::builder(store))
            .start()
            .await
            .unwrap();
        let mut ids = Vec::new();
        for _ in 0..17 {
            let id = engine
                .send(Request::operator(Message::user_text("1")).skill("ticker"))
                .await
                .unwrap();
            engine.wait_settled(&Caller::Operator, &id).await.unwrap();
            ids.push(id.to_string());
        }
        ids
    };
    let tasks = |args: &[&str]| tasks_in(dir.path(), args);
    // The shortest prefix that names one task.
    let id = &ids[0];
    let unique = (1..=id.len())
        .map(|n| &id[..n])
        .find(|p| ids.iter().filter(|other| other.starts_with(p)).count() == 1)
        .unwrap();
    let out = tasks(&["show", unique]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(
        shown.starts_with(&format!("task {id} — skill `ticker`")),
        "{shown}"
    );
    assert!(shown.contains("completed"), "{shown}");

    let first = ids
        .iter()
        .map(|i| &i[..1])
        .find(|p| ids.iter().filter(|i| i.starts_with(p)).count() >= 2)
        .unwrap();
    let out = tasks(&["show", first]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with(&format!("error: `{first}` is ambiguous: ")),
        "{err}"
    );
    for candidate in ids.iter().filter(|i| i.starts_with(first)) {
        assert!(
            err.contains(candidate.as_str()),
            "{candidate} missing from {err}"
        );
    }
    for other in ids.iter().filter(|i| !i.starts_with(first)) {
        assert!(!err.contains(other.as_str()), "{other} listed in {err}");
    }
}

#[test(multi_thread)]
async fn the_ticker_refuses_a_count_the_engines_max_steps_would_stop_and_runs_the_largest_it_accepts(
) {
    let engine = demo::engine(radkit::engine::Engine::builder(
        radkit::store::MemoryStore::new(),
    ))
    .start()
    .await
    .unwrap();
    let run = |text: String| {
        let engine = engine.clone();
        async move {
            let id = engine
                .send(Request::operator(Message::user_text(text)).skill("ticker"))
                .await
                .unwrap();
            engine.wait_settled(&Caller::Operator, &id).await.unwrap()
        }
    };
    let max = demo::ticker::MAX_TICKS;
    for too_many in [max + 1, 20_000, 100_000] {
        let task = run(too_many.to_string()).await;
        assert_eq!(
            task.status.state,
            TaskState::Rejected,
            "{too_many}: {task:?}"
        );
        let said = task
            .status
            .message
            .map(|m| m.joined_texts())
            .unwrap_or_default();
        assert!(said.contains(&format!("1 to {max} steps")), "{said}");
    }
    let task = run(max.to_string()).await;
    assert_eq!(task.status.state, TaskState::Completed, "{:?}", task.status);
    assert_eq!(
        task.status.message.map(|m| m.joined_texts()).as_deref(),
        Some(format!("{max} ticks").as_str())
    );
}

#[test(multi_thread)]
async fn tasks_show_into_a_reader_that_stops_early_ends_quietly() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let store =
            SqliteStore::open(dir.path().join("radkit.sqlite"), Durability::Normal).unwrap();
        let engine = demo::engine(radkit::engine::Engine::builder(store))
            .start()
            .await
            .unwrap();
        let id = engine
            .send(Request::operator(Message::user_text("1500")).skill("ticker"))
            .await
            .unwrap();
        engine.wait_settled(&Caller::Operator, &id).await.unwrap();
        id
    };
    let show = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
        cmd.arg("tasks")
            .arg("--data-dir")
            .arg(dir.path())
            .args(["show", id.as_str()]);
        cmd
    };
    let whole = show().output().unwrap();
    assert!(whole.status.success());
    // More than a pipe holds, so the command is still writing when its reader leaves.
    assert!(
        whole.stdout.len() > 256 * 1024,
        "{} bytes",
        whole.stdout.len()
    );
    // `radkit tasks show <id> | head -1`.
    let mut child = show()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with(&format!("task {id}")), "{first}");
    // The reader is dropped here: the rest of the output meets a closed pipe.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(stderr.is_empty(), "{stderr}");
}

/// `radkit tasks versions` counts the unfinished tasks per skill version; `radkit serve` refuses to
/// start while a task needs a version the binary lacks and cannot move, naming it; `radkit tasks
/// migrate` says why it stays.
#[test]
async fn tasks_versions_lists_a_stranded_version_and_serve_refuses_to_start_on_it() {
    use radkit::journal::Entry;
    use radkit::store::{Append, Store};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("radkit.sqlite");
    let (id, next_seq) = {
        let store = SqliteStore::open(&path, Durability::Full).unwrap();
        let engine = demo::engine(radkit::engine::Engine::builder(store))
            .start()
            .await
            .unwrap();
        let id = engine
            .send(Request::operator(Message::user_text("Durable agents")))
            .await
            .unwrap();
        let task = engine.wait_settled(&Caller::Operator, &id).await.unwrap();
        assert_eq!(task.status.state, TaskState::InputRequired);
        engine.halt();
        let row = engine.store().task(&id).await.unwrap().unwrap();
        (id, row.last_seq + 1)
    };
    // The task moved to a version no binary has, whose steps' shapes nobody knows.
    let store = SqliteStore::open(&path, Durability::Full).unwrap();
    let current = store.task(&id).await.unwrap().unwrap().skill_version;
    let mut append = Append::new(
        id.to_string(),
        next_seq,
        vec![Entry::Migrated {
            from: current,
            to: "retired".into(),
            steps: Default::default(),
            state: None,
        }],
    );
    append.at_ms = radkit::journal::now_ms();
    store.append(append).await.unwrap();
    drop(store);

    let radkit = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_radkit"))
            .args(args)
            .arg("--data-dir")
            .arg(dir.path())
            .output()
            .unwrap()
    };
    let versions = radkit(&["tasks", "versions"]);
    let text = String::from_utf8_lossy(&versions.stdout);
    assert!(versions.status.success(), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("retired"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("research_loop_v2") && line.contains(" no ") && line.contains("input"),
        "{line}"
    );

    let migrate = radkit(&[
        "tasks",
        "migrate",
        "--skill",
        "research_loop_v2",
        "--dry-run",
    ]);
    let text = String::from_utf8_lossy(&migrate.stdout);
    assert!(migrate.status.success(), "{text}");
    assert!(
        text.contains(id.as_str()) && text.contains("stays:") && text.contains("0 of 1"),
        "{text}"
    );

    let serve = radkit(&["serve", "--addr", "127.0.0.1:0"]);
    let error = String::from_utf8_lossy(&serve.stderr);
    assert!(!serve.status.success(), "{error}");
    assert!(
        error.contains(id.as_str()) && error.contains("--allow-stranded"),
        "{error}"
    );
}

/// `radkit tasks prune` deletes what finished before its cutoff, once, and leaves a waiting task;
/// without a retention it refuses, saying what to give.
#[test]
async fn tasks_prune_deletes_finished_tasks_once_and_leaves_waiting_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (finished, waiting) = {
        let store = SqliteStore::open(dir.path().join("radkit.sqlite"), Durability::Full).unwrap();
        let engine = demo::engine(radkit::engine::Engine::builder(store))
            .start()
            .await
            .unwrap();
        let mut report = Request::operator(Message::user_text("Retention"));
        report.skill = Some("report".to_owned());
        let finished = engine.send(report).await.unwrap();
        let waiting = engine
            .send(Request::operator(Message::user_text("Durable agents")))
            .await
            .unwrap();
        for id in [&finished, &waiting] {
            engine.wait_settled(&Caller::Operator, id).await.unwrap();
        }
        let state = engine.state(&Caller::Operator, &finished).await.unwrap();
        assert_eq!(state, TaskState::Completed);
        engine.shutdown().await;
        (finished, waiting)
    };
    let run = |args: &[&str]| tasks_in(dir.path(), args);
    let refused = run(&["prune"]);
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("--retain-tasks"), "{why}");
    let pruned = run(&["prune", "--retain-tasks", "0s"]);
    let said = String::from_utf8_lossy(&pruned.stdout);
    assert!(
        pruned.status.success(),
        "{}",
        String::from_utf8_lossy(&pruned.stderr)
    );
    assert!(
        said.contains("0 journal(s) compacted, 1 task(s) deleted"),
        "{said}"
    );
    let list = String::from_utf8(run(&["list"]).stdout).unwrap();
    assert!(!list.contains(finished.as_str()), "{list}");
    assert!(list.contains(waiting.as_str()), "{list}");
    let again = run(&["prune", "--retain-tasks", "0s"]);
    let said = String::from_utf8_lossy(&again.stdout);
    assert!(said.contains("0 task(s) deleted"), "{said}");
}
