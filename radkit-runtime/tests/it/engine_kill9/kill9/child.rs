//! The child process: its body (run the case's task until the parent kills it) and, on the
//! parent's side, the guard that spawns it, waits for its marker, kills it with SIGKILL and reaps it
//! on every exit path.

use radkit_runtime::engine::{Caller, Request};
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use radkit_runtime::model::{Message, TaskState};

use super::skill::{engine, open_store};
use super::{Case, Kill, Process, CASE_VAR, CHILD_TEST, DIR_VAR};
use crate::support::common::{within, PATIENCE};

/// How long the parent waits for the child to reach the kill point (it starts a process and an
/// engine, on a machine other builds share).
pub const REACH: Duration = Duration::from_secs(60);
/// A child nobody killed (its parent died) exits on its own after this long.
pub const CHILD_LIFETIME: Duration = Duration::from_secs(120);

/// The child's body: run `case`'s task over `dir` until killed at the case's kill point.
pub async fn run(case: &Case, dir: &Path) {
    let first = engine(case, dir, Process::Child, open_store(dir))
        .start()
        .await
        .expect("start the child's engine");
    let task_id = first
        .send(Request::operator(Message::user_text("order 7")))
        .await
        .expect("create the task");
    let _canceling = match case.kill {
        Kill::DuringEffect => None,
        Kill::DuringCompensation => {
            let task = within(
                PATIENCE,
                "the question before the cancel",
                first.wait_settled(&Caller::Operator, &task_id),
            )
            .await
            .expect("wait_settled");
            assert_eq!(
                task.status.state,
                TaskState::InputRequired,
                "{:?}",
                task.status
            );
            // The task waits as a row; this engine stops cleanly and another one cancels it (a cancel
            // on the engine whose driver is still winding down can be lost: see crash_matrix's
            // `cancel_right_after_the_task_settled`).
            first.shutdown().await;
            let second = engine(case, dir, Process::Child, open_store(dir))
                .start()
                .await
                .expect("start the child's canceling engine");
            let id = task_id.clone();
            Some(tokio::spawn(async move {
                second.cancel(&Caller::Operator, &id).await
            }))
        }
    };
    tokio::time::sleep(CHILD_LIFETIME).await;
    panic!(
        "the child was not killed within {CHILD_LIFETIME:?} (marker written: {})",
        dir.join("marker").exists()
    );
}

/// The child process; killed with SIGKILL and reaped when dropped, so no exit path of a test leaves
/// it running.
pub struct Child {
    process: std::process::Child,
    dir: PathBuf,
}

impl Child {
    pub fn spawn(case: &Case, dir: &Path) -> Child {
        let output = |name: &str| {
            std::fs::File::create(dir.join(name)).unwrap_or_else(|e| panic!("create {name}: {e}"))
        };
        let process = std::process::Command::new(std::env::current_exe().expect("the test binary"))
            .args(["--exact", CHILD_TEST, "--ignored", "--nocapture"])
            .env(DIR_VAR, dir)
            .env(CASE_VAR, case.name)
            .stdout(output("child.stdout"))
            .stderr(output("child.stderr"))
            .spawn()
            .expect("spawn the child process");
        Child {
            process,
            dir: dir.to_owned(),
        }
    }

    /// What the child printed to stderr, for failure messages.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("child.stderr")).unwrap_or_default()
    }

    /// Wait until the child wrote the marker at its kill point. The marker is written by another
    /// process, so no event reaches this one: poll, with a deadline naming what was awaited.
    pub async fn reached(&mut self, kill: Kill) {
        let what = kill.point();
        let started = Instant::now();
        while !self.dir.join("marker").exists() {
            if let Some(status) = self.process.try_wait().expect("try_wait on the child") {
                panic!(
                    "the child exited ({status}) before {what}; its stderr:\n{}",
                    self.stderr()
                );
            }
            assert!(
                started.elapsed() < REACH,
                "timed out after {REACH:?} waiting for {what}; the child's stderr:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let marker = std::fs::read_to_string(self.dir.join("marker")).unwrap_or_default();
        assert_eq!(
            marker,
            kill.function(),
            "the child stopped in another function than {what}"
        );
    }

    /// SIGKILL, reap, and check that the signal is what ended it.
    pub fn kill_9(&mut self) {
        self.process.kill().expect("SIGKILL the child");
        let status = self.process.wait().expect("reap the child");
        assert_eq!(
            status.signal(),
            Some(9),
            "the child ended by SIGKILL: {status}"
        );
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}
