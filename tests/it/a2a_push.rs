//! Push-notification configs over every binding and version: 1.0 JSON-RPC
//! (`CreateTaskPushNotificationConfig` …), 0.3 JSON-RPC (`tasks/pushNotificationConfig/*`) and REST
//! (`/tasks/{id}/pushNotificationConfigs…`): create, read, list a page at a time, delete
//! (idempotently), the errors, another principal's tasks, and webhook URLs that are refused.

use crate::support::push_common;

use std::sync::Arc;

use push_common::*;
use radkit::store::{MemoryStore, Store, TaskQuery};
use serde_json::{json, Value};

const V1: Option<&str> = Some("1.0");

#[test(multi_thread)]
async fn push_configs_are_created_read_paged_and_deleted_over_json_rpc_1_0() {
    let agent = agent(true).await;
    let task = waiting_task(&agent.url, None).await;
    let hook = "http://127.0.0.1:9/hook";
    let created = call(
        &agent.url,
        V1,
        None,
        "CreateTaskPushNotificationConfig",
        json!({ "taskId": task, "url": hook, "token": "tok",
                "authentication": { "scheme": "Bearer", "credentials": "secret" } }),
    )
    .await;
    let first = &created["result"];
    let first_id = first["id"].as_str().expect("an id is assigned");
    assert!(!first_id.is_empty(), "{created}");
    assert_eq!(first["taskId"], task.as_str(), "{created}");
    assert_eq!(first["url"], hook);
    assert_eq!(first["token"], "tok");
    assert_eq!(
        first["authentication"],
        json!({ "scheme": "Bearer", "credentials": "secret" })
    );
    for id in ["b", "c"] {
        let made = call(
            &agent.url,
            V1,
            None,
            "CreateTaskPushNotificationConfig",
            json!({ "taskId": task, "id": id, "url": hook }),
        )
        .await;
        assert_eq!(made["result"]["id"], id, "{made}");
    }
    let got = call(
        &agent.url,
        V1,
        None,
        "GetTaskPushNotificationConfig",
        json!({ "taskId": task, "id": first_id }),
    )
    .await;
    assert_eq!(&got["result"], first, "{got}");

    // Pages of two: every config once, then an empty token.
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = call(
            &agent.url,
            V1,
            None,
            "ListTaskPushNotificationConfigs",
            json!({ "taskId": task, "pageSize": 2, "pageToken": token }),
        )
        .await;
        let configs = page["result"]["configs"]
            .as_array()
            .expect("configs")
            .clone();
        assert!(configs.len() <= 2, "{page}");
        seen.extend(configs.iter().map(|c| c["id"].as_str().unwrap().to_owned()));
        token = page["result"]["nextPageToken"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        if token.is_empty() {
            break;
        }
    }
    let mut expected = vec![first_id.to_owned(), "b".to_owned(), "c".to_owned()];
    expected.sort();
    assert_eq!(
        seen, expected,
        "a listing in pages shows each config once, in id order"
    );

    for _ in 0..2 {
        let deleted = call(
            &agent.url,
            V1,
            None,
            "DeleteTaskPushNotificationConfig",
            json!({ "taskId": task, "id": "b" }),
        )
        .await;
        assert_eq!(
            deleted["result"],
            json!({}),
            "deleting is idempotent: {deleted}"
        );
    }
    let gone = call(
        &agent.url,
        V1,
        None,
        "GetTaskPushNotificationConfig",
        json!({ "taskId": task, "id": "b" }),
    )
    .await;
    assert_eq!(error_code(&gone), -32001, "{gone}");

    for (method, params) in [
        (
            "CreateTaskPushNotificationConfig",
            json!({ "taskId": "nope", "url": hook }),
        ),
        (
            "ListTaskPushNotificationConfigs",
            json!({ "taskId": "nope" }),
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({ "taskId": "nope", "id": "b" }),
        ),
        (
            "DeleteTaskPushNotificationConfig",
            json!({ "taskId": "nope", "id": "b" }),
        ),
    ] {
        let answer = call(&agent.url, V1, None, method, params).await;
        assert_eq!(
            error_code(&answer),
            -32001,
            "{method} of an unknown task: {answer}"
        );
    }
    for params in [
        json!({ "taskId": task, "url": "ftp://example.com/hook" }),
        json!({ "taskId": task, "url": "not a url" }),
        json!({ "taskId": task }),
        json!({ "taskId": task, "url": hook, "token": "line\nbreak" }),
    ] {
        let answer = call(
            &agent.url,
            V1,
            None,
            "CreateTaskPushNotificationConfig",
            params.clone(),
        )
        .await;
        assert_eq!(error_code(&answer), -32602, "{params}: {answer}");
    }
    let too_big = call(
        &agent.url,
        V1,
        None,
        "ListTaskPushNotificationConfigs",
        json!({ "taskId": task, "pageSize": 500 }),
    )
    .await;
    assert_eq!(error_code(&too_big), -32602, "{too_big}");
}

#[test(multi_thread)]
async fn push_configs_over_json_rpc_0_3_default_to_the_task_id() {
    let agent = agent(true).await;
    let sent = call(
        &agent.url,
        None,
        None,
        "message/send",
        json!({ "message": message_v03("hi", None) }),
    )
    .await;
    let task = sent["result"]["id"].as_str().expect("task").to_owned();
    let hook = "http://127.0.0.1:9/hook";
    let set = call(
        &agent.url,
        None,
        None,
        "tasks/pushNotificationConfig/set",
        json!({ "taskId": task, "pushNotificationConfig": { "url": hook, "token": "t",
                "authentication": { "schemes": ["Bearer"], "credentials": "c" } } }),
    )
    .await;
    assert_eq!(set["result"]["taskId"], task.as_str(), "{set}");
    assert_eq!(
        set["result"]["pushNotificationConfig"]["id"],
        task.as_str(),
        "{set}"
    );
    assert_eq!(
        set["result"]["pushNotificationConfig"]["authentication"]["schemes"],
        json!(["Bearer"])
    );
    let got = call(
        &agent.url,
        None,
        None,
        "tasks/pushNotificationConfig/get",
        json!({ "id": task }),
    )
    .await;
    assert_eq!(
        got["result"], set["result"],
        "get without a config id finds the task's"
    );
    call(
        &agent.url,
        None,
        None,
        "tasks/pushNotificationConfig/set",
        json!({ "taskId": task, "pushNotificationConfig": { "id": "x", "url": hook } }),
    )
    .await;
    let listed = call(
        &agent.url,
        None,
        None,
        "tasks/pushNotificationConfig/list",
        json!({ "id": task }),
    )
    .await;
    assert_eq!(
        listed["result"].as_array().map(Vec::len),
        Some(2),
        "{listed}"
    );
    let deleted = call(
        &agent.url,
        None,
        None,
        "tasks/pushNotificationConfig/delete",
        json!({ "id": task, "pushNotificationConfigId": "x" }),
    )
    .await;
    assert_eq!(deleted["result"], Value::Null, "{deleted}");
    assert!(deleted.get("error").is_none(), "{deleted}");
    let gone = call(
        &agent.url,
        None,
        None,
        "tasks/pushNotificationConfig/get",
        json!({ "id": task, "pushNotificationConfigId": "x" }),
    )
    .await;
    assert_eq!(error_code(&gone), -32001, "{gone}");
    let renamed = call(
        &agent.url,
        V1,
        None,
        "tasks/pushNotificationConfig/set",
        json!({}),
    )
    .await;
    assert!(
        renamed["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("CreateTaskPushNotificationConfig"),
        "a 0.3 name with A2A-Version 1.0 names its 1.0 method: {renamed}"
    );
}

async fn rest(
    method: reqwest::Method,
    url: String,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = client().request(method, url).header("A2A-Version", "1.0");
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let resp = request.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[test(multi_thread)]
async fn push_configs_over_rest_follow_the_proto_paths() {
    use reqwest::Method;
    let agent = agent(true).await;
    let task = waiting_task(&agent.url, None).await;
    let base = format!("{}/tasks/{task}/pushNotificationConfigs", agent.url);
    let (status, created) = rest(
        Method::POST,
        base.clone(),
        None,
        Some(json!({ "id": "r1", "url": "http://127.0.0.1:9/hook", "token": "t" })),
    )
    .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["id"], "r1");
    assert_eq!(
        created["taskId"],
        task.as_str(),
        "the task comes from the path: {created}"
    );
    let (status, got) = rest(Method::GET, format!("{base}/r1"), None, None).await;
    assert_eq!((status, &got), (200, &created));
    let (status, listed) = rest(Method::GET, format!("{base}?pageSize=10"), None, None).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["configs"], json!([created]), "{listed}");
    let (status, deleted) = rest(Method::DELETE, format!("{base}/r1"), None, None).await;
    assert_eq!((status, deleted), (200, json!({})));
    let (status, gone) = rest(Method::GET, format!("{base}/r1"), None, None).await;
    assert_eq!(status, 404, "{gone}");
    assert_eq!(
        gone["error"]["details"][0]["reason"], "TASK_NOT_FOUND",
        "{gone}"
    );
    let (status, unknown) = rest(
        Method::GET,
        format!("{}/tasks/nope/pushNotificationConfigs", agent.url),
        None,
        None,
    )
    .await;
    assert_eq!(status, 404, "{unknown}");
    let (status, bad) = rest(
        Method::POST,
        base,
        None,
        Some(json!({ "url": "gopher://x/" })),
    )
    .await;
    assert_eq!(status, 400, "{bad}");
}

#[test(multi_thread)]
async fn another_principal_can_neither_see_nor_change_a_tasks_push_configs() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let agent = agent_on(store, true, &[("tok-alice", "alice"), ("tok-bob", "bob")]).await;
    let alice = Some("tok-alice");
    let bob = Some("tok-bob");
    let task = waiting_task(&agent.url, alice).await;
    let hook = "http://127.0.0.1:9/hook";
    let made = call(
        &agent.url,
        V1,
        alice,
        "CreateTaskPushNotificationConfig",
        json!({ "taskId": task, "id": "mine", "url": hook }),
    )
    .await;
    assert_eq!(made["result"]["id"], "mine", "{made}");
    for (method, params) in [
        (
            "CreateTaskPushNotificationConfig",
            json!({ "taskId": task, "id": "evil", "url": hook }),
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({ "taskId": task, "id": "mine" }),
        ),
        ("ListTaskPushNotificationConfigs", json!({ "taskId": task })),
        (
            "DeleteTaskPushNotificationConfig",
            json!({ "taskId": task, "id": "mine" }),
        ),
    ] {
        let answer = call(&agent.url, V1, bob, method, params).await;
        assert_eq!(error_code(&answer), -32001, "bob's {method}: {answer}");
    }
    for (method, params) in [
        (
            "tasks/pushNotificationConfig/set",
            json!({ "taskId": task, "pushNotificationConfig": { "url": hook } }),
        ),
        (
            "tasks/pushNotificationConfig/get",
            json!({ "id": task, "pushNotificationConfigId": "mine" }),
        ),
        ("tasks/pushNotificationConfig/list", json!({ "id": task })),
        (
            "tasks/pushNotificationConfig/delete",
            json!({ "id": task, "pushNotificationConfigId": "mine" }),
        ),
    ] {
        let answer = call(&agent.url, None, bob, method, params).await;
        assert_eq!(error_code(&answer), -32001, "bob's {method}: {answer}");
    }
    let base = format!("{}/tasks/{task}/pushNotificationConfigs", agent.url);
    let (status, _) = rest(reqwest::Method::GET, base.clone(), bob, None).await;
    assert_eq!(status, 404);
    let (status, _) = rest(reqwest::Method::DELETE, format!("{base}/mine"), bob, None).await;
    assert_eq!(status, 404);
    let listed = call(
        &agent.url,
        V1,
        alice,
        "ListTaskPushNotificationConfigs",
        json!({ "taskId": task }),
    )
    .await;
    let ids: Vec<&str> = listed["result"]["configs"]
        .as_array()
        .expect("configs")
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(ids, vec!["mine"], "bob changed nothing: {listed}");
}

#[test(multi_thread)]
async fn loopback_and_private_webhooks_are_refused_unless_allowed() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let agent = agent_on(store.clone(), false, &[]).await;
    let task = waiting_task(&agent.url, None).await;
    for hook in [
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://[::1]:9/hook",
        "http://[::ffff:127.0.0.1]:9/hook",
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data",
    ] {
        let answer = call(
            &agent.url,
            V1,
            None,
            "CreateTaskPushNotificationConfig",
            json!({ "taskId": task, "url": hook }),
        )
        .await;
        assert_eq!(error_code(&answer), -32602, "{hook}: {answer}");
    }
    let answer = call(
        &agent.url,
        None,
        None,
        "tasks/pushNotificationConfig/set",
        json!({ "taskId": task, "pushNotificationConfig": { "url": "http://127.0.0.1:9/" } }),
    )
    .await;
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("push-allow-private"),
        "the refusal says how to allow it: {answer}"
    );
    let before = store.list(TaskQuery::default()).await.unwrap().len();
    let refused = call(
        &agent.url,
        V1,
        None,
        "SendMessage",
        json!({ "message": message("hi", None),
                "configuration": { "taskPushNotificationConfig": { "url": "http://127.0.0.1:9/" } } }),
    )
    .await;
    assert_eq!(error_code(&refused), -32602, "{refused}");
    let after = store.list(TaskQuery::default()).await.unwrap().len();
    assert_eq!(
        before, after,
        "a send with a refused webhook starts no task"
    );
    let card: Value = client()
        .get(format!("{}/.well-known/agent-card.json", agent.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["capabilities"]["pushNotifications"], true, "{card}");
}

#[test(multi_thread)]
async fn a_refused_reply_leaves_no_webhook_behind() {
    let agent = agent(true).await;
    let task = waiting_task(&agent.url, None).await;
    let done = call(
        &agent.url,
        V1,
        None,
        "SendMessage",
        json!({ "message": message("yes", Some(&task)) }),
    )
    .await;
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    let refused = call(
        &agent.url,
        V1,
        None,
        "SendMessage",
        json!({ "message": message("again", Some(&task)),
                "configuration": { "taskPushNotificationConfig": { "url": "http://127.0.0.1:9/hook" } } }),
    )
    .await;
    assert_eq!(
        error_code(&refused),
        -32004,
        "a message to an ended task: {refused}"
    );
    let listed = call(
        &agent.url,
        V1,
        None,
        "ListTaskPushNotificationConfigs",
        json!({ "taskId": task }),
    )
    .await;
    assert_eq!(
        listed["result"],
        json!({}),
        "the refused send's webhook is gone: {listed}"
    );
}

#[test(multi_thread)]
async fn a_send_whose_webhook_has_a_bad_token_or_scheme_is_refused_before_any_task_starts() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let agent = agent_on(store.clone(), true, &[]).await;
    let cases = [
        (
            V1,
            "SendMessage",
            json!({ "message": message("hi", None),
                    "configuration": { "taskPushNotificationConfig": {
                        "url": "http://127.0.0.1:9/hook", "token": "a\nb" } } }),
        ),
        (
            V1,
            "SendMessage",
            json!({ "message": message("hi", None),
                    "configuration": { "taskPushNotificationConfig": {
                        "url": "http://127.0.0.1:9/hook",
                        "authentication": { "scheme": "", "credentials": "x" } } } }),
        ),
        (
            None,
            "message/send",
            json!({ "message": message_v03("hi", None),
                    "configuration": { "blocking": true, "pushNotificationConfig": {
                        "url": "http://127.0.0.1:9/hook", "authentication": { "schemes": [] } } } }),
        ),
    ];
    for (version, method, params) in cases {
        let refused = call(&agent.url, version, None, method, params.clone()).await;
        assert_eq!(error_code(&refused), -32602, "{params}: {refused}");
        assert!(
            store.list(TaskQuery::default()).await.unwrap().is_empty(),
            "a send with a bad webhook starts no task: {params}"
        );
    }
}

#[test(multi_thread)]
async fn a_refused_send_restores_the_webhook_it_would_have_replaced() {
    let agent = agent(true).await;
    let task = waiting_task(&agent.url, None).await;
    let made = call(
        &agent.url,
        V1,
        None,
        "CreateTaskPushNotificationConfig",
        json!({ "taskId": task, "id": "hook", "url": "http://127.0.0.1:9/old", "token": "old" }),
    )
    .await;
    assert_eq!(made["result"]["url"], "http://127.0.0.1:9/old", "{made}");
    // Answer the task, then send to it again (refused: it has ended) with a webhook of the same id.
    call(
        &agent.url,
        V1,
        None,
        "SendMessage",
        json!({ "message": message("yes", Some(&task)) }),
    )
    .await;
    let refused = call(
        &agent.url,
        V1,
        None,
        "SendMessage",
        json!({ "message": message("again", Some(&task)),
                "configuration": { "taskPushNotificationConfig": {
                    "id": "hook", "url": "http://127.0.0.1:9/new", "token": "new" } } }),
    )
    .await;
    assert_eq!(error_code(&refused), -32004, "{refused}");
    let got = call(
        &agent.url,
        V1,
        None,
        "GetTaskPushNotificationConfig",
        json!({ "taskId": task, "id": "hook" }),
    )
    .await;
    assert_eq!(
        (&got["result"]["url"], &got["result"]["token"]),
        (&json!("http://127.0.0.1:9/old"), &json!("old")),
        "the client's webhook is as it set it: {got}"
    );
}
