//! `radkit lambda http` and `radkit lambda sweep` as AWS Lambda functions, run through the real
//! `lambda_runtime` client loop against a local Runtime API (the documented endpoints
//! `GET /2018-06-01/runtime/invocation/next` and `POST …/{id}/response|error`, served here), on a
//! shared Postgres store: the agent card, a task asked over JSON-RPC 0.3 and answered over
//! HTTP+JSON 1.0 in separate invocations (Function URL events), and a task longer than one
//! invocation's time that answers `working` and is finished by scheduled sweeps.
#![cfg(unix)]

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, Mutex};

use crate::support::common::{user, within};
use crate::support::services;

/// One invocation waiting for the function: its id, payload, time, and where its answer goes.
struct Invocation {
    id: String,
    event: Value,
    budget: Duration,
}

/// Where each invocation's answer goes, by its request id (`Err`: the function reported an error).
type Answers = Arc<Mutex<HashMap<String, oneshot::Sender<Result<Value, Value>>>>>;

#[derive(Clone)]
struct Api {
    next: Arc<Mutex<mpsc::Receiver<Invocation>>>,
    answers: Answers,
}

async fn next(State(api): State<Api>) -> impl IntoResponse {
    let invocation = api.next.lock().await.recv().await;
    let Some(invocation) = invocation else {
        return (StatusCode::GONE, HeaderMap::new(), String::new());
    };
    let deadline = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        + invocation.budget;
    let mut headers = HeaderMap::new();
    headers.insert(
        "lambda-runtime-aws-request-id",
        invocation.id.parse().unwrap(),
    );
    headers.insert(
        "lambda-runtime-deadline-ms",
        deadline.as_millis().to_string().parse().unwrap(),
    );
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:eu-west-1:123456789012:function:radkit"
            .parse()
            .unwrap(),
    );
    headers.insert(
        "lambda-runtime-trace-id",
        "Root=1-5759e988-bd862e3fe1be46a994272793".parse().unwrap(),
    );
    (StatusCode::OK, headers, invocation.event.to_string())
}

async fn answered(
    State(api): State<Api>,
    Path((id, kind)): Path<(String, String)>,
    body: String,
) -> StatusCode {
    let value: Value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    if let Some(tx) = api.answers.lock().await.remove(&id) {
        let _ = tx.send(if kind == "response" {
            Ok(value)
        } else {
            Err(value)
        });
    }
    StatusCode::ACCEPTED
}

/// A local Runtime API and the function process polling it.
struct Function {
    invocations: mpsc::Sender<Invocation>,
    answers: Answers,
    child: std::process::Child,
    count: u32,
}

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Function {
    /// `radkit lambda <args>` against a Runtime API of its own.
    async fn start(args: &[&str]) -> Function {
        let (invocations, rx) = mpsc::channel(16);
        let answers = Arc::new(Mutex::new(HashMap::new()));
        let api = Api {
            next: Arc::new(Mutex::new(rx)),
            answers: answers.clone(),
        };
        let app = axum::Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route("/2018-06-01/runtime/invocation/{id}/{kind}", post(answered))
            .with_state(api);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let child = Command::new(env!("CARGO_BIN_EXE_radkit"))
            .arg("lambda")
            .args(args)
            .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", "radkit")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Function {
            invocations,
            answers,
            child,
            count: 0,
        }
    }

    /// Invoke the function with `event`, giving it `budget`; its answer (`Err` for an error).
    async fn invoke(&mut self, event: Value, budget: Duration) -> Result<Value, Value> {
        self.count += 1;
        let id = format!("inv-{}", self.count);
        let (tx, rx) = oneshot::channel();
        self.answers.lock().await.insert(id.clone(), tx);
        self.invocations
            .send(Invocation { id, event, budget })
            .await
            .unwrap();
        within(Duration::from_secs(60), "the function's answer", rx)
            .await
            .unwrap()
    }

    /// An HTTP request through a Function URL event; the status and the JSON body.
    async fn http(
        &mut self,
        method: &str,
        path: &str,
        headers: Value,
        body: Option<Value>,
        budget: Duration,
    ) -> (u16, Value) {
        let mut all = json!({"content-type": "application/json", "host": "fn.example"});
        for (k, v) in headers.as_object().unwrap() {
            all[k] = v.clone();
        }
        let event = json!({
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": path,
            "rawQueryString": "",
            "headers": all,
            "requestContext": {
                "accountId": "123456789012", "apiId": "fn", "domainName": "fn.example",
                "domainPrefix": "fn", "requestId": format!("req-{}", self.count),
                "routeKey": "$default", "stage": "$default",
                "time": "27/Nov/2026:00:00:00 +0000", "timeEpoch": 1_795_000_000_000u64,
                "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                         "sourceIp": "127.0.0.1", "userAgent": "radkit-test"}
            },
            "body": body.map(|b| b.to_string()),
            "isBase64Encoded": false
        });
        let answer = self
            .invoke(event, budget)
            .await
            .expect("the function answered");
        let status = answer["statusCode"].as_u64().unwrap_or(0) as u16;
        let body = answer["body"].as_str().unwrap_or("null");
        (
            status,
            serde_json::from_str(body).unwrap_or(Value::String(body.to_owned())),
        )
    }
}

async fn fresh_schema() -> String {
    let (_, scoped) =
        radkit::store::PostgresStore::create_schema(&services::postgres_url(), "radkit_lambda")
            .await
            .expect("create a test schema");
    scoped
}

const LONG: Duration = Duration::from_secs(30);

#[test(multi_thread, needs = Postgres)]
async fn the_a2a_surface_and_the_sweep_run_as_lambda_functions_on_postgres() {
    let url = fresh_schema().await;
    let mut http = Function::start(&[
        "http",
        "--store",
        &url,
        "--public-url",
        "https://fn.example/",
    ])
    .await;
    let (status, card) = http
        .http("GET", "/.well-known/agent-card.json", json!({}), None, LONG)
        .await;
    assert_eq!(status, 200, "{card}");
    let bindings: Vec<&str> = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["protocolBinding"].as_str().unwrap())
        .collect();
    assert!(
        bindings.contains(&"JSONRPC") && bindings.contains(&"HTTP+JSON"),
        "{bindings:?}"
    );
    assert!(
        !bindings.contains(&"GRPC"),
        "no gRPC through Lambda's front doors: {bindings:?}"
    );

    // The research loop (the binary's default skill): asked over JSON-RPC 0.3 ...
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send",
                      "params": {"message": user("Durable execution for agents")}});
    let (status, asked) = http.http("POST", "/", json!({}), Some(send), LONG).await;
    assert_eq!(status, 200);
    assert_eq!(
        asked["result"]["status"]["state"], "input-required",
        "{asked}"
    );
    let task_id = asked["result"]["id"].as_str().unwrap().to_owned();
    // ... and answered over HTTP+JSON 1.0 in another invocation.
    let reply = json!({"message": {"messageId": "reply-1", "role": "ROLE_USER", "taskId": task_id,
                                   "parts": [{"text": "Make it friendlier."}]}});
    let (status, done) = http
        .http(
            "POST",
            "/message:send",
            json!({"a2a-version": "1.0"}),
            Some(reply),
            LONG,
        )
        .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        done["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );

    // A task longer than its invocation: 30 ticks of 100 ms each in a 3 s invocation (less the
    // adapter's margin) answers `working`; scheduled sweeps, each its own invocation, finish it.
    let mut ticks = user("30 100");
    ticks["metadata"] = json!({"skillId": "ticker"});
    let send =
        json!({"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {"message": ticks}});
    let started = Instant::now();
    let (_, working) = http
        .http("POST", "/", json!({}), Some(send), Duration::from_secs(3))
        .await;
    assert_eq!(working["result"]["status"]["state"], "working", "{working}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the invocation kept its deadline"
    );
    let ticker = working["result"]["id"].as_str().unwrap().to_owned();
    let mut sweep = Function::start(&["sweep", "--store", &url]).await;
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut sweeps = 0;
    let state = loop {
        let get =
            json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": ticker}});
        let (_, got) = http.http("POST", "/", json!({}), Some(get), LONG).await;
        let state = got["result"]["status"]["state"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if state != "working" && state != "submitted" {
            break state;
        }
        assert!(
            Instant::now() < deadline,
            "the sweeps never finished the ticker: {got}"
        );
        let answer = sweep
            .invoke(
                json!({"source": "aws.events", "detail-type": "Scheduled Event"}),
                Duration::from_secs(3),
            )
            .await
            .expect("a sweep's answer");
        assert!(answer["passes"].is_u64(), "{answer}");
        sweeps += 1;
    };
    assert_eq!(state, "completed");
    assert!(
        sweeps >= 1,
        "the first invocation could not have done 30 ticks in its time"
    );
}
