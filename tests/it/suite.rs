//! The suite runs every test written in it: a test the harness never registered (a libtest or tokio
//! `#[test]`, which this `harness = false` binary compiles out, or one hidden from the attribute)
//! would pass silently by never running.

use std::path::Path;

use crate::support::harness;

#[test]
fn every_test_written_in_the_suite_is_registered_with_its_harness() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let from_root = "tests/it/";
    let written = harness::written(&dir);
    assert!(
        written.foreign.is_empty(),
        "`#[tokio::test]` never runs in this suite; write `#[test]` (`#[test(multi_thread)]`) in {:?}",
        written.foreign
    );
    assert!(written.tests > 100, "the suite's sources were not found");
    assert_eq!(
        harness::registered(from_root),
        written.tests,
        "as many tests registered as written under {}",
        dir.display()
    );
}
