//! `bench a2a --binding grpc`'s client: a blocking `SendMessage` of "ping" through the A2A 1.0 gRPC
//! binding with the runtime's generated tonic client, one HTTP/2 connection per worker.

use anyhow::bail;

use crate::server::grpc::proto::{self, a2a_service_client::A2aServiceClient};

/// A gRPC client of the A2A service over one HTTP/2 connection.
pub(crate) type Client = A2aServiceClient<tonic::transport::Channel>;

/// A connection to the server at `url`.
pub(crate) async fn connect(url: &str) -> anyhow::Result<Client> {
    let channel = tonic::transport::Endpoint::from_shared(url.to_owned())?
        .connect()
        .await?;
    Ok(A2aServiceClient::new(channel))
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
