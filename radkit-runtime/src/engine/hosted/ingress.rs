//! Restate's HTTP ingress as the A2A server in front uses it: start a task's workflow, resolve its
//! promises. And the admin API's deployment registration.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::EngineError;
use crate::flow::PermissionMode;
use crate::model::Message;

/// The name Restate knows the workflow by (its ingress path is `/RadkitTask/<task id>/<handler>`).
pub const WORKFLOW: &str = "RadkitTask";

/// What starts a task's workflow: the front's send, forwarded to Restate's ingress.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Start {
    /// The skill the task runs.
    pub skill: String,
    /// Its context, if the message names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// Who created it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// Its permission mode.
    #[serde(default)]
    pub mode: PermissionMode,
    /// The message that creates it.
    pub message: Message,
}

/// A reply to the question a task asked when its journal ended at `seq`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskReply {
    /// The seq of the task's last record when it settled waiting for input.
    pub seq: u64,
    /// The reply.
    pub message: Message,
}

/// How long one request to Restate may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A Restate server's ingress (e.g. `http://127.0.0.1:8080`).
#[derive(Debug, Clone)]
pub struct Ingress {
    base: String,
    http: reqwest::Client,
}

impl Ingress {
    /// The ingress at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        let base = url.into().trim_end_matches('/').to_owned();
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .unwrap_or_default();
        Ingress { base, http }
    }

    /// The ingress's URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    /// Start the workflow of task `task_id` (without waiting for it). A workflow started already
    /// for this id is not started again: Restate answers that it exists, which is success here.
    pub async fn start(&self, task_id: &str, start: &Start) -> Result<(), EngineError> {
        let url = format!("{}/{WORKFLOW}/{}/run/send", self.base, path(task_id));
        let response = self.post(&url, Some(start)).await?;
        match response.status().as_u16() {
            200..=299 | 409 => Ok(()),
            _ => Err(refused(&url, response).await),
        }
    }

    /// Resolve the wait for input that began at `seq` with `message`.
    pub async fn reply(&self, task_id: &str, reply: &TaskReply) -> Result<(), EngineError> {
        let url = format!("{}/{WORKFLOW}/{}/reply", self.base, path(task_id));
        let response = self.post(&url, Some(reply)).await?;
        if response.status().is_success() {
            return Ok(());
        }
        Err(refused(&url, response).await)
    }

    /// Ask task `task_id` to cancel.
    pub async fn cancel(&self, task_id: &str) -> Result<(), EngineError> {
        let url = format!("{}/{WORKFLOW}/{}/cancel", self.base, path(task_id));
        let response = self.post::<()>(&url, None).await?;
        if response.status().is_success() {
            return Ok(());
        }
        Err(refused(&url, response).await)
    }

    async fn post<T: serde::Serialize>(
        &self,
        url: &str,
        body: Option<&T>,
    ) -> Result<reqwest::Response, EngineError> {
        let request = self.http.post(url);
        let request = match body {
            Some(body) => request.json(body),
            None => request,
        };
        request.send().await.map_err(|e| {
            EngineError::HostUnavailable(format!(
                "Restate's ingress at {url} cannot be reached: {e}"
            ))
        })
    }
}

/// A task id as one segment of an ingress path.
fn path(task_id: &str) -> String {
    task_id
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn refused(url: &str, response: reqwest::Response) -> EngineError {
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    let body: String = body.chars().take(300).collect();
    EngineError::HostUnavailable(format!("Restate's ingress refused {url}: {status} {body}"))
}

/// Register the deployment at `endpoint_url` (a process serving
/// [`RestateHost`](crate::restate::RestateHost))
/// with the Restate server whose admin API is at `admin_url` (e.g. `http://127.0.0.1:9070`). A
/// deployment registered before at that URL is registered again (`force`), so a redeploy with
/// changed handlers takes effect.
pub async fn register_deployment(admin_url: &str, endpoint_url: &str) -> Result<(), EngineError> {
    let url = format!("{}/deployments", admin_url.trim_end_matches('/'));
    let response = reqwest::Client::new()
        .post(&url)
        .timeout(Duration::from_secs(30))
        .json(&serde_json::json!({ "uri": endpoint_url, "force": true }))
        .send()
        .await
        .map_err(|e| {
            EngineError::HostUnavailable(format!(
                "Restate's admin API at {url} cannot be reached: {e}"
            ))
        })?;
    if response.status().is_success() {
        return Ok(());
    }
    Err(refused(&url, response).await)
}
