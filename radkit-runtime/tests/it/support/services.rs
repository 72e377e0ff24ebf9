//! The outside services some tests need (a PostgreSQL server, the official A2A Python SDK) and how
//! the suite runs its tests with them. Each test becomes a `libtest_mimic::Trial`; one whose service
//! cannot be reached is marked ignored, so cargo's summary counts it as ignored and never as passed,
//! and one line on stderr says why. A service named explicitly by its environment variable that does
//! not work fails its tests instead: someone asked for it. This module only looks at services; it never
//! starts, stops or changes one. Shared by both crates' suites (`tests/it` includes this file by path).
#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use libtest_mimic::{Arguments, Failed, Trial};

/// The server used when `RADKIT_TEST_POSTGRES_URL` is unset: the conventional local one.
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// How long the PostgreSQL probe waits for a connection and `SELECT 1`.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// What a test needs besides this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Nothing: the test always runs.
    Nothing,
    /// A PostgreSQL server: [`postgres_url`].
    Postgres,
    /// A Python with the official `a2a-sdk` 0.3 and `httpx`: [`python`].
    Python,
    /// A Python with the official `a2a-sdk` 1.x (A2A 1.0): [`python1`].
    Python1,
    /// [`Needs::Python`] that can also serve an agent (`a2a-sdk[http-server]` and uvicorn).
    PythonServer,
    /// [`Needs::Python1`] that can also serve an agent (`a2a-sdk[http-server]` and uvicorn).
    Python1Server,
    /// A `restate-server` binary: [`restate_server`].
    Restate,
    /// A Python with the official MCP SDK (`mcp`) and its time server (`mcp-server-time`):
    /// [`python_mcp`].
    PythonMcp,
    /// Chromium and its WebDriver server, ChromeDriver: [`chromium`], [`chromedriver`].
    Browser,
}

/// One test before the harness decides how to run it.
pub struct Test {
    name: String,
    needs: Needs,
    /// Run only when asked for (`--ignored`), whatever the services.
    ignored: bool,
    body: Box<dyn FnOnce() + Send>,
}

impl Test {
    /// This test, run only when asked for (`--ignored`) if `ignored`.
    pub fn ignored(mut self, ignored: bool) -> Test {
        self.ignored = ignored;
        self
    }

    /// This test named below `module` (a `module_path!()`, the crate root left out).
    pub fn within(mut self, module: &str) -> Test {
        if let Some((_, below)) = module.split_once("::") {
            self.name = format!("{below}::{}", self.name);
        }
        self
    }
}

/// A synchronous test (what `#[test]` declares).
pub fn sync(name: impl Into<String>, needs: Needs, body: fn()) -> Test {
    Test {
        name: name.into(),
        needs,
        ignored: false,
        body: Box::new(body),
    }
}

/// An async test on a current-thread runtime (what `#[tokio::test]` declares).
pub fn current_thread<F>(name: impl Into<String>, needs: Needs, body: fn() -> F) -> Test
where
    F: Future<Output = ()> + 'static,
{
    let run = move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("build a current-thread runtime");
        runtime.block_on(body());
    };
    Test {
        name: name.into(),
        needs,
        ignored: false,
        body: Box::new(run),
    }
}

/// An async test on a two-worker runtime (what
/// `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` declares).
pub fn multi_thread<F>(name: impl Into<String>, needs: Needs, body: fn() -> F) -> Test
where
    F: Future<Output = ()> + 'static,
{
    let run = move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("build a multi-thread runtime");
        runtime.block_on(body());
    };
    Test {
        name: name.into(),
        needs,
        ignored: false,
        body: Box::new(run),
    }
}

/// A test that runs this long is named on stderr with its time.
const SLOW: std::time::Duration = std::time::Duration::from_secs(30);

/// Run `tests` under the command line's arguments (filters, `--list`, `--test-threads`, `--ignored`,
/// `--include-ignored`, …) the way libtest does, and return the exit code. A service is probed only
/// when a selected test needs it.
pub fn run(mut tests: Vec<Test>) -> ExitCode {
    let mut args = Arguments::from_args();
    if args.test_threads.is_none() {
        // libtest's own override, which libtest-mimic does not read.
        args.test_threads = std::env::var("RUST_TEST_THREADS")
            .ok()
            .and_then(|n| n.parse().ok());
    }
    tests.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(twice) = tests.windows(2).find(|pair| pair[0].name == pair[1].name) {
        eprintln!("error: two tests are named `{}`", twice[0].name);
        return ExitCode::FAILURE;
    }
    for needs in [
        Needs::Postgres,
        Needs::Python,
        Needs::Python1,
        Needs::PythonServer,
        Needs::Python1Server,
        Needs::Restate,
        Needs::PythonMcp,
        Needs::Browser,
    ] {
        let selected = tests.iter().any(|test| {
            // Flagged ignored so that `--ignored` keeps it: only the name decides here.
            let probe = Trial::test(test.name.clone(), || Ok(())).with_ignored_flag(true);
            test.needs == needs && !args.is_filtered_out(&probe)
        });
        if selected && (!args.list || args.ignored) {
            availability(needs);
        }
    }
    let trials = tests.into_iter().map(trial).collect();
    libtest_mimic::run(&args, trials).exit_code()
}

/// The trial for `test`: ignored when its service is missing; when run anyway (`--ignored`), or when
/// the service was asked for and does not work, it fails saying why.
fn trial(test: Test) -> Trial {
    let Test {
        name,
        needs,
        ignored,
        body,
    } = test;
    let missing = matches!(probed(needs), Some(Availability::Missing(_)));
    let named = name.clone();
    Trial::test(name, move || {
        if let Some(Availability::Missing(why) | Availability::Broken(why)) = availability(needs) {
            return Err(Failed::from(why));
        }
        let started = std::time::Instant::now();
        body();
        let took = started.elapsed();
        if took >= SLOW {
            // Where a long suite's time goes, in CI's log (libtest-mimic times nothing).
            eprintln!("slow test: {named} took {:.0} s", took.as_secs_f64());
        }
        Ok(())
    })
    .with_ignored_flag(ignored || missing)
}

/// The PostgreSQL server the tests use: `RADKIT_TEST_POSTGRES_URL`, else [`DEFAULT_POSTGRES_URL`].
/// Tests declared [`Needs::Postgres`] run only after it answered.
pub fn postgres_url() -> String {
    explicit("RADKIT_TEST_POSTGRES_URL").unwrap_or_else(|| DEFAULT_POSTGRES_URL.to_owned())
}

/// The Python that runs the official A2A SDK: `RADKIT_PYTHON`, else the workspace's
/// `.venv/bin/python` (where `.ci/run` installs it). Tests declared [`Needs::Python`] run only after
/// it imported the SDK.
pub fn python() -> String {
    explicit("RADKIT_PYTHON").unwrap_or_else(|| venv_python(".venv").display().to_string())
}

/// The Python that runs the official A2A SDK 1.x: `RADKIT_PYTHON1`, else the workspace's
/// `.venv1/bin/python` (where `.ci/run` installs it). Tests declared [`Needs::Python1`] run only
/// after it imported the SDK's 1.0 types.
pub fn python1() -> String {
    explicit("RADKIT_PYTHON1").unwrap_or_else(|| venv_python(".venv1").display().to_string())
}

/// The Python that runs the official MCP SDK's time server: `RADKIT_PYTHON_MCP`, else the
/// workspace's `.venv-mcp/bin/python` (where `.ci/run` installs `mcp` and `mcp-server-time`). Tests
/// declared [`Needs::PythonMcp`] run only after it imported both.
pub fn python_mcp() -> String {
    explicit("RADKIT_PYTHON_MCP").unwrap_or_else(|| venv_python(".venv-mcp").display().to_string())
}

fn probe_python_mcp() -> Availability {
    let python = python_mcp();
    let asked = explicit("RADKIT_PYTHON_MCP").is_some();
    if !asked && !Path::new(&python).exists() {
        return Availability::Missing(format!(
            "the official MCP Python SDK is not installed: RADKIT_PYTHON_MCP is not set and {python} \
             does not exist (`bash .ci/run` installs it there)"
        ));
    }
    let error = match Command::new(&python)
        .args(["-c", "import mcp, mcp_server_time"])
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => return Availability::Ready,
        Ok(out) => String::from_utf8_lossy(&out.stderr)
            .lines()
            .last()
            .unwrap_or("it exited with an error")
            .to_owned(),
        Err(e) => format!("it cannot be started: {e}"),
    };
    if asked {
        Availability::Broken(format!(
            "RADKIT_PYTHON_MCP is set to {python}, but it cannot import `mcp` and `mcp_server_time` ({error})"
        ))
    } else {
        Availability::Missing(format!(
            "{python} cannot import `mcp` and `mcp_server_time` ({error}); `bash .ci/run` installs \
             them, or set RADKIT_PYTHON_MCP"
        ))
    }
}

/// The Restate server binary: `RADKIT_RESTATE_SERVER`, else the one `.ci/run` installs from the npm
/// registry under the workspace's `.ci/restate`. Tests declared [`Needs::Restate`] run only after
/// it printed its version.
pub fn restate_server() -> String {
    explicit("RADKIT_RESTATE_SERVER").unwrap_or_else(|| {
        workspace_root()
            .join(
                ".ci/restate/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server",
            )
            .display()
            .to_string()
    })
}

fn probe_restate() -> Availability {
    let server = restate_server();
    let asked = explicit("RADKIT_RESTATE_SERVER").is_some();
    if !asked && !Path::new(&server).exists() {
        return Availability::Missing(format!(
            "restate-server is not installed: RADKIT_RESTATE_SERVER is not set and {server} does \
             not exist (`bash .ci/run` installs it there)"
        ));
    }
    let error = match Command::new(&server)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => return Availability::Ready,
        Ok(out) => format!("it exited with {}", out.status),
        Err(e) => format!("it cannot be started: {e}"),
    };
    if asked {
        Availability::Broken(format!(
            "RADKIT_RESTATE_SERVER is set to {server}, but {error}"
        ))
    } else {
        Availability::Missing(format!("{server} does not run ({error})"))
    }
}

/// The headless browser of the console's tests: `RADKIT_CHROMIUM`, else Debian's `/usr/bin/chromium`
/// (`.ci/run` installs the `chromium` package).
pub fn chromium() -> String {
    explicit("RADKIT_CHROMIUM").unwrap_or_else(|| "/usr/bin/chromium".to_owned())
}

/// Its WebDriver server: `RADKIT_CHROMEDRIVER`, else Debian's `/usr/bin/chromedriver` (the
/// `chromium-driver` package).
pub fn chromedriver() -> String {
    explicit("RADKIT_CHROMEDRIVER").unwrap_or_else(|| "/usr/bin/chromedriver".to_owned())
}

fn probe_browser() -> Availability {
    let asked = explicit("RADKIT_CHROMIUM").is_some() || explicit("RADKIT_CHROMEDRIVER").is_some();
    for (program, what) in [(chromium(), "chromium"), (chromedriver(), "chromedriver")] {
        if !asked && !Path::new(&program).exists() {
            return Availability::Missing(format!(
                "{what} is not installed at {program} (`bash .ci/run` installs Debian's `chromium` \
                 and `chromium-driver`; or set RADKIT_CHROMIUM and RADKIT_CHROMEDRIVER)"
            ));
        }
        let error = match Command::new(&program)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
        {
            Ok(out) if out.status.success() => continue,
            Ok(out) => format!("it exited with {}", out.status),
            Err(e) => format!("it cannot be started: {e}"),
        };
        return match asked {
            true => Availability::Broken(format!("{what} at {program} does not run ({error})")),
            false => Availability::Missing(format!("{what} at {program} does not run ({error})")),
        };
    }
    Availability::Ready
}

/// Whether a service can be used, found once per test binary.
enum Availability {
    /// It answered.
    Ready,
    /// Not asked for and not found in the conventional place: its tests are ignored.
    Missing(String),
    /// Asked for by its environment variable but not working: its tests fail.
    Broken(String),
}

static POSTGRES: OnceLock<Availability> = OnceLock::new();
static PYTHON: OnceLock<Availability> = OnceLock::new();
static PYTHON1: OnceLock<Availability> = OnceLock::new();
static PYTHON_SERVER: OnceLock<Availability> = OnceLock::new();
static BROWSER: OnceLock<Availability> = OnceLock::new();
static PYTHON1_SERVER: OnceLock<Availability> = OnceLock::new();
static RESTATE: OnceLock<Availability> = OnceLock::new();
static PYTHON_MCP: OnceLock<Availability> = OnceLock::new();

fn cell(needs: Needs) -> Option<&'static OnceLock<Availability>> {
    match needs {
        Needs::Nothing => None,
        Needs::Postgres => Some(&POSTGRES),
        Needs::Python => Some(&PYTHON),
        Needs::Python1 => Some(&PYTHON1),
        Needs::PythonServer => Some(&PYTHON_SERVER),
        Needs::Python1Server => Some(&PYTHON1_SERVER),
        Needs::Restate => Some(&RESTATE),
        Needs::PythonMcp => Some(&PYTHON_MCP),
        Needs::Browser => Some(&BROWSER),
    }
}

/// What is known about the service `needs`, without probing it.
fn probed(needs: Needs) -> Option<&'static Availability> {
    cell(needs)?.get()
}

/// Probe the service `needs` (once) and say on stderr why it cannot be used.
fn availability(needs: Needs) -> Option<&'static Availability> {
    let cell = cell(needs)?;
    Some(cell.get_or_init(|| {
        let found = match needs {
            Needs::Nothing => Availability::Ready,
            Needs::Postgres => probe_postgres(),
            Needs::Python => probe_python(Sdk::V0_3),
            Needs::Python1 => probe_python(Sdk::V1),
            Needs::PythonServer => probe_python(Sdk::V0_3Server),
            Needs::Python1Server => probe_python(Sdk::V1Server),
            Needs::Restate => probe_restate(),
            Needs::PythonMcp => probe_python_mcp(),
            Needs::Browser => probe_browser(),
        };
        match &found {
            Availability::Ready => {}
            Availability::Missing(why) => {
                eprintln!("\nnote: {why}; the tests that need it are ignored\n")
            }
            Availability::Broken(why) => eprintln!("\nerror: {why}; the tests that need it fail\n"),
        }
        found
    }))
}

/// A non-empty environment variable.
fn explicit(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|value| !value.is_empty())
}

fn probe_postgres() -> Availability {
    let url = postgres_url();
    let Err(error) = connect_and_select(&url) else {
        return Availability::Ready;
    };
    let shown = redacted(&url);
    if explicit("RADKIT_TEST_POSTGRES_URL").is_some() {
        Availability::Broken(format!(
            "RADKIT_TEST_POSTGRES_URL is set to {shown}, but PostgreSQL does not answer there ({error})"
        ))
    } else {
        Availability::Missing(format!(
            "PostgreSQL does not answer at {shown} ({error}); start it or set \
             RADKIT_TEST_POSTGRES_URL (`bash .ci/run` does both)"
        ))
    }
}

/// Connect and run `SELECT 1` within [`PROBE_TIMEOUT`].
fn connect_and_select(url: &str) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot build a runtime to probe it: {e}"))?;
    runtime.block_on(async {
        let probe = async {
            let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
            let connection = tokio::spawn(connection);
            client.simple_query("SELECT 1").await?;
            drop(client);
            let _ = connection.await;
            Ok::<(), tokio_postgres::Error>(())
        };
        match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(with_causes(&e)),
            Err(_) => Err(format!("no answer within {} s", PROBE_TIMEOUT.as_secs())),
        }
    })
}

/// `error` and its causes, `: `-separated (tokio-postgres keeps the useful part in the causes).
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let more = e.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = e.source();
    }
    text
}

/// `url` with its password (URL or `key=value` form) replaced by `***`, fit to print.
fn redacted(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let authority_end = rest.find('/').unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@') {
            if let Some((user, _password)) = rest[..at].split_once(':') {
                return format!("{scheme}://{user}:***{}", &rest[at..]);
            }
        }
        return url.to_owned();
    }
    url.split_whitespace()
        .map(|pair| match pair.split_once('=') {
            Some(("password", _)) => "password=***".to_owned(),
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Which official SDK a Python must import.
#[derive(Clone, Copy)]
enum Sdk {
    V0_3,
    V1,
    /// 0.3 with what serving an agent takes.
    V0_3Server,
    /// 1.x with what serving an agent takes.
    V1Server,
}

fn probe_python(sdk: Sdk) -> Availability {
    let (variable, python, import) = match sdk {
        Sdk::V0_3 => ("RADKIT_PYTHON", python(), "import a2a.client, httpx"),
        Sdk::V1 => (
            "RADKIT_PYTHON1",
            python1(),
            "import a2a.client, httpx, grpc; from a2a.types import SendMessageRequest, ListTasksRequest; from a2a.client.transports.grpc import GrpcTransport",
        ),
        Sdk::V0_3Server => (
            "RADKIT_PYTHON",
            python(),
            "import uvicorn; from a2a.server.apps import A2AStarletteApplication",
        ),
        Sdk::V1Server => (
            "RADKIT_PYTHON1",
            python1(),
            "import uvicorn; from a2a.server.routes import create_jsonrpc_routes; from a2a.types import AgentInterface",
        ),
    };
    let asked = explicit(variable).is_some();
    if !asked && !Path::new(&python).exists() {
        return Availability::Missing(format!(
            "the official A2A Python SDK is not installed: {variable} is not set and {python} does \
             not exist (`bash .ci/run` installs it there)"
        ));
    }
    let imported = Command::new(&python)
        .args(["-c", import])
        .stdin(Stdio::null())
        .output();
    let error = match imported {
        Ok(out) if out.status.success() => return Availability::Ready,
        Ok(out) => String::from_utf8_lossy(&out.stderr)
            .lines()
            .last()
            .unwrap_or("it exited with an error")
            .to_owned(),
        Err(e) => format!("it cannot be started: {e}"),
    };
    if asked {
        Availability::Broken(format!(
            "{variable} is set to {python}, but it cannot import the A2A SDK ({error})"
        ))
    } else {
        Availability::Missing(format!(
            "{python} cannot import the official A2A Python SDK ({error}); `bash .ci/run` installs \
             it, or set {variable}"
        ))
    }
}

/// `<venv>/bin/python` in the workspace root.
fn venv_python(venv: &str) -> PathBuf {
    workspace_root().join(venv).join("bin").join("python")
}

/// The workspace root (the directory holding `Cargo.lock`).
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").exists())
        .unwrap_or(manifest)
        .to_path_buf()
}
