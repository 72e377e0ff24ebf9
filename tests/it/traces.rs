//! OpenTelemetry traces (the `otel` feature): one task through the A2A server with an incoming W3C
//! `traceparent`, its spans exported over OTLP/HTTP to a receiver in this test (decoded with the
//! OpenTelemetry project's protobuf types), and the model call it makes; then a task whose call to
//! another agent over gRPC and whose MCP tool call over HTTP carry the trace on. The subscriber is
//! this test's own (`set_default` on its current-thread runtime, where every span of the task is
//! made), never the process's global one that other tests share.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::HeaderMap;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use radkit::client::Binding;
use radkit::engine::AgentSpec;
use radkit::llm::OpenAiModel;
use radkit::prelude::*;
use radkit::store::MemoryStore;
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

use crate::support::agent::{self, client};
use crate::support::common::{user, within, PATIENCE};
use crate::support::mcp_server;

/// The trace the client's request belongs to, and the client's span in it.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// Asks the `writer` model once and completes with its answer.
#[derive(Default)]
struct Writes;

#[flow_skill(id = "writes", name = "Writes", register = false)]
impl Writes {
    #[step(start)]
    async fn write(&self, ctx: &StepCtx, _: Content) -> StepResult {
        let text: String = ctx.llm("writer").run("a line").await?;
        ctx.complete(text, vec![])
    }
}

/// Calls the `peer` agent and the MCP tool `srv.lookup`, and completes with both answers.
#[derive(Default)]
struct Reaches;

#[flow_skill(id = "reaches", name = "Reaches", register = false)]
impl Reaches {
    #[step(start)]
    async fn reach(&self, ctx: &StepCtx, _: Content) -> StepResult {
        let reply = ctx.agent("peer").send("hello").await?;
        let looked: serde_json::Value = ctx.tool("srv.lookup").call(json!({ "name": "x" })).await?;
        ctx.complete(format!("{} {}", reply.text(), looked["name"]), vec![])
    }
}

/// Answers every message at once.
#[derive(Default)]
struct Answers;

#[flow_skill(id = "answers", name = "Answers", register = false)]
impl Answers {
    #[step(start)]
    async fn answer(&self, ctx: &StepCtx, _: Content) -> StepResult {
        ctx.complete("answered", vec![])
    }
}

/// What the receiver got: exported spans, and the `traceparent` of each model call.
#[derive(Default)]
struct Received {
    spans: Mutex<Vec<Span>>,
    traceparents: Mutex<Vec<Option<String>>>,
}

/// An OTLP/HTTP trace receiver (`POST /v1/traces`) and an OpenAI-compatible model
/// (`POST /v1/chat/completions`) on a loopback port: its URL.
async fn receiver(received: Arc<Received>) -> String {
    let traces = {
        let received = received.clone();
        move |body: Bytes| async move {
            let request = ExportTraceServiceRequest::decode(body).expect("an OTLP trace export");
            let mut spans = received.spans.lock().unwrap();
            for resource in request.resource_spans {
                for scope in resource.scope_spans {
                    spans.extend(scope.spans);
                }
            }
            (
                [("content-type", "application/x-protobuf")],
                Vec::<u8>::new(),
            )
        }
    };
    let completions = move |headers: HeaderMap| async move {
        let traceparent = headers
            .get("traceparent")
            .map(|v| v.to_str().unwrap().to_owned());
        received.traceparents.lock().unwrap().push(traceparent);
        axum::Json(json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": "written" }, "finish_reason": "stop" }]
        }))
    };
    let app = axum::Router::new()
        .route("/v1/traces", axum::routing::post(traces))
        .route("/v1/chat/completions", axum::routing::post(completions));
    let listener = agent::loopback().await;
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The value of `span`'s attribute `key`, as text.
fn attribute(span: &Span, key: &str) -> Option<String> {
    let value = span
        .attributes
        .iter()
        .find(|a| a.key == key)?
        .value
        .as_ref()?;
    Some(match value.value.as_ref()? {
        AnyValue::StringValue(s) => s.clone(),
        AnyValue::BoolValue(b) => b.to_string(),
        AnyValue::IntValue(i) => i.to_string(),
        other => format!("{other:?}"),
    })
}

/// Send `go` over JSON-RPC to `url` with the client's `traceparent`; the task it answers with.
async fn send_traced(url: &str) -> serde_json::Value {
    send_in_trace(url, TRACE, true).await
}

/// Send `go` over JSON-RPC to `url` as the client's span in `trace`, `sampled` or not; the task it
/// answers with.
async fn send_in_trace(url: &str, trace: &str, sampled: bool) -> serde_json::Value {
    let flags = if sampled { "01" } else { "00" };
    let answer: serde_json::Value = client()
        .post(format!("{url}/"))
        .header("traceparent", format!("00-{trace}-{CLIENT_SPAN}-{flags}"))
        .json(
            &json!({ "jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
            "message": user("go"), "configuration": { "blocking": true } } }),
        )
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("a JSON answer");
    assert_eq!(answer["result"]["status"]["state"], "completed", "{answer}");
    answer["result"].clone()
}

/// Flush `otlp` until `done` holds for the spans received (bounded): a task's span ends once its
/// driver lets the task go, which may be after the answer.
async fn spans_until(
    otlp: &Arc<radkit::telemetry::Otlp>,
    received: &Received,
    what: &str,
    done: impl Fn(&[Span]) -> bool,
) -> Vec<Span> {
    within(Duration::from_secs(30), what, async {
        loop {
            let flushing = otlp.clone();
            tokio::task::spawn_blocking(move || flushing.flush())
                .await
                .expect("flush")
                .expect("spans exported");
            let spans = received.spans.lock().unwrap().clone();
            if done(&spans) {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

#[test]
async fn a_call_to_an_agent_over_grpc_and_an_mcp_tool_call_over_http_carry_the_trace_on() {
    let received = Arc::new(Received::default());
    let url = receiver(received.clone()).await;
    let otlp = Arc::new(radkit::telemetry::otlp(&url, "radkit-traces-test").expect("an exporter"));
    let _scope =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(otlp.layer()));

    // The callee offers gRPC only: the caller's client speaks gRPC to it.
    let callee = agent::start(agent::only(MemoryStore::new(), Answers), |mut config| {
        config.bindings = vec![Binding::Grpc];
        config
    })
    .await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("calls.jsonl");
    let tools = within(
        PATIENCE,
        "the MCP server to connect",
        radkit::tools::mcp::McpServer::http("srv", mcp_server::serve_http(&log).await).connect(),
    )
    .await
    .expect("the MCP server's tools");
    let caller = agent::start(
        agent::only(MemoryStore::new(), Reaches)
            .effects(Effects::new().tools_from(tools))
            .agent("peer", AgentSpec::new(&callee.url)),
        |c| c,
    )
    .await;
    let task = send_traced(&caller.url).await;
    let texts = task.to_string();
    assert!(texts.contains("answered \\\"x\\\""), "{texts}");

    let grpc_request = |spans: &[Span]| {
        spans
            .iter()
            .find(|s| {
                s.name == "a2a.request" && attribute(s, "radkit.binding").as_deref() == Some("grpc")
            })
            .cloned()
    };
    let spans = spans_until(&otlp, &received, "the callee's request span", |spans| {
        grpc_request(spans).is_some()
    })
    .await;
    let callee_request = grpc_request(&spans).expect("found");
    assert_eq!(
        hex(&callee_request.trace_id),
        TRACE,
        "the callee's gRPC request continues the caller's trace"
    );
    let parent = spans
        .iter()
        .find(|s| s.span_id == callee_request.parent_span_id)
        .unwrap_or_else(|| panic!("the callee's parent among the caller's spans: {spans:#?}"));
    assert!(
        ["call", "command"].contains(&parent.name.as_str()),
        "under the caller's call: {parent:#?}"
    );

    let calls = mcp_server::calls(&log);
    let lookup = calls
        .iter()
        .find(|c| c["tool"] == "lookup")
        .unwrap_or_else(|| panic!("the tool call in {calls:?}"));
    for field in ["traceparent", "meta_traceparent"] {
        let traceparent = lookup[field]
            .as_str()
            .unwrap_or_else(|| panic!("{field} in {lookup}"));
        assert!(
            traceparent.starts_with(&format!("00-{TRACE}-")),
            "the MCP call continues the trace in its {field}: {traceparent}"
        );
    }

    drop(caller);
    drop(callee);
    tokio::task::spawn_blocking(move || drop(otlp))
        .await
        .expect("the exporter shut down");
}

// A current-thread runtime: the request's, the driver's and the export receiver's tasks all run
// on this thread, under the subscriber set below.
#[test]
async fn a_request_with_a_traceparent_continues_its_trace_through_the_task_and_its_model_call() {
    let received = Arc::new(Received::default());
    let url = receiver(received.clone()).await;
    let otlp = Arc::new(radkit::telemetry::otlp(&url, "radkit-traces-test").expect("an exporter"));
    let _scope =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(otlp.layer()));

    let effects = Effects::new().model("writer", OpenAiModel::new(format!("{url}/v1"), "gpt-test"));
    let served = agent::start(
        agent::only(MemoryStore::new(), Writes).effects(effects),
        |c| c,
    )
    .await;
    let task = send_traced(&served.url).await;
    let task_id = task["id"].as_str().expect("a task id").to_owned();

    let spans = spans_until(
        &otlp,
        &received,
        "the task's spans at the receiver",
        |spans| {
            let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
            ["a2a.request", "task", "step", "command"]
                .iter()
                .all(|n| names.contains(n))
        },
    )
    .await;
    let named = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name && hex(&s.trace_id) == TRACE)
            .unwrap_or_else(|| panic!("no `{name}` span in trace {TRACE}: {spans:#?}"))
    };
    let request = named("a2a.request");
    assert_eq!(
        hex(&request.parent_span_id),
        CLIENT_SPAN,
        "the request continues the client's span"
    );
    assert_eq!(
        attribute(request, "radkit.binding").as_deref(),
        Some("jsonrpc")
    );
    let task = named("task");
    assert_eq!(
        task.parent_span_id, request.span_id,
        "the task runs under the request"
    );
    assert_eq!(attribute(task, "task"), Some(task_id.clone()));
    assert_eq!(attribute(task, "skill").as_deref(), Some("writes"));
    let step = named("step");
    assert_eq!(
        step.parent_span_id, task.span_id,
        "the step runs under the task"
    );
    assert_eq!(attribute(step, "step").as_deref(), Some("write"));
    assert_eq!(attribute(step, "radkit.replayed").as_deref(), Some("false"));
    for costly in ["busy_ns", "idle_ns", "thread.id", "thread.name"] {
        assert_eq!(
            attribute(step, costly),
            None,
            "the layer tracks no `{costly}` (a cost on every poll)"
        );
    }
    let command = named("command");
    assert_eq!(
        command.parent_span_id, step.span_id,
        "the command runs under its step"
    );
    let invocation = attribute(command, "invocation").expect("the command's InvocationId");
    assert!(
        invocation.starts_with(&format!("{task_id}:1:")),
        "{invocation}"
    );
    assert_eq!(attribute(command, "kind").as_deref(), Some("llm"));
    assert!(attribute(command, "policy").is_some(), "{command:#?}");
    assert_eq!(attribute(command, "attempt").as_deref(), Some("1"));

    // Stop exporting off this thread: the receiver runs on it, and a shutdown waits for its last
    // export.
    drop(served);
    tokio::task::spawn_blocking(move || drop(otlp))
        .await
        .expect("the exporter shut down");

    let traceparents = received.traceparents.lock().unwrap().clone();
    assert_eq!(traceparents.len(), 1, "one model call: {traceparents:?}");
    let outbound = traceparents[0]
        .as_deref()
        .expect("the model call carries a traceparent");
    assert!(
        outbound.starts_with(&format!("00-{TRACE}-")),
        "the model call continues the trace: {outbound}"
    );
}

/// The name and target of every span made, whichever layer exports it: what a log layer sees.
#[derive(Clone, Default)]
struct Made(Arc<Mutex<Vec<(String, String)>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Made {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let meta = attrs.metadata();
        self.0
            .lock()
            .unwrap()
            .push((meta.name().to_owned(), meta.target().to_owned()));
    }
}

#[test]
async fn a_trace_the_sampler_drops_exports_no_span_yet_its_model_call_carries_it_unsampled() {
    const DROPPED: &str = "0af7651916cd43dd8448eb211c80319c";
    let received = Arc::new(Received::default());
    let url = receiver(received.clone()).await;
    let otlp = Arc::new(radkit::telemetry::otlp(&url, "radkit-traces-test").expect("an exporter"));
    let made = Made::default();
    let _scope = tracing::subscriber::set_default(
        tracing_subscriber::registry()
            .with(otlp.layer())
            .with(made.clone()),
    );
    let effects = Effects::new().model("writer", OpenAiModel::new(format!("{url}/v1"), "gpt-test"));
    let served = agent::start(
        agent::only(MemoryStore::new(), Writes).effects(effects),
        |c| c,
    )
    .await;

    // The caller did not sample its trace: the default sampler (parent-based) follows it.
    send_in_trace(&served.url, DROPPED, false).await;
    let unsampled_made = made.0.lock().unwrap().clone();
    // Then a sampled one, whose spans reaching the receiver say that the first task's would have.
    send_in_trace(&served.url, TRACE, true).await;
    let spans = spans_until(&otlp, &received, "the sampled task's spans", |spans| {
        ["task", "step", "command"].iter().all(|n| {
            spans
                .iter()
                .any(|s| s.name == *n && hex(&s.trace_id) == TRACE)
        })
    })
    .await;
    assert!(
        spans.iter().all(|s| hex(&s.trace_id) != DROPPED),
        "nothing of the unsampled trace is exported: {spans:#?}"
    );
    // Log layers still see the unsampled task's steps and commands, made where the exporting
    // layer does not look; the sampled task's are made where it does.
    for name in ["step", "command"] {
        assert!(
            unsampled_made
                .iter()
                .any(|(n, t)| n == name && t == "radkit_runtime::unsampled"),
            "the unsampled task's `{name}` span is made for log layers: {unsampled_made:?}"
        );
    }
    let all_made = made.0.lock().unwrap().clone();
    let sampled_made = &all_made[unsampled_made.len()..];
    assert!(
        sampled_made
            .iter()
            .any(|(n, t)| n == "step" && t != "radkit_runtime::unsampled"),
        "{sampled_made:?}"
    );

    drop(served);
    tokio::task::spawn_blocking(move || drop(otlp))
        .await
        .expect("the exporter shut down");
    let traceparents = received.traceparents.lock().unwrap().clone();
    assert_eq!(traceparents.len(), 2, "two model calls: {traceparents:?}");
    let first = traceparents[0].as_deref().expect("a traceparent");
    assert!(
        first.starts_with(&format!("00-{DROPPED}-")) && first.ends_with("-00"),
        "the unsampled task's model call continues its trace, unsampled: {first}"
    );
    let second = traceparents[1].as_deref().expect("a traceparent");
    assert!(
        second.starts_with(&format!("00-{TRACE}-")) && second.ends_with("-01"),
        "{second}"
    );
}
