//! What each protocol version calls its methods and how it writes their params and results: 0.3's
//! slash-named methods and `kind`-tagged objects (`model::v0_3`), 1.0's PascalCase methods and
//! ProtoJSON (`model::v1`). Callers see radkit's model whatever the peer speaks.

use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::transport::Call;
use super::{ClientError, ProtocolVersion, Reply, StreamEvent};
use crate::model::{v0_3, v1, ArtifactUpdate, Message, StatusUpdate, Task, WireError};

/// The methods the client calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Send,
    Stream,
    Get,
    Cancel,
    Subscribe,
}

impl Method {
    /// The method's name in `version`.
    pub(crate) fn name(self, version: ProtocolVersion) -> &'static str {
        match (version, self) {
            (ProtocolVersion::V0_3, Method::Send) => "message/send",
            (ProtocolVersion::V0_3, Method::Stream) => "message/stream",
            (ProtocolVersion::V0_3, Method::Get) => "tasks/get",
            (ProtocolVersion::V0_3, Method::Cancel) => "tasks/cancel",
            (ProtocolVersion::V0_3, Method::Subscribe) => "tasks/resubscribe",
            (ProtocolVersion::V1_0, Method::Send) => "SendMessage",
            (ProtocolVersion::V1_0, Method::Stream) => "SendStreamingMessage",
            (ProtocolVersion::V1_0, Method::Get) => "GetTask",
            (ProtocolVersion::V1_0, Method::Cancel) => "CancelTask",
            (ProtocolVersion::V1_0, Method::Subscribe) => "SubscribeToTask",
        }
    }
}

/// How one peer is spoken to: its version and its 1.0 tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dialect {
    pub version: ProtocolVersion,
    pub tenant: String,
}

fn json_of(value: impl serde::Serialize) -> Result<Value, ClientError> {
    serde_json::to_value(value)
        .map_err(|e| ClientError::Invalid(format!("the request cannot be written as JSON: {e}")))
}

impl Dialect {
    /// A send (`Send` or `Stream`) of `message` as it is: its `messageId`, `taskId` and
    /// `contextId` are the caller's. `return_immediately` is 0.3 `blocking: false`, 1.0
    /// `returnImmediately: true`; a stream states neither.
    pub(crate) fn send(
        &self,
        method: Method,
        message: Message,
        return_immediately: bool,
    ) -> Result<Call, ClientError> {
        self.send_with(method, message, return_immediately, None)
    }

    /// A send that also asks the peer to post the task's updates to `push` (0.3
    /// `configuration.pushNotificationConfig`, 1.0 `configuration.taskPushNotificationConfig`).
    pub(crate) fn send_with(
        &self,
        method: Method,
        message: Message,
        return_immediately: bool,
        push: Option<&super::PushTarget>,
    ) -> Result<Call, ClientError> {
        let name = method.name(self.version);
        let params = match self.version {
            ProtocolVersion::V0_3 => {
                let mut params = json!({ "message": json_of(v0_3::Message::from(message))? });
                if method == Method::Send {
                    params["configuration"] = json!({ "blocking": !return_immediately });
                }
                if let Some(push) = push {
                    params["configuration"]["pushNotificationConfig"] =
                        json!({ "url": push.url, "token": push.token });
                }
                params
            }
            ProtocolVersion::V1_0 => {
                json_of(self.v1_send(method, message, return_immediately, push))?
            }
        };
        Ok(Call::new(name, params))
    }

    /// A 1.0 `SendMessageRequest` of `message` as it is (every 1.0 binding sends this): with
    /// `returnImmediately` for a `Send` that asks it, and the push config when given.
    pub(crate) fn v1_send(
        &self,
        method: Method,
        message: Message,
        return_immediately: bool,
        push: Option<&super::PushTarget>,
    ) -> v1::SendMessageRequest {
        let returns = method == Method::Send && return_immediately;
        let configuration = (returns || push.is_some()).then(|| v1::SendMessageConfiguration {
            return_immediately: returns,
            task_push_notification_config: push.map(|p| v1::TaskPushNotificationConfig {
                tenant: String::new(),
                id: String::new(),
                task_id: String::new(),
                url: p.url.clone(),
                token: p.token.clone(),
                authentication: None,
            }),
            ..Default::default()
        });
        v1::SendMessageRequest {
            tenant: self.tenant.clone(),
            message: v1::Message::from(message),
            configuration,
            metadata: None,
        }
    }

    /// A call naming one task (`Get`, `Cancel`, `Subscribe`).
    pub(crate) fn about_task(&self, method: Method, task_id: &str) -> Call {
        let mut params = json!({ "id": task_id });
        if self.version == ProtocolVersion::V1_0 && !self.tenant.is_empty() {
            params["tenant"] = json!(self.tenant);
        }
        Call::new(method.name(self.version), params)
    }

    /// A send's result: a Task or a Message (1.0: a `SendMessageResponse`).
    pub(crate) fn reply(&self, call: &Call, result: Value) -> Result<Reply, ClientError> {
        match self.version {
            ProtocolVersion::V0_3 => match kind(&result) {
                Some("task") => Ok(Reply::Task(read_as::<v0_3::Task, _>(call, result)?)),
                Some("message") => Ok(Reply::Message(read_as::<v0_3::Message, _>(call, result)?)),
                other => Err(call.protocol(&format!(
                    "is neither a task nor a message (`kind` is {other:?})"
                ))),
            },
            ProtocolVersion::V1_0 => match read::<v1::SendMessageResponse>(call, result)? {
                v1::SendMessageResponse::Task(task) => Ok(Reply::Task(convert(call, task)?)),
                v1::SendMessageResponse::Message(message) => {
                    Ok(Reply::Message(convert(call, message)?))
                }
            },
        }
    }

    /// A `Get` or `Cancel` result: a task.
    pub(crate) fn task(&self, call: &Call, result: Value) -> Result<Task, ClientError> {
        match self.version {
            ProtocolVersion::V0_3 => read_as::<v0_3::Task, _>(call, result),
            ProtocolVersion::V1_0 => read_as::<v1::Task, _>(call, result),
        }
    }

    /// One item of a stream (1.0: a `StreamResponse`).
    pub(crate) fn event(&self, call: &Call, result: Value) -> Result<StreamEvent, ClientError> {
        match self.version {
            ProtocolVersion::V0_3 => match kind(&result) {
                Some("task") => Ok(StreamEvent::Task(read_as::<v0_3::Task, _>(call, result)?)),
                Some("message") => Ok(StreamEvent::Message(read_as::<v0_3::Message, _>(
                    call, result,
                )?)),
                Some("status-update") => Ok(StreamEvent::Status(read_as::<
                    v0_3::TaskStatusUpdateEvent,
                    _,
                >(call, result)?)),
                Some("artifact-update") => {
                    Ok(StreamEvent::Artifact(read_as::<
                        v0_3::TaskArtifactUpdateEvent,
                        _,
                    >(call, result)?))
                }
                other => Err(call.protocol(&format!("holds an event of unknown `kind` {other:?}"))),
            },
            ProtocolVersion::V1_0 => Ok(match read::<v1::StreamResponse>(call, result)? {
                v1::StreamResponse::Task(task) => StreamEvent::Task(convert(call, task)?),
                v1::StreamResponse::Message(m) => StreamEvent::Message(convert(call, m)?),
                v1::StreamResponse::StatusUpdate(s) => {
                    StreamEvent::Status(convert::<_, StatusUpdate>(call, s)?)
                }
                v1::StreamResponse::ArtifactUpdate(a) => {
                    StreamEvent::Artifact(convert::<_, ArtifactUpdate>(call, a)?)
                }
            }),
        }
    }
}

fn kind(value: &Value) -> Option<&str> {
    value.get("kind").and_then(Value::as_str)
}

fn read<T: DeserializeOwned>(call: &Call, result: Value) -> Result<T, ClientError> {
    serde_json::from_value(result).map_err(|e| {
        call.protocol(&format!(
            "does not match the A2A schema ({e}); the peer may speak another version, try forcing one"
        ))
    })
}

/// A result read as wire type `W`, then into radkit's model.
fn read_as<W: DeserializeOwned, T: TryFrom<W, Error = WireError>>(
    call: &Call,
    result: Value,
) -> Result<T, ClientError> {
    convert(call, read::<W>(call, result)?)
}

fn convert<F, T>(call: &Call, value: F) -> Result<T, ClientError>
where
    T: TryFrom<F, Error = WireError>,
{
    T::try_from(value).map_err(|e| call.protocol(&format!("holds a value radkit cannot hold: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Role, TaskState};

    fn v1() -> Dialect {
        Dialect {
            version: ProtocolVersion::V1_0,
            tenant: String::new(),
        }
    }

    fn v0_3() -> Dialect {
        Dialect {
            version: ProtocolVersion::V0_3,
            tenant: String::new(),
        }
    }

    #[test]
    fn a_send_keeps_the_callers_message_id_and_says_return_immediately_per_version() {
        let mut message = Message::user_text("hi");
        message.message_id = "m-1".into();
        message.task_id = Some("t-1".into());
        let call = v0_3().send(Method::Send, message.clone(), true).unwrap();
        assert_eq!(call.method, "message/send");
        assert_eq!(call.params["message"]["messageId"], "m-1");
        assert_eq!(call.params["message"]["taskId"], "t-1");
        assert_eq!(call.params["configuration"]["blocking"], false);
        let call = v1().send(Method::Send, message.clone(), true).unwrap();
        assert_eq!(call.method, "SendMessage");
        assert_eq!(call.params["message"]["messageId"], "m-1");
        assert_eq!(call.params["message"]["role"], "ROLE_USER");
        assert_eq!(call.params["message"]["parts"][0]["text"], "hi");
        assert_eq!(call.params["configuration"]["returnImmediately"], true);
        let call = v1().send(Method::Send, message.clone(), false).unwrap();
        assert_eq!(call.params.get("configuration"), None);
        let call = v1().send(Method::Stream, message, false).unwrap();
        assert_eq!(call.method, "SendStreamingMessage");
    }

    #[test]
    fn a_1_0_tenant_goes_into_every_request() {
        let dialect = Dialect {
            version: ProtocolVersion::V1_0,
            tenant: "acme".into(),
        };
        let call = dialect.about_task(Method::Get, "t");
        assert_eq!(call.params, json!({"id": "t", "tenant": "acme"}));
        let call = dialect
            .send(Method::Send, Message::user_text("x"), false)
            .unwrap();
        assert_eq!(call.params["tenant"], "acme");
    }

    #[test]
    fn results_of_1_0_come_back_in_radkits_model() {
        let d = v1();
        let call = d.about_task(Method::Get, "t");
        let task =
            json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_INPUT_REQUIRED"}});
        let got = d.task(&call, task.clone()).unwrap();
        assert_eq!(got.status.state, TaskState::InputRequired);
        let Reply::Task(t) = d.reply(&call, json!({ "task": task })).unwrap() else {
            panic!("a task")
        };
        assert_eq!(t.id, "t");
        let message = json!({"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "hey"}]});
        let Reply::Message(m) = d.reply(&call, json!({ "message": message })).unwrap() else {
            panic!("a message")
        };
        assert_eq!(m.role, Role::Agent);
        let status = json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}});
        let StreamEvent::Status(s) = d.event(&call, status).unwrap() else {
            panic!("a status")
        };
        assert!(s.is_final);
        let unspecified =
            json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_UNSPECIFIED"}});
        assert!(matches!(
            d.task(&call, unspecified),
            Err(ClientError::Protocol(_))
        ));
    }

    #[test]
    fn results_of_0_3_are_told_apart_by_kind() {
        let d = v0_3();
        let call = d.about_task(Method::Subscribe, "t");
        assert_eq!(call.method, "tasks/resubscribe");
        let artifact = json!({"kind": "artifact-update", "taskId": "t", "contextId": "c",
            "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "x"}]}});
        assert!(matches!(
            d.event(&call, artifact),
            Ok(StreamEvent::Artifact(_))
        ));
        assert!(matches!(
            d.event(&call, json!({"kind": "bogus"})),
            Err(ClientError::Protocol(_))
        ));
        assert!(matches!(
            d.reply(&call, json!({"kind": "task", "id": 3})),
            Err(ClientError::Protocol(_))
        ));
    }
}
