//! The HTTP+JSON (REST) binding of A2A 1.0, as the client speaks it: the paths of `a2a.proto`'s
//! HTTP annotations under the interface's URL (and its tenant: `/{tenant}/message:send`), ProtoJSON
//! bodies, SSE streams of bare `StreamResponse`s, and errors as a `google.rpc.Status` body whose
//! `ErrorInfo` reason names the A2A error. It frames requests and reads answers; the HTTP exchange
//! is `transport`'s and where a stream ends is `stream`'s.

use reqwest::Url;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::transport::{excerpt, Answer, Transport};
use super::wire::Method;
use super::{ClientError, Reply, StreamEvent};
use crate::model::{v1, ArtifactUpdate, StatusUpdate, WireError};

/// Where a peer's HTTP+JSON interface is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rest {
    /// The interface's URL, the base the paths are appended to.
    pub base: Url,
    /// The 1.0 tenant (`""`: none), the first path segment when set.
    pub tenant: String,
}

/// One REST request about to be sent.
#[derive(Debug, Clone)]
pub(crate) struct RestCall {
    /// The A2A operation (`SendMessage`, `GetTask`, ...), for errors.
    pub method: &'static str,
    http: reqwest::Method,
    /// The request's URL.
    pub url: Url,
    body: Option<Value>,
}

impl Rest {
    /// The URL of `path` (segments, each percent-encoded as one) under the base and the tenant.
    fn url(&self, path: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty();
            if !self.tenant.is_empty() {
                segments.push(&self.tenant);
            }
            segments.extend(path);
        }
        url
    }

    /// A send (`POST /message:send`) or a streaming send (`POST /message:stream`) of `request`.
    pub(crate) fn send(
        &self,
        method: Method,
        request: &v1::SendMessageRequest,
    ) -> Result<RestCall, ClientError> {
        let body = serde_json::to_value(request).map_err(|e| {
            ClientError::Invalid(format!("the request cannot be written as JSON: {e}"))
        })?;
        let (name, path) = match method {
            Method::Stream => ("SendStreamingMessage", "message:stream"),
            _ => ("SendMessage", "message:send"),
        };
        Ok(RestCall {
            method: name,
            http: reqwest::Method::POST,
            url: self.url(&[path]),
            body: Some(body),
        })
    }

    /// A request naming one task: `GET /tasks/{id}`, `POST /tasks/{id}:cancel`,
    /// `GET /tasks/{id}:subscribe`.
    pub(crate) fn about_task(&self, method: Method, task_id: &str) -> RestCall {
        let (name, http, suffix, body) = match method {
            Method::Cancel => (
                "CancelTask",
                reqwest::Method::POST,
                ":cancel",
                Some(json!({ "id": task_id })),
            ),
            Method::Subscribe => ("SubscribeToTask", reqwest::Method::GET, ":subscribe", None),
            _ => ("GetTask", reqwest::Method::GET, "", None),
        };
        RestCall {
            method: name,
            http,
            url: self.url(&["tasks", &format!("{task_id}{suffix}")]),
            body,
        }
    }
}

impl RestCall {
    /// The request, ready to send.
    pub(crate) fn request(
        &self,
        transport: &Transport,
        accept: &'static str,
    ) -> reqwest::RequestBuilder {
        transport.plain(self.http.clone(), &self.url, self.body.as_ref(), accept)
    }

    pub(crate) fn protocol(&self, problem: &str) -> ClientError {
        ClientError::Protocol(format!(
            "the answer to `{}` ({} {}) {problem}",
            self.method, self.http, self.url
        ))
    }

    /// A success answer's body read as `W` and then as radkit's `T`; any other answer's error.
    pub(crate) fn read<W, T>(&self, answer: Answer) -> Result<T, ClientError>
    where
        W: DeserializeOwned,
        T: TryFrom<W, Error = WireError>,
    {
        if !(200..300).contains(&answer.status) {
            return Err(self.error(&answer));
        }
        self.convert(self.parse::<W>(&answer.body)?)
    }

    /// A send's answer: the task, or the agent's direct message.
    pub(crate) fn reply(&self, answer: Answer) -> Result<Reply, ClientError> {
        if !(200..300).contains(&answer.status) {
            return Err(self.error(&answer));
        }
        Ok(match self.parse::<v1::SendMessageResponse>(&answer.body)? {
            v1::SendMessageResponse::Task(task) => Reply::Task(self.convert(task)?),
            v1::SendMessageResponse::Message(m) => Reply::Message(self.convert(m)?),
        })
    }

    fn parse<W: DeserializeOwned>(&self, body: &[u8]) -> Result<W, ClientError> {
        serde_json::from_slice(body).map_err(|e| {
            self.protocol(&format!(
                "does not match the A2A schema ({e}): {}",
                excerpt(&String::from_utf8_lossy(body))
            ))
        })
    }

    fn convert<W, T: TryFrom<W, Error = WireError>>(&self, value: W) -> Result<T, ClientError> {
        T::try_from(value)
            .map_err(|e| self.protocol(&format!("holds a value radkit cannot hold: {e}")))
    }

    /// The error an answer that is not a success says: the A2A error its `google.rpc.Status`
    /// names, else [`ClientError::Http`] with the start of its body.
    pub(crate) fn error(&self, answer: &Answer) -> ClientError {
        serde_json::from_slice::<Value>(&answer.body)
            .ok()
            .and_then(|body| self.status_error(&body))
            .unwrap_or_else(|| ClientError::http(self.url.as_str(), answer.status, &answer.body))
    }

    /// The A2A error a `{"error": google.rpc.Status}` body names, if it names one.
    fn status_error(&self, body: &Value) -> Option<ClientError> {
        let status = body.get("error")?;
        let message = status.get("message").and_then(Value::as_str).unwrap_or("");
        let details = status
            .get("details")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        ClientError::from_status(self.method, message, details)
    }

    /// One SSE event of a stream: a bare `StreamResponse`, or an error status (an `error` event,
    /// or a body that is one).
    pub(crate) fn event(&self, kind: &str, data: &str) -> Result<StreamEvent, ClientError> {
        let value: Value = serde_json::from_str(data).map_err(|e| {
            self.protocol(&format!(
                "holds an SSE event that is not JSON ({e}): {}",
                excerpt(data)
            ))
        })?;
        if kind == "error" || value.get("error").is_some() {
            return Err(self.status_error(&value).unwrap_or_else(|| {
                self.protocol(&format!("ends with an error: {}", excerpt(data)))
            }));
        }
        Ok(match serde_json::from_value::<v1::StreamResponse>(value) {
            Ok(v1::StreamResponse::Task(t)) => StreamEvent::Task(self.convert(t)?),
            Ok(v1::StreamResponse::Message(m)) => StreamEvent::Message(self.convert(m)?),
            Ok(v1::StreamResponse::StatusUpdate(s)) => {
                StreamEvent::Status(self.convert::<_, StatusUpdate>(s)?)
            }
            Ok(v1::StreamResponse::ArtifactUpdate(a)) => {
                StreamEvent::Artifact(self.convert::<_, ArtifactUpdate>(a)?)
            }
            Err(e) => {
                return Err(self.protocol(&format!(
                    "holds an event that does not match the A2A schema ({e}): {}",
                    excerpt(data)
                )))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Message, TaskState};

    fn rest(base: &str, tenant: &str) -> Rest {
        Rest {
            base: Url::parse(base).unwrap(),
            tenant: tenant.into(),
        }
    }

    #[test]
    fn paths_follow_the_protos_http_annotations_under_the_base_and_tenant() {
        let r = rest("http://h/a2a/", "");
        let send = v1::SendMessageRequest {
            tenant: String::new(),
            message: Message::user_text("hi").into(),
            configuration: None,
            metadata: None,
        };
        assert_eq!(
            r.send(Method::Send, &send).unwrap().url.as_str(),
            "http://h/a2a/message:send"
        );
        assert_eq!(
            r.send(Method::Stream, &send).unwrap().url.as_str(),
            "http://h/a2a/message:stream"
        );
        let get = r.about_task(Method::Get, "t/1 ?");
        assert_eq!(get.url.as_str(), "http://h/a2a/tasks/t%2F1%20%3F");
        assert_eq!(get.http, reqwest::Method::GET);
        let cancel = rest("http://h", "acme").about_task(Method::Cancel, "t");
        assert_eq!(cancel.url.as_str(), "http://h/acme/tasks/t:cancel");
        assert_eq!(cancel.http, reqwest::Method::POST);
        assert_eq!(
            r.about_task(Method::Subscribe, "t").url.as_str(),
            "http://h/a2a/tasks/t:subscribe"
        );
    }

    #[test]
    fn an_error_status_reads_as_the_a2a_error_its_error_info_names() {
        let call = rest("http://h", "").about_task(Method::Get, "t");
        let body = json!({"error": {"code": 404, "status": "NOT_FOUND", "message": "no task t",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org", "metadata": {}}]}});
        let answer = Answer {
            status: 404,
            body: body.to_string().into_bytes(),
        };
        let e = call
            .read::<v1::Task, crate::model::Task>(answer)
            .unwrap_err();
        assert!(e.is_task_not_found(), "{e}");
        // A 503 with no status body is the transient HTTP error it always was.
        let e = call.error(&Answer {
            status: 503,
            body: b"busy".to_vec(),
        });
        assert!(matches!(e, ClientError::Http { status: 503, .. }) && e.is_transient());
    }

    #[test]
    fn stream_events_are_bare_stream_responses_and_an_error_ends_them() {
        let call = rest("http://h", "").about_task(Method::Subscribe, "t");
        let status = json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED"}}});
        let Ok(StreamEvent::Status(s)) = call.event("message", &status.to_string()) else {
            panic!("a status update")
        };
        assert_eq!(s.status.state, TaskState::Completed);
        let artifact = json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
            "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}}});
        assert!(matches!(
            call.event("message", &artifact.to_string()),
            Ok(StreamEvent::Artifact(_))
        ));
        let error = json!({"error": {"code": 400, "message": "m", "details": [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "UNSUPPORTED_OPERATION"}]}});
        let e = call.event("error", &error.to_string()).unwrap_err();
        assert_eq!(e.rpc_code(), Some(-32004));
        assert!(matches!(
            call.event("message", "{\"bogus\": 1}"),
            Err(ClientError::Protocol(_))
        ));
    }
}
