//! `radkit bench concurrent --telemetry`: every pass in a process of its own (off, metrics, OTLP to
//! the parent's receiver, `radkit serve`'s logs without and with OTLP), in rounds; one JSON line
//! with each kind's throughput and CPU time per step, and each cost as the mean of the rounds' pairs
//! with its 95% confidence interval.

use crate::support::common;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

#[test]
fn telemetry_prints_the_throughput_cpu_per_step_and_cost_of_each_kind_of_pass() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args([
        "bench",
        "concurrent",
        "--telemetry",
        "--flows",
        "4",
        "--steps",
        "3",
        "--telemetry-rounds",
        "3",
    ]);
    let out = common::output_within(
        cmd,
        Duration::from_secs(300),
        "radkit bench concurrent --telemetry",
    );
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
    assert_eq!(lines.len(), 1, "{stdout}");
    let line = &lines[0];
    assert_eq!(line["workload"], "concurrent_telemetry", "{stdout}");
    assert_eq!(line["steps"], 12, "{stdout}");
    for kind in ["off", "metrics", "metrics_and_otlp"] {
        for key in [
            format!("steps_per_sec_{kind}"),
            format!("cpu_us_per_step_{kind}"),
        ] {
            let value = line[&key].as_f64().unwrap_or(0.0);
            assert!(value > 0.0, "{key}: {stdout}");
        }
    }
    let rounds = |kind: &str| -> Vec<f64> {
        let by_round = line["cpu_us_per_step_by_round"][kind]
            .as_array()
            .unwrap_or_else(|| panic!("{kind}'s rounds: {stdout}"));
        by_round.iter().map(|v| v.as_f64().unwrap()).collect()
    };
    assert_eq!(rounds("off").len(), 3, "{stdout}");
    // The slowest pass off is never faster than the best one.
    let spread = line["cpu_spread_off"]
        .as_f64()
        .expect("the spread of the passes off");
    assert!(spread >= 0.0, "{stdout}");
    // Each cost is the mean of the rounds' pairs (a pass against the one it is compared with, in
    // the same round), and its interval Student's t (two degrees of freedom: 4.303) standard
    // errors of that mean.
    let check = |cost: &str, with: &str, without: &str| {
        let pairs: Vec<f64> = rounds(with)
            .iter()
            .zip(rounds(without))
            .map(|(w, o)| w / o - 1.0)
            .collect();
        let mean = pairs.iter().sum::<f64>() / 3.0;
        let sd = (pairs.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
        let printed = line[cost]
            .as_f64()
            .unwrap_or_else(|| panic!("{cost}: {stdout}"));
        assert!((printed - mean).abs() < 1e-9, "{cost}: {stdout}");
        let ci95 = line[format!("{cost}_ci95")].as_f64().unwrap();
        assert!(
            (ci95 - 4.303 * sd / 3f64.sqrt()).abs() < 1e-9,
            "{cost}: {stdout}"
        );
    };
    check("cost_metrics", "metrics", "off");
    check("cost_metrics_and_otlp", "metrics_and_otlp", "off");
    check("cost_serve_logs", "serve_logs", "off");
    // `radkit serve`'s subscriber without and with OTLP: switching OTLP on in a server that logs
    // is costed against that server, not against no subscriber at all.
    check("cost_otlp_in_serve", "serve_logs_and_otlp", "serve_logs");
}

#[test]
fn telemetry_refuses_fewer_than_two_rounds() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args([
        "bench",
        "concurrent",
        "--telemetry",
        "--telemetry-rounds",
        "1",
    ]);
    let out = common::output_within(
        cmd,
        Duration::from_secs(120),
        "radkit bench concurrent --telemetry --telemetry-rounds 1",
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("at least 2"), "{stderr}");
}
