//! `bench a2a --binding grpc`'s client: a blocking `SendMessage` of "ping" through the A2A 1.0 gRPC
//! binding with the runtime's generated tonic client, each worker over its own HTTP/2 connection
//! made with hyper's client.

use anyhow::bail;
use tonic::codegen::{http, Context, Future, Pin, Poll, Service};

use crate::server::grpc::proto::{self, a2a_service_client::A2aServiceClient};

/// A gRPC client of the A2A service over one HTTP/2 connection.
pub(crate) type Client = A2aServiceClient<Http2>;

/// A connection to the server at `url` (`http://host:port/`).
pub(crate) async fn connect(url: &str) -> anyhow::Result<Client> {
    let authority = url.trim_start_matches("http://").trim_end_matches('/');
    let addr: std::net::SocketAddr = authority.parse()?;
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await?;
    tokio::spawn(conn);
    Ok(A2aServiceClient::with_origin(Http2(sender), url.parse()?))
}

/// Send message `n` (blocking) and check the task completed.
pub(crate) async fn send(mut client: Client, n: u64) -> anyhow::Result<()> {
    // A message id per request: one names one task (a repeated id is a retry).
    let request = proto::SendMessageRequest {
        message: Some(proto::Message {
            message_id: format!("ping-{n}"),
            role: proto::Role::User as i32,
            parts: vec![proto::Part {
                content: Some(proto::part::Content::Text("ping".into())),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut request = tonic::Request::new(request);
    request.metadata_mut().insert(
        "a2a-version",
        tonic::metadata::MetadataValue::from_static("1.0"),
    );
    let reply = client.send_message(request).await?.into_inner();
    let completed = match &reply.payload {
        Some(proto::send_message_response::Payload::Task(task)) => task
            .status
            .as_ref()
            .is_some_and(|s| s.state == proto::TaskState::Completed as i32),
        _ => false,
    };
    if !completed {
        bail!("unexpected reply: {reply:?}");
    }
    Ok(())
}

/// One HTTP/2 connection as the generated client's transport: each call is a stream on it, sent
/// straight from the calling task (tonic's `Channel` would hand each call to a worker task first,
/// which on a machine whose cores the server shares is the client's cost, not the binding's).
#[derive(Clone)]
pub(crate) struct Http2(hyper::client::conn::http2::SendRequest<tonic::body::Body>);

impl Service<http::Request<tonic::body::Body>> for Http2 {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = hyper::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(self.0.send_request(request))
    }
}
