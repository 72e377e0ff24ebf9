//! Errors the engine returns to its callers (the server, the CLI, tests).

use crate::model::TaskState;
use crate::store::StoreError;

/// Why an engine request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// No such task (or not visible to the caller).
    #[error("task {0} not found")]
    TaskNotFound(String),
    /// The task is finished and takes no more input or cancel.
    #[error("task {task_id} is already {} and cannot be changed", state.as_str())]
    TaskFinished {
        /// Task.
        task_id: String,
        /// Its final state.
        state: TaskState,
    },
    /// The task is not waiting for input.
    #[error("task {task_id} is {} and does not wait for input", state.as_str())]
    NotAwaitingInput {
        /// Task.
        task_id: String,
        /// Its state.
        state: TaskState,
    },
    /// No skill with that id is served (or a task belongs to one that is not).
    #[error("{0}")]
    UnknownSkill(String),
    /// A new task names no skill and the agent serves several without a default.
    #[error("this agent serves {} skills and the request names none; choose one of: {}", skills.len(), skills.join(", "))]
    NoSkillChosen {
        /// The skills served.
        skills: Vec<String>,
    },
    /// The task belongs to a skill this agent does not serve (it was created by an agent with other
    /// skills sharing the store), so it cannot be resumed here.
    #[error("task {task_id} belongs to skill `{skill_id}`, which this agent does not serve")]
    SkillNotServed {
        /// Task.
        task_id: String,
        /// The skill recorded at its creation.
        skill_id: String,
    },
    /// Two served skills have one id.
    #[error(transparent)]
    DuplicateSkill(#[from] crate::registry::DuplicateSkill),
    /// A served skill's id is empty or contains whitespace (the error names the skill and where it
    /// comes from).
    #[error(transparent)]
    InvalidSkillId(#[from] crate::registry::InvalidSkillId),
    /// The engine cannot be built as configured: no skill to serve, a default skill or an
    /// `only_skills` id that is not served, a lease too short.
    #[error("{0}")]
    Config(String),
    /// The request is malformed.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The task runs on a version of its skill this agent does not serve, and cannot move to the
    /// one it serves.
    #[error("task {task_id} runs on version {recorded} of skill `{skill_id}`, which this agent does not serve, and cannot move to version {running}: {reason}; serve version {recorded} beside version {running} (`version = N` on each), or let a binary that has it finish the task")]
    VersionMismatch {
        /// Task.
        task_id: String,
        /// Skill.
        skill_id: String,
        /// The version the task runs on.
        recorded: String,
        /// The version it could move to (the newest served).
        running: String,
        /// Why it cannot move.
        reason: String,
    },
    /// Unfinished tasks run on skill versions this engine does not serve and cannot move to the ones
    /// it serves (`EngineBuilder::refuse_stranded`).
    #[error("{}", stranded_text(.0))]
    Stranded(Vec<super::Move>),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store does not accept writes (a full disk, a database that is down): the task's run
    /// stopped, and it is resumed by itself when the store accepts writes again.
    #[error("storage unavailable: task {task_id} could not be written; it resumes when the store accepts writes again")]
    StorageUnavailable {
        /// Task.
        task_id: String,
    },
    /// The store keeps no push-notification configs.
    #[error("push notifications are not supported by this agent's store")]
    PushNotSupported,
    /// The task has no push-notification config with that id.
    #[error("task {task_id} has no push notification config `{config_id}`")]
    PushConfigNotFound {
        /// Task.
        task_id: String,
        /// The config id asked for.
        config_id: String,
    },
    /// A webhook URL that may not be used.
    #[error(transparent)]
    PushTarget(#[from] super::TargetError),
    /// The engine is halted.
    #[error("engine halted")]
    Halted,
    /// The host that runs this engine's tasks elsewhere (Restate) cannot be reached or refused the
    /// request; nothing was changed by it, and the request can be sent again.
    #[error("task host unavailable: {0}")]
    HostUnavailable(String),
    /// A bug in radkit or in a skill's code panicked where no task could take the failure (the
    /// request's own work); the message is the panic's. Nothing the request acknowledged is lost.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<super::run::FlushError> for EngineError {
    fn from(e: super::run::FlushError) -> Self {
        match e {
            super::run::FlushError::Halted => EngineError::Halted,
            super::run::FlushError::Store(e) => EngineError::Store(e),
        }
    }
}

/// The message of [`EngineError::Stranded`]: the tasks, at most twenty, each with its reason.
fn stranded_text(tasks: &[super::Move]) -> String {
    let mut text = format!(
        "{} unfinished task(s) run on a skill version this agent does not serve and cannot move to the one it serves; serve the old version beside the new one (`version = N` on each), let a binary that has it finish them, or start anyway with --allow-stranded (they stay in the store, refused until a binary that can run them starts):",
        tasks.len()
    );
    for task in tasks.iter().take(20) {
        let reason = match &task.outcome {
            super::MoveOutcome::Stays(reason) => reason.as_str(),
            _ => "",
        };
        text.push_str(&format!(
            "\n  {} (version {}): {reason}",
            task.task_id, task.from
        ));
    }
    if tasks.len() > 20 {
        text.push_str(&format!(
            "\n  … and {} more (`radkit tasks versions`)",
            tasks.len() - 20
        ));
    }
    text
}
