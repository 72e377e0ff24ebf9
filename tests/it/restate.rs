//! The Restate host on a real `restate-server` (the npm registry's binary, installed by `.ci/run`):
//! the payment flow with its approval gate and the research loop, each task a Restate workflow run
//! by a service process (this test binary run again through the ignored entry point
//! `child_process_serves_the_workflows`), radkit's engine in front in Restate mode over the same
//! SQLite file. `restate-server` is SIGKILLed and restarted while a task waits for input and while
//! an effect runs, and the service process is SIGKILLed right after a payment tool applied its
//! effect (before Restate journaled its outcome). Every task completes; each InvocationId has one
//! effect (the provider's ledger holds one charge, the outbox one email) and one receipt; the
//! research loop's journal is the long-lived engine's on the same inputs.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use radkit::effects::Effects;
use radkit::engine::{Caller, Engine, EngineBuilder, EngineError, Request};
use radkit::flow::{CmdKind, EffectError};
use radkit::journal::{Entry, JournalRecord};
use radkit::llm::{LlmRequest, LlmResponse, Model};
use radkit::model::{Message, TaskId, TaskState};
use radkit::prelude::*;
use radkit::restate::{register_deployment, RestateHost};
use radkit::store::{Durability, MemoryStore, SqliteStore, Store};
use serde_json::json;

use crate::delegate_kill9::delegate::coordinator::{Coordinator, SPECIALISTS};
use crate::delegate_kill9::serve_specialists as specialists;
use crate::fold_prop::shape;
use crate::payments::skill::{read_lines, PaymentWorld, Payments};
use crate::support::demo;
use crate::support::services;
use radkit::engine::AgentSpec;

/// How long anything here may take on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(180);

/// A child process, killed with SIGKILL when dropped: a failing test leaves no process behind.
struct Child(std::process::Child);

impl Child {
    fn kill(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A local Restate server keeping its state in `dir` (so a restart finds its journal).
struct Restate {
    dir: PathBuf,
    ingress: u16,
    admin: u16,
    node: u16,
    process: Option<Child>,
}

impl Restate {
    async fn start(dir: &Path) -> Restate {
        let mut restate = Restate {
            dir: dir.join("restate"),
            ingress: free_port(),
            admin: free_port(),
            node: free_port(),
            process: None,
        };
        restate.restart().await;
        restate
    }

    fn ingress_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.ingress)
    }

    fn admin_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.admin)
    }

    /// SIGKILL, as a crash.
    fn kill(&mut self) {
        if let Some(process) = self.process.take() {
            process.kill();
        }
    }

    /// Start it (again) and wait until its admin API and ingress answer.
    async fn restart(&mut self) {
        self.kill();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.with_extension("log"))
            .unwrap();
        let process = Command::new(services::restate_server())
            .args(["--no-logo", "--listen-mode", "tcp", "--node-name", "radkit"])
            .arg("--base-dir")
            .arg(&self.dir)
            .args(["--bind-port", &self.node.to_string()])
            .env(
                "RESTATE_INGRESS__BIND_ADDRESS",
                format!("127.0.0.1:{}", self.ingress),
            )
            .env(
                "RESTATE_ADMIN__BIND_ADDRESS",
                format!("127.0.0.1:{}", self.admin),
            )
            // A service that died is tried again soon (the default waits up to a minute).
            .env("RESTATE_DEFAULT_RETRY_POLICY__INITIAL_INTERVAL", "100ms")
            .env("RESTATE_DEFAULT_RETRY_POLICY__MAX_INTERVAL", "1s")
            .env("RESTATE_DEFAULT_RETRY_POLICY__MAX_ATTEMPTS", "1000")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start restate-server");
        self.process = Some(Child(process));
        let http = reqwest::Client::new();
        let started = Instant::now();
        loop {
            let admin = http
                .get(format!("{}/health", self.admin_url()))
                .send()
                .await;
            let ingress = http
                .get(format!("{}/restate/health", self.ingress_url()))
                .send()
                .await;
            if admin.is_ok_and(|r| r.status().is_success())
                && ingress.is_ok_and(|r| r.status().is_success())
            {
                return;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "restate-server did not answer; its log is {}",
                self.dir.with_extension("log").display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The skills and effects both sides build: the payment flow over `world`, the research loop with
/// its scripted models, each model call written to `models.jsonl` in `world` with its InvocationId.
fn builder(
    store: Arc<dyn Store>,
    world: &Path,
    pause: Option<&str>,
    specialists: Option<&str>,
) -> EngineBuilder {
    let mut payments = PaymentWorld::new(world);
    if let Some(tool) = pause {
        payments = payments.pause_after(tool);
    }
    let models = Logged {
        inner: demo::shared::scripted_effects(),
        log: world.join("models.jsonl"),
    };
    let mut builder = Engine::builder_arc(store)
        .without_registered_skills()
        .skill(Payments::default())
        .skill(demo::macro_form::ResearchLoop)
        .skill(Coordinator)
        .skill(Elder)
        .skill(Napper)
        .effects(payments.effects().replace_models(models))
        .call_recheck(Duration::from_millis(200));
    if std::env::var_os("RADKIT_RESTATE_HOOKS").is_some() {
        builder = builder.hook(Recorder(world.join("hooks.log")));
    }
    match specialists {
        Some(url) => builder
            .agent(SPECIALISTS[0], AgentSpec::new(url))
            .agent(SPECIALISTS[1], AgentSpec::new(url)),
        None => builder,
    }
}

/// A hook that writes each call to a file (the service is a process of its own) and changes
/// nothing.
struct Recorder(PathBuf);

impl Recorder {
    fn note(&self, line: String) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.0)
            .unwrap();
        writeln!(file, "{line}").unwrap();
    }
}

#[async_trait]
impl radkit::engine::Hook for Recorder {
    async fn before_step(&self, ctx: &radkit::engine::HookContext) -> radkit::engine::HookDecision {
        self.note(format!("{} before {}", ctx.skill_id, ctx.step));
        radkit::engine::HookDecision::Continue
    }

    async fn after_step(&self, ctx: &radkit::engine::HookContext, outcome: &str) {
        self.note(format!("{} after {}: {outcome}", ctx.skill_id, ctx.step));
    }

    async fn before_command(
        &self,
        ctx: &radkit::engine::HookContext,
        cmd: &mut radkit::flow::Cmd,
    ) -> radkit::engine::HookDecision {
        self.note(format!(
            "{} before {}",
            ctx.skill_id,
            cmd.kind.fingerprint()
        ));
        radkit::engine::HookDecision::Continue
    }
}

/// Calls the child skill `napper` with its message, and completes with what it answered.
#[derive(Default)]
struct Elder;

#[flow_skill(id = "elder", name = "Elder", register = false)]
impl Elder {
    #[step(start)]
    async fn delegate(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let answer = ctx.skill("napper").send(msg.joined_texts()).await?;
        ctx.complete(format!("elder got: {}", answer.text()), vec![])
    }
}

/// Sleeps as many milliseconds as its message says (a durable timer), then completes.
#[derive(Default)]
struct Napper;

#[flow_skill(id = "napper", name = "Napper", register = false)]
impl Napper {
    #[step(start)]
    async fn nap(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let ms: u64 = msg.joined_texts().trim().parse().unwrap_or(0);
        ctx.sleep(Duration::from_millis(ms)).await?;
        ctx.complete(format!("rested {ms}"), vec![])
    }
}

/// The research loop's scripted models, each call logged with its InvocationId.
struct Logged {
    inner: Effects,
    log: PathBuf,
}

#[async_trait]
impl Model for Logged {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, EffectError> {
        use std::io::Write;
        let line = json!({ "model": request.model, "id": request.invocation_id.to_string() });
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| EffectError::transient(e.to_string()))?;
        writeln!(file, "{line}").map_err(|e| EffectError::transient(e.to_string()))?;
        let kind = CmdKind::Llm {
            model: request.model.clone(),
            input: request.input.clone(),
            schema: request.schema.clone(),
            tools: Vec::new(),
            turns: Vec::new(),
            stream: None,
        };
        let performed = self.inner.perform(&request.invocation_id, &kind).await?;
        Ok(LlmResponse::answer(performed.value, performed.usage))
    }
}

#[test(multi_thread)]
#[ignore = "entry point of the child processes of the tests below"]
async fn child_process_serves_the_workflows() {
    let env = |name: &str| std::env::var(name).expect("run by a parent test");
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(env("RADKIT_RESTATE_DB"), Durability::Full).unwrap());
    let pause = std::env::var("RADKIT_RESTATE_PAUSE").ok();
    let world = env("RADKIT_RESTATE_WORLD");
    let specialists = std::env::var("RADKIT_RESTATE_SPECIALISTS").ok();
    let host = RestateHost::from_builder(builder(
        store,
        Path::new(&world),
        pause.as_deref(),
        specialists.as_deref(),
    ))
    .unwrap();
    let listener =
        tokio::net::TcpListener::bind(("127.0.0.1", env("RADKIT_RESTATE_PORT").parse().unwrap()))
            .await
            .unwrap();
    host.listen(listener).await;
}

/// The service process on `port` (the same port each time: Restate knows the deployment by it).
fn service(
    dir: &Path,
    port: u16,
    pause: Option<&str>,
    specialists: Option<&str>,
    hooks: bool,
) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "restate::child_process_serves_the_workflows",
        "--ignored",
        "--nocapture",
    ])
    .env("RADKIT_RESTATE_DB", dir.join("tasks.sqlite"))
    .env("RADKIT_RESTATE_WORLD", dir)
    .env("RADKIT_RESTATE_PORT", port.to_string())
    .env_remove("RADKIT_RESTATE_HOOKS")
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if let Some(tool) = pause {
        cmd.env("RADKIT_RESTATE_PAUSE", tool);
    }
    if let Some(url) = specialists {
        cmd.env("RADKIT_RESTATE_SPECIALISTS", url);
    }
    if hooks {
        cmd.env("RADKIT_RESTATE_HOOKS", "1");
    }
    Child(cmd.spawn().unwrap())
}

/// Everything one test runs: the server, the service, and the engine in front.
struct Setup {
    dir: tempfile::TempDir,
    restate: Restate,
    port: u16,
    specialists: Option<String>,
    /// The service runs with the `Recorder` hook.
    hooks: bool,
    service: Option<Child>,
    front: Engine,
}

impl Setup {
    async fn start(pause: Option<&str>) -> Setup {
        Setup::start_with(pause, None).await
    }

    async fn start_with(pause: Option<&str>, specialists: Option<String>) -> Setup {
        Setup::start_full(pause, specialists, false).await
    }

    async fn start_full(pause: Option<&str>, specialists: Option<String>, hooks: bool) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let restate = Restate::start(dir.path()).await;
        let port = free_port();
        let service = service(dir.path(), port, pause, specialists.as_deref(), hooks);
        let started = Instant::now();
        // The deployment answers discovery once the service listens.
        while let Err(e) =
            register_deployment(&restate.admin_url(), &format!("http://127.0.0.1:{port}")).await
        {
            assert!(started.elapsed() < PATIENCE, "registration failed: {e}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(dir.path().join("tasks.sqlite"), Durability::Full).unwrap());
        let front = builder(store, dir.path(), None, None)
            .push_settings(crate::support::push_common::settings(true))
            .restate(restate.ingress_url())
            .start()
            .await
            .unwrap();
        Setup {
            dir,
            restate,
            port,
            specialists,
            hooks,
            service: Some(service),
            front,
        }
    }

    fn world(&self) -> &Path {
        self.dir.path()
    }

    /// SIGKILL the service and start it again (without a pause).
    fn restart_service(&mut self) {
        if let Some(service) = self.service.take() {
            service.kill();
        }
        self.service = Some(service(
            self.dir.path(),
            self.port,
            None,
            self.specialists.as_deref(),
            self.hooks,
        ));
    }

    /// Send `text` (as a reply to `task` if given) as a client would: sent again while Restate
    /// cannot be reached (it may be restarting), with the same `messageId`.
    async fn send(&self, text: &str, skill: &str, task: Option<&TaskId>) -> TaskId {
        let mut message = Message::user_text(text);
        message.task_id = task.map(|t| t.to_string());
        let started = Instant::now();
        loop {
            let mut request = Request::operator(message.clone());
            request.skill = Some(skill.to_owned());
            match self.front.send(request).await {
                Ok(id) => return id,
                Err(EngineError::HostUnavailable(why)) => {
                    assert!(started.elapsed() < PATIENCE, "never taken: {why}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("send `{text}` failed: {e}"),
            }
        }
    }

    /// The task once it waits for input or ended.
    async fn settled(&self, task: &TaskId) -> radkit::model::Task {
        crate::support::common::within(
            PATIENCE,
            "the task to settle",
            self.front.wait_settled(&Caller::Operator, task),
        )
        .await
        .unwrap()
    }

    async fn journal(&self, task: &TaskId) -> Vec<JournalRecord> {
        self.front.journal(&Caller::Operator, task).await.unwrap()
    }

    /// Wait until `task`'s journal holds a timer: a call waits on its recheck.
    async fn until_a_call_waits(&self, task: &TaskId) {
        let started = Instant::now();
        while !self
            .journal(task)
            .await
            .iter()
            .any(|r| matches!(r.entry, Entry::TimerSet { .. }))
        {
            assert!(started.elapsed() < PATIENCE, "the call never waited");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Each command of the journal has exactly one receipt, and no receipt is for a command the
/// journal does not hold.
fn one_receipt_per_command(journal: &[JournalRecord]) {
    let issued: Vec<String> = journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::CommandIssued { id, .. } => Some(id.to_string()),
            _ => None,
        })
        .collect();
    let receipts: Vec<String> = journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::ReceiptRecorded { receipt } => Some(receipt.id.to_string()),
            _ => None,
        })
        .collect();
    for id in &issued {
        assert_eq!(
            receipts.iter().filter(|r| *r == id).count(),
            1,
            "command {id}: one receipt"
        );
    }
    assert_eq!(
        issued.len(),
        receipts.len(),
        "a receipt without its command"
    );
    let seqs: Vec<u64> = journal.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=journal.len() as u64).collect::<Vec<_>>());
}

#[test(multi_thread, needs = Restate)]
async fn a_refund_through_restate_charges_once_and_emails_once_with_restate_and_the_service_killed_mid_task(
) {
    let mut s = Setup::start(Some("charge_card")).await;
    let task = s.send("refund 9900 bob", "payments", None).await;
    let asked = s.settled(&task).await;
    assert_eq!(
        asked.status.state,
        TaskState::InputRequired,
        "the approval gate"
    );

    // Restate dies while the task waits for its approver; the wait survives it.
    s.restate.kill();
    s.restate.restart().await;
    s.send("approve", "payments", Some(&task)).await;

    // The charge is applied, and both Restate and the service die before its outcome is journaled.
    let paused = s.world().join("paused-charge_card");
    let started = Instant::now();
    while !paused.exists() {
        assert!(started.elapsed() < PATIENCE, "the charge never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s.restate.kill();
    s.restart_service();
    s.restate.restart().await;

    let done = s.settled(&task).await;
    assert_eq!(done.status.state, TaskState::Completed, "{:?}", done.status);
    let journal = s.journal(&task).await;
    one_receipt_per_command(&journal);

    // The charge ran twice under one InvocationId, and the provider kept one.
    let calls = read_lines(&s.world().join("calls.jsonl"));
    let ledger = read_lines(&s.world().join("ledger.jsonl"));
    assert_eq!(ledger.len(), 1, "one charge: {ledger:?}");
    assert!(calls.len() >= 2, "the charge was reissued: {calls:?}");
    assert!(
        calls.iter().all(|c| c["key"] == ledger[0]["key"]),
        "every attempt used the charge's InvocationId: {calls:?}"
    );
    let receipts = read_lines(&s.world().join("receipts.jsonl"));
    assert!(receipts.iter().all(|r| r["key"] == receipts[0]["key"]));
    assert_eq!(
        read_lines(&s.world().join("outbox.jsonl")).len(),
        1,
        "one email"
    );
}

#[test(multi_thread, needs = Restate)]
async fn the_research_loop_through_restate_calls_each_model_once_per_invocation_id_with_restate_killed_mid_task(
) {
    let mut s = Setup::start(None).await;
    let seed = std::env::var("RADKIT_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    let mut rng = fastrand::Rng::with_seed(seed);
    let task = s
        .send(
            "Write a note on durable execution",
            "research_loop_v2",
            None,
        )
        .await;
    // Restate dies somewhere in the first cycles (drafts and critiques), then again while the task
    // waits for the human.
    tokio::time::sleep(Duration::from_millis(rng.u64(0..300))).await;
    s.restate.kill();
    s.restate.restart().await;
    let asked = s.settled(&task).await;
    assert_eq!(asked.status.state, TaskState::InputRequired, "seed {seed}");
    s.restate.kill();
    s.restate.restart().await;
    s.send("Add a conclusion.", "research_loop_v2", Some(&task))
        .await;
    let done = s.settled(&task).await;
    assert_eq!(
        done.status.state,
        TaskState::Completed,
        "seed {seed}: {:?}",
        done.status
    );

    let journal = s.journal(&task).await;
    one_receipt_per_command(&journal);
    let commands: Vec<String> = journal
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::CommandIssued { id, .. } => Some(id.to_string()),
            _ => None,
        })
        .collect();
    // Every model call was made under an InvocationId of the journal; one cut off by the kill was
    // made again under the same id, never under a new one.
    let calls = read_lines(&s.world().join("models.jsonl"));
    let mut ids: Vec<String> = calls
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids.dedup();
    let mut expected = commands.clone();
    expected.sort();
    assert_eq!(
        ids, expected,
        "seed {seed}: the model calls' ids are the journal's commands"
    );

    // The long-lived engine journals the same on the same inputs.
    let reference = reference_research_journal().await;
    assert_eq!(shape(&journal), shape(&reference), "seed {seed}");
}

/// The research loop on the long-lived engine, in memory: the same message and reply.
async fn reference_research_journal() -> Vec<JournalRecord> {
    let dir = tempfile::tempdir().unwrap();
    let engine = builder(Arc::new(MemoryStore::new()), dir.path(), None, None)
        .start()
        .await
        .unwrap();
    let mut request = Request::operator(Message::user_text("Write a note on durable execution"));
    request.skill = Some("research_loop_v2".to_owned());
    let task = engine.send(request).await.unwrap();
    engine.wait_settled(&Caller::Operator, &task).await.unwrap();
    let mut reply = Message::user_text("Add a conclusion.");
    reply.task_id = Some(task.to_string());
    engine.send(Request::operator(reply)).await.unwrap();
    engine.wait_settled(&Caller::Operator, &task).await.unwrap();
    let journal = engine.journal(&Caller::Operator, &task).await.unwrap();
    engine.shutdown().await;
    journal
}

#[test(multi_thread, needs = Restate)]
async fn an_email_cut_off_by_a_kill_on_restate_is_not_sent_again_and_its_outcome_is_unknown() {
    let mut s = Setup::start(Some("send_email")).await;
    let task = s.send("charge 4200 alice", "payments", None).await;
    // The email (at most once) is sent, and the service and Restate die before its outcome is
    // journaled: Restate holds the marker that it began, so it is not sent again.
    let paused = s.world().join("paused-send_email");
    let started = Instant::now();
    while !paused.exists() {
        assert!(started.elapsed() < PATIENCE, "the email never went");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s.restate.kill();
    s.restart_service();
    s.restate.restart().await;

    let done = s.settled(&task).await;
    assert_eq!(done.status.state, TaskState::Failed, "{:?}", done.status);
    let said = done
        .status
        .message
        .map(|m| m.joined_texts())
        .unwrap_or_default();
    assert!(said.contains("outcome unknown"), "{said}");
    one_receipt_per_command(&s.journal(&task).await);
    assert_eq!(
        read_lines(&s.world().join("outbox.jsonl")).len(),
        1,
        "one email"
    );
    assert_eq!(
        read_lines(&s.world().join("ledger.jsonl")).len(),
        1,
        "one charge"
    );
}

#[test(multi_thread, needs = Restate)]
async fn the_delegate_coordinator_on_restate_calls_each_specialist_once_with_restate_killed_while_it_waits(
) {
    const QUESTION: &str = "Should we ship the tested release?";
    let (url, reference_specialists) = specialists().await;
    let dir = tempfile::tempdir().unwrap();
    let engine = builder(Arc::new(MemoryStore::new()), dir.path(), None, Some(&url))
        .start()
        .await
        .unwrap();
    let mut request = Request::operator(Message::user_text(QUESTION));
    request.skill = Some("coordinator".to_owned());
    let id = engine.send(request).await.unwrap();
    let expected_task = engine.wait_settled(&Caller::Operator, &id).await.unwrap();
    let expected = engine.journal(&Caller::Operator, &id).await.unwrap();
    engine.shutdown().await;
    assert_eq!(
        reference_specialists
            .store()
            .list(Default::default())
            .await
            .unwrap()
            .len(),
        2
    );

    let (url, specialists) = specialists().await;
    let mut s = Setup::start_with(None, Some(url)).await;
    let task = s.send(QUESTION, "coordinator", None).await;
    // The optimist answered at once; the pessimist thinks: the workflow sleeps until its recheck.
    s.until_a_call_waits(&task).await;
    s.restate.kill();
    s.restate.restart().await;
    let done = s.settled(&task).await;
    assert_eq!(done.status.state, TaskState::Completed, "{:?}", done.status);
    assert_eq!(
        done.status.message.as_ref().map(Message::joined_texts),
        expected_task
            .status
            .message
            .as_ref()
            .map(Message::joined_texts)
    );
    let journal = s.journal(&task).await;
    one_receipt_per_command(&journal);
    let calls = |journal: &[JournalRecord]| {
        let mut shape: Vec<String> = shape(journal)
            .into_iter()
            .filter(|kind| kind != "timer_set")
            .collect();
        shape.sort();
        shape
    };
    assert_eq!(
        calls(&journal),
        calls(&expected),
        "the engine's journal, rechecks aside"
    );
    assert_eq!(
        specialists
            .store()
            .list(Default::default())
            .await
            .unwrap()
            .len(),
        2,
        "one task per specialist"
    );
}

#[test(multi_thread, needs = Restate)]
async fn a_task_canceled_on_restate_cancels_the_agent_task_its_open_call_made() {
    // The pessimist thinks for a minute: its task is still working when the coordinator is
    // canceled, however slow the machine.
    let (url, specialists) =
        crate::delegate_kill9::serve_specialists_thinking(Duration::from_secs(60)).await;
    let s = Setup::start_with(None, Some(url)).await;
    let task = s
        .send("Should we ship the tested release?", "coordinator", None)
        .await;
    // The optimist answered; the call to the pessimist waits on its recheck.
    s.until_a_call_waits(&task).await;
    s.front.cancel(&Caller::Operator, &task).await.unwrap();
    let done = s.settled(&task).await;
    assert_eq!(done.status.state, TaskState::Canceled, "{:?}", done.status);
    // No work goes on for it: the pessimist's task is canceled too.
    until_tasks_of(specialists.store().as_ref(), "pessimist", |tasks| {
        tasks.iter().any(|(_, state)| *state == TaskState::Canceled)
    })
    .await;
}

#[test(multi_thread, needs = Restate)]
async fn the_server_in_front_of_restate_delivers_the_webhook_updates_the_workflow_journals() {
    let hook = crate::support::push_common::Receiver::start().await;
    let s = Setup::start(None).await;
    let task = s.send("refund 9900 bob", "payments", None).await;
    let config = radkit::store::PushConfig {
        id: "hook".to_owned(),
        url: hook.url.clone(),
        token: Some("tok".to_owned()),
        authentication: None,
        format: radkit::store::PushFormat::V1_0,
    };
    // Every update from the task's creation on, as for a config sent with the first message.
    s.front
        .set_push_config(&Caller::Operator, &task, config, Some(0))
        .await
        .unwrap();
    let asked = s.settled(&task).await;
    assert_eq!(asked.status.state, TaskState::InputRequired, "the gate");
    s.send("approve", "payments", Some(&task)).await;
    let done = s.settled(&task).await;
    assert_eq!(done.status.state, TaskState::Completed, "{:?}", done.status);
    let posts = hook
        .wait_for("the end at the webhook", |posts| {
            posts.iter().any(|p| {
                p.acknowledged()
                    && crate::support::push_common::is_status(p, "TASK_STATE_COMPLETED")
            })
        })
        .await;
    let seqs: Vec<u64> = posts
        .iter()
        .filter(|p| p.acknowledged())
        .map(crate::support::push_common::Post::seq)
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "each update once, in journal order: {seqs:?}"
    );
    assert!(
        posts
            .iter()
            .any(|p| crate::support::push_common::is_status(p, "TASK_STATE_INPUT_REQUIRED")),
        "the gate's question reached the webhook too: {posts:#?}"
    );
    let updates = crate::support::push_common::update_seqs(&s.front, task.as_str()).await;
    assert_eq!(
        seqs, updates,
        "every update the journal holds, and only those"
    );
}

/// The tasks of skill `skill` in `store`, with their states.
async fn tasks_of(store: &dyn Store, skill: &str) -> Vec<(String, TaskState)> {
    store
        .list(Default::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.skill_id == skill)
        .map(|t| (t.id.to_string(), t.state))
        .collect()
}

/// Wait until the tasks of skill `skill` in `store` are as `done` wants them.
async fn until_tasks_of(
    store: &dyn Store,
    skill: &str,
    done: impl Fn(&[(String, TaskState)]) -> bool,
) {
    let started = Instant::now();
    loop {
        let tasks = tasks_of(store, skill).await;
        if done(&tasks) {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the {skill} tasks never got there: {tasks:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Send `1500` to `elder` (its child naps 1.5 s), kill and restart `restate-server` while the
/// parent waits on its call's recheck, and return the task once it completed.
async fn elder_through_a_restate_kill(s: &mut Setup) -> (TaskId, radkit::model::Task) {
    let task = s.send("1500", "elder", None).await;
    // The child's workflow was started; the parent rests on its recheck.
    s.until_a_call_waits(&task).await;
    s.restate.kill();
    s.restate.restart().await;
    let done = s.settled(&task).await;
    assert_eq!(done.status.state, TaskState::Completed, "{:?}", done.status);
    (task, done)
}

/// The callee task a journal's `call_started` names.
fn callee_of(journal: &[JournalRecord]) -> String {
    journal
        .iter()
        .find_map(|r| match &r.entry {
            Entry::CallStarted { task_id, .. } => Some(task_id.clone()),
            _ => None,
        })
        .expect("a call_started entry")
}

#[test(multi_thread, needs = Restate)]
async fn a_child_skill_on_restate_runs_as_a_workflow_of_its_own_once_with_restate_killed_while_the_parent_waits(
) {
    let mut s = Setup::start(None).await;
    let (task, done) = elder_through_a_restate_kill(&mut s).await;
    let text = format!("{done:?}");
    assert!(text.contains("elder got: rested 1500"), "{text}");
    let journal = s.journal(&task).await;
    one_receipt_per_command(&journal);
    let child = callee_of(&journal);
    assert_eq!(
        tasks_of(s.front.store().as_ref(), "napper").await,
        vec![(child.clone(), TaskState::Completed)],
        "one child task, the one the parent's journal names, run to its end"
    );
    let child_task = s
        .front
        .task(&Caller::Operator, &child.clone().into(), None)
        .await
        .unwrap();
    assert_eq!(
        child_task.context_id, done.context_id,
        "the child runs in its parent's context"
    );
}

#[test(multi_thread, needs = Restate)]
async fn a_parent_canceled_on_restate_cancels_its_child_skills_workflow() {
    let s = Setup::start(None).await;
    // The child naps for ten minutes: it is still asleep when its parent is canceled.
    let task = s.send("600000", "elder", None).await;
    s.until_a_call_waits(&task).await;
    s.front.cancel(&Caller::Operator, &task).await.unwrap();
    let done = s.settled(&task).await;
    assert_eq!(done.status.state, TaskState::Canceled, "{:?}", done.status);
    let child = callee_of(&s.journal(&task).await);
    until_tasks_of(s.front.store().as_ref(), "napper", |children| {
        children == [(child.clone(), TaskState::Canceled)]
    })
    .await;
}

#[test(multi_thread, needs = Restate)]
async fn a_workflow_asks_the_hooks_about_each_visit_and_once_about_each_command_with_restate_killed(
) {
    let mut s = Setup::start_full(None, None, true).await;
    elder_through_a_restate_kill(&mut s).await;
    let log = std::fs::read_to_string(s.world().join("hooks.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let count = |line: &str| lines.iter().filter(|l| **l == line).count();
    // Each visit is put to the hooks, a re-run one too (after each recheck), as in the engine; a
    // command only before it is first journaled, and the answers are in Restate's journal: the
    // kill replays them, it does not ask again.
    assert!(count("elder before delegate") >= 2, "{lines:#?}");
    assert_eq!(count("elder before skill `napper`"), 1, "{lines:#?}");
    // The child runs while Restate is killed: an answer it asked for just before the kill, whose
    // `ctx.run` Restate had not journaled yet, is asked for once more (Restate's `run` is at
    // least once); one kill, so at most twice.
    assert!(
        (1..=2).contains(&count("napper before sleep")),
        "{lines:#?}"
    );
    assert!(count("napper before nap") >= 1, "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("elder after delegate: complete")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("napper after nap: complete")),
        "{lines:#?}"
    );
}
