//! The harness of a suite binary: every `#[test]` (the `radkit-test-macros` attribute) registers a
//! [`Case`] with `inventory`, a module that makes its tests at run time (a table of cases) registers
//! a [`Suite`], and [`main`] runs them all under libtest's command line through
//! [`services::run`](super::services::run): a test whose outside service is missing is reported
//! ignored. Tests are named by their module path below the crate root, as libtest names them
//! (`crash_matrix::sqlite::at_most_once::during_effect::step`), so `cargo test -p radkit-runtime
//! --test it call_order::` selects one former test file.
//!
//! Shared by both crates' suites (`tests/it` includes this file by path).

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;

pub use super::services::{Needs, Test};

/// One test, registered by `#[test]`.
pub struct Case {
    /// `module_path!()` where it was written (`it::call_order`).
    pub module: &'static str,
    /// `file!()` where it was written (`tests/it/a2a_errors.rs`).
    pub file: &'static str,
    /// Its function's name.
    pub name: &'static str,
    pub needs: Needs,
    /// `#[ignore]`: run only with `--ignored` (the child halves of the kill tests).
    pub ignored: bool,
    pub run: Run,
}

/// A boxed test future (not `Send`: it is driven by `block_on` on the test's own thread).
pub type Body = Pin<Box<dyn Future<Output = ()>>>;

/// How a [`Case`] runs: what `#[test]`, `#[tokio::test]` and
/// `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` declare.
pub enum Run {
    Sync(fn()),
    CurrentThread(fn() -> Body),
    MultiThread(fn() -> Body),
}

/// The tests one module makes at run time (`name` relative to `module`).
pub struct Suite {
    pub module: &'static str,
    pub tests: fn() -> Vec<Test>,
}

inventory::collect!(Case);
inventory::collect!(Suite);

/// What a test body returns: `()` passes, a `Result` passes on `Ok`.
pub trait Outcome {
    fn check(self);
}

impl Outcome for () {
    fn check(self) {}
}

impl<T, E: std::fmt::Debug> Outcome for Result<T, E> {
    fn check(self) {
        if let Err(e) = self {
            panic!("the test returned an error: {e:?}");
        }
    }
}

/// Every registered test, by name.
pub fn tests() -> Vec<Test> {
    let mut tests: Vec<Test> = inventory::iter::<Case>
        .into_iter()
        .map(|case| {
            let (name, needs) = (case.name, case.needs);
            let test = match case.run {
                Run::Sync(body) => super::services::sync(name, needs, body),
                Run::CurrentThread(body) => super::services::current_thread(name, needs, body),
                Run::MultiThread(body) => super::services::multi_thread(name, needs, body),
            };
            // Named by its module path below the crate root: `it::call_order` + `x` = `call_order::x`.
            test.within(case.module).ignored(case.ignored)
        })
        .collect();
    for suite in inventory::iter::<Suite> {
        tests.extend(
            (suite.tests)()
                .into_iter()
                .map(|test| test.within(suite.module)),
        );
    }
    tests
}

/// The suite's `main`.
pub fn main() -> ExitCode {
    super::services::run(tests())
}

/// How many tests the suite's sources under `dir` declare: lines that start with `#[test]` or
/// `#[test(`, and any attribute naming `tokio::test` (which this harness would never run: the suite
/// checks there is none).
pub fn written(dir: &std::path::Path) -> Written {
    let mut written = Written::default();
    let mut files = vec![dir.to_owned()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            let entries = std::fs::read_dir(&path).expect("read a test directory");
            files.extend(entries.map(|e| e.expect("a directory entry").path()));
            continue;
        }
        if path.extension().is_none_or(|ext| ext != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read a test file");
        for line in text.lines().map(str::trim_start) {
            if line == "#[test]" || line.starts_with("#[test(") {
                written.tests += 1;
            }
            if line.starts_with("#[") && line.contains("tokio::test") {
                written.foreign.push(path.display().to_string());
            }
        }
    }
    written
}

/// What [`written`] found.
#[derive(Debug, Default)]
pub struct Written {
    pub tests: usize,
    /// The files with a `#[tokio::test]`.
    pub foreign: Vec<String>,
}

/// How many tests `#[test]` registered in this binary from files under `dir` (a path from the
/// workspace root, as `file!()` gives it: `tests/it/`), leaving out the tests of sources the suite
/// includes from elsewhere (the demo's own unit tests).
pub fn registered(dir: &str) -> usize {
    inventory::iter::<Case>
        .into_iter()
        .filter(|case| lexical(case.file).starts_with(dir))
        .count()
}

/// `file` with its `..` steps taken: a file included by `#[path]` (the demo's, in radkit's suite) is
/// named through the `..` steps of its path attribute.
fn lexical(file: &str) -> std::path::PathBuf {
    let mut path = std::path::PathBuf::new();
    for part in std::path::Path::new(file).components() {
        match part {
            std::path::Component::ParentDir => {
                path.pop();
            }
            other => path.push(other),
        }
    }
    path
}
