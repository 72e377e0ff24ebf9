//! Restate mode ([`EngineBuilder::restate`](super::EngineBuilder::restate)): the engine in front of
//! skills that Restate's workflows run ([`RestateHost`](crate::restate::RestateHost)). It checks
//! each request as the long-running engine does, forwards what changes a task to Restate's
//! ingress, and answers from the store the workflows write.

mod ingress;

use std::future::Future;
use std::time::{Duration, Instant};

pub use self::ingress::{register_deployment, Ingress, Start, TaskReply, WORKFLOW};
use super::api::{check_message, task_id_for};
use super::{Caller, Engine, EngineError, Request};
use crate::model::{Message, Task, TaskId, TaskState};

/// How long a send, a reply or a cancel waits for the workflow to journal what it forwarded.
const PATIENCE: Duration = Duration::from_secs(30);

impl Engine {
    /// A send in Restate mode: a new task's workflow is started (and the send answers once its
    /// first append is in the store); a reply resolves the wait it answers.
    pub(super) async fn send_hosted(
        &self,
        ingress: &Ingress,
        request: Request,
    ) -> Result<TaskId, EngineError> {
        let Request {
            caller,
            skill,
            mode,
            message,
        } = request;
        check_message(&message)?;
        if let Some(task_id) = message.task_id.clone() {
            let task_id = TaskId::from(task_id);
            self.reply_hosted(ingress, &caller, &task_id, message)
                .await?;
            return Ok(task_id);
        }
        // A retried message (the client lost the answer) finds the task it created.
        let task_id = task_id_for(&caller, &message.message_id);
        if self.created(&caller, &task_id).await? {
            self.same_as_first(&task_id, &message).await?;
            return Ok(task_id);
        }
        let skill = self.choose_skill(skill.as_deref())?;
        let start = Start {
            skill: skill.info().id.clone(),
            context_id: message.context_id.clone(),
            principal: caller.principal_name().map(str::to_owned),
            mode: mode.unwrap_or(self.inner.config.permission_mode),
            message,
        };
        ingress.start(&task_id, &start).await?;
        let store = &self.inner.store;
        let created = self
            .until(|| async { Ok(store.task(&task_id).await?.is_some()) })
            .await?;
        if !created {
            return Err(EngineError::HostUnavailable(format!(
                "Restate took task {task_id} but its workflow did not create it within {}s; is the deployment registered, and does it reach this store?",
                PATIENCE.as_secs()
            )));
        }
        Ok(task_id)
    }

    /// A reply in Restate mode: checked as the engine checks one, sent to the workflow's wait, and
    /// answered once the task's journal has it.
    async fn reply_hosted(
        &self,
        ingress: &Ingress,
        caller: &Caller,
        task_id: &TaskId,
        mut message: Message,
    ) -> Result<(), EngineError> {
        let Some(record) = self.awaiting_reply(caller, task_id, &message).await? else {
            return Ok(());
        };
        message.context_id = Some(record.context_id.to_string());
        let reply = TaskReply {
            seq: record.last_seq,
            message: message.clone(),
        };
        ingress.reply(task_id, &reply).await?;
        let taken = self
            .until(|| self.received_before(task_id, &message))
            .await?;
        if taken {
            return Ok(());
        }
        // Not journaled: the task moved on without it (a deadline, a cancel), or Restate is slow.
        let now = self.visible(caller, task_id).await?;
        if now.last_seq != record.last_seq || now.state != TaskState::InputRequired {
            return Err(EngineError::NotAwaitingInput {
                task_id: task_id.to_string(),
                state: now.state,
            });
        }
        Err(EngineError::HostUnavailable(format!(
            "Restate took the reply to task {task_id} but its workflow did not journal it within {}s",
            PATIENCE.as_secs()
        )))
    }

    /// A cancel in Restate mode: the workflow is asked, and the answer is the task once it ended
    /// (or as it stands when it did not end in time: the workflow carries the cancel out).
    pub(super) async fn cancel_hosted(
        &self,
        ingress: &Ingress,
        caller: &Caller,
        task_id: &TaskId,
    ) -> Result<Task, EngineError> {
        let record = self.visible(caller, task_id).await?;
        if record.state.is_terminal() {
            return Err(EngineError::TaskFinished {
                task_id: task_id.to_string(),
                state: record.state,
            });
        }
        ingress.cancel(task_id).await?;
        let store = &self.inner.store;
        self.until(|| async {
            Ok(store
                .task(task_id)
                .await?
                .is_some_and(|row| row.state.is_terminal()))
        })
        .await?;
        self.task(caller, task_id, None).await
    }

    /// Ask `done` every poll interval until it says yes (true) or [`PATIENCE`] runs out (false).
    async fn until<F, Fut>(&self, mut done: F) -> Result<bool, EngineError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<bool, EngineError>>,
    {
        let give_up = Instant::now() + PATIENCE;
        loop {
            if done().await? {
                return Ok(true);
            }
            if Instant::now() >= give_up {
                return Ok(false);
            }
            tokio::time::sleep(self.inner.config.poll).await;
        }
    }
}
