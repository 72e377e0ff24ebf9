//! The connection promises of `tests/it/connections.rs`, for gRPC's HTTP/2 connections on the same
//! port: a connection that sends no request is cut after the header timeout, the connection limit
//! counts HTTP/2 connections too and an idle one gives its place back after the idle timeout, a
//! gRPC stream in progress is never idle, a caller's streams stay within its limit, and a message
//! over the body limit is refused. The engine runs over a memory store and the server in-process on
//! a loopback listener, with small limits and short timeouts.

use crate::support::agent::{lasting, only, start, Agent};
use crate::support::common;
use crate::support::skills::Nap;

use std::time::Duration;

use futures::StreamExt;
use radkit::server::grpc::proto::{self, a2a_service_client::A2aServiceClient};
use radkit::server::ServerConfig;
use radkit::store::MemoryStore;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::transport::Channel;
use tonic::Code;

const PATIENCE: Duration = Duration::from_secs(10);

/// The `nap` skill served with `config`'s changes to settings whose timeouts do not fire.
async fn agent(config: impl FnOnce(ServerConfig) -> ServerConfig) -> Agent {
    start(only(MemoryStore::new(), Nap), |c| config(lasting(c))).await
}

/// A gRPC client on a connection of its own.
async fn connect(url: &str) -> Result<A2aServiceClient<Channel>, tonic::transport::Error> {
    let channel = tonic::transport::Endpoint::from_shared(url.to_owned())
        .expect("a URL")
        .connect_timeout(PATIENCE)
        .connect()
        .await?;
    Ok(A2aServiceClient::new(channel))
}

/// `GetTask` of a task that does not exist: answered `NOT_FOUND` by a server that serves the
/// connection, anything else by one that refused it.
async fn probe(client: &mut A2aServiceClient<Channel>) -> Code {
    let request = proto::GetTaskRequest {
        id: "no-such-task".into(),
        ..Default::default()
    };
    common::within(PATIENCE, "a gRPC answer", client.get_task(request))
        .await
        .map(|_| Code::Ok)
        .unwrap_or_else(|status| status.code())
}

#[test(multi_thread)]
async fn an_http2_connection_that_sends_no_request_is_cut_after_the_header_timeout() {
    let agent = agent(|mut c| {
        c.header_timeout = Duration::from_millis(200);
        c
    })
    .await;
    // The preface and nothing more: an HTTP/2 connection that never asks anything.
    let mut socket = TcpStream::connect(agent.addr).await.expect("connect");
    socket
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .expect("write the preface");
    let mut chunk = [0u8; 1024];
    common::within(PATIENCE, "the server to close the connection", async {
        loop {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
}

#[test(multi_thread)]
async fn the_connection_limit_counts_grpc_connections_and_an_idle_one_gives_its_place_back() {
    let agent = agent(|mut c| {
        c.max_connections = 1;
        c.idle_timeout = Duration::from_millis(300);
        c
    })
    .await;
    let mut first = connect(&agent.url).await.expect("the first connection");
    assert_eq!(probe(&mut first).await, Code::NotFound);
    // The one place is taken: a second connection is refused.
    let refused = match connect(&agent.url).await {
        Ok(mut second) => probe(&mut second).await,
        Err(_) => Code::Unavailable,
    };
    assert_ne!(refused, Code::NotFound, "a second connection was served");
    // Once the first is idle past the timeout, the server closes it and a new one is served.
    common::within(PATIENCE, "a connection to be served again", async {
        loop {
            if let Ok(mut next) = connect(&agent.url).await {
                if probe(&mut next).await == Code::NotFound {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
}

#[test(multi_thread)]
async fn a_grpc_stream_outlives_the_idle_timeout() {
    let agent = agent(|mut c| {
        c.idle_timeout = Duration::from_millis(200);
        c.header_timeout = Duration::from_millis(200);
        c
    })
    .await;
    let mut client = connect(&agent.url).await.expect("connect");
    let send = proto::SendMessageRequest {
        message: Some(proto::Message {
            message_id: common::uuid(),
            role: proto::Role::User as i32,
            parts: vec![proto::Part {
                content: Some(proto::part::Content::Text("nap".into())),
                ..Default::default()
            }],
            ..Default::default()
        }),
        configuration: Some(proto::SendMessageConfiguration {
            return_immediately: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    let task = match client
        .send_message(send)
        .await
        .expect("send")
        .into_inner()
        .payload
    {
        Some(proto::send_message_response::Payload::Task(task)) => task,
        other => panic!("expected a task, got {other:?}"),
    };
    let mut stream = client
        .subscribe_to_task(proto::SubscribeToTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        })
        .await
        .expect("subscribe")
        .into_inner();
    // Well past both timeouts, the stream still delivers: the cancellation (over JSON-RPC, on
    // another connection) ends it.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let http = reqwest::Client::new();
    let canceled = common::rpc(
        &http,
        &agent.url,
        None,
        "tasks/cancel",
        json!({ "id": task.id }),
    )
    .await;
    assert_eq!(
        canceled["result"]["status"]["state"], "canceled",
        "{canceled}"
    );
    let items: Vec<_> = common::within(PATIENCE, "the end of the stream", async {
        let mut items = Vec::new();
        while let Some(item) = stream.next().await {
            items.push(item.expect("a stream item").payload.expect("a payload"));
        }
        items
    })
    .await;
    match items.last() {
        Some(proto::stream_response::Payload::StatusUpdate(update)) => assert_eq!(
            update.status.as_ref().expect("a status").state,
            proto::TaskState::Canceled as i32,
            "{items:?}"
        ),
        other => panic!("the stream ends with the canceled status, not {other:?}"),
    }
}

#[test(multi_thread)]
async fn a_grpc_request_over_the_body_limit_is_refused_and_the_connection_serves_on() {
    let agent = agent(|mut c| {
        c.max_body_bytes = 1024;
        c
    })
    .await;
    let mut client = connect(&agent.url).await.expect("connect");
    let big = proto::SendMessageRequest {
        message: Some(proto::Message {
            message_id: common::uuid(),
            role: proto::Role::User as i32,
            parts: vec![proto::Part {
                content: Some(proto::part::Content::Text("x".repeat(4096))),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let refused = common::within(PATIENCE, "the refusal", client.send_message(big))
        .await
        .expect_err("a request over the limit was served");
    // tonic's own refusal of a message over the decoding limit.
    assert_eq!(refused.code(), Code::OutOfRange, "{refused:?}");
    assert_eq!(probe(&mut client).await, Code::NotFound);
}

#[test(multi_thread)]
async fn a_grpc_caller_over_its_stream_limit_gets_resource_exhausted_until_a_stream_ends() {
    let agent = agent(|mut c| {
        c.max_streams_per_principal = 1;
        c
    })
    .await;
    let mut client = connect(&agent.url).await.expect("connect");
    let send = proto::SendMessageRequest {
        message: Some(proto::Message {
            message_id: common::uuid(),
            role: proto::Role::User as i32,
            parts: vec![proto::Part {
                content: Some(proto::part::Content::Text("nap".into())),
                ..Default::default()
            }],
            ..Default::default()
        }),
        configuration: Some(proto::SendMessageConfiguration {
            return_immediately: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    let task = match client
        .send_message(send)
        .await
        .expect("send")
        .into_inner()
        .payload
    {
        Some(proto::send_message_response::Payload::Task(task)) => task,
        other => panic!("expected a task, got {other:?}"),
    };
    let subscribe = proto::SubscribeToTaskRequest {
        id: task.id.clone(),
        ..Default::default()
    };
    let open = client
        .subscribe_to_task(subscribe.clone())
        .await
        .expect("a stream within the limit");
    let refused = client
        .subscribe_to_task(subscribe.clone())
        .await
        .expect_err("a second stream was opened");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    // The one stream dropped, a new one opens.
    drop(open);
    common::within(PATIENCE, "a stream to open again", async {
        while client.subscribe_to_task(subscribe.clone()).await.is_err() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}
