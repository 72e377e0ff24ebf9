//! `GET /metrics`: a real server scraped over HTTP after a few tasks, the body read with a
//! Prometheus text parser (`prometheus-parse`). The values asserted are ones the journal
//! guarantees: the tasks' states, the one retried attempt, the command's receipt.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use radkit::flow::RetryPolicy;
use radkit::prelude::*;
use radkit::store::SqliteStore;
use radkit::tools::FnTool;
use serde_json::json;

use crate::support::agent::{self, client, tokens};
use crate::support::common::{rpc, user};
use crate::support::skills::Ask;

/// Calls the `flaky` tool (which fails its first attempt transiently), then completes.
#[derive(Default)]
struct Retried;

#[flow_skill(id = "retried", name = "Retried", register = false)]
impl Retried {
    #[step(start)]
    async fn start(&self, ctx: &StepCtx, _: Content) -> StepResult {
        let retry = RetryPolicy {
            max_attempts: 3,
            initial_backoff_ms: 1,
            max_backoff_ms: 1,
        };
        let said: String = ctx.tool("flaky").retry(retry).call(()).await?;
        ctx.complete(said, vec![])
    }
}

/// A tool whose first call fails transiently and whose later calls answer `"fine"`.
fn flaky() -> FnTool {
    let calls = Arc::new(AtomicU32::new(0));
    FnTool::new(EffectPolicy::Idempotent, move |_, _| {
        let calls = calls.clone();
        async move {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 => Err(EffectError::transient("not yet")),
                _ => Ok(json!("fine")),
            }
        }
    })
}

/// The value of the one sample named `name` whose labels include `labels`, if the scrape has it.
/// A `/metrics` body read with the Prometheus text parser.
pub(crate) fn parse(body: &str) -> prometheus_parse::Scrape {
    prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .expect("a Prometheus text body")
}

/// The value of the sample `name` whose labels include `labels`.
pub(crate) fn value(
    scrape: &prometheus_parse::Scrape,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match &s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => *v,
            other => panic!("{name} is not a single value: {other:?}"),
        })
}

#[test(multi_thread)]
async fn metrics_count_what_the_journal_holds_and_need_a_token() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = SqliteStore::open_default(dir.path().join("metrics.sqlite")).expect("open sqlite");
    let builder = agent::only(store, Retried)
        .skill(Ask)
        .effects(Effects::new().tool("flaky", flaky()));
    let served = agent::start(builder, |mut config| {
        config.tokens = tokens(&[("scrape-me", "ops")]);
        config
    })
    .await;
    let http = client();
    let send = |skill: &str| {
        let mut message = user("go");
        message["metadata"] = json!({ "skillId": skill });
        json!({ "message": message, "configuration": { "blocking": true } })
    };
    let done = rpc(
        &http,
        &served.url,
        Some("scrape-me"),
        "message/send",
        send("retried"),
    )
    .await;
    assert_eq!(done["result"]["status"]["state"], "completed", "{done}");
    let asking = rpc(
        &http,
        &served.url,
        Some("scrape-me"),
        "message/send",
        send("ask"),
    )
    .await;
    assert_eq!(
        asking["result"]["status"]["state"], "input-required",
        "{asking}"
    );

    let refused = http
        .get(format!("{}/metrics", served.url))
        .send()
        .await
        .expect("scrape without a token");
    assert_eq!(refused.status(), 401, "a scrape without a token is refused");

    let answer = http
        .get(format!("{}/metrics", served.url))
        .bearer_auth("scrape-me")
        .send()
        .await
        .expect("scrape");
    assert_eq!(answer.status(), 200);
    let content_type = answer.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let body = answer.text().await.expect("the scrape's body");
    let scrape = parse(&body);
    let v = |name: &str, labels: &[(&str, &str)]| {
        value(&scrape, name, labels).unwrap_or_else(|| panic!("no {name} {labels:?} in:\n{body}"))
    };
    assert_eq!(v("radkit_tasks", &[("state", "completed")]), 1.0);
    assert_eq!(v("radkit_tasks", &[("state", "input-required")]), 1.0);
    assert_eq!(v("radkit_tasks_waiting", &[("on", "input")]), 1.0);
    let tool = [("kind", "tool"), ("policy", "idempotent")];
    assert_eq!(v("radkit_command_retries_total", &tool), 1.0);
    assert_eq!(
        v(
            "radkit_commands_total",
            &[tool[0], tool[1], ("outcome", "ok")]
        ),
        1.0
    );
    assert_eq!(v("radkit_steps_total", &[("outcome", "complete")]), 1.0);
    assert_eq!(v("radkit_steps_total", &[("outcome", "await_input")]), 1.0);
    assert!(
        v("radkit_receipt_commit_seconds_count", &[]) >= 1.0,
        "{body}"
    );
    let batches = v("radkit_store_batch_appends_count", &[]);
    assert!(batches >= 1.0, "{body}");
    assert!(
        v("radkit_store_batch_appends_sum", &[]) >= batches,
        "{body}"
    );
    assert_eq!(v("radkit_streams_open", &[]), 0.0);
}
