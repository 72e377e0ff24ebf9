//! The official A2A Rust client (`a2a-client-lf`, pinned `=0.2.9`) as a second oracle for radkit's
//! A2A 1.0 JSON-RPC and HTTP+JSON bindings, against `radkit serve --default-skill conformance`: the
//! card it resolves and the binding it picks, blocking and non-blocking sends, a stream with the
//! chunked artifact, get with historyLength, the input-required round trip, cancel, subscribe,
//! list with paging, and an unknown task; and, with `--token`, `--extended-card` and `--card-key`,
//! the card's security scheme, the bearer token and the extended card over both bindings.

use crate::support::common;

use a2a::{
    CancelTaskRequest, GetExtendedAgentCardRequest, GetTaskRequest, ListTasksRequest, Message,
    Part, Role, SendMessageConfiguration, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskState,
};
use std::sync::Arc;

use a2a::SecurityScheme;
use a2a_client::agent_card::AgentCardResolver;
use a2a_client::auth::AuthInterceptor;
use a2a_client::{A2AClient, A2AClientFactory, Transport};
use futures::StreamExt;

type Client = A2AClient<Box<dyn Transport>>;

fn user(id: &str, text: &str, task_id: Option<&str>) -> SendMessageRequest {
    let mut message = Message::new(Role::User, vec![Part::text(text)]);
    message.message_id = id.to_owned();
    message.task_id = task_id.map(str::to_owned);
    SendMessageRequest {
        message,
        configuration: None,
        metadata: None,
        tenant: None,
    }
}

fn task(response: SendMessageResponse) -> Task {
    match response {
        SendMessageResponse::Task(task) => task,
        SendMessageResponse::Message(m) => panic!("a message, not a task: {m:?}"),
    }
}

/// A client for `binding` made by the official factory from the card radkit serves.
async fn client(url: &str, binding: &str) -> Client {
    let card = AgentCardResolver::new(None)
        .resolve(url)
        .await
        .expect("the official client reads the card");
    let (client, interface) = A2AClientFactory::builder()
        .preferred_bindings(vec![binding.to_owned()])
        .build()
        .create_from_card_with_interface(&card)
        .await
        .expect("a client for the binding");
    assert_eq!(interface.protocol_binding, binding);
    assert_eq!(interface.protocol_version, "1.0");
    client
}

async fn drive(url: &str, binding: &str) {
    let c = client(url, binding).await;
    let tag = binding.to_lowercase().replace('+', "-");

    // Blocking send of other text: the task completes with the echoed artifact.
    let done = task(
        c.send_message(&user(&format!("lf-{tag}-block"), "hello", None))
            .await
            .unwrap(),
    );
    assert_eq!(
        done.status.state,
        TaskState::Completed,
        "{binding}: {done:?}"
    );
    assert!(
        !done.artifacts.clone().unwrap_or_default().is_empty(),
        "{binding}: {done:?}"
    );

    // Non-blocking: answered before the task ends, then readable.
    let mut request = user(&format!("lf-{tag}-nonblock"), "hello", None);
    request.configuration = Some(SendMessageConfiguration {
        accepted_output_modes: None,
        task_push_notification_config: None,
        history_length: None,
        return_immediately: Some(true),
    });
    let early = task(c.send_message(&request).await.unwrap());
    let read = c
        .get_task(&GetTaskRequest {
            id: early.id.clone(),
            history_length: None,
            tenant: None,
        })
        .await
        .unwrap();
    assert_eq!(read.id, early.id, "{binding}");

    // A stream: the task, then the echo's chunks, then completed. A stream opens with the task as it
    // is when the stream starts, so a chunk written before that (a loaded machine) is in the opening
    // task instead of an update: the promise is that none is lost, and that the last is appended
    // and last.
    let events: Vec<StreamResponse> = c
        .send_streaming_message(&user(&format!("lf-{tag}-stream"), "hello", None))
        .await
        .unwrap()
        .map(|e| e.expect("a stream event"))
        .collect()
        .await;
    let Some(StreamResponse::Task(opening)) = events.first() else {
        panic!("{binding}: the stream opens with the task: {events:?}")
    };
    let chunks: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamResponse::ArtifactUpdate(a) => Some(a),
            _ => None,
        })
        .collect();
    let in_opening = !opening.artifacts.clone().unwrap_or_default().is_empty();
    assert!(
        chunks.len() == 2 || (chunks.len() < 2 && in_opening),
        "{binding}: {events:?}"
    );
    if let Some(last) = chunks.last() {
        assert_eq!(
            (last.append, last.last_chunk),
            (Some(true), Some(true)),
            "{binding}"
        );
    }
    assert!(
        matches!(events.last(), Some(StreamResponse::StatusUpdate(s)) if s.status.state == TaskState::Completed),
        "{binding}: {events:?}"
    );

    // "ask": input-required; get with historyLength 1; a subscription shows it waiting and then
    // completed by the reply, with answer.txt.
    let asked = task(
        c.send_message(&user(&format!("lf-{tag}-ask"), "ask me", None))
            .await
            .unwrap(),
    );
    assert_eq!(
        asked.status.state,
        TaskState::InputRequired,
        "{binding}: {asked:?}"
    );
    let got = c
        .get_task(&GetTaskRequest {
            id: asked.id.clone(),
            history_length: Some(1),
            tenant: None,
        })
        .await
        .unwrap();
    assert_eq!(got.history.unwrap_or_default().len(), 1, "{binding}");
    // A 1.0 subscription follows the task to its end (spec 3.1.6): it opens with the task
    // waiting, stays open across the reply, and ends with the completion.
    let subscription = c
        .subscribe_to_task(&SubscribeToTaskRequest {
            id: asked.id.clone(),
            tenant: None,
        })
        .await
        .unwrap();
    let answered = task(
        c.send_message(&user(
            &format!("lf-{tag}-reply"),
            "forty-two",
            Some(&asked.id),
        ))
        .await
        .unwrap(),
    );
    let subscribed: Vec<StreamResponse> = subscription
        .map(|e| e.expect("a subscription event"))
        .collect()
        .await;
    assert!(
        matches!(subscribed.first(), Some(StreamResponse::Task(t)) if t.status.state == TaskState::InputRequired),
        "{binding}: {subscribed:?}"
    );
    assert!(
        matches!(subscribed.last(), Some(StreamResponse::StatusUpdate(s)) if s.status.state == TaskState::Completed),
        "{binding}: {subscribed:?}"
    );
    assert_eq!(answered.status.state, TaskState::Completed, "{binding}");
    let names: Vec<Option<String>> = answered
        .artifacts
        .unwrap_or_default()
        .into_iter()
        .map(|a| a.name)
        .collect();
    assert!(
        names.contains(&Some("answer.txt".to_owned())),
        "{binding}: {names:?}"
    );

    // Cancel a waiting task.
    let waiting = task(
        c.send_message(&user(&format!("lf-{tag}-cancel"), "ask again", None))
            .await
            .unwrap(),
    );
    let canceled = c
        .cancel_task(&CancelTaskRequest {
            id: waiting.id.clone(),
            metadata: None,
            tenant: None,
        })
        .await
        .unwrap();
    assert_eq!(canceled.status.state, TaskState::Canceled, "{binding}");

    // List, one task a page.
    let page = |token: Option<String>| ListTasksRequest {
        context_id: None,
        status: None,
        page_size: Some(1),
        page_token: token,
        history_length: None,
        status_timestamp_after: None,
        include_artifacts: None,
        tenant: None,
    };
    let first = c.list_tasks(&page(None)).await.unwrap();
    assert_eq!(first.tasks.len(), 1, "{binding}: {first:?}");
    assert!(
        !first.next_page_token.is_empty() && first.total_size >= 2,
        "{binding}: {first:?}"
    );
    let second = c
        .list_tasks(&page(Some(first.next_page_token.clone())))
        .await
        .unwrap();
    assert_eq!(second.tasks.len(), 1, "{binding}");
    assert_ne!(second.tasks[0].id, first.tasks[0].id, "{binding}");

    // Errors: an unknown task is TaskNotFound; no extended card is UnsupportedOperation.
    let missing = c
        .get_task(&GetTaskRequest {
            id: "no-such-task".into(),
            history_length: None,
            tenant: None,
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code, -32001, "{binding}: {missing:?}");
    let card = c
        .get_extended_agent_card(&GetExtendedAgentCardRequest { tenant: None })
        .await
        .unwrap_err();
    assert_eq!(card.code, -32004, "{binding}: {card:?}");
}

#[test(multi_thread)]
async fn official_rust_client_drives_json_rpc_1_0() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::serve(&[
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--default-skill",
        "conformance",
    ]);
    common::within(
        common::PATIENCE * 4,
        "the JSON-RPC run",
        drive(&server.url, "JSONRPC"),
    )
    .await;
}

#[test(multi_thread)]
async fn official_rust_client_drives_rest_1_0() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::serve(&[
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--default-skill",
        "conformance",
    ]);
    common::within(
        common::PATIENCE * 4,
        "the HTTP+JSON run",
        drive(&server.url, "HTTP+JSON"),
    )
    .await;
}

#[test(multi_thread)]
async fn official_rust_client_reads_the_card_with_a_token_and_gets_the_extended_card() {
    const TOKEN: &str = "s3cret";
    let dir = tempfile::tempdir().unwrap();
    let extended = dir.path().join("extended.json");
    std::fs::write(
        &extended,
        r#"{"skills": [{"id": "members-only", "name": "Members only", "description": "For token holders.", "tags": []}]}"#,
    )
    .unwrap();
    let key = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/radkit-runtime/src/model/testdata/card-es256.pem"
    );
    let server = common::serve(&[
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--default-skill",
        "conformance",
        "--token",
        TOKEN,
        "--extended-card",
        extended.to_str().unwrap(),
        "--card-key",
        key,
    ]);
    let card = AgentCardResolver::new(None)
        .resolve(&server.url)
        .await
        .expect("the card");
    let schemes = card.security_schemes.clone().expect("security schemes");
    assert!(
        matches!(&schemes["bearer"], SecurityScheme::HttpAuth(h) if h.scheme == "Bearer"),
        "{schemes:?}"
    );
    let requirements = card
        .security_requirements
        .clone()
        .expect("security requirements");
    assert_eq!(requirements.len(), 1, "{requirements:?}");
    assert_eq!(card.capabilities.extended_agent_card, Some(true));
    assert_eq!(card.signatures.as_ref().map(Vec::len), Some(3));

    for binding in ["JSONRPC", "HTTP+JSON"] {
        let factory = |token: Option<&str>| {
            let builder = A2AClientFactory::builder().preferred_bindings(vec![binding.to_owned()]);
            match token {
                Some(token) => builder.with_interceptor(Arc::new(AuthInterceptor::bearer(token))),
                None => builder,
            }
            .build()
        };
        let anonymous = factory(None).create_from_card(&card).await.unwrap();
        let refused = anonymous
            .get_task(&GetTaskRequest {
                id: "any".into(),
                history_length: None,
                tenant: None,
            })
            .await;
        assert!(
            refused.is_err(),
            "{binding}: a call without the token is refused"
        );
        let c = factory(Some(TOKEN)).create_from_card(&card).await.unwrap();
        let done = task(
            c.send_message(&user(&format!("lf-auth-{binding}"), "hello", None))
                .await
                .unwrap(),
        );
        assert_eq!(done.status.state, TaskState::Completed, "{binding}");
        let extended = c
            .get_extended_agent_card(&GetExtendedAgentCardRequest { tenant: None })
            .await
            .unwrap_or_else(|e| panic!("{binding}: {e:?}"));
        let ids: Vec<&str> = extended.skills.iter().map(|s| s.id.as_str()).collect();
        assert!(
            ids.contains(&"members-only") && ids.contains(&"conformance"),
            "{binding}: {ids:?}"
        );
    }
}
