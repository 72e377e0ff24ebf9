//! `radkit bench fanout`: one JSON line per form (sequential, then parallel), each with its time per
//! effect and its ratio to the floor (one durable commit, measured in the same run), the parallel
//! one with its ratio to the sequential. No timing is asserted; the commits are: a parallel step
//! commits its calls together, so it makes fewer commits per effect than calls made in sequence.

use crate::support::common;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

#[test]
fn bench_fanout_prints_both_forms_with_their_ratios() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args([
        "bench", "fanout", "--width", "3", "--depth", "2", "--rounds", "1",
    ]);
    let out = common::output_within(cmd, Duration::from_secs(120), "radkit bench fanout");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    let (sequential, parallel) = (&lines[0], &lines[1]);
    assert_eq!(sequential["workload"], "fanout/sequential", "{stdout}");
    assert_eq!(parallel["workload"], "fanout/parallel", "{stdout}");
    for line in &lines {
        assert_eq!(line["effects"], 6, "{stdout}");
        let us = line["us_per_effect"].as_f64().expect("a time per effect");
        let floor = line["floor_commit_us"].as_f64().expect("a floor");
        let ratio = line["ratio_to_floor"]
            .as_f64()
            .expect("a ratio to the floor");
        assert!((ratio - us / floor).abs() < 1e-9, "{stdout}");
        // The same floor's fields, as every timed bench line carries them.
        let floor_ratio = line["floor_ratio"].as_f64().expect("floor_ratio");
        assert!((floor_ratio - ratio).abs() < 1e-9, "{stdout}");
        assert_eq!(line["floor_against"], "floor-sequential", "{stdout}");
    }
    let ratio = parallel["ratio_to_sequential"]
        .as_f64()
        .expect("a ratio to the sequential form");
    let expected =
        parallel["us_per_effect"].as_f64().unwrap() / sequential["us_per_effect"].as_f64().unwrap();
    assert!((ratio - expected).abs() < 1e-9, "{stdout}");
    assert!(
        parallel["commits_per_effect"].as_f64() < sequential["commits_per_effect"].as_f64(),
        "{stdout}"
    );
}

#[test]
fn bench_fanout_refuses_an_empty_fan() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args(["bench", "fanout", "--width", "0"]);
    let out = common::output_within(cmd, Duration::from_secs(60), "radkit bench fanout");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("at least 1"), "{stderr}");
}
