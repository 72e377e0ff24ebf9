//! A2A 1.0 over gRPC (`lf.a2a.v1.A2AService`), from Rust: the client tonic generates from the same
//! vendored `a2a.proto`, over HTTP/2 to `radkit serve --default-skill conformance` on its one port.
//! Sends (waiting and `returnImmediately`), streams, `GetTask` with `historyLength`, the
//! input-required round trip, cancel, subscribe, `ListTasks` paging, the errors (`NOT_FOUND` with an
//! `ErrorInfo`, a version not served, no token), and one task over gRPC, JSON-RPC 0.3 and REST.

use crate::support::common;

use std::collections::HashMap;

use prost::Message as _;
use radkit::server::grpc::proto::{self, a2a_service_client::A2aServiceClient};
use serde_json::{json, Value};
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

use common::{rpc, within, Server, PATIENCE};

type Client = A2aServiceClient<Channel>;

/// `radkit serve --default-skill conformance` over a fresh data directory, with `extra` flags.
fn serve(extra: &[&str]) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--data-dir", dir.path().to_str().unwrap()];
    args.extend_from_slice(&["--default-skill", "conformance"]);
    args.extend_from_slice(extra);
    (common::serve(&args), dir)
}

async fn client(url: &str) -> Client {
    let channel = within(PATIENCE, "a gRPC connection", async {
        tonic::transport::Endpoint::from_shared(url.to_owned())
            .unwrap()
            .connect()
            .await
            .unwrap()
    })
    .await;
    A2aServiceClient::new(channel)
}

/// A request with `a2a-version: 1.0` (and a bearer token).
fn req<T>(message: T, token: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("a2a-version", "1.0".parse().unwrap());
    if let Some(token) = token {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    request
}

fn user(text: &str) -> proto::Message {
    proto::Message {
        message_id: common::uuid(),
        role: proto::Role::User as i32,
        parts: vec![proto::Part {
            content: Some(proto::part::Content::Text(text.to_owned())),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn send_request(message: proto::Message, return_immediately: bool) -> proto::SendMessageRequest {
    proto::SendMessageRequest {
        message: Some(message),
        configuration: Some(proto::SendMessageConfiguration {
            return_immediately,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn task_of(response: proto::SendMessageResponse) -> proto::Task {
    match response.payload {
        Some(proto::send_message_response::Payload::Task(task)) => task,
        other => panic!("expected a task, got {other:?}"),
    }
}

fn state(task: &proto::Task) -> proto::TaskState {
    let state = task.status.as_ref().expect("status").state;
    proto::TaskState::try_from(state).expect("a known state")
}

fn text_of(part: &proto::Part) -> &str {
    match &part.content {
        Some(proto::part::Content::Text(text)) => text,
        other => panic!("expected text, got {other:?}"),
    }
}

/// The `google.rpc.ErrorInfo` reason and domain in a status's details.
fn error_info(status: &Status) -> Option<(String, String)> {
    #[derive(Clone, PartialEq, prost::Message)]
    struct RpcStatus {
        #[prost(int32, tag = "1")]
        code: i32,
        #[prost(string, tag = "2")]
        message: String,
        #[prost(message, repeated, tag = "3")]
        details: Vec<prost_types::Any>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    struct ErrorInfo {
        #[prost(string, tag = "1")]
        reason: String,
        #[prost(string, tag = "2")]
        domain: String,
        #[prost(map = "string, string", tag = "3")]
        metadata: HashMap<String, String>,
    }
    let body = RpcStatus::decode(status.details()).ok()?;
    let any = body
        .details
        .iter()
        .find(|a| a.type_url == "type.googleapis.com/google.rpc.ErrorInfo")?;
    let info = ErrorInfo::decode(any.value.as_slice()).ok()?;
    Some((info.reason, info.domain))
}

/// Every item of a server stream, failing the test after [`PATIENCE`].
async fn collect(
    stream: tonic::Streaming<proto::StreamResponse>,
) -> Vec<proto::stream_response::Payload> {
    use futures::StreamExt;
    within(PATIENCE, "the end of a gRPC stream", async {
        stream
            .map(|item| item.expect("a stream item").payload.expect("a payload"))
            .collect()
            .await
    })
    .await
}

#[test(multi_thread)]
async fn grpc_send_waits_for_the_task_or_returns_immediately_and_get_honours_history_length() {
    let (server, _dir) = serve(&[]);
    let mut client = client(&server.url).await;

    let task = task_of(
        client
            .send_message(req(send_request(user("hello grpc"), false), None))
            .await
            .unwrap()
            .into_inner(),
    );
    assert_eq!(state(&task), proto::TaskState::Completed, "{task:?}");
    let artifact = &task.artifacts[0];
    assert_eq!(artifact.name, "echo.txt");
    let text: String = artifact.parts.iter().map(text_of).collect();
    assert_eq!(text, "Echo: hello grpc");

    let early = task_of(
        client
            .send_message(req(send_request(user("quick"), true), None))
            .await
            .unwrap()
            .into_inner(),
    );
    assert!(
        matches!(
            state(&early),
            proto::TaskState::Submitted | proto::TaskState::Working
        ),
        "returnImmediately answers before the 0.3 s task ends: {early:?}"
    );

    let got = client
        .get_task(req(
            proto::GetTaskRequest {
                id: task.id.clone(),
                history_length: Some(0),
                ..Default::default()
            },
            None,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.id, task.id);
    assert!(got.history.is_empty(), "historyLength 0: {got:?}");
    let full = client
        .get_task(req(
            proto::GetTaskRequest {
                id: task.id.clone(),
                ..Default::default()
            },
            None,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(!full.history.is_empty(), "{full:?}");
}

#[test(multi_thread)]
async fn grpc_stream_sends_the_task_then_its_chunks_then_its_end() {
    let (server, _dir) = serve(&[]);
    let mut client = client(&server.url).await;
    let stream = client
        .send_streaming_message(req(send_request(user("streamed"), false), None))
        .await
        .unwrap()
        .into_inner();
    let items = collect(stream).await;
    use proto::stream_response::Payload;
    assert!(matches!(items[0], Payload::Task(_)), "{items:?}");
    let chunks: Vec<&proto::TaskArtifactUpdateEvent> = items
        .iter()
        .filter_map(|i| match i {
            Payload::ArtifactUpdate(u) => Some(u),
            _ => None,
        })
        .collect();
    assert_eq!(chunks.len(), 2, "{items:?}");
    assert!(chunks[1].append && chunks[1].last_chunk, "{chunks:?}");
    match items.last() {
        Some(Payload::StatusUpdate(u)) => assert_eq!(
            u.status.as_ref().unwrap().state,
            proto::TaskState::Completed as i32
        ),
        other => panic!("the stream ends with the completed status: {other:?}"),
    }
}

#[test(multi_thread)]
async fn grpc_input_required_round_trip_and_cancel_and_subscribe() {
    let (server, _dir) = serve(&[]);
    let mut client = client(&server.url).await;

    let asked = task_of(
        client
            .send_message(req(send_request(user("ask me"), false), None))
            .await
            .unwrap()
            .into_inner(),
    );
    assert_eq!(state(&asked), proto::TaskState::InputRequired, "{asked:?}");
    let mut reply = user("forty-two");
    reply.task_id = asked.id.clone();
    reply.context_id = asked.context_id.clone();
    let answered = task_of(
        client
            .send_message(req(send_request(reply, false), None))
            .await
            .unwrap()
            .into_inner(),
    );
    assert_eq!(state(&answered), proto::TaskState::Completed);
    let answer = answered
        .artifacts
        .iter()
        .find(|a| a.name == "answer.txt")
        .expect("answer.txt");
    assert_eq!(text_of(&answer.parts[0]), "forty-two");

    // A task waiting for input is canceled; subscribing to it then is UnsupportedOperation.
    let waiting = task_of(
        client
            .send_message(req(send_request(user("ask again"), false), None))
            .await
            .unwrap()
            .into_inner(),
    );
    let canceled = client
        .cancel_task(req(
            proto::CancelTaskRequest {
                id: waiting.id.clone(),
                ..Default::default()
            },
            None,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state(&canceled), proto::TaskState::Canceled);
    let ended = client
        .subscribe_to_task(req(
            proto::SubscribeToTaskRequest {
                id: waiting.id.clone(),
                ..Default::default()
            },
            None,
        ))
        .await
        .unwrap_err();
    assert_eq!(ended.code(), Code::FailedPrecondition, "{ended:?}");
    assert_eq!(
        error_info(&ended),
        Some(("UNSUPPORTED_OPERATION".into(), "a2a-protocol.org".into()))
    );

    // Subscribing to a running task: the task as it is now, then its updates to the end.
    let running = task_of(
        client
            .send_message(req(send_request(user("follow me"), true), None))
            .await
            .unwrap()
            .into_inner(),
    );
    let stream = client
        .subscribe_to_task(req(
            proto::SubscribeToTaskRequest {
                id: running.id.clone(),
                ..Default::default()
            },
            None,
        ))
        .await;
    match stream {
        Ok(stream) => {
            let items = collect(stream.into_inner()).await;
            use proto::stream_response::Payload;
            assert!(matches!(items[0], Payload::Task(_)), "{items:?}");
            assert!(
                matches!(items.last(), Some(Payload::StatusUpdate(u))
                    if u.status.as_ref().unwrap().state == proto::TaskState::Completed as i32),
                "{items:?}"
            );
        }
        // The 0.3 s task may have ended before the subscription: then it is refused as above.
        Err(e) => assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}"),
    }
}

#[test(multi_thread)]
async fn grpc_list_tasks_pages_through_the_callers_tasks() {
    let (server, _dir) = serve(&[]);
    let mut client = client(&server.url).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let task = task_of(
            client
                .send_message(req(send_request(user(&format!("ask {i}")), false), None))
                .await
                .unwrap()
                .into_inner(),
        );
        ids.push(task.id);
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = client
            .list_tasks(req(
                proto::ListTasksRequest {
                    page_size: Some(2),
                    page_token: token.clone(),
                    status: proto::TaskState::InputRequired as i32,
                    ..Default::default()
                },
                None,
            ))
            .await
            .unwrap()
            .into_inner();
        assert!(page.tasks.len() <= 2);
        assert_eq!(page.total_size, 3);
        seen.extend(page.tasks.into_iter().map(|t| t.id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    seen.sort();
    ids.sort();
    assert_eq!(seen, ids);

    let bad = client
        .list_tasks(req(
            proto::ListTasksRequest {
                page_size: Some(1000),
                ..Default::default()
            },
            None,
        ))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument, "{bad:?}");
}

#[test(multi_thread)]
async fn grpc_errors_are_statuses_with_the_spec_codes_and_error_info() {
    let (server, _dir) = serve(&[]);
    let mut client = client(&server.url).await;

    let missing = client
        .get_task(req(
            proto::GetTaskRequest {
                id: "no-such-task".into(),
                ..Default::default()
            },
            None,
        ))
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound, "{missing:?}");
    assert_eq!(
        error_info(&missing),
        Some(("TASK_NOT_FOUND".into(), "a2a-protocol.org".into()))
    );
    // An error echoes a bounded part of what the client sent: a 100 KB id is NOT_FOUND, not a
    // status whose trailers the client refuses as too large.
    let huge = client
        .get_task(req(
            proto::GetTaskRequest {
                id: "x".repeat(100_000),
                ..Default::default()
            },
            None,
        ))
        .await
        .unwrap_err();
    assert_eq!(huge.code(), Code::NotFound, "{:?}", huge.code());
    assert!(
        huge.message().len() < 2048,
        "{} bytes",
        huge.message().len()
    );
    let stream = client
        .subscribe_to_task(req(
            proto::SubscribeToTaskRequest {
                id: "no-such-task".into(),
                ..Default::default()
            },
            None,
        ))
        .await
        .unwrap_err();
    assert_eq!(stream.code(), Code::NotFound, "{stream:?}");

    let mut old = Request::new(proto::GetTaskRequest {
        id: "x".into(),
        ..Default::default()
    });
    old.metadata_mut()
        .insert("a2a-version", "0.3".parse().unwrap());
    let refused = client.get_task(old).await.unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert_eq!(
        error_info(&refused),
        Some(("VERSION_NOT_SUPPORTED".into(), "a2a-protocol.org".into()))
    );
    let mut future = Request::new(proto::GetTaskRequest::default());
    future
        .metadata_mut()
        .insert("a2a-version", "2.0".parse().unwrap());
    let refused = client.get_task(future).await.unwrap_err();
    assert_eq!(
        error_info(&refused).map(|i| i.0),
        Some("VERSION_NOT_SUPPORTED".into())
    );

    let empty = client
        .send_message(req(
            send_request(
                proto::Message {
                    message_id: "m".into(),
                    role: proto::Role::User as i32,
                    ..Default::default()
                },
                false,
            ),
            None,
        ))
        .await
        .unwrap_err();
    assert_eq!(empty.code(), Code::InvalidArgument, "{empty:?}");
    let no_message = client
        .send_message(req(proto::SendMessageRequest::default(), None))
        .await
        .unwrap_err();
    assert_eq!(no_message.code(), Code::InvalidArgument, "{no_message:?}");

    // A reply to a task that does not exist, sent as a stream: NOT_FOUND before any item.
    let mut orphan = user("hello?");
    orphan.task_id = "no-such-task".into();
    let stream = client
        .send_streaming_message(req(send_request(orphan, false), None))
        .await
        .unwrap_err();
    assert_eq!(stream.code(), Code::NotFound, "{stream:?}");
    // A message whose role is unset (ROLE_UNSPECIFIED) or names no Role.
    for role in [0, 7] {
        let mut message = user("who am I");
        message.role = role;
        let bad = client
            .send_message(req(send_request(message, false), None))
            .await
            .unwrap_err();
        assert_eq!(bad.code(), Code::InvalidArgument, "role {role}: {bad:?}");
    }
    let negative = client
        .get_task(req(
            proto::GetTaskRequest {
                id: "x".into(),
                history_length: Some(-1),
                ..Default::default()
            },
            None,
        ))
        .await
        .unwrap_err();
    assert_eq!(negative.code(), Code::InvalidArgument, "{negative:?}");

    let push = client
        .get_task_push_notification_config(req(
            proto::GetTaskPushNotificationConfigRequest {
                task_id: "no-such-task".into(),
                id: "hook".into(),
                ..Default::default()
            },
            None,
        ))
        .await
        .unwrap_err();
    assert_eq!(push.code(), Code::NotFound, "{push:?}");
    assert_eq!(
        error_info(&push).map(|i| i.0),
        Some("TASK_NOT_FOUND".into())
    );
}

#[test(multi_thread)]
async fn grpc_push_configs_are_created_read_listed_and_deleted_and_the_extended_card_needs_a_token()
{
    let extended = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        extended.path(),
        json!({ "description": "The extended card." }).to_string(),
    )
    .unwrap();
    let (server, _dir) = serve(&[
        "--token",
        "a-token=alice",
        "--push-allow-private",
        "--extended-card",
        extended.path().to_str().unwrap(),
    ]);
    let mut client = client(&server.url).await;
    let token = Some("a-token");
    let asked = task_of(
        client
            .send_message(req(send_request(user("ask push"), false), token))
            .await
            .unwrap()
            .into_inner(),
    );
    let config = |id: &str| proto::TaskPushNotificationConfig {
        task_id: asked.id.clone(),
        id: id.into(),
        url: "http://127.0.0.1:9/hook".into(),
        token: format!("tok-{id}"),
        ..Default::default()
    };
    for id in ["a", "b"] {
        let made = client
            .create_task_push_notification_config(req(config(id), token))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            (made.id.as_str(), made.task_id.as_str()),
            (id, asked.id.as_str())
        );
    }
    let got = client
        .get_task_push_notification_config(req(
            proto::GetTaskPushNotificationConfigRequest {
                task_id: asked.id.clone(),
                id: "a".into(),
                ..Default::default()
            },
            token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.token, "tok-a");
    let page = client
        .list_task_push_notification_configs(req(
            proto::ListTaskPushNotificationConfigsRequest {
                task_id: asked.id.clone(),
                page_size: 1,
                ..Default::default()
            },
            token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page.configs.len(), 1);
    assert!(!page.next_page_token.is_empty());
    client
        .delete_task_push_notification_config(req(
            proto::DeleteTaskPushNotificationConfigRequest {
                task_id: asked.id.clone(),
                id: "b".into(),
                ..Default::default()
            },
            token,
        ))
        .await
        .unwrap();
    let left = client
        .list_task_push_notification_configs(req(
            proto::ListTaskPushNotificationConfigsRequest {
                task_id: asked.id.clone(),
                ..Default::default()
            },
            token,
        ))
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<&str> = left.configs.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["a"]);
    // A webhook pointing at a private address without --push-allow-private is refused elsewhere
    // (tests/it/a2a_push.rs); here the same config over JSON-RPC 0.3 reads back what gRPC wrote.
    let over_rpc = rpc(
        &reqwest::Client::new(),
        &server.url,
        Some("a-token"),
        "tasks/pushNotificationConfig/get",
        json!({ "id": asked.id, "pushNotificationConfigId": "a" }),
    )
    .await;
    assert_eq!(
        over_rpc["result"]["pushNotificationConfig"]["token"], "tok-a",
        "{over_rpc}"
    );

    let card = client
        .get_extended_agent_card(req(proto::GetExtendedAgentCardRequest::default(), token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(card.description, "The extended card.");
    let refused = client
        .get_extended_agent_card(req(proto::GetExtendedAgentCardRequest::default(), None))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
}

#[test(multi_thread)]
async fn grpc_needs_the_bearer_token_and_scopes_tasks_to_its_principal() {
    let (server, _dir) = serve(&["--token", "a-token=alice", "--token", "b-token=bob"]);
    let mut client = client(&server.url).await;
    let none = client
        .send_message(req(send_request(user("hi"), false), None))
        .await
        .unwrap_err();
    assert_eq!(none.code(), Code::Unauthenticated, "{none:?}");
    let wrong = client
        .send_message(req(send_request(user("hi"), false), Some("nope")))
        .await
        .unwrap_err();
    assert_eq!(wrong.code(), Code::Unauthenticated, "{wrong:?}");

    let task = task_of(
        client
            .send_message(req(send_request(user("ask alice"), false), Some("a-token")))
            .await
            .unwrap()
            .into_inner(),
    );
    let get = |token| {
        req(
            proto::GetTaskRequest {
                id: task.id.clone(),
                ..Default::default()
            },
            Some(token),
        )
    };
    assert!(client.get_task(get("a-token")).await.is_ok());
    let other = client.get_task(get("b-token")).await.unwrap_err();
    assert_eq!(other.code(), Code::NotFound, "bob never sees alice's task");
    let listed = client
        .list_tasks(req(proto::ListTasksRequest::default(), Some("b-token")))
        .await
        .unwrap()
        .into_inner();
    assert!(listed.tasks.is_empty(), "{listed:?}");
}

#[test(multi_thread)]
async fn a_task_created_over_grpc_is_read_over_json_rpc_0_3_and_rest_and_the_other_way_round() {
    let (server, _dir) = serve(&[]);
    let mut client = client(&server.url).await;
    let http = reqwest::Client::new();

    let task = task_of(
        client
            .send_message(req(send_request(user("ask from grpc"), false), None))
            .await
            .unwrap()
            .into_inner(),
    );
    let read = rpc(
        &http,
        &server.url,
        None,
        "tasks/get",
        json!({ "id": task.id }),
    )
    .await;
    assert_eq!(
        read["result"]["status"]["state"], "input-required",
        "{read}"
    );
    assert_eq!(
        read["result"]["contextId"],
        Value::from(task.context_id.clone())
    );
    // Answered over 0.3, the task completes; gRPC reads the answer.
    let reply = json!({ "message": {
        "kind": "message", "role": "user", "messageId": common::uuid(),
        "taskId": task.id, "contextId": task.context_id,
        "parts": [{ "kind": "text", "text": "from json-rpc" }]
    }, "configuration": { "blocking": true } });
    let answered = rpc(&http, &server.url, None, "message/send", reply).await;
    assert_eq!(
        answered["result"]["status"]["state"], "completed",
        "{answered}"
    );
    let got = client
        .get_task(req(
            proto::GetTaskRequest {
                id: task.id.clone(),
                ..Default::default()
            },
            None,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state(&got), proto::TaskState::Completed);
    let answer = got
        .artifacts
        .iter()
        .find(|a| a.name == "answer.txt")
        .unwrap();
    assert_eq!(text_of(&answer.parts[0]), "from json-rpc");

    // Created over 0.3, canceled over gRPC.
    let created = rpc(
        &http,
        &server.url,
        None,
        "message/send",
        json!({ "message": common::user("ask from 0.3") }),
    )
    .await;
    let id = created["result"]["id"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let canceled = client
        .cancel_task(req(
            proto::CancelTaskRequest {
                id: id.clone(),
                ..Default::default()
            },
            None,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state(&canceled), proto::TaskState::Canceled);
    let read = rpc(&http, &server.url, None, "tasks/get", json!({ "id": id })).await;
    assert_eq!(read["result"]["status"]["state"], "canceled", "{read}");

    // Created over REST, followed over gRPC: the stream opens with the waiting task, stays open
    // while it waits (a 1.0 subscription follows the task to its end), and ends with the
    // completion a REST reply causes.
    let created: Value = http
        .post(format!("{}/message:send", server.url))
        .header("content-type", "application/a2a+json")
        .body(
            json!({ "message": {
                "messageId": common::uuid(), "role": "ROLE_USER", "parts": [{ "text": "ask over rest" }]
            } })
            .to_string(),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["task"]["id"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let stream = client
        .subscribe_to_task(req(
            proto::SubscribeToTaskRequest {
                id: id.clone(),
                ..Default::default()
            },
            None,
        ))
        .await
        .unwrap()
        .into_inner();
    let replied = http
        .post(format!("{}/message:send", server.url))
        .header("content-type", "application/a2a+json")
        .body(
            json!({ "message": {
                "messageId": common::uuid(), "role": "ROLE_USER", "taskId": id,
                "parts": [{ "text": "from rest" }]
            } })
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(replied.status(), 200);
    let items = collect(stream).await;
    match (items.first(), items.last()) {
        (
            Some(proto::stream_response::Payload::Task(task)),
            Some(proto::stream_response::Payload::StatusUpdate(update)),
        ) => {
            assert_eq!(task.id, id);
            assert_eq!(state(task), proto::TaskState::InputRequired);
            let last = update.status.as_ref().map(|s| s.state);
            assert_eq!(last, Some(proto::TaskState::Completed as i32), "{items:?}");
        }
        other => panic!("the waiting task first, the completion last: {other:?}"),
    }
    let rest: Value = http
        .get(format!("{}/tasks/{}", server.url, task.id))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(rest["status"]["state"], "TASK_STATE_COMPLETED", "{rest}");
}

#[test(multi_thread)]
async fn the_card_lists_grpc_as_the_servers_own_host_and_port() {
    let (server, _dir) = serve(&[]);
    let card: Value = reqwest::get(format!("{}/.well-known/agent-card.json", server.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let interfaces = card["supportedInterfaces"].as_array().unwrap();
    assert!(
        interfaces.contains(&json!({
            "url": server.url.trim_start_matches("http://"),
            "protocolBinding": "GRPC",
            "protocolVersion": "1.0"
        })),
        "{card}"
    );
}
