//! `--agent NAME=URL` and `--agent-token NAME=TOKEN` of `radkit serve` and `radkit worker`: a
//! mistake is a clap error (status 2, the option and the fix named) before any store is opened, and
//! good values start the server. That the agents are applied — calls reach them, with their tokens —
//! is `tests/it/delegate_kill9.rs`'s (the delegate example, served through the same options).

use crate::support::common;

use std::process::{Command, Output};
use std::time::Duration;

fn radkit(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args(args).env_remove("RADKIT_TOKENS");
    common::output_within(cmd, Duration::from_secs(60), "radkit")
}

/// The run failed as a usage error whose message says `says`.
fn refused(args: &[&str], says: &[&str]) {
    let out = radkit(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    for s in says {
        assert!(stderr.contains(s), "{args:?} should say {s:?}: {stderr}");
    }
}

#[test]
fn an_agent_without_a_url_is_a_usage_error() {
    refused(
        &["serve", "--agent", "planner"],
        &["--agent <NAME=URL>", "expected NAME=URL", "planner=http://"],
    );
    refused(
        &["serve", "--agent", "planner="],
        &["no URL after `planner=`"],
    );
}

#[test]
fn an_agent_url_that_is_not_http_is_a_usage_error() {
    refused(
        &["serve", "--agent", "planner=localhost:9101"],
        &["`localhost:9101` is not an http(s) URL"],
    );
    refused(
        &["serve", "--agent", "planner=http//127.0.0.1:9101"],
        &["is not a URL"],
    );
    refused(
        &["serve", "--agent", "plan ner=http://127.0.0.1:9101"],
        &["is not an agent name"],
    );
}

#[test]
fn a_token_for_an_undeclared_agent_is_a_usage_error() {
    refused(
        &[
            "serve",
            "--agent",
            "planner=http://127.0.0.1:9101",
            "--agent-token",
            "ghost=s3cret",
        ],
        &[
            "--agent-token names the agent `ghost`",
            "the declared agents are planner",
            "--agent ghost=URL",
            "Usage: radkit serve",
        ],
    );
    refused(
        &["serve", "--agent-token", "planner"],
        &["expected NAME=TOKEN"],
    );
}

#[test]
fn an_agent_declared_twice_is_a_usage_error() {
    refused(
        &[
            "serve",
            "--agent",
            "planner=http://127.0.0.1:9101",
            "--agent",
            "planner=http://127.0.0.1:9102",
        ],
        &["the agent `planner` is declared twice"],
    );
}

#[test]
fn worker_checks_its_agents_before_it_connects_to_the_store() {
    // Nothing listens at this Postgres URL: the usage error comes first.
    refused(
        &[
            "worker",
            "--store",
            "postgres://nobody@127.0.0.1:1/none",
            "--agent",
            "planner",
        ],
        &["expected NAME=URL"],
    );
    refused(
        &[
            "worker",
            "--store",
            "postgres://nobody@127.0.0.1:1/none",
            "--agent-token",
            "ghost=t",
        ],
        &["`ghost`", "Usage: radkit worker"],
    );
}

#[test]
fn serve_starts_with_agents_and_ignores_tokens_in_the_environment_for_undeclared_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
    cmd.args([
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--data-dir",
        dir.path().to_str().expect("utf-8 path"),
        "--agent",
        "planner=http://127.0.0.1:9/",
        "--agent",
        "web-search=https://agents.example/.well-known/agent-card.json",
        "--agent-token",
        "planner=s3cret",
    ])
    // Another program's agent: not this one's business.
    .env("RADKIT_AGENT_TOKEN_GHOST", "unused")
    .env("RADKIT_AGENT_TOKEN_WEB_SEARCH", "from-env");
    let server = common::serve_command(cmd);
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
}
