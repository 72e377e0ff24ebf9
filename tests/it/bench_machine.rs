//! `radkit bench machine`: the machine's own cost per step beside the durable figure of the same
//! task, measured in the same run. No timing is asserted; what the machine did is: one append per
//! step (output commit: a step's command is durable before its effect), and the `radkit` binary
//! counts allocations (its global allocator), so the line carries allocations per step.

use crate::support::common;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

#[test]
fn bench_machine_prints_its_cost_per_step_beside_the_durable_figure() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args(["bench", "machine", "--steps", "200", "--rounds", "1"]);
    let out = common::output_within(cmd, Duration::from_secs(120), "radkit bench machine");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(line["workload"], "machine", "{stdout}");
    assert_eq!(line["steps"], 200, "{stdout}");
    let appends = line["appends_per_step"].as_f64().unwrap();
    assert!((1.0..1.1).contains(&appends), "{stdout}");
    assert!(line["allocs_per_step"].as_f64().unwrap() > 0.0, "{stdout}");
    // Each step journals its visit, command, receipt and transition.
    assert!(
        line["journal_bytes_per_step"].as_f64().unwrap() > 100.0,
        "{stdout}"
    );
    assert!(line["cpu_us_per_step"].as_f64().unwrap() > 0.0, "{stdout}");
    let machine = line["us_per_step"].as_f64().unwrap();
    let durable = line["durable_us_per_step"].as_f64().unwrap();
    let ratio = line["durable_over_machine"].as_f64().unwrap();
    assert!((ratio - durable / machine).abs() < 1e-6 * ratio, "{stdout}");
}
