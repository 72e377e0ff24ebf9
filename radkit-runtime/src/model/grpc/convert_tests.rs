//! The protobuf forms of the `v1` types: what a gRPC client sends reads as the same `v1` value the
//! ProtoJSON of the same message reads as, and answers keep every field.

use serde_json::json;

use super::*;

fn text_part(text: &str) -> proto::Part {
    proto::Part {
        content: Some(proto::part::Content::Text(text.to_owned())),
        ..Default::default()
    }
}

#[test]
fn a_send_request_reads_as_its_protojson_twin() {
    let data = prost_types::Value {
        kind: Some(Kind::StructValue(prost_types::Struct {
            fields: [
                (
                    "n".to_owned(),
                    prost_types::Value {
                        kind: Some(Kind::NumberValue(2.5)),
                    },
                ),
                (
                    "list".to_owned(),
                    prost_types::Value {
                        kind: Some(Kind::ListValue(prost_types::ListValue {
                            values: vec![
                                prost_types::Value {
                                    kind: Some(Kind::BoolValue(true)),
                                },
                                prost_types::Value {
                                    kind: Some(Kind::NullValue(0)),
                                },
                            ],
                        })),
                    },
                ),
            ]
            .into_iter()
            .collect(),
        })),
    };
    let request = proto::SendMessageRequest {
        tenant: String::new(),
        message: Some(proto::Message {
            message_id: "m1".to_owned(),
            context_id: "c1".to_owned(),
            task_id: String::new(),
            role: proto::Role::User as i32,
            parts: vec![
                text_part("hi"),
                proto::Part {
                    content: Some(proto::part::Content::Raw(b"\x00\x01".to_vec())),
                    filename: "a.bin".to_owned(),
                    media_type: "application/octet-stream".to_owned(),
                    ..Default::default()
                },
                proto::Part {
                    content: Some(proto::part::Content::Data(data)),
                    ..Default::default()
                },
            ],
            metadata: Some(prost_types::Struct {
                fields: [(
                    "skillId".to_owned(),
                    prost_types::Value {
                        kind: Some(Kind::StringValue("echo".to_owned())),
                    },
                )]
                .into_iter()
                .collect(),
            }),
            extensions: vec![],
            reference_task_ids: vec!["t0".to_owned()],
        }),
        configuration: Some(proto::SendMessageConfiguration {
            accepted_output_modes: vec!["text/plain".to_owned()],
            task_push_notification_config: None,
            history_length: Some(3),
            return_immediately: true,
        }),
        metadata: None,
    };
    let twin: v1::SendMessageRequest = serde_json::from_value(json!({
        "message": {
            "messageId": "m1",
            "contextId": "c1",
            "role": "ROLE_USER",
            "parts": [
                {"text": "hi"},
                {"raw": "AAE=", "filename": "a.bin", "mediaType": "application/octet-stream"},
                {"data": {"n": 2.5, "list": [true, null]}}
            ],
            "metadata": {"skillId": "echo"},
            "referenceTaskIds": ["t0"]
        },
        "configuration": {
            "acceptedOutputModes": ["text/plain"],
            "historyLength": 3,
            "returnImmediately": true
        }
    }))
    .unwrap();
    assert_eq!(v1::SendMessageRequest::try_from(request).unwrap(), twin);
}

#[test]
fn a_request_without_its_message_or_with_an_unknown_enum_is_a_bad_field() {
    let missing = proto::SendMessageRequest::default();
    assert_eq!(
        v1::SendMessageRequest::try_from(missing).unwrap_err().field,
        "message"
    );
    let request = proto::SendMessageRequest {
        message: Some(proto::Message {
            message_id: "m".to_owned(),
            role: 9,
            parts: vec![text_part("x")],
            ..Default::default()
        }),
        ..Default::default()
    };
    let e = v1::SendMessageRequest::try_from(request).unwrap_err();
    assert_eq!(e.field, "message.role");
    assert!(e.problem.contains("9"), "{e}");
    let list = proto::ListTasksRequest {
        status: 42,
        ..Default::default()
    };
    assert_eq!(
        v1::ListTasksRequest::try_from(list).unwrap_err().field,
        "status"
    );
    let nan = proto::SendMessageRequest {
        message: Some(proto::Message {
            message_id: "m".to_owned(),
            role: 1,
            parts: vec![proto::Part {
                content: Some(proto::part::Content::Data(prost_types::Value {
                    kind: Some(Kind::NumberValue(f64::NAN)),
                })),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        v1::SendMessageRequest::try_from(nan).unwrap_err().field,
        "message.parts[0].data"
    );
}

#[test]
fn a_list_request_filter_keeps_its_time_as_rfc3339() {
    let request = proto::ListTasksRequest {
        context_id: "c".to_owned(),
        status: proto::TaskState::Working as i32,
        page_size: Some(2),
        page_token: "tok".to_owned(),
        history_length: Some(0),
        status_timestamp_after: Some("2026-05-01T10:00:00Z".parse().unwrap()),
        include_artifacts: Some(true),
        ..Default::default()
    };
    let read = v1::ListTasksRequest::try_from(request).unwrap();
    assert_eq!(read.status, v1::TaskState::Working);
    assert_eq!(
        read.status_timestamp_after.as_deref(),
        Some("2026-05-01T10:00:00Z")
    );
    assert_eq!((read.page_size, read.history_length), (Some(2), Some(0)));
}

#[test]
fn a_task_answer_keeps_every_field() {
    let task: v1::Task = serde_json::from_value(json!({
        "id": "t1",
        "contextId": "c1",
        "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "s", "role": "ROLE_AGENT", "parts": [{"text": "ask?"}]},
            "timestamp": "2026-05-01T10:00:00.250Z"
        },
        "artifacts": [{
            "artifactId": "a1", "name": "answer.txt",
            "parts": [{"text": "x", "mediaType": "text/plain"}],
            "metadata": {"k": [1, "two"]}
        }],
        "history": [{"messageId": "m1", "role": "ROLE_USER", "parts": [{"url": "https://x/y"}]}]
    }))
    .unwrap();
    let out = proto::Task::from(task);
    assert_eq!((out.id.as_str(), out.context_id.as_str()), ("t1", "c1"));
    let status = out.status.unwrap();
    assert_eq!(status.state, proto::TaskState::InputRequired as i32);
    let ts = status.timestamp.unwrap();
    assert_eq!((ts.seconds, ts.nanos), (1_777_629_600, 250_000_000));
    assert_eq!(status.message.unwrap().role, proto::Role::Agent as i32);
    let artifact = &out.artifacts[0];
    assert_eq!(artifact.name, "answer.txt");
    assert_eq!(artifact.parts[0].media_type, "text/plain");
    let meta = artifact.metadata.clone().unwrap();
    assert_eq!(
        struct_in(meta, "m").unwrap(),
        json!({"k": [1.0, "two"]}).as_object().unwrap().clone()
    );
    assert_eq!(
        out.history[0].parts[0].content,
        Some(proto::part::Content::Url("https://x/y".to_owned()))
    );
}

#[test]
fn stream_items_and_send_answers_keep_their_oneof_member() {
    let event: v1::StreamResponse = serde_json::from_value(json!({"artifactUpdate": {
        "taskId": "t", "contextId": "c", "append": true, "lastChunk": true,
        "artifact": {"artifactId": "a", "parts": [{"text": "2"}]}
    }}))
    .unwrap();
    match proto::StreamResponse::from(event).payload {
        Some(proto::stream_response::Payload::ArtifactUpdate(u)) => {
            assert!(u.append && u.last_chunk);
            assert_eq!(u.artifact.unwrap().artifact_id, "a");
        }
        other => panic!("{other:?}"),
    }
    let status: v1::StreamResponse = serde_json::from_value(json!({"statusUpdate": {
        "taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}
    }}))
    .unwrap();
    assert!(matches!(
        proto::StreamResponse::from(status).payload,
        Some(proto::stream_response::Payload::StatusUpdate(_))
    ));
    let task: v1::Task = serde_json::from_value(
        json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}),
    )
    .unwrap();
    assert!(matches!(
        proto::SendMessageResponse::from(v1::SendMessageResponse::Task(task)).payload,
        Some(proto::send_message_response::Payload::Task(_))
    ));
}

#[test]
fn a_push_config_keeps_its_fields_both_ways() {
    let config = proto::TaskPushNotificationConfig {
        tenant: String::new(),
        id: "cfg-1".to_owned(),
        task_id: "t1".to_owned(),
        url: "https://hooks.example.com/a2a".to_owned(),
        token: "tok".to_owned(),
        authentication: Some(proto::AuthenticationInfo {
            scheme: "Bearer".to_owned(),
            credentials: "secret".to_owned(),
        }),
    };
    let read = v1::TaskPushNotificationConfig::from(config.clone());
    assert_eq!(read.url, "https://hooks.example.com/a2a");
    assert_eq!(read.authentication.as_ref().unwrap().scheme, "Bearer");
    assert_eq!(proto::TaskPushNotificationConfig::from(read), config);
    let list = v1::ListTaskPushNotificationConfigsRequest::from(
        proto::ListTaskPushNotificationConfigsRequest {
            task_id: "t1".to_owned(),
            page_size: 5,
            page_token: "p".to_owned(),
            ..Default::default()
        },
    );
    assert_eq!(
        (
            list.task_id.as_str(),
            list.page_size,
            list.page_token.as_str()
        ),
        ("t1", 5, "p")
    );
}
