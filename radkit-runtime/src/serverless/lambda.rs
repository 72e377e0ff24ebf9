//! AWS Lambda functions over a serverless engine (the `lambda` feature, on the official
//! `lambda_http`/`lambda_runtime` crates):
//!
//! * [`serve_http`]: the A2A surface (JSON-RPC 1.0 and 0.3, HTTP+JSON, the agent card) behind a
//!   Function URL, an API Gateway HTTP or REST API, or an ALB. Each invocation is one request to
//!   the same router `radkit serve` uses, over an engine in serverless mode
//!   ([`EngineBuilder::serverless`](crate::engine::EngineBuilder::serverless)): a send, a reply or a
//!   cancel runs its task as one pass that ends by the invocation's deadline (less a margin), a
//!   blocking send answers with the task as the pass left it, a stream sends what the pass journaled
//!   (a client resumes it with `Last-Event-ID` in a later invocation).
//! * [`serve_sweeps`]: the function a schedule (EventBridge) triggers: one [`Passes::sweep`] per
//!   invocation runs the tasks with work now (due timers, work an earlier invocation left, cancels)
//!   until the invocation's deadline.
//! * [`serve_executor`]: an executor of dispatched commands, one [`Executor::run`] per invocation.
//!
//! gRPC is not served: Lambda's HTTP front doors (Function URLs, API Gateway, ALB) end HTTP/2 at the
//! edge and hand the function one buffered request and response, which gRPC's streamed HTTP/2
//! frames and trailers cannot travel through. Its paths answer as on any server, but no client
//! reaches them through Lambda; the card a serverless agent publishes should list JSON-RPC and
//! HTTP+JSON (`ServerConfig`), as [`serve_http`] makes sure.

use std::time::{Duration, Instant, SystemTime};

use lambda_http::tower::ServiceExt;

use super::{Executor, Passes};
use crate::engine::{with_deadline, Engine};
use crate::server::ServerConfig;

/// How long before an invocation's deadline its passes stop starting effects: the time the
/// function needs to persist, give its lease back and answer.
pub const DEADLINE_MARGIN: Duration = Duration::from_millis(1500);

/// The instant `margin` before the deadline of an invocation (`lambda_runtime::Context::deadline`).
fn pass_deadline(deadline: SystemTime, margin: Duration) -> Instant {
    let left = deadline
        .duration_since(SystemTime::now())
        .unwrap_or_default()
        .saturating_sub(margin);
    Instant::now() + left
}

/// Serve `engine`'s A2A surface as an HTTP function: each invocation is one request, its passes
/// bounded by the invocation's deadline less [`DEADLINE_MARGIN`]. Runs the Lambda Runtime API's
/// loop (`AWS_LAMBDA_RUNTIME_API`) until the platform stops the process.
pub async fn serve_http(
    mut config: ServerConfig,
    engine: Engine,
) -> Result<(), lambda_http::Error> {
    // A card listing gRPC would send clients where Lambda cannot take them.
    config
        .bindings
        .retain(|b| *b != crate::model::Binding::Grpc);
    let router = crate::server::router(engine, config);
    let handler = lambda_http::service_fn(move |request: lambda_http::Request| {
        let router = router.clone();
        async move {
            use lambda_http::RequestExt;
            let deadline = request
                .lambda_context_ref()
                .map(|context| pass_deadline(context.deadline(), DEADLINE_MARGIN))
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(30));
            let request = request.map(axum::body::Body::new);
            let response = with_deadline(deadline, router.oneshot(request)).await?;
            let (parts, body) = response.into_parts();
            // Lambda answers with one buffered body: the stream of a send ends where its pass
            // ended, so the whole of it is here.
            let bytes = axum::body::to_bytes(body, usize::MAX).await?;
            Ok::<_, lambda_http::Error>(lambda_http::Response::from_parts(
                parts,
                lambda_http::Body::from(bytes.to_vec()),
            ))
        }
    });
    lambda_http::run(handler).await
}

/// Serve scheduled sweeps: each invocation runs [`Passes::sweep`] (at most `limit` passes) until
/// its deadline less [`DEADLINE_MARGIN`], and answers with how many tasks it ran and how each was
/// left. The event's payload is not read (any schedule or manual invocation will do).
pub async fn serve_sweeps(passes: Passes, limit: usize) -> Result<(), lambda_http::Error> {
    let handler = lambda_http::service_fn(
        move |event: lambda_http::LambdaEvent<serde_json::Value>| {
            let passes = passes.clone();
            async move {
                let deadline = pass_deadline(event.context.deadline(), DEADLINE_MARGIN);
                let passed = passes.sweep(deadline, limit).await?;
                let tasks: Vec<serde_json::Value> = passed
                    .iter()
                    .map(|p| serde_json::json!({"task_id": p.task_id, "rest": format!("{:?}", p.rest)}))
                    .collect();
                Ok::<_, lambda_http::Error>(
                    serde_json::json!({ "passes": passed.len(), "tasks": tasks }),
                )
            }
        },
    );
    lambda_http::lambda_runtime::run(handler).await
}

/// Serve an executor: each invocation performs up to `limit` dispatched commands
/// ([`Executor::run`]) until its deadline less [`DEADLINE_MARGIN`], and answers with what each came
/// to. Trigger it on a schedule, or from the dispatch list's changes.
pub async fn serve_executor(executor: Executor, limit: usize) -> Result<(), lambda_http::Error> {
    let handler =
        lambda_http::service_fn(move |event: lambda_http::LambdaEvent<serde_json::Value>| {
            let executor = executor.clone();
            async move {
                let deadline = pass_deadline(event.context.deadline(), DEADLINE_MARGIN);
                let executed = executor.run(deadline, limit).await?;
                let commands: Vec<String> = executed.iter().map(|e| format!("{e:?}")).collect();
                Ok::<_, lambda_http::Error>(
                    serde_json::json!({ "commands": executed.len(), "executed": commands }),
                )
            }
        });
    lambda_http::lambda_runtime::run(handler).await
}
