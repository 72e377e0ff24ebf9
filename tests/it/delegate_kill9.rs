//! The delegate example (`examples/delegate.rs`) with real processes killed by SIGKILL: a
//! coordinator and the specialists it calls, two processes on loopback, each on its own SQLite file,
//! with a TCP proxy between them that can hold bytes. The coordinator is killed before the
//! specialists answered its request, after they made the task but before it heard so, and while it
//! waits for them; the specialists are killed while they work. Each time the coordinator's task
//! completes with both answers, and each specialist holds exactly one task for it.
//!
//! The processes are this test binary run again (the ignored entry point
//! `child_process_serves_a_delegate_role`), which serves a role through the example's own
//! `delegate::run` — the radkit command line with `--agent` and `--agent-token`.
#![cfg(unix)]

use crate::support::common;
use crate::support::hold_proxy;

#[allow(dead_code)]
#[path = "../../examples/delegate.rs"]
pub(crate) mod delegate;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use radkit::client::{A2aClient, ClientAuth, Reply};
use radkit::journal::Entry;
use radkit::model::{Message, Task, TaskState};
use radkit::store::{Durability, SqliteStore, Store};
use serde_json::{json, Value};

use common::{within, PATIENCE};
use hold_proxy::{Hold, Proxy};

/// A question both specialists answer yes to (it names a safeguard): the coordinator completes
/// without asking.
const AGREED: &str = "Should we ship the tested release?";
/// A question they disagree on: the coordinator asks whom to follow.
const DISPUTED: &str = "Should we ship on Friday?";

const ARGS_VAR: &str = "RADKIT_DELEGATE_ARGS";

/// The example's specialists (the pessimist thinking 2 s) served on loopback by a long-lived
/// engine of their own, for the tests that run the coordinator on another host (a serverless pass,
/// Restate): their URL, and the engine (to count the tasks it holds).
pub(crate) async fn serve_specialists() -> (String, radkit::engine::Engine) {
    serve_specialists_thinking(Duration::from_secs(2)).await
}

/// [`serve_specialists`] with the pessimist thinking for `think`.
pub(crate) async fn serve_specialists_thinking(
    think: Duration,
) -> (String, radkit::engine::Engine) {
    let engine = radkit::engine::Engine::builder(radkit::store::MemoryStore::new())
        .without_registered_skills()
        .skill(delegate::specialists::Optimist)
        .skill(delegate::specialists::Pessimist { think })
        .start()
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let config = radkit::server::ServerConfig::new(url.clone());
    tokio::spawn(radkit::server::serve(listener, engine.clone(), config));
    (url, engine)
}

#[test]
#[ignore = "entry point of the processes the tests below start and kill"]
fn child_process_serves_a_delegate_role() {
    let args: Vec<String> = match std::env::var(ARGS_VAR) {
        Ok(json) => serde_json::from_str(&json).expect("the arguments as a JSON list"),
        Err(_) => return, // run by hand with --ignored: nothing to serve
    };
    let code = delegate::run(args.into_iter().map(Into::into).collect());
    // The server returns only on a mistake in the arguments; SIGKILL is the usual end.
    panic!("delegate exited: {code:?}");
}

/// One role's process, killed with SIGKILL when dropped; its log (stderr) is printed when the test
/// fails.
struct Role {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Role {
    /// Start `delegate <role> --addr 127.0.0.1:0 --data-dir <dir>/<role> <args>` and wait for its
    /// banner.
    fn start(role: &str, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Role {
        let data = dir.join(role);
        let mut argv = vec![
            "delegate".to_owned(),
            role.to_owned(),
            "--addr".to_owned(),
            "127.0.0.1:0".to_owned(),
            "--data-dir".to_owned(),
            data.to_str().expect("utf-8 path").to_owned(),
        ];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        std::fs::create_dir_all(&data).unwrap();
        let log = data.join(format!("{role}-{}.log", unique_suffix()));
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "delegate_kill9::child_process_serves_a_delegate_role",
            "--ignored",
            "--nocapture",
        ])
        .env(ARGS_VAR, serde_json::to_string(&argv).unwrap())
        .env("RUST_LOG", "info")
        .env_remove("RADKIT_TOKENS")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start the child process");
        let stdout = child.stdout.take().expect("stdout");
        // The banner is read on a thread, so a process that never prints it fails the test; the
        // thread then drains the rest (libtest's own lines).
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains(" serving ") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(line);
                    }
                }
            }
        });
        let mut role = Role {
            child,
            url: String::new(),
            log,
        };
        let banner = rx
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("{} printed no banner within {PATIENCE:?}", role.name()));
        role.url = banner
            .split(" on ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .expect("the URL in the banner")
            .trim_end_matches('/')
            .to_owned();
        role
    }

    fn name(&self) -> String {
        self.log
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    fn addr(&self) -> SocketAddr {
        self.url
            .trim_start_matches("http://")
            .parse()
            .expect("a socket address")
    }

    /// SIGKILL, and wait for the process to be gone.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            eprintln!("---- {} ----\n{log}", self.log.display());
        }
    }
}

fn unique_suffix() -> String {
    format!(
        "{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
            % 1_000_000_007
    )
}

/// One of the specialists' tasks: its id, its state (`TASK_STATE_…`) and its status message.
type RemoteTask = (String, String, String);

/// The specialists' tasks, read from them directly (not through the proxy) with A2A 1.0
/// `ListTasks`.
async fn remote_tasks(specialists: &str, token: Option<&str>) -> Vec<RemoteTask> {
    let mut request = reqwest::Client::new()
        .post(format!("{specialists}/"))
        .header("A2A-Version", "1.0")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {} }));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let answer: Value = within(PATIENCE, "ListTasks", async {
        request.send().await.unwrap().json().await.unwrap()
    })
    .await;
    answer["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("no tasks in {answer}"))
        .iter()
        .map(|t| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                text(&t["id"]),
                text(&t["status"]["state"]),
                text(&t["status"]["message"]["parts"][0]["text"]),
            )
        })
        .collect()
}

async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    within(PATIENCE, what, async {
        loop {
            if let Some(value) = check().await {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

async fn client(url: &str) -> A2aClient {
    A2aClient::connect(url, ClientAuth::None)
        .await
        .expect("the coordinator's card")
}

/// Ask the coordinator `question`; its task id.
async fn ask(coordinator: &str, question: &str) -> String {
    match client(coordinator)
        .await
        .send(Message::user_text(question), true)
        .await
        .expect("the coordinator takes the question")
    {
        Reply::Task(task) => task.id,
        other => panic!("a task, not {other:?}"),
    }
}

/// Follow the coordinator's task to its end, answering `pessimist` when it asks whom to follow.
async fn finish(coordinator: &str, id: &str) -> Task {
    let client = client(coordinator).await;
    let mut answered = false;
    eventually(&format!("the coordinator's task {id} to end"), async || {
        let task = client.get(id).await.ok()?;
        match task.status.state {
            TaskState::InputRequired if !answered => {
                let mut choice = Message::user_text("pessimist");
                choice.task_id = Some(id.to_owned());
                client.send(choice, true).await.expect("the choice");
                answered = true;
                None
            }
            state if state.is_terminal() => Some(task),
            _ => None,
        }
    })
    .await
}

/// The decision artifact's text.
fn decision(task: &Task) -> String {
    let artifact = task
        .artifacts
        .iter()
        .find(|a| a.name.as_deref() == Some("decision.md"))
        .unwrap_or_else(|| panic!("no decision.md in {task:?}"));
    artifact.parts[0].as_text().unwrap_or_default().to_owned()
}

/// The promises every test keeps: the coordinator's task completed with both answers, the
/// specialists hold exactly one task for each call — the ones the answers came from — and the
/// coordinator's journal bound each call to its task once (read after `coordinator` is killed).
async fn assert_one_remote_task_each(
    task: &Task,
    coordinator: Role,
    specialists: &str,
    token: Option<&str>,
) {
    let text = decision(task);
    assert_eq!(task.status.state, TaskState::Completed, "{text}");
    let remote = remote_tasks(specialists, token).await;
    assert_eq!(
        remote.len(),
        2,
        "one remote task per specialist: {remote:?}\n{text}"
    );
    for (id, state, _) in &remote {
        assert_eq!(state, "TASK_STATE_COMPLETED", "{remote:?}");
        assert!(text.contains(&format!("(task {id})")), "{id} in:\n{text}");
    }
    for specialist in ["optimist (task", "pessimist (task"] {
        assert!(text.contains(specialist), "{specialist} in:\n{text}");
    }
    let sqlite = coordinator
        .log
        .parent()
        .expect("the data dir")
        .join("radkit.sqlite");
    coordinator.kill();
    let store = SqliteStore::open(&sqlite, Durability::Full).expect("the coordinator's store");
    let mut bound: Vec<String> = store
        .journal(&task.id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| match r.entry {
            Entry::CallStarted { task_id, .. } => Some(task_id),
            _ => None,
        })
        .collect();
    let mut remote: Vec<String> = remote.into_iter().map(|(id, _, _)| id).collect();
    bound.sort();
    remote.sort();
    assert_eq!(bound, remote, "each call journaled its remote task once");
}

/// Each call's request was sent exactly twice — before and after the kill — with the same
/// `messageId`.
fn assert_sent_again_with_the_same_message_ids(proxy: &Proxy) {
    let mut ids = proxy.sent_message_ids();
    ids.sort();
    assert_eq!(ids.len(), 4, "{ids:?}");
    assert!(
        ids[0] == ids[1] && ids[2] == ids[3] && ids[1] != ids[2],
        "{ids:?}"
    );
}

/// A proxy and the specialists behind it, the pessimist thinking `think` seconds.
async fn specialists(dir: &Path, think: &str, extra: &[&str]) -> (Proxy, Role) {
    let proxy = Proxy::start().await;
    let mut args = vec!["--think", think, "--public-url"];
    let public = format!("{}/", proxy.url);
    args.push(&public);
    args.extend_from_slice(extra);
    let role = Role::start("specialists", dir, &args, &[]);
    proxy.to(role.addr());
    (proxy, role)
}

fn coordinator(dir: &Path, proxy: &Proxy) -> Role {
    let optimist = format!("optimist={}", proxy.url);
    let pessimist = format!("pessimist={}", proxy.url);
    Role::start(
        "coordinator",
        dir,
        &["--agent", &optimist, "--agent", &pessimist],
        &[],
    )
}

/// The pessimist's task once the coordinator follows it while it still works: the call is
/// journaled and the coordinator waits.
async fn waiting_on_the_pessimist(proxy: &Proxy, specialists: &str) -> String {
    eventually(
        "the coordinator to follow the pessimist's working task",
        async || {
            // The pessimist's task says it is thinking while it sleeps.
            let remote = remote_tasks(specialists, None).await;
            let (id, _, _) = remote.into_iter().find(|(_, state, status)| {
                state == "TASK_STATE_WORKING" && status.starts_with("Thinking it over")
            })?;
            proxy.subscribed_to(&id).then_some(id)
        },
    )
    .await
}

#[test(multi_thread)]
async fn the_coordinator_calls_both_specialists_with_their_tokens_and_completes_when_they_agree() {
    let dir = tempfile::tempdir().unwrap();
    let (proxy, specialists) = specialists(dir.path(), "0.5", &["--token", "s3cret"]).await;
    let optimist = format!("optimist={}", proxy.url);
    let pessimist = format!("pessimist={}", proxy.url);
    // One token from its option, the other from the environment.
    let coordinator = Role::start(
        "coordinator",
        dir.path(),
        &[
            "--agent",
            &optimist,
            "--agent",
            &pessimist,
            "--agent-token",
            "optimist=s3cret",
        ],
        &[("RADKIT_AGENT_TOKEN_PESSIMIST", "s3cret")],
    );
    let id = ask(&coordinator.url, AGREED).await;
    let task = finish(&coordinator.url, &id).await;
    let text = decision(&task);
    assert!(
        text.contains("Decision: yes — both specialists agree"),
        "{text}"
    );
    assert_one_remote_task_each(&task, coordinator, &specialists.url, Some("s3cret")).await;
}

#[test(multi_thread)]
async fn caller_killed_before_the_remote_answered_sends_again_and_makes_one_task_each() {
    let dir = tempfile::tempdir().unwrap();
    let (proxy, specialists) = specialists(dir.path(), "1", &[]).await;
    proxy.hold(Hold::Requests);
    let first = coordinator(dir.path(), &proxy);
    let id = ask(&first.url, DISPUTED).await;
    eventually("both requests held", async || {
        (proxy.held() >= 2).then_some(())
    })
    .await;
    assert!(
        remote_tasks(&specialists.url, None).await.is_empty(),
        "the specialists never saw the requests"
    );
    first.kill();
    proxy.hold(Hold::Nothing);
    let second = coordinator(dir.path(), &proxy);
    let task = finish(&second.url, &id).await;
    assert!(decision(&task).contains("Decision: no — you follow the pessimist"));
    assert_sent_again_with_the_same_message_ids(&proxy);
    assert_one_remote_task_each(&task, second, &specialists.url, None).await;
}

#[test(multi_thread)]
async fn caller_killed_after_the_remote_created_the_task_resumes_it_and_makes_no_second_one() {
    let dir = tempfile::tempdir().unwrap();
    let (proxy, specialists) = specialists(dir.path(), "1", &[]).await;
    proxy.hold(Hold::Responses);
    let first = coordinator(dir.path(), &proxy);
    let id = ask(&first.url, AGREED).await;
    eventually("both responses held", async || {
        (proxy.held() >= 2).then_some(())
    })
    .await;
    assert_eq!(
        remote_tasks(&specialists.url, None).await.len(),
        2,
        "the specialists made their tasks; the coordinator never heard"
    );
    first.kill();
    proxy.hold(Hold::Nothing);
    let second = coordinator(dir.path(), &proxy);
    let task = finish(&second.url, &id).await;
    // The same messageIds found the same tasks.
    assert_sent_again_with_the_same_message_ids(&proxy);
    assert_one_remote_task_each(&task, second, &specialists.url, None).await;
}

#[test(multi_thread)]
async fn caller_killed_while_the_specialists_work_resumes_the_same_remote_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let (proxy, specialists) = specialists(dir.path(), "6", &[]).await;
    let first = coordinator(dir.path(), &proxy);
    let id = ask(&first.url, DISPUTED).await;
    let pessimist = waiting_on_the_pessimist(&proxy, &specialists.url).await;
    first.kill();
    let second = coordinator(dir.path(), &proxy);
    let task = finish(&second.url, &id).await;
    let text = decision(&task);
    assert!(
        text.contains(&format!("pessimist (task {pessimist}): no")),
        "{text}"
    );
    assert!(
        text.contains("Decision: no — you follow the pessimist"),
        "{text}"
    );
    assert_eq!(
        proxy.sent_message_ids().len(),
        2,
        "resumed by id, never sent again"
    );
    assert_one_remote_task_each(&task, second, &specialists.url, None).await;
}

#[test(multi_thread)]
async fn specialists_killed_while_they_work_answer_after_their_restart_without_restarting_the_caller(
) {
    let dir = tempfile::tempdir().unwrap();
    let (proxy, first) = specialists(dir.path(), "6", &[]).await;
    let coordinator = coordinator(dir.path(), &proxy);
    let id = ask(&coordinator.url, DISPUTED).await;
    let pessimist = waiting_on_the_pessimist(&proxy, &first.url).await;
    first.kill();
    let public = format!("{}/", proxy.url);
    let second = Role::start(
        "specialists",
        dir.path(),
        &["--think", "6", "--public-url", &public],
        &[],
    );
    proxy.to(second.addr());
    let task = finish(&coordinator.url, &id).await;
    let text = decision(&task);
    assert!(
        text.contains(&format!("pessimist (task {pessimist}): no")),
        "{text}"
    );
    assert_eq!(
        proxy.sent_message_ids().len(),
        2,
        "resumed by id, never sent again"
    );
    assert_one_remote_task_each(&task, coordinator, &second.url, None).await;
}
