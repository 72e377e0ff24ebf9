//! Compile-time errors of the macros, pinned to this compiler's output under `cargo test --workspace`
//! (`TRYBUILD=overwrite cargo test --workspace --test compiletest` to
//! regenerate after reviewing), and the forms that must compile.

#[rustversion::attr(
    not(stable(1.95)),
    ignore = "ui .stderr files are pinned to rustc 1.95"
)]
#[cfg_attr(miri, ignore)]
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/**/*.rs");
    t.pass("tests/pass/*.rs");
}
