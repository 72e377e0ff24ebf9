//! `radkit bench idle`: tasks waiting for input, created, then a restart in a fresh process that
//! answers some of them. No timing is asserted: what the line says is checked against itself (each
//! answered task completed, or the bench fails; bytes per task is the file over the count).

use crate::support::common;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

/// Run `radkit bench idle <args>` (bounded) and parse its one line; a failure shows its output.
fn bench_idle(args: &[&str]) -> (Value, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args(["bench", "idle"]).args(args);
    let out = common::output_within(cmd, Duration::from_secs(300), "radkit bench idle");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_str(stdout.trim()).unwrap(), stdout)
}

#[test]
fn bench_idle_creates_waiting_tasks_restarts_and_answers_some_of_them() {
    let (line, stdout) = bench_idle(&["--tasks", "60", "--answers", "10"]);
    assert_eq!(line["workload"], "idle", "{stdout}");
    assert_eq!(line["skill"], "idle", "{stdout}");
    assert_eq!(line["tasks"], 60, "{stdout}");
    assert_eq!(line["answers"], 10, "{stdout}");
    let bytes = line["file_bytes"].as_f64().unwrap();
    let per_task = line["bytes_per_waiting_task"].as_f64().unwrap();
    assert!(
        bytes > 0.0 && (per_task - bytes / 60.0).abs() < 1e-6,
        "{stdout}"
    );
    for key in [
        "create_seconds",
        "ready_ms",
        "rss_after_restart_bytes",
        "answer_p50_ms",
        "answer_p99_ms",
    ] {
        assert!(line[key].as_f64().unwrap() > 0.0, "{key}: {stdout}");
    }
    assert!(line["answer_p99_ms"].as_f64() >= line["answer_p50_ms"].as_f64());
}

#[test]
fn bench_idle_refuses_zero_tasks() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args(["bench", "idle", "--tasks", "0"]);
    let out = common::output_within(cmd, Duration::from_secs(60), "radkit bench idle");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--tasks must be at least 1"), "{stderr}");
}

/// `--skill` runs one of the program's skills as `radkit serve` would: the demo's research loop
/// (the example of a waiting task) drafts, is critiqued and asks a human; answered, each
/// completes.
#[test]
fn bench_idle_runs_a_skill_of_the_program_the_research_loop() {
    let (line, stdout) = bench_idle(&[
        "--tasks",
        "20",
        "--answers",
        "5",
        "--skill",
        "research_loop_v2",
    ]);
    assert_eq!(line["skill"], "research_loop_v2", "{stdout}");
    assert_eq!(line["answers"], 5, "{stdout}");
    assert!(
        line["bytes_per_waiting_task"].as_f64().unwrap() > 0.0,
        "{stdout}"
    );
}

/// A skill whose tasks end without asking is refused with why, not waited on for an hour.
#[test]
fn bench_idle_refuses_a_skill_whose_tasks_do_not_wait_for_input() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args(["bench", "idle", "--tasks", "3", "--skill", "report"]);
    let out = common::output_within(cmd, Duration::from_secs(120), "radkit bench idle --skill");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("instead of waiting for input"), "{stderr}");
}
