//! Golden JSON of the 1.0 wire types, and their conversions from and to radkit's model.

use serde::de::DeserializeOwned;
use serde_json::json;

use super::*;
use crate::model::{self as own, v0_3, WireError};

/// Reads `json` as `T` and writes it back: the result must be the same JSON.
fn golden<T: Serialize + DeserializeOwned>(json: Value) -> T {
    let typed: T = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(serde_json::to_value(&typed).unwrap(), json);
    typed
}

fn read<T: DeserializeOwned>(json: Value) -> Result<T, String> {
    serde_json::from_value(json).map_err(|e| e.to_string())
}

// ---- ProtoJSON: parsers accept the original proto field names too ----

#[test]
fn requests_with_proto_field_names_read_as_their_camel_case_form() {
    // ProtoJSON parsers accept `history_length` as well as `historyLength` (protobuf's own
    // json_format does, and clients built on it — the A2A TCK's among them — send it); what is
    // written is always camelCase. User data (metadata) keeps its keys as sent.
    let snake: SendMessageRequest = read(json!({
        "message": {
            "message_id": "m1", "context_id": "c1", "task_id": "t1", "role": "ROLE_USER",
            "reference_task_ids": ["t0"],
            "parts": [{"text": "hi", "media_type": "text/plain"}],
            "metadata": {"my_key": 1},
        },
        "configuration": {"history_length": 2, "return_immediately": true,
                          "accepted_output_modes": ["text/plain"]},
    }))
    .unwrap();
    let camel: SendMessageRequest = read(json!({
        "message": {
            "messageId": "m1", "contextId": "c1", "taskId": "t1", "role": "ROLE_USER",
            "referenceTaskIds": ["t0"],
            "parts": [{"text": "hi", "mediaType": "text/plain"}],
            "metadata": {"my_key": 1},
        },
        "configuration": {"historyLength": 2, "returnImmediately": true,
                          "acceptedOutputModes": ["text/plain"]},
    }))
    .unwrap();
    assert_eq!(snake, camel);
    assert_eq!(
        serde_json::to_value(&snake).unwrap()["message"]["metadata"],
        json!({"my_key": 1})
    );
    let get: GetTaskRequest = read(json!({"id": "t1", "history_length": 0})).unwrap();
    assert_eq!(get.history_length, Some(0));
    let list: ListTasksRequest = read(json!({
        "context_id": "c1", "page_size": 5, "page_token": "x", "include_artifacts": true,
        "status_timestamp_after": "2026-01-01T00:00:00Z",
    }))
    .unwrap();
    assert_eq!(
        (
            list.context_id.as_str(),
            list.page_size,
            list.page_token.as_str()
        ),
        ("c1", Some(5), "x")
    );
    let config: TaskPushNotificationConfig =
        read(json!({"task_id": "t1", "url": "https://example.com/hook"})).unwrap();
    assert_eq!(config.task_id, "t1");
}

// ---- Enums (§4.1.3 TaskState, §4.1.5 Role, §5.5 JSON Field Naming Convention) ----

#[test]
fn task_state_serializes_as_the_proto_enum_name() {
    let names = [
        "TASK_STATE_UNSPECIFIED",
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_AUTH_REQUIRED",
    ];
    for (number, (state, name)) in TaskState::ALL.into_iter().zip(names).enumerate() {
        assert_eq!(state as usize, number);
        assert_eq!(golden::<TaskState>(json!(name)), state);
    }
}

#[test]
fn role_serializes_as_the_proto_enum_name() {
    let names = ["ROLE_UNSPECIFIED", "ROLE_USER", "ROLE_AGENT"];
    for (number, (role, name)) in Role::ALL.into_iter().zip(names).enumerate() {
        assert_eq!(role as usize, number);
        assert_eq!(golden::<Role>(json!(name)), role);
    }
}

#[test]
fn enums_are_also_read_by_proto_number() {
    assert_eq!(read::<TaskState>(json!(6)), Ok(TaskState::InputRequired));
    assert_eq!(read::<Role>(json!(2)), Ok(Role::Agent));
    assert_eq!(
        serde_json::to_value(read::<TaskState>(json!(3)).unwrap()).unwrap(),
        json!("TASK_STATE_COMPLETED")
    );
}

#[test]
fn unknown_enum_values_and_0_3_names_are_refused() {
    // §6.5, "Validation Error Example": TASK_STATE_RUNNING is not a state.
    for bad in [json!("TASK_STATE_RUNNING"), json!("working"), json!(9)] {
        let e = read::<TaskState>(bad.clone()).unwrap_err();
        assert!(e.contains("unknown TaskState value"), "{bad}: {e}");
    }
    assert!(read::<Role>(json!("user")).is_err());
}

// ---- Part (§4.1.6; §A.2.1 "Kind Discriminator Removed"; whats-new-v1 "Part Object") ----

#[test]
fn a_part_is_discriminated_by_its_content_member() {
    // §A.2.1 "Current Pattern (v1.0)" and whats-new-v1 "v1.0 Structure (Unified Part)".
    let text = golden::<Part>(json!({"text": "Hello world", "mediaType": "text/plain"}));
    assert_eq!(text.content, Some(PartContent::Text("Hello world".into())));
    assert_eq!(text.media_type, "text/plain");

    let raw = golden::<Part>(
        json!({"raw": "iVBORw0KGgo=", "filename": "diagram.png", "mediaType": "image/png"}),
    );
    assert_eq!(
        raw.content,
        Some(PartContent::Raw(b"\x89PNG\r\n\x1a\n".to_vec()))
    );
    assert_eq!(raw.filename, "diagram.png");

    let url = golden::<Part>(json!({
        "url": "https://example.com/doc.pdf",
        "filename": "doc.pdf",
        "mediaType": "application/pdf"
    }));
    assert_eq!(
        url.content,
        Some(PartContent::Url("https://example.com/doc.pdf".into()))
    );

    let data = golden::<Part>(json!({"data": {"key": "value"}, "mediaType": "application/json"}));
    assert_eq!(
        data.content,
        Some(PartContent::Data(json!({"key": "value"})))
    );

    // §6.8: a text part with metadata.
    let with_metadata = golden::<Part>(json!({
        "text": "Show me a list of my open IT tickets",
        "metadata": {"mediaType": "application/json", "schema": {"type": "array"}}
    }));
    assert!(with_metadata.metadata.is_some());
}

#[test]
fn part_data_holds_any_json_value_null_included() {
    // proto: `google.protobuf.Value data = 4` ("object, array, string, number, boolean, or null").
    for value in [
        json!([1, 2]),
        json!("s"),
        json!(1.5),
        json!(true),
        Value::Null,
    ] {
        let part = golden::<Part>(json!({ "data": value }));
        assert_eq!(part.content, Some(PartContent::Data(value)));
    }
}

#[test]
fn a_part_with_two_content_members_is_refused() {
    let e = read::<Part>(json!({"text": "a", "url": "https://example.com"})).unwrap_err();
    assert!(
        e.contains("more than one of `text`, `raw`, `url` and `data`"),
        "{e}"
    );
}

#[test]
fn raw_reads_url_safe_or_unpadded_base64_and_writes_standard_padded() {
    for text in ["+/8=", "+/8", "-_8=", "-_8"] {
        let part = read::<Part>(json!({ "raw": text })).unwrap();
        assert_eq!(
            part.content,
            Some(PartContent::Raw(vec![0xfb, 0xff])),
            "{text}"
        );
        assert_eq!(serde_json::to_value(&part).unwrap(), json!({"raw": "+/8="}));
    }
    let e = read::<Part>(json!({"raw": "not base64!"})).unwrap_err();
    assert!(e.contains("`raw` is not valid base64"), "{e}");
}

#[test]
fn a_part_without_content_reads_but_has_no_0_3_form() {
    let part = golden::<Part>(json!({"mediaType": "text/plain"}));
    assert_eq!(part.content, None);
    assert_eq!(
        own::Part::try_from(part),
        Err(WireError::NoContent {
            field: "Part.content"
        })
    );
}

// ---- Message, Task, Artifact, TaskStatus (§4.1; examples §6.1, §6.3, §6.5, §6.7) ----

#[test]
fn message_golden() {
    // §6.1 "Basic Task Execution", request message.
    let message = golden::<Message>(json!({
        "role": "ROLE_USER",
        "parts": [{"text": "What is the weather today?"}],
        "messageId": "msg-uuid"
    }));
    assert_eq!(message.role, Role::User);
    // §6.3 follow-up request, with a task id.
    golden::<Message>(json!({
        "taskId": "task-uuid",
        "role": "ROLE_USER",
        "parts": [{"text": "From San Francisco to New York"}],
        "messageId": "msg-2"
    }));
    // §6.7, a text part and a raw file part (the spec's base64 is elided; a real one here).
    golden::<Message>(json!({
        "role": "ROLE_USER",
        "parts": [
            {"text": "Analyze this image and highlight any faces."},
            {"raw": "iVBORw0KGgo=", "filename": "input_image.png", "mediaType": "image/png"}
        ],
        "messageId": "6dbc13b5-bd57-4c2b-b503-24e381b6c8d6"
    }));
    // Every field of the proto's Message.
    golden::<Message>(json!({
        "messageId": "m",
        "contextId": "c",
        "taskId": "t",
        "role": "ROLE_AGENT",
        "parts": [{"data": {"a": 1}}],
        "metadata": {"k": "v"},
        "extensions": ["https://example.com/ext/v1"],
        "referenceTaskIds": ["t0"]
    }));
}

#[test]
fn task_golden() {
    // §6.1 response task, with an artifact (§4.1.7).
    let task = golden::<Task>(json!({
        "id": "task-uuid",
        "contextId": "context-uuid",
        "status": {"state": "TASK_STATE_COMPLETED"},
        "artifacts": [{
            "artifactId": "artifact-uuid",
            "name": "Weather Report",
            "parts": [{"text": "Today will be sunny with a high of 75°F"}]
        }]
    }));
    assert_eq!(task.status.state, TaskState::Completed);
    // §6.5, a working task whose status (§4.1.2) carries a message and a timestamp.
    golden::<Task>(json!({
        "id": "789abc-def0-1234-5678-9abcdef01234",
        "contextId": "another-context-id",
        "status": {
            "state": "TASK_STATE_WORKING",
            "message": {
                "role": "ROLE_AGENT",
                "parts": [{"text": "Processing your document analysis..."}],
                "messageId": "msg-status-update"
            },
            "timestamp": "2024-03-15T10:20:00Z"
        }
    }));
    // §6.7 response task: an artifact holding a file by URL.
    golden::<Task>(json!({
        "id": "43667960-d455-4453-b0cf-1bae4955270d",
        "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2024-03-15T12:05:00Z"},
        "artifacts": [{
            "artifactId": "9b6934dd-37e3-4eb1-8766-962efaab63a1",
            "name": "processed_image_with_faces.png",
            "parts": [{
                "url": "https://storage.example.com/processed/task-bbb/output.png?token=xyz",
                "filename": "output.png",
                "mediaType": "image/png"
            }]
        }]
    }));
    // Every field of the proto's Task and Artifact.
    golden::<Task>(json!({
        "id": "t",
        "contextId": "c",
        "status": {"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": "2025-10-28T10:30:00.000Z"},
        "artifacts": [{
            "artifactId": "a",
            "name": "n",
            "description": "d",
            "parts": [{"text": "x"}],
            "metadata": {},
            "extensions": ["https://example.com/ext/v1"]
        }],
        "history": [{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}],
        "metadata": {"k": [1]}
    }));
}

#[test]
fn unset_fields_are_omitted_and_required_ones_always_written() {
    let message = Message {
        message_id: "m".into(),
        context_id: String::new(),
        task_id: String::new(),
        role: Role::Unspecified,
        parts: vec![],
        metadata: None,
        extensions: vec![],
        reference_task_ids: vec![],
    };
    assert_eq!(
        serde_json::to_value(&message).unwrap(),
        json!({"messageId": "m", "role": "ROLE_UNSPECIFIED", "parts": []})
    );
    // §3.1.4: `nextPageToken` MUST always be present, "" on the last page.
    assert_eq!(
        serde_json::to_value(ListTasksResponse::default()).unwrap(),
        json!({"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0})
    );
}

#[test]
fn required_identifiers_must_be_present() {
    let e = read::<Message>(json!({"role": "ROLE_USER", "parts": []})).unwrap_err();
    assert!(e.contains("missing field `messageId`"), "{e}");
    let e = read::<Task>(json!({"id": "t"})).unwrap_err();
    assert!(e.contains("missing field `status`"), "{e}");
    // §6.2's stream example omits `contextId` from its events, which the proto requires.
    let e = read::<TaskStatusUpdateEvent>(
        json!({"taskId": "task-uuid", "status": {"state": "TASK_STATE_COMPLETED"}}),
    )
    .unwrap_err();
    assert!(e.contains("missing field `contextId`"), "{e}");
}

// ---- Streaming (§4.2, §3.2.3, §4.3.3; examples §6.2, §6.6) ----

#[test]
fn status_update_event_golden() {
    // §6.6, the notification the server posts to the webhook.
    let json = json!({"statusUpdate": {
        "taskId": "43667960-d455-4453-b0cf-1bae4955270d",
        "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2024-03-15T18:30:00Z"}
    }});
    let StreamResponse::StatusUpdate(event) = golden::<StreamResponse>(json.clone()) else {
        panic!("not a status update")
    };
    assert_eq!(serde_json::to_value(&event).unwrap(), json["statusUpdate"]);
}

#[test]
fn artifact_update_event_golden() {
    // §6.2's artifactUpdate, with the `contextId` and `artifactId` the proto requires and the
    // chunking flags of §4.2.2.
    let json = json!({"artifactUpdate": {
        "taskId": "task-uuid",
        "contextId": "context-uuid",
        "artifact": {"artifactId": "report", "parts": [{"text": "# Climate Change Report\n\n"}]},
        "append": true,
        "lastChunk": true,
        "metadata": {"seq": 2}
    }});
    let StreamResponse::ArtifactUpdate(event) = golden::<StreamResponse>(json.clone()) else {
        panic!("not an artifact update")
    };
    assert!(event.append && event.last_chunk);
    assert_eq!(
        serde_json::to_value(&event).unwrap(),
        json["artifactUpdate"]
    );
}

#[test]
fn stream_response_is_discriminated_by_its_member_name() {
    // §4.3.3 lists the four members; §6.2 opens a stream with a task.
    let task = golden::<StreamResponse>(
        json!({"task": {"id": "task-uuid", "status": {"state": "TASK_STATE_WORKING"}}}),
    );
    assert!(matches!(task, StreamResponse::Task(_)));
    let message = golden::<StreamResponse>(json!({"message": {
        "messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "done"}]
    }}));
    assert!(matches!(message, StreamResponse::Message(_)));
    assert!(read::<StreamResponse>(json!({"kind": "status-update"})).is_err());
}

// ---- Requests and responses (§3.2, §9.4, §11.4; examples §6.1, §6.5, §6.6) ----

#[test]
fn send_message_request_golden() {
    // §6.6, a send that asks for push notifications.
    let request = golden::<SendMessageRequest>(json!({
        "message": {
            "role": "ROLE_USER",
            "parts": [{"text": "Generate the Q1 sales report. This usually takes a while. Notify me when it's ready."}],
            "messageId": "6dbc13b5-bd57-4c2b-b503-24e381b6c8d6"
        },
        "configuration": {
            "taskPushNotificationConfig": {
                "url": "https://client.example.com/webhook/a2a-notifications",
                "authentication": {"scheme": "Bearer", "credentials": "secure-client-token-for-task-aaa"}
            }
        }
    }));
    let config = request.configuration.unwrap();
    assert_eq!(
        config.task_push_notification_config.unwrap().authentication,
        Some(AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: "secure-client-token-for-task-aaa".into()
        })
    );
    // §11.4, with accepted output modes; and every proto field.
    golden::<SendMessageRequest>(json!({
        "message": {"messageId": "uuid", "role": "ROLE_USER", "parts": [{"text": "Hello"}]},
        "configuration": {"acceptedOutputModes": ["text/plain"]}
    }));
    golden::<SendMessageRequest>(json!({
        "tenant": "acme",
        "message": {"messageId": "uuid", "role": "ROLE_USER", "parts": [{"text": "Hello"}]},
        "configuration": {
            "acceptedOutputModes": ["text/plain", "application/json"],
            "historyLength": 0,
            "returnImmediately": true
        },
        "metadata": {"trace": "x"}
    }));
}

#[test]
fn send_configuration_has_return_immediately_and_no_blocking() {
    // proto SendMessageConfiguration: `bool return_immediately = 4` and
    // `task_push_notification_config = 2`; 0.3's `blocking` and §5.5's `pushNotificationConfig`
    // are unknown fields, ignored.
    let config = read::<SendMessageConfiguration>(json!({
        "blocking": false,
        "pushNotificationConfig": {"url": "https://example.com/hook"},
        "returnImmediately": true
    }))
    .unwrap();
    assert_eq!(
        config,
        SendMessageConfiguration {
            return_immediately: true,
            ..SendMessageConfiguration::default()
        }
    );
    assert_eq!(
        serde_json::to_value(&config).unwrap(),
        json!({"returnImmediately": true})
    );
}

#[test]
fn send_message_response_golden() {
    // §6.1 and §11.4 responses; §9.4.1 "contains one of task, message".
    let response = golden::<SendMessageResponse>(json!({"task": {
        "id": "task-uuid", "contextId": "context-uuid", "status": {"state": "TASK_STATE_COMPLETED"}
    }}));
    assert!(matches!(response, SendMessageResponse::Task(_)));
    let response = golden::<SendMessageResponse>(json!({"message": {
        "messageId": "m", "contextId": "c", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]
    }}));
    assert!(matches!(response, SendMessageResponse::Message(_)));
}

#[test]
fn task_operation_requests_golden() {
    // §9.4.3 GetTask params.
    let get = golden::<GetTaskRequest>(json!({"id": "task-uuid", "historyLength": 10}));
    assert_eq!(get.history_length, Some(10));
    golden::<GetTaskRequest>(json!({"tenant": "acme", "id": "task-uuid", "historyLength": 0}));
    // §9.4.4 ListTasks params, and the remaining proto fields.
    let list = golden::<ListTasksRequest>(json!({
        "contextId": "context-uuid",
        "status": "TASK_STATE_WORKING",
        "pageSize": 50,
        "pageToken": "cursor-token"
    }));
    assert_eq!(list.status, TaskState::Working);
    golden::<ListTasksRequest>(json!({
        "tenant": "acme",
        "historyLength": 3,
        "statusTimestampAfter": "2023-10-27T10:00:00Z",
        "includeArtifacts": false
    }));
    golden::<ListTasksRequest>(json!({}));
    // §9.4.5 CancelTask and §9.4.6 SubscribeToTask params.
    golden::<CancelTaskRequest>(json!({"id": "task-uuid"}));
    golden::<CancelTaskRequest>(
        json!({"tenant": "acme", "id": "task-uuid", "metadata": {"why": "x"}}),
    );
    golden::<SubscribeToTaskRequest>(json!({"id": "task-uuid"}));
    golden::<SubscribeToTaskRequest>(json!({"tenant": "acme", "id": "task-uuid"}));
    // §9.4.8 GetExtendedAgentCard has no params; the proto's only field is `tenant`.
    golden::<GetExtendedAgentCardRequest>(json!({}));
    golden::<GetExtendedAgentCardRequest>(json!({"tenant": "acme"}));
}

#[test]
fn list_tasks_response_golden() {
    // §6.5, both responses.
    let page = golden::<ListTasksResponse>(json!({
        "tasks": [{
            "id": "3f36680c-7f37-4a5f-945e-d78981fafd36",
            "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2024-03-15T10:15:00Z"}
        }],
        "totalSize": 5,
        "pageSize": 10,
        "nextPageToken": ""
    }));
    assert_eq!((page.total_size, page.page_size), (5, 10));
    golden::<ListTasksResponse>(json!({
        "tasks": [],
        "totalSize": 15,
        "pageSize": 10,
        "nextPageToken": "base64-encoded-next-cursor-token"
    }));
}

#[test]
fn push_notification_config_types_golden() {
    // §3.1.7-§3.1.10 (tables of the proto messages) and §6.6's config and authentication.
    golden::<TaskPushNotificationConfig>(json!({
        "url": "https://client.example.com/webhook/a2a-notifications",
        "authentication": {"scheme": "Bearer", "credentials": "secure-client-token-for-task-aaa"}
    }));
    let config = golden::<CreateTaskPushNotificationConfigRequest>(json!({
        "tenant": "acme",
        "id": "cfg-1",
        "taskId": "task-uuid",
        "url": "https://client.example.com/webhook",
        "token": "session-token",
        "authentication": {"scheme": "Basic"}
    }));
    assert_eq!(config.task_id, "task-uuid");
    golden::<AuthenticationInfo>(json!({"scheme": "Bearer", "credentials": "t"}));
    golden::<GetTaskPushNotificationConfigRequest>(json!({"taskId": "task-uuid", "id": "cfg-1"}));
    golden::<DeleteTaskPushNotificationConfigRequest>(
        json!({"tenant": "acme", "taskId": "task-uuid", "id": "cfg-1"}),
    );
    golden::<ListTaskPushNotificationConfigsRequest>(json!({"taskId": "task-uuid"}));
    golden::<ListTaskPushNotificationConfigsRequest>(
        json!({"tenant": "acme", "taskId": "task-uuid", "pageSize": 10, "pageToken": "p"}),
    );
    golden::<ListTaskPushNotificationConfigsResponse>(json!({
        "configs": [{"id": "cfg-1", "taskId": "task-uuid", "url": "https://client.example.com/webhook"}],
        "nextPageToken": "p2"
    }));
    golden::<ListTaskPushNotificationConfigsResponse>(json!({}));
}

// ---- Agent card (§4.4, §4.5, §5.8, §8.5, §6.9) ----

#[test]
fn agent_card_golden() {
    // §8.5 "Sample Agent Card" (descriptions and the second skill shortened), except that its
    // `"security": [{"google": [..]}]` is written as the proto's `securityRequirements`
    // (repeated SecurityRequirement, each a map<string, StringList> named `schemes`).
    let card = golden::<AgentCard>(json!({
        "name": "GeoSpatial Route Planner Agent",
        "description": "Provides advanced route planning, traffic analysis, and custom map generation services.",
        "supportedInterfaces": [
            {"url": "https://georoute-agent.example.com/a2a/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "https://georoute-agent.example.com/a2a/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "https://georoute-agent.example.com/a2a/json", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
        ],
        "provider": {"organization": "Example Geo Services Inc.", "url": "https://www.examplegeoservices.com"},
        "iconUrl": "https://georoute-agent.example.com/icon.png",
        "version": "1.2.0",
        "documentationUrl": "https://docs.examplegeoservices.com/georoute-agent/api",
        "capabilities": {"streaming": true, "pushNotifications": true, "extendedAgentCard": true},
        "securitySchemes": {
            "google": {"openIdConnectSecurityScheme": {
                "openIdConnectUrl": "https://accounts.google.com/.well-known/openid-configuration"
            }}
        },
        "securityRequirements": [{"schemes": {"google": {"list": ["openid", "profile", "email"]}}}],
        "defaultInputModes": ["application/json", "text/plain"],
        "defaultOutputModes": ["application/json", "image/png"],
        "skills": [{
            "id": "route-optimizer-traffic",
            "name": "Traffic-Aware Route Optimizer",
            "description": "Calculates the optimal driving route between two or more locations.",
            "tags": ["maps", "routing", "navigation", "directions", "traffic"],
            "examples": ["Plan a route from '1600 Amphitheatre Parkway, Mountain View, CA' to 'San Francisco International Airport' avoiding tolls."],
            "inputModes": ["application/json", "text/plain"],
            "outputModes": ["application/json", "application/vnd.geo+json", "text/html"]
        }],
        "signatures": [{
            "protected": "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpPU0UiLCJraWQiOiJrZXktMSIsImprdSI6Imh0dHBzOi8vZXhhbXBsZS5jb20vYWdlbnQvandrcy5qc29uIn0",
            "signature": "QFdkNLNszlGj3z3u0YQGt_T9LixY3qtdQpZmsTdDHDe3fXV9y9-B3m2-XgCpzuhiLt8E0tV6HXoZKHv4GtHgKQ"
        }]
    }));
    assert_eq!(card.supported_interfaces[1].protocol_binding, "GRPC");
    assert!(matches!(
        card.security_schemes["google"],
        SecurityScheme::OpenIdConnect(_)
    ));
}

#[test]
fn agent_card_parts_golden() {
    // §5.8, a custom binding's interface; `tenant` from the proto.
    golden::<AgentInterface>(json!({
        "url": "wss://agent.example.com/a2a/websocket",
        "protocolBinding": "https://example.com/bindings/websocket/v1",
        "tenant": "acme",
        "protocolVersion": "1.0"
    }));
    // §4.4.3-§4.4.5, §4.4.7: every proto field.
    golden::<AgentCapabilities>(json!({
        "streaming": false,
        "pushNotifications": false,
        "extensions": [{
            "uri": "https://example.com/extensions/geolocation/v1",
            "description": "Location data",
            "required": true,
            "params": {"precision": "city"}
        }],
        "extendedAgentCard": false
    }));
    golden::<AgentCapabilities>(json!({}));
    golden::<AgentProvider>(json!({"url": "https://ai.google.dev", "organization": "Google"}));
    golden::<AgentSkill>(json!({
        "id": "s",
        "name": "S",
        "description": "d",
        "tags": [],
        "securityRequirements": [{"schemes": {"bearer": {}}}]
    }));
    golden::<AgentCardSignature>(
        json!({"protected": "eyJhbGciOiJFUzI1NiJ9", "signature": "c2ln", "header": {"kid": "key-1"}}),
    );
}

#[test]
fn security_schemes_golden() {
    // §4.5 (tables of the proto messages); §6.9 for OpenID Connect.
    let schemes = [
        json!({"apiKeySecurityScheme": {"description": "key", "location": "header", "name": "X-API-Key"}}),
        json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}),
        json!({"openIdConnectSecurityScheme": {
            "openIdConnectUrl": "https://accounts.google.com/.well-known/openid-configuration"
        }}),
        json!({"mtlsSecurityScheme": {}}),
        json!({"oauth2SecurityScheme": {
            "flows": {"authorizationCode": {
                "authorizationUrl": "https://auth.example.com/authorize",
                "tokenUrl": "https://auth.example.com/token",
                "refreshUrl": "https://auth.example.com/refresh",
                "scopes": {"read": "Read access"},
                "pkceRequired": true
            }},
            "oauth2MetadataUrl": "https://auth.example.com/.well-known/oauth-authorization-server"
        }}),
        json!({"oauth2SecurityScheme": {"flows": {"clientCredentials": {
            "tokenUrl": "https://auth.example.com/token", "scopes": {}
        }}}}),
        json!({"oauth2SecurityScheme": {"flows": {"deviceCode": {
            "deviceAuthorizationUrl": "https://auth.example.com/device",
            "tokenUrl": "https://auth.example.com/token",
            "scopes": {"read": "Read access"}
        }}}}),
        json!({"oauth2SecurityScheme": {"flows": {"implicit": {
            "authorizationUrl": "https://auth.example.com/authorize", "scopes": {"read": "Read access"}
        }}}}),
        json!({"oauth2SecurityScheme": {"flows": {"password": {
            "tokenUrl": "https://auth.example.com/token"
        }}}}),
    ];
    for scheme in schemes {
        golden::<SecurityScheme>(scheme);
    }
    // A oneof sets one member.
    assert!(read::<SecurityScheme>(json!({
        "mtlsSecurityScheme": {},
        "httpAuthSecurityScheme": {"scheme": "Bearer"}
    }))
    .is_err());
}

#[test]
fn types_only_seen_inside_others_golden() {
    // §4.1.7 Artifact and §4.1.2 TaskStatus with every field; §4.3 SendMessageConfiguration
    // with every field (historyLength 0 is set, not absent: the proto field is `optional`).
    golden::<Artifact>(json!({
        "artifactId": "a1",
        "name": "answer.txt",
        "description": "the answer",
        "parts": [{"text": "42"}],
        "metadata": {"k": 1},
        "extensions": ["https://example.com/ext/v1"]
    }));
    golden::<TaskStatus>(json!({
        "state": "TASK_STATE_INPUT_REQUIRED",
        "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "Your answer?"}]},
        "timestamp": "2025-10-28T10:30:00Z"
    }));
    golden::<SendMessageConfiguration>(json!({
        "acceptedOutputModes": ["text/plain"],
        "taskPushNotificationConfig": {"url": "https://example.com/hook", "token": "t"},
        "historyLength": 0,
        "returnImmediately": true
    }));
    // §4.5 SecurityRequirement: scheme name to StringList; an empty list is `{}`.
    golden::<SecurityRequirement>(
        json!({"schemes": {"oauth": {"list": ["read", "write"]}, "key": {}}}),
    );
    golden::<StringList>(json!({"list": ["a"]}));
    golden::<AgentExtension>(json!({"uri": "https://example.com/ext/v1"}));
}

#[test]
fn a_security_scheme_with_0_3_members_beside_its_oneof_reads_as_the_oneof() {
    // What cards served for both versions hold (the official Python SDK's, radkit's).
    let scheme = read::<SecurityScheme>(json!({
        "httpAuthSecurityScheme": {"scheme": "Bearer"},
        "type": "http",
        "scheme": "Bearer"
    }))
    .unwrap();
    assert_eq!(
        scheme,
        SecurityScheme::HttpAuth(HttpAuthSecurityScheme {
            description: String::new(),
            scheme: "Bearer".into(),
            bearer_format: String::new()
        })
    );
    // A 0.3 scheme alone has no 1.0 member: refused, naming the members.
    let e = read::<SecurityScheme>(json!({"type": "http", "scheme": "bearer"})).unwrap_err();
    assert!(e.contains("httpAuthSecurityScheme"), "{e}");
    let e = read::<SecurityScheme>(json!({"mtlsSecurityScheme": {"description": 5}})).unwrap_err();
    assert!(e.contains("`mtlsSecurityScheme`"), "{e}");
}

// ---- Conversions from and to radkit's model ----

/// A message of the model with every part kind and every optional field, read from its 0.3 form.
fn own_message(role: &str) -> own::Message {
    let wire: v0_3::Message = serde_json::from_value(json!({
        "kind": "message",
        "role": role,
        "messageId": "m1",
        "contextId": "c1",
        "taskId": "t1",
        "referenceTaskIds": ["t0"],
        "extensions": ["https://example.com/ext/v1"],
        "metadata": {"k": 1},
        "parts": [
            {"kind": "text", "text": "hi", "metadata": {"a": true}},
            {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "hi.txt"}},
            {"kind": "file", "file": {"uri": "https://example.com/a.png", "mimeType": "image/png"}},
            {"kind": "data", "data": {"x": [1, 2]}, "metadata": {"b": 2}}
        ]
    }))
    .unwrap();
    wire.try_into().unwrap()
}

#[test]
fn a_message_with_every_part_kind_survives_v1_and_back() {
    for role in ["user", "agent"] {
        let message = own_message(role);
        let v1 = Message::from(message.clone());
        assert_eq!(own::Message::try_from(v1).unwrap(), message);
    }
}

#[test]
fn a_message_is_written_in_the_v1_shape() {
    let v1 = Message::from(own_message("user"));
    assert_eq!(
        serde_json::to_value(&v1).unwrap(),
        json!({
            "messageId": "m1",
            "contextId": "c1",
            "taskId": "t1",
            "role": "ROLE_USER",
            "parts": [
                {"text": "hi", "metadata": {"a": true}},
                {"raw": "aGk=", "filename": "hi.txt", "mediaType": "text/plain"},
                {"url": "https://example.com/a.png", "mediaType": "image/png"},
                {"data": {"x": [1, 2]}, "metadata": {"b": 2}}
            ],
            "metadata": {"k": 1},
            "extensions": ["https://example.com/ext/v1"],
            "referenceTaskIds": ["t0"]
        })
    );
}

#[test]
fn a_task_with_history_artifacts_and_every_part_kind_survives_v1_and_back() {
    let message = own_message("agent");
    let task = own::Task {
        id: "t1".into(),
        context_id: "c1".into(),
        status: own::TaskStatus {
            state: own::TaskState::InputRequired,
            message: Some(message.clone()),
            timestamp: Some("2025-10-28T10:30:00.000Z".into()),
        },
        history: vec![own_message("user"), message.clone()],
        artifacts: vec![own::Artifact {
            artifact_id: "a1".into(),
            name: Some("report".into()),
            description: Some("the report".into()),
            parts: message.parts,
            metadata: serde_json::from_value(json!({"m": 1})).unwrap(),
            extensions: vec!["https://example.com/ext/v1".into()],
        }],
        metadata: serde_json::from_value(json!({"owner": "me"})).unwrap(),
    };
    let v1 = Task::from(task.clone());
    assert_eq!(v1.status.state, TaskState::InputRequired);
    assert_eq!(own::Task::try_from(v1).unwrap(), task);
}

#[test]
fn every_task_state_survives_v1_and_back() {
    for state in own::TaskState::ALL {
        assert_eq!(own::TaskState::try_from(TaskState::from(state)), Ok(state));
    }
}

#[test]
fn the_update_events_survive_v1_and_back() {
    let status = own::StatusUpdate {
        task_id: "t1".into(),
        context_id: "c1".into(),
        status: own::TaskStatus {
            state: own::TaskState::Completed,
            message: None,
            timestamp: Some("2025-10-28T10:30:00Z".into()),
        },
        is_final: true,
        metadata: serde_json::from_value(json!({"k": 1})).unwrap(),
    };
    let v1 = TaskStatusUpdateEvent::from(status.clone());
    assert_eq!(own::StatusUpdate::try_from(v1).unwrap(), status);

    let artifact = own::ArtifactUpdate {
        task_id: "t1".into(),
        context_id: "c1".into(),
        artifact: own::Artifact {
            artifact_id: "a1".into(),
            name: None,
            description: None,
            parts: own_message("agent").parts,
            metadata: None,
            extensions: Vec::new(),
        },
        append: true,
        last_chunk: true,
        metadata: serde_json::from_value(json!({"k": 1})).unwrap(),
    };
    let v1 = TaskArtifactUpdateEvent::from(artifact.clone());
    assert!(v1.append && v1.last_chunk);
    assert_eq!(own::ArtifactUpdate::try_from(v1).unwrap(), artifact);
}

#[test]
fn a_v1_status_update_is_final_when_a_v1_stream_would_close() {
    for (state, is_final) in [
        (TaskState::Submitted, false),
        (TaskState::Working, false),
        (TaskState::InputRequired, true),
        (TaskState::AuthRequired, true),
        (TaskState::Completed, true),
        (TaskState::Failed, true),
        (TaskState::Canceled, true),
        (TaskState::Rejected, true),
    ] {
        let event = TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state,
                message: None,
                timestamp: None,
            },
            metadata: None,
        };
        let own = own::StatusUpdate::try_from(event).unwrap();
        assert_eq!(own.is_final, is_final, "{state:?}");
    }
}

#[test]
fn values_without_a_counterpart_are_typed_errors_naming_the_field() {
    let message = |role: &str, part: Value| {
        read::<Message>(json!({"messageId": "m", "role": role, "parts": [part]})).unwrap()
    };
    let e = own::Message::try_from(message("ROLE_UNSPECIFIED", json!({"text": "x"})));
    assert_eq!(
        e,
        Err(WireError::Unspecified {
            field: "Message.role"
        })
    );
    assert!(e.unwrap_err().to_string().contains("`Message.role`"));
    assert_eq!(
        own::Message::try_from(message("ROLE_USER", json!({"data": [1]}))),
        Err(WireError::DataNotObject { field: "Part.data" })
    );
    assert_eq!(
        own::Message::try_from(message("ROLE_USER", json!({"filename": "a"}))),
        Err(WireError::NoContent {
            field: "Part.content"
        })
    );
    let task =
        read::<Task>(json!({"id": "t", "status": {"state": "TASK_STATE_UNSPECIFIED"}})).unwrap();
    assert_eq!(
        own::Task::try_from(task),
        Err(WireError::Unspecified {
            field: "TaskStatus.state"
        })
    );
}

#[test]
fn a_v1_text_part_loses_media_type_and_filename_in_the_model() {
    let part =
        read::<Part>(json!({"text": "# hi", "mediaType": "text/markdown", "filename": "a.md"}))
            .unwrap();
    assert_eq!(own::Part::try_from(part), Ok(own::Part::text("# hi")));
    let part = read::<Part>(json!({"url": "https://example.com/a", "filename": "a"})).unwrap();
    assert_eq!(
        own::Part::try_from(part).unwrap(),
        own::Part::file(own::File::uri("https://example.com/a", None).named("a"))
    );
}
