//! A child skill as a callee: a task of this engine, created with the parent's principal and
//! context, its id derived from the call's `messageId` (so a start sent again finds the task the
//! first one made). On a shared store the child is a row like any other: any worker drives it.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use super::{Progress, Started};
use crate::engine::{Caller, Engine, EngineError, Inner, Request};
use crate::flow::EffectError;
use crate::journal::Entry;
use crate::model::TaskState;
use crate::model::{Message, Task, TaskId};

#[derive(Clone)]
pub(crate) struct ChildPeer {
    engine: Engine,
    caller: Caller,
    context_id: String,
    skill: String,
    /// The parent's permission mode: a child never runs with more rights than its parent.
    mode: crate::flow::PermissionMode,
}

/// A child's error as a call's: a store that cannot be reached is worth retrying; the rest is
/// what the child task says.
fn effect_error(e: EngineError) -> EffectError {
    match e {
        EngineError::StorageUnavailable { .. } | EngineError::Store(_) | EngineError::Halted => {
            EffectError::transient(e.to_string())
        }
        other => EffectError::permanent(other.to_string()),
    }
}

impl ChildPeer {
    pub fn new(
        inner: Arc<Inner>,
        principal: Option<String>,
        context_id: String,
        skill: String,
        mode: crate::flow::PermissionMode,
    ) -> Self {
        ChildPeer {
            engine: Engine { inner },
            caller: principal.map_or(Caller::Operator, Caller::Principal),
            context_id,
            skill,
            mode,
        }
    }

    pub async fn start(&self, mut message: Message) -> Result<Started, EffectError> {
        if message.context_id.is_none() {
            message.context_id = Some(self.context_id.clone());
        }
        let reply_to = message.task_id.clone();
        let message_id = message.message_id.clone();
        let request = Request::new(self.caller.clone(), message)
            .skill(self.skill.clone())
            .mode(self.mode);
        let task_id = match self.engine.send(request).await {
            Ok(task_id) => task_id,
            // A reply the child took before a crash cut the call off: the child moved on, and its
            // history holds the message.
            Err(e) if reply_to.is_some() => {
                let task = self.get(reply_to.as_deref().unwrap_or_default()).await?;
                let delivered = task.history.iter().any(|m| m.message_id == message_id);
                if !delivered {
                    return Err(effect_error(e));
                }
                return Ok(Started::Task(task));
            }
            Err(e) => return Err(effect_error(e)),
        };
        Ok(Started::Task(self.get(&task_id).await?))
    }

    pub async fn get(&self, task_id: &str) -> Result<Task, EffectError> {
        self.engine
            .task(&self.caller, &TaskId::from(task_id.to_owned()), None)
            .await
            .map_err(effect_error)
    }

    /// The child task call `id` started or answers with `message`, though the call was cut off
    /// before it journaled the child's id: the child's id is derived from the parent's principal
    /// and the call's `messageId` (or is the `taskId` a reply names).
    pub fn task_of(&self, id: &crate::flow::InvocationId, message: &Message) -> Option<String> {
        let mut message = message.clone();
        message.message_id = super::message_id(id);
        self.engine
            .task_of_message(&self.caller, &message)
            .map(|t| t.to_string())
    }

    pub async fn cancel(&self, task_id: &str) -> Result<(), EffectError> {
        match self
            .engine
            .cancel(&self.caller, &TaskId::from(task_id.to_owned()))
            .await
        {
            // A call cut off before its child was created started nothing.
            Ok(_) | Err(EngineError::TaskFinished { .. } | EngineError::TaskNotFound(_)) => Ok(()),
            Err(e) => Err(effect_error(e)),
        }
    }

    /// The child's progress, status and end, from its journal, until it settles.
    pub fn follow(&self, task_id: &str) -> futures::stream::BoxStream<'static, Progress> {
        let (engine, caller, task_id) = (
            self.engine.clone(),
            self.caller.clone(),
            TaskId::from(task_id.to_owned()),
        );
        let updates = async move {
            // From where the child stands now: its earlier progress was relayed (or was before
            // this call), and an earlier question it asked is answered.
            let Ok(snapshot) = engine.snapshot(&caller, &task_id, Some(0)).await else {
                return futures::stream::empty().boxed();
            };
            if snapshot.is_final {
                let state = snapshot.task.status.state;
                return futures::stream::iter([Progress::status(state, None)]).boxed();
            }
            let Ok(sub) = engine
                .subscribe_from(&caller, &task_id, snapshot.last_seq)
                .await
            else {
                return futures::stream::empty().boxed();
            };
            futures::stream::unfold(sub, |mut sub| async move {
                let update = sub.next().await?.ok()?;
                Some((update, sub))
            })
            .filter_map(|update| {
                let is_final = update.is_final;
                futures::future::ready(match update.record.entry {
                    Entry::Progress { message } | Entry::MessageEmitted { message } => {
                        Some(Progress::status(TaskState::Working, Some(message)))
                    }
                    // A wait for input ends the follow only when nothing answers it (`is_final`, on
                    // its `awaiting_input` entry).
                    Entry::StatusChanged { state }
                        if !matches!(state, TaskState::InputRequired | TaskState::AuthRequired) =>
                    {
                        Some(Progress::status(state, None))
                    }
                    Entry::ArtifactEmitted {
                        artifact,
                        append,
                        last_chunk,
                    } => Some(Progress::artifact(artifact, append, last_chunk)),
                    Entry::Terminal { state, .. } => Some(Progress::status(state, None)),
                    Entry::AwaitingInput { .. } if is_final => {
                        Some(Progress::status(TaskState::InputRequired, None))
                    }
                    _ => None,
                })
            })
            .boxed()
        };
        futures::stream::once(updates).flatten().boxed()
    }

    pub async fn watch(&self, task_id: &str) {
        let id = TaskId::from(task_id.to_owned());
        let mut delay = Duration::from_millis(500);
        // A store that cannot be read now is read again, patiently: the watcher wakes the parent
        // only when the child settled (or at its deadline, the recheck).
        while self.engine.wait_settled(&self.caller, &id).await.is_err() {
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(30));
        }
    }
}
