//! `radkit bench concurrent --telemetry`: every pass in a process of its own (off, metrics, OTLP to
//! the parent's receiver, `radkit serve`'s logs without and with OTLP), one JSON line with each kind's throughput, CPU time per step and cost
//! against the pass off.

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
    // The slowest pass off is never faster than the best one.
    let spread = line["cpu_spread_off"]
        .as_f64()
        .expect("the spread of the passes off");
    assert!(spread >= 0.0, "{stdout}");
    let per_step = |kind: &str| line[format!("cpu_us_per_step_{kind}")].as_f64().unwrap();
    let cost = line["cost_metrics_and_otlp"].as_f64().expect("a cost");
    assert!(
        (cost - (per_step("metrics_and_otlp") / per_step("off") - 1.0)).abs() < 1e-9,
        "the cost is of CPU time per step: {stdout}"
    );
    // `radkit serve`'s subscriber without and with OTLP: switching OTLP on in a server that logs
    // is costed against that server, not against no subscriber at all.
    let serve = line["cost_otlp_in_serve"]
        .as_f64()
        .expect("OTLP's cost in serve");
    assert!(
        (serve - (per_step("serve_logs_and_otlp") / per_step("serve_logs") - 1.0)).abs() < 1e-9,
        "{stdout}"
    );
    let logs = line["cost_serve_logs"].as_f64().expect("the logs' cost");
    assert!(
        (logs - (per_step("serve_logs") / per_step("off") - 1.0)).abs() < 1e-9,
        "{stdout}"
    );
}
