//! `radkit bench a2a --binding …`: one JSON line for the 0.3 JSON-RPC floor and one for the binding,
//! measured in the same run, the binding's with its ratio to the floor; a binding that does not
//! speak the version asked for is refused.

use crate::support::common;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

fn bench(args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args([
        "bench",
        "a2a",
        "--requests",
        "20",
        "--concurrency",
        "2",
        "--rounds",
        "2",
        "--warmup",
        "10",
    ])
    .args(args);
    common::output_within(cmd, Duration::from_secs(120), "radkit bench a2a")
}

#[test]
fn each_binding_prints_its_line_after_the_floor_with_the_ratio_to_it() {
    for (args, name) in [
        (
            &["--binding", "jsonrpc", "--version", "1.0"][..],
            "jsonrpc/1.0",
        ),
        (&["--binding", "rest"][..], "rest/1.0"),
        (&["--binding", "grpc"][..], "grpc/1.0"),
    ] {
        let out = bench(args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{args:?}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{stdout}");
        assert_eq!(lines[0]["binding"], "jsonrpc/0.3", "{stdout}");
        assert_eq!(lines[0]["requests"], 20, "{stdout}");
        assert_eq!(lines[1]["binding"], name, "{stdout}");
        assert_eq!(lines[1]["requests"], 20, "{stdout}");
        // Each server took its warm-up first, untimed: the line counts the timed requests only,
        // one append each (the task's creation with its step's end) beside the commits they made.
        assert_eq!(lines[1]["warmup"], 10, "{stdout}");
        assert_eq!(lines[1]["appends"], 20, "{stdout}");
        let ratio = lines[1]["ratio_to_floor"].as_f64().expect("a ratio");
        let expected = lines[1]["requests_per_sec"].as_f64().unwrap()
            / lines[0]["requests_per_sec"].as_f64().unwrap();
        assert!((ratio - expected).abs() < 1e-9, "{stdout}");
        // Against the store's batched floor of the same run, as every timed bench line.
        let floor_ratio = lines[1]["floor_ratio"].as_f64().expect("floor_ratio");
        let floor = lines[1]["floor_batched_steps_per_sec"].as_f64().unwrap();
        assert!(
            (floor_ratio - lines[1]["requests_per_sec"].as_f64().unwrap() / floor).abs()
                < 1e-9 * floor_ratio.max(1.0),
            "{stdout}"
        );
        for key in ["p50_ms", "p99_ms"] {
            assert!(lines[1][key].as_f64().is_some(), "{key}: {stdout}");
        }
    }
    // The floor alone: one line.
    let out = bench(&[]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
}

#[test]
fn rest_over_0_3_is_refused_naming_the_version_it_speaks() {
    let out = bench(&["--binding", "rest", "--version", "0.3"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("speaks A2A 1.0 only"), "{stderr}");
    let out = bench(&["--binding", "grpc", "--version", "0.3"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("gRPC binding speaks A2A 1.0 only"),
        "{stderr}"
    );
}
