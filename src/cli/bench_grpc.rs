//! `bench a2a --binding grpc`: the `bench a2a` workload (blocking sends of "ping" to a trivial
//! durable skill over loopback, every task journaled with FULL durability) through the A2A 1.0 gRPC
//! binding, with the runtime's generated tonic client, one HTTP/2 connection per client in flight.
//! Prints one JSON line like the other bindings'.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::bail;

use tonic::codegen::{http, Context, Future, Pin, Poll, Service};

use super::bench::{a2a_engine, latency_line};
use crate::server::grpc::proto::{self, a2a_service_client::A2aServiceClient};

/// Blocking `SendMessage` over gRPC: `requests` in all, `concurrency` in flight.
pub(crate) async fn a2a_grpc(requests: u64, concurrency: u64) -> anyhow::Result<()> {
    let (_dir, store, engine) = a2a_engine().await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    let server = tokio::spawn(crate::server::serve(
        listener,
        engine,
        crate::server::ServerConfig::new(url.clone()),
    ));
    let addr = listener_addr(&url)?;
    let mut clients = Vec::new();
    for _ in 0..concurrency {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(stream),
        )
        .await?;
        tokio::spawn(conn);
        clients.push(A2aServiceClient::with_origin(Http2(sender), url.parse()?));
    }
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers = clients.into_iter().map(|mut client| {
        let next = next.clone();
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= requests {
                    break;
                }
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
                let t = Instant::now();
                let reply = client.send_message(request).await?.into_inner();
                latencies.push(t.elapsed());
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
            }
            anyhow::Ok(latencies)
        })
    });
    let mut latencies = Vec::new();
    for worker in futures::future::join_all(workers).await {
        latencies.extend(worker??);
    }
    let elapsed = started.elapsed();
    server.abort();
    println!(
        "{}",
        latency_line(&store, "grpc", "1.0", concurrency, elapsed, latencies)
    );
    Ok(())
}

/// The server's address in `url` (`http://host:port/`).
fn listener_addr(url: &str) -> anyhow::Result<std::net::SocketAddr> {
    let authority = url.trim_start_matches("http://").trim_end_matches('/');
    Ok(authority.parse()?)
}

/// One HTTP/2 connection as the generated client's transport: each call is a stream on it, sent
/// straight from the calling task (tonic's `Channel` would hand each call to a worker task first,
/// which on a machine whose cores the server shares is the client's cost, not the binding's).
#[derive(Clone)]
struct Http2(hyper::client::conn::http2::SendRequest<tonic::body::Body>);

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
