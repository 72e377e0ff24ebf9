//! What callers hand the engine: who asks ([`Caller`]) and, for a message, which skill runs it in which
//! permission mode ([`Request`]). A server turns its protocol's metadata into these once; the engine
//! never reads metadata keys.

use crate::flow::PermissionMode;
use crate::model::Message;

/// Who is asking: which tasks a call may see and change.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Caller {
    /// The process itself (an embedding program, the CLI, a server without authentication): every
    /// task. The tasks it creates belong to no principal.
    Operator,
    /// An authenticated principal: only the tasks it created.
    Principal(String),
}

impl Caller {
    /// A principal.
    pub fn principal(name: impl Into<String>) -> Self {
        Caller::Principal(name.into())
    }

    /// The principal's name; `None` for the operator.
    pub fn principal_name(&self) -> Option<&str> {
        match self {
            Caller::Operator => None,
            Caller::Principal(name) => Some(name),
        }
    }

    /// True when this caller may see a task created by `owner` (`None`: by the operator).
    pub fn can_see(&self, owner: Option<&str>) -> bool {
        match self {
            Caller::Operator => true,
            Caller::Principal(name) => owner == Some(name.as_str()),
        }
    }
}

/// A user message for the engine: it starts a task (no `task_id`) or answers one waiting for input.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Who sends it.
    pub caller: Caller,
    /// The skill a new task runs; `None`: the only skill, or the default one.
    pub skill: Option<String>,
    /// The permission mode of a new task; `None`: the engine's default.
    pub mode: Option<PermissionMode>,
    /// The message.
    pub message: Message,
}

impl Request {
    /// `message` sent by `caller`, to the default skill in the default mode.
    pub fn new(caller: Caller, message: Message) -> Self {
        Request {
            caller,
            skill: None,
            mode: None,
            message,
        }
    }

    /// `message` sent by the operator (see [`Caller::Operator`]).
    pub fn operator(message: Message) -> Self {
        Self::new(Caller::Operator, message)
    }

    /// Run a new task with skill `id`.
    pub fn skill(mut self, id: impl Into<String>) -> Self {
        self.skill = Some(id.into());
        self
    }

    /// Run a new task in `mode`.
    pub fn mode(mut self, mode: PermissionMode) -> Self {
        self.mode = Some(mode);
        self
    }
}
