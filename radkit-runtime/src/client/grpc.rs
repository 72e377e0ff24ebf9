//! The gRPC binding of A2A 1.0, as the client speaks it: the generated `A2AService` client
//! (`model::grpc::proto`) over one plaintext HTTP/2 connection made with hyper's client, opened on
//! first use and again after it closes. It converts `v1` requests to protobuf and answers back,
//! and reads a failed call's status: the A2A error its `google.rpc.ErrorInfo` names, a transport
//! failure, or [`ClientError::Grpc`]. Where a stream ends is `stream::Ending`'s.

use std::sync::Arc;

use futures::stream::{self, BoxStream, StreamExt};
use prost::Message as _;
use reqwest::Url;
use tonic::codegen::{http, Context, Future, Pin, Poll, Service};

use super::stream::{Ending, Follows};
use super::transport::Timeouts;
use super::wire::Method;
use super::{ClientError, Reply, StreamEvent};
use crate::model::grpc::proto::{self, a2a_service_client::A2aServiceClient};
use crate::model::grpc::{ErrorInfo, RpcStatus, ERROR_INFO_TYPE};
use crate::model::{v1, ArtifactUpdate, StatusUpdate, Task, WireError};

type SendRequest = hyper::client::conn::http2::SendRequest<tonic::body::Body>;

/// A peer's gRPC interface and the connection to it.
#[derive(Clone)]
pub(crate) struct Grpc {
    channel: Channel,
    origin: http::Uri,
    tenant: String,
    /// Sent with every call: the credentials and `a2a-version: 1.0`.
    headers: http::HeaderMap,
    timeouts: Timeouts,
    max_body: usize,
}

impl std::fmt::Debug for Grpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grpc")
            .field("target", &self.channel.target)
            .finish_non_exhaustive()
    }
}

impl Grpc {
    /// The interface at `target` (`http://host:port`), spoken with `auth` (headers already
    /// checked as HTTP header values) within `timeouts`, answers read up to `max_body` bytes.
    pub(crate) fn new(
        target: &Url,
        tenant: String,
        auth: &http::HeaderMap,
        timeouts: Timeouts,
        max_body: usize,
    ) -> Result<Self, ClientError> {
        let (Some(host), Some(port)) = (target.host_str(), target.port_or_known_default()) else {
            return Err(ClientError::Card(format!(
                "the gRPC interface `{target}` names no host and port"
            )));
        };
        let origin: http::Uri = format!("http://{}", authority(host, port))
            .parse()
            .map_err(|e| {
                ClientError::Card(format!(
                    "the gRPC interface `{target}` is not a target ({e})"
                ))
            })?;
        let mut headers = auth.clone();
        headers.insert("a2a-version", http::HeaderValue::from_static("1.0"));
        Ok(Grpc {
            channel: Channel {
                target: target.to_string(),
                host: host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned(),
                port,
                connect_timeout: timeouts.connect,
                sender: Arc::default(),
            },
            origin,
            tenant,
            headers,
            timeouts,
            max_body,
        })
    }

    fn client(&self) -> A2aServiceClient<Channel> {
        A2aServiceClient::with_origin(self.channel.clone(), self.origin.clone())
            .max_decoding_message_size(self.max_body)
            .max_encoding_message_size(usize::MAX)
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        let mut headers = self.headers.clone();
        // The call joins the caller's trace (W3C trace context as gRPC metadata).
        for (name, value) in crate::telemetry::trace_context() {
            if let (Ok(name), Ok(value)) = (
                http::HeaderName::try_from(name),
                http::HeaderValue::try_from(value),
            ) {
                headers.insert(name, value);
            }
        }
        *request.metadata_mut() = tonic::metadata::MetadataMap::from_headers(headers);
        request
    }

    /// `call` within the request timeout; its expiry, like a lost connection, is a transport error.
    async fn unary<T>(
        &self,
        method: &'static str,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, ClientError> {
        match tokio::time::timeout(self.timeouts.request, call).await {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(self.error(method, &status)),
            Err(_) => Err(ClientError::Transport {
                url: self.channel.target.clone(),
                detail: format!("no complete answer within {:?}", self.timeouts.request),
            }),
        }
    }

    /// `SendMessage`: the task, or the agent's direct message.
    pub(crate) async fn send(&self, request: v1::SendMessageRequest) -> Result<Reply, ClientError> {
        const METHOD: &str = "SendMessage";
        let request = self.request(proto::SendMessageRequest::from(request));
        let answer = self
            .unary(METHOD, self.client().send_message(request))
            .await?;
        let answer = v1::SendMessageResponse::try_from(answer)
            .map_err(|e| protocol(METHOD, &format!("holds a bad field {e}")))?;
        Ok(match answer {
            v1::SendMessageResponse::Task(task) => Reply::Task(model(METHOD, task)?),
            v1::SendMessageResponse::Message(m) => Reply::Message(model(METHOD, m)?),
        })
    }

    /// `GetTask` or `CancelTask`.
    pub(crate) async fn task(&self, method: Method, task_id: &str) -> Result<Task, ClientError> {
        let mut client = self.client();
        let (name, answer) = match method {
            Method::Cancel => {
                let request = self.request(proto::CancelTaskRequest {
                    tenant: self.tenant.clone(),
                    id: task_id.to_owned(),
                    metadata: None,
                });
                let answer = self.unary("CancelTask", client.cancel_task(request));
                ("CancelTask", answer.await?)
            }
            _ => {
                let request = self.request(proto::GetTaskRequest {
                    tenant: self.tenant.clone(),
                    id: task_id.to_owned(),
                    history_length: None,
                });
                let answer = self.unary("GetTask", client.get_task(request));
                ("GetTask", answer.await?)
            }
        };
        let task = v1::Task::try_from(answer)
            .map_err(|e| protocol(name, &format!("holds a bad field {e}")))?;
        model(name, task)
    }

    /// `SendStreamingMessage` of `request`, or `SubscribeToTask` of `task_id`, until the task
    /// settles (see `stream::Ending`).
    pub(crate) fn follow(
        &self,
        opening: Opening,
        follows: Follows,
    ) -> BoxStream<'static, Result<StreamEvent, ClientError>> {
        let grpc = self.clone();
        let method = opening.method();
        let opened = async move {
            let mut client = grpc.client();
            let call = async {
                match opening {
                    Opening::Send(request) => {
                        let request = grpc.request(proto::SendMessageRequest::from(*request));
                        client.send_streaming_message(request).await
                    }
                    Opening::Subscribe(task_id) => {
                        let request = grpc.request(proto::SubscribeToTaskRequest {
                            tenant: grpc.tenant.clone(),
                            id: task_id,
                        });
                        client.subscribe_to_task(request).await
                    }
                }
            };
            grpc.unary(method, call).await.map(|s| (grpc, s))
        };
        let events = stream::once(opened).flat_map(move |opened| match opened {
            Err(e) => stream::once(async move { Err(e) }).boxed(),
            Ok((grpc, streaming)) => grpc.events(method, streaming, follows),
        });
        events.boxed()
    }

    /// The events of an opened stream, ended by [`Ending`]; a stream that stops before the task
    /// settled ends with [`ClientError::StreamClosed`].
    fn events(
        self,
        method: &'static str,
        streaming: tonic::Streaming<proto::StreamResponse>,
        follows: Follows,
    ) -> BoxStream<'static, Result<StreamEvent, ClientError>> {
        let state = (self, streaming, Ending::new(follows), false);
        stream::unfold(
            state,
            move |(grpc, mut streaming, mut ending, done)| async move {
                if done {
                    return None;
                }
                let idle = grpc.timeouts.stream_idle;
                let item = match tokio::time::timeout(idle, streaming.message()).await {
                    Ok(Ok(Some(response))) => event(method, response),
                    Ok(Ok(None)) if ending.settled() => return None,
                    Ok(Ok(None)) => Err(ClientError::StreamClosed {
                        url: grpc.channel.target.clone(),
                    }),
                    Ok(Err(status)) => Err(grpc.error(method, &status)),
                    Err(_) => Err(ClientError::Transport {
                        url: grpc.channel.target.clone(),
                        detail: format!("the stream was silent for {idle:?}"),
                    }),
                };
                let done = ending.ends_with(&item);
                Some((item, (grpc, streaming, ending, done)))
            },
        )
        .boxed()
    }

    /// The error a failed call's status says.
    fn error(&self, method: &'static str, status: &tonic::Status) -> ClientError {
        if let Some(error) = a2a_error(method, status) {
            return error;
        }
        // The call never got an answer: the connection failed or was lost.
        if std::error::Error::source(status).is_some() {
            return ClientError::Transport {
                url: self.channel.target.clone(),
                detail: super::error::excerpt(&format!("{status}")),
            };
        }
        ClientError::Grpc {
            url: self.channel.target.clone(),
            method: method.to_owned(),
            code: status.code() as i32,
            message: super::error::excerpt(status.message()),
        }
    }
}

/// What a stream opens with.
pub(crate) enum Opening {
    /// `SendStreamingMessage`.
    Send(Box<v1::SendMessageRequest>),
    /// `SubscribeToTask` of this task.
    Subscribe(String),
}

impl Opening {
    fn method(&self) -> &'static str {
        match self {
            Opening::Send(_) => "SendStreamingMessage",
            Opening::Subscribe(_) => "SubscribeToTask",
        }
    }
}

/// The A2A error the `google.rpc.Status` in a status's details names, if any.
fn a2a_error(method: &str, status: &tonic::Status) -> Option<ClientError> {
    let body = RpcStatus::decode(status.details()).ok()?;
    let details: Vec<serde_json::Value> = body
        .details
        .iter()
        .filter(|any| any.type_url == ERROR_INFO_TYPE)
        .filter_map(|any| ErrorInfo::decode(any.value.as_slice()).ok())
        .map(|info| {
            serde_json::json!({
                "@type": ERROR_INFO_TYPE,
                "reason": info.reason,
                "domain": info.domain,
                "metadata": info.metadata,
            })
        })
        .collect();
    ClientError::from_status(method, status.message(), &details)
}

fn protocol(method: &str, problem: &str) -> ClientError {
    ClientError::Protocol(format!("the answer to `{method}` over gRPC {problem}"))
}

fn model<W, T: TryFrom<W, Error = WireError>>(method: &str, value: W) -> Result<T, ClientError> {
    T::try_from(value)
        .map_err(|e| protocol(method, &format!("holds a value radkit cannot hold: {e}")))
}

/// One item of a stream in radkit's model.
fn event(method: &str, response: proto::StreamResponse) -> Result<StreamEvent, ClientError> {
    let response = v1::StreamResponse::try_from(response)
        .map_err(|e| protocol(method, &format!("holds a bad field {e}")))?;
    Ok(match response {
        v1::StreamResponse::Task(t) => StreamEvent::Task(model(method, t)?),
        v1::StreamResponse::Message(m) => StreamEvent::Message(model(method, m)?),
        v1::StreamResponse::StatusUpdate(s) => {
            StreamEvent::Status(model::<_, StatusUpdate>(method, s)?)
        }
        v1::StreamResponse::ArtifactUpdate(a) => {
            StreamEvent::Artifact(model::<_, ArtifactUpdate>(method, a)?)
        }
    })
}

/// `host:port`, an IPv6 host in brackets.
fn authority(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// One HTTP/2 connection to the target, shared by the client's clones: opened on first use and
/// opened again once it closed (a restarted peer). Each call is a stream on it, sent from the
/// calling task.
#[derive(Clone)]
struct Channel {
    target: String,
    host: String,
    port: u16,
    connect_timeout: std::time::Duration,
    sender: Arc<tokio::sync::Mutex<Option<SendRequest>>>,
}

/// Why the channel could not carry a call.
#[derive(Debug, thiserror::Error)]
enum ChannelError {
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("{0}")]
    Http2(#[from] hyper::Error),
}

impl Channel {
    /// The open connection, or a new one.
    async fn sender(&self) -> Result<SendRequest, ChannelError> {
        let mut slot = self.sender.lock().await;
        if let Some(sender) = slot.as_ref().filter(|s| !s.is_closed()) {
            return Ok(sender.clone());
        }
        let connect = tokio::net::TcpStream::connect((self.host.as_str(), self.port));
        let tcp = match tokio::time::timeout(self.connect_timeout, connect).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) => return Err(ChannelError::Connect(e.to_string())),
            Err(_) => {
                return Err(ChannelError::Connect(format!(
                    "timed out after {:?}",
                    self.connect_timeout
                )))
            }
        };
        let _ = tcp.set_nodelay(true);
        let handshake = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tcp),
        );
        let (sender, connection) = match tokio::time::timeout(self.connect_timeout, handshake).await
        {
            Ok(handshake) => handshake?,
            Err(_) => {
                return Err(ChannelError::Connect(
                    "the HTTP/2 handshake timed out".into(),
                ))
            }
        };
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "a gRPC client connection ended");
            }
        });
        *slot = Some(sender.clone());
        Ok(sender)
    }
}

impl Service<http::Request<tonic::body::Body>> for Channel {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = ChannelError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness is the connection's, awaited per call below.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let channel = self.clone();
        Box::pin(async move {
            let mut sender = channel.sender().await?;
            sender.ready().await?;
            Ok(sender.send_request(request).await?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_with(reason: &str, domain: &str, code: tonic::Code) -> tonic::Status {
        let info = ErrorInfo {
            reason: reason.into(),
            domain: domain.into(),
            metadata: Default::default(),
        };
        let body = RpcStatus {
            code: code as i32,
            message: "m".into(),
            details: vec![prost_types::Any {
                type_url: ERROR_INFO_TYPE.into(),
                value: info.encode_to_vec(),
            }],
        };
        tonic::Status::with_details(code, "m", body.encode_to_vec().into())
    }

    fn grpc() -> Grpc {
        let target = Url::parse("http://127.0.0.1:9").unwrap();
        Grpc::new(
            &target,
            String::new(),
            &http::HeaderMap::new(),
            Timeouts::default(),
            1024,
        )
        .unwrap()
    }

    #[test]
    fn a_status_reads_as_the_a2a_error_its_error_info_names() {
        let g = grpc();
        let e = g.error(
            "GetTask",
            &status_with("TASK_NOT_FOUND", "a2a-protocol.org", tonic::Code::NotFound),
        );
        assert!(e.is_task_not_found(), "{e}");
        let e = g.error(
            "CancelTask",
            &status_with(
                "TASK_NOT_CANCELABLE",
                "a2a-protocol.org",
                tonic::Code::FailedPrecondition,
            ),
        );
        assert!(e.is_not_cancelable(), "{e}");
        let e = g.error(
            "SendMessage",
            &status_with("STORAGE_UNAVAILABLE", "radkit", tonic::Code::Unavailable),
        );
        assert!(e.is_transient(), "{e}");
        let e = g.error("GetTask", &tonic::Status::unavailable("down"));
        assert!(
            matches!(e, ClientError::Grpc { code: 14, .. }) && e.is_transient(),
            "{e}"
        );
        let e = g.error("GetTask", &tonic::Status::permission_denied("no"));
        assert!(!e.is_transient(), "{e}");
    }

    #[tokio::test]
    async fn a_peer_that_is_not_there_is_a_transient_transport_error() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let target = Url::parse(&format!("http://{addr}")).unwrap();
        let g = Grpc::new(
            &target,
            String::new(),
            &http::HeaderMap::new(),
            Timeouts::default(),
            1024,
        )
        .unwrap();
        let e = g.task(Method::Get, "t").await.unwrap_err();
        assert!(
            matches!(e, ClientError::Transport { .. }) && e.is_transient(),
            "{e}"
        );
    }
}
