//! `radkit bench floor` and the floor every bench line carries: the floor's two lines (one durable
//! row per step, the same rows group-committed) on SQLite and Postgres, and a workload's line with
//! its `floor_ratio` (computed from the floor measured in the same run) and `cpu_us_per_step`. No
//! timing is asserted: only that the figures are there, positive and consistent with each other.

use crate::support::common;
use crate::support::services;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

/// The JSON lines `radkit <args>` prints.
fn bench(args: &[&str]) -> Vec<Value> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args(args);
    let out = common::output_within(cmd, Duration::from_secs(300), "radkit bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn positive(line: &Value, key: &str) -> f64 {
    let v = line[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no {key}: {line}"));
    assert!(v > 0.0 && v.is_finite(), "{key} = {v}: {line}");
    v
}

fn check_floor(lines: &[Value], store: &str) {
    assert_eq!(lines.len(), 2, "{lines:?}");
    let (w1, w2) = (&lines[0], &lines[1]);
    assert_eq!(w1["workload"], "floor-sequential", "{w1}");
    assert_eq!(w2["workload"], "floor-batched", "{w2}");
    for line in lines {
        assert_eq!(line["store"], store, "{line}");
        assert!(line["row_bytes"].as_u64().unwrap_or(0) > 100, "{line}");
        let (us, per_sec) = (
            positive(line, "us_per_step"),
            positive(line, "steps_per_sec"),
        );
        assert!((us * per_sec / 1e6 - 1.0).abs() < 1e-6, "{line}");
    }
    assert_eq!(w1["steps"], 40, "{w1}");
    assert_eq!(w2["steps"], 400, "{w2}");
    assert_eq!(w2["batch"], 20, "{w2}");
}

#[test]
fn bench_floor_prints_one_row_per_commit_and_the_same_rows_batched_on_sqlite() {
    let lines = bench(&[
        "bench",
        "floor",
        "--steps",
        "40",
        "--batched",
        "400",
        "--batch",
        "20",
    ]);
    check_floor(&lines, "sqlite");
}

#[test(needs = Postgres)]
fn bench_floor_prints_one_row_per_commit_and_the_same_rows_batched_on_postgres() {
    let url = services::postgres_url();
    let lines = bench(&[
        "bench",
        "floor",
        "--store",
        &url,
        "--steps",
        "40",
        "--batched",
        "400",
        "--batch",
        "20",
    ]);
    check_floor(&lines, "postgres");
}

#[test]
fn bench_floor_refuses_a_store_it_does_not_know() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args(["bench", "floor", "--store", "mysql://localhost"]);
    let out = common::output_within(cmd, Duration::from_secs(60), "radkit bench floor");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("`sqlite` or a `postgres://"), "{stderr}");
}

#[test]
fn a_bench_line_carries_its_ratio_to_the_floor_of_its_own_run_and_its_cpu_per_step() {
    let sequential = &bench(&[
        "bench",
        "sequential",
        "--steps",
        "30",
        "--warmup-steps",
        "300",
    ])[0];
    let ratio = positive(sequential, "floor_ratio");
    let floor = positive(sequential, "floor_sequential_us_per_step");
    let us = positive(sequential, "us_per_step");
    assert!((ratio - us / floor).abs() < 1e-6 * ratio, "{sequential}");
    assert_eq!(sequential["floor_against"], "floor-sequential");
    // Five alternating rounds of W1 and the workload by default, the steps split among them.
    assert_eq!(sequential["rounds"], 5, "{sequential}");
    assert_eq!(sequential["steps"], 30, "{sequential}");
    // Both files warmed before the rounds (W2's rows on the floor's, as many steps on the
    // engine's).
    assert_eq!(sequential["warmup_steps"], 300, "{sequential}");
    positive(sequential, "cpu_us_per_step");

    let concurrent = &bench(&[
        "bench",
        "concurrent",
        "--flows",
        "8",
        "--steps",
        "5",
        "--warmup-steps",
        "300",
    ])[0];
    let ratio = positive(concurrent, "floor_ratio");
    let floor = positive(concurrent, "floor_batched_steps_per_sec");
    let per_sec = positive(concurrent, "steps_per_sec");
    assert!(
        (ratio - per_sec / floor).abs() < 1e-6 * ratio,
        "{concurrent}"
    );
    assert_eq!(concurrent["floor_against"], "floor-batched");
    positive(concurrent, "cpu_us_per_step");
    // The store's figures are the measured run's, the warm-up's left out: one append per step
    // and one to create each task, in at least one commit.
    assert_eq!(concurrent["warmup_steps"], 300, "{concurrent}");
    assert_eq!(concurrent["appends"], 48, "{concurrent}");
    positive(concurrent, "commits");
}

/// The other timed lines carry the floor of their own run too: its two figures, which one they are
/// compared with, and their ratio to it.
#[test]
fn every_timed_bench_line_carries_the_floor_of_its_own_run() {
    let runs: [&[&str]; 6] = [
        &["bench", "resume", "--steps", "20"],
        &["bench", "read", "--entries", "40", "--reads", "20"],
        &["bench", "console", "--tasks", "60", "--reads", "10"],
        &[
            "bench",
            "soak",
            "--seconds",
            "2",
            "--clients",
            "2",
            "--every",
            "1",
        ],
        &[
            "bench",
            "a2a",
            "--requests",
            "20",
            "--concurrency",
            "2",
            "--rounds",
            "1",
            "--warmup",
            "10",
        ],
        &[
            "bench", "fanout", "--width", "2", "--depth", "3", "--rounds", "1",
        ],
    ];
    for args in runs {
        let lines = bench(args);
        // The last line is the run's summary (soak prints one line every interval before it).
        let line = lines
            .last()
            .unwrap_or_else(|| panic!("{args:?} printed nothing"));
        let ratio = positive(line, "floor_ratio");
        positive(line, "floor_sequential_us_per_step");
        positive(line, "floor_batched_steps_per_sec");
        let against = line["floor_against"]
            .as_str()
            .expect("the floor compared with");
        assert!(
            ["floor-sequential", "floor-batched"].contains(&against),
            "{args:?}: {line}"
        );
        assert!(ratio.is_finite(), "{args:?}: {line}");
    }
    // Too few tasks for the console's floor page is a clear error, not a failed read.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args(["bench", "console", "--tasks", "30"]);
    let out = common::output_within(cmd, Duration::from_secs(60), "radkit bench console");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--tasks 50 or more"), "{stderr}");
}

/// More flows than one engine holds at once (256 by default): the sends beyond its room create
/// unleased tasks, which its own claims take up (the bench once built its engine without starting
/// it, and a thousand flows left hundreds of tasks unrun until the bench was killed).
#[test(needs = Postgres)]
fn bench_concurrent_on_postgres_runs_more_flows_than_one_engine_holds_at_once() {
    let url = services::postgres_url();
    let lines = bench(&[
        "bench",
        "concurrent",
        "--store",
        &url,
        "--flows",
        "300",
        "--steps",
        "2",
        "--warmup-steps",
        "200",
    ]);
    let line = &lines[0];
    assert_eq!(line["steps"], 600, "{line}");
    assert_eq!(line["warmup_steps"], 200, "{line}");
    // Only the measured run's appends: each task's three (its creation, two steps' records),
    // not the warm-up's.
    let appends = line["appends"].as_u64().expect("appends");
    assert!((600..=1_200).contains(&appends), "{line}");
    assert_eq!(line["floor_against"], "floor-batched", "{line}");
    positive(line, "floor_ratio");
    positive(line, "cpu_us_per_step");
}
