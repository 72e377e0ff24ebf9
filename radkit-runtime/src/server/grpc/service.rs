//! `lf.a2a.v1.A2AService`: each RPC admits its caller (the `a2a-version` and `authorization`
//! metadata, as the HTTP bindings read their headers), converts its protobuf request to the `v1`
//! types, runs the same operation as JSON-RPC and REST (`ops`, `open`, `v1_requests`) and converts the
//! answer back. Errors are gRPC statuses with an `ErrorInfo` (`status`).
//!
//! Streams are `StreamResponse`s: the task as it is now, then its updates until the one that settles
//! it, like SSE's. gRPC gives a stream no event ids (`StreamResponse` has no field for one and
//! §10.7 defines no resumption), so a gRPC stream is not resumed after a cut: a client that loses
//! one calls `SubscribeToTask`, which opens with the task as it is then.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use super::proto;
use super::proto::a2a_service_server::A2aService;
use super::status::{status, unauthenticated};
use super::FieldError;
use crate::engine::Caller;
use crate::model::{v1, TaskId};
use crate::server::errors::{Kind, OpError};
use crate::server::open::{self, Item, Opened, Target};
use crate::server::version::Version;
use crate::server::wire::v1_event;
use crate::server::{card, ops, v1_requests, AppState};

/// A server stream of `StreamResponse`s.
pub(crate) type Updates = Pin<Box<dyn Stream<Item = Result<proto::StreamResponse, Status>> + Send>>;

/// The service over the server's state (the engine, the tokens, the stream slots).
pub(crate) struct Service {
    state: Arc<AppState>,
}

impl Service {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Service { state }
    }

    /// The caller of a request, after its version and credentials are checked. This binding speaks
    /// 1.0 only (`lf.a2a.v1`): a request without `a2a-version` is 1.0, one naming another version
    /// is `VersionNotSupportedError`.
    fn admit<T>(&self, request: &Request<T>) -> Result<Caller, Status> {
        let headers = request.metadata().clone().into_headers();
        let version = match headers.get("a2a-version") {
            None => Ok(Version::V1_0),
            Some(_) => Version::of_request(&headers, None),
        };
        match version.map_err(|e| status(&e))? {
            Version::V1_0 => {}
            Version::V0_3 => {
                return Err(status(&OpError::new(
                    Kind::VersionNotSupported,
                    "the gRPC binding speaks A2A 1.0 (lf.a2a.v1.A2AService); A2A 0.3 is served over JSON-RPC",
                )))
            }
        }
        self.state
            .tokens
            .caller(&headers)
            .map_err(|_| unauthenticated())
    }
}

fn invalid(bad: FieldError) -> Status {
    status(&OpError::new(Kind::InvalidInput, bad.to_string()))
}

fn failed(error: OpError) -> Status {
    status(&error)
}

/// An opened stream as gRPC `StreamResponse`s; an error ends the stream with its status.
fn updates(opened: Opened) -> Updates {
    let items = open::items(opened).map(|item| {
        let response = match item {
            Item::Task(task, _) => Ok(v1::StreamResponse::Task(task.into())),
            Item::Message(message, _) => Ok(v1::StreamResponse::Message(message.into())),
            Item::Event(event, _) | Item::Live(event) => Ok(v1_event(event)),
            Item::Error(error) => Err(error),
        };
        response.map(proto::StreamResponse::from).map_err(failed)
    });
    Box::pin(items)
}

#[tonic::async_trait]
impl A2aService for Service {
    async fn send_message(
        &self,
        request: Request<proto::SendMessageRequest>,
    ) -> Result<Response<proto::SendMessageResponse>, Status> {
        let caller = self.admit(&request)?;
        let request = v1::SendMessageRequest::try_from(request.into_inner()).map_err(invalid)?;
        let send = v1_requests::send_of_request(request).map_err(failed)?;
        let answer = match ops::send_task(&self.state, &caller, send).await {
            Ok(ops::Answer::Task(task)) => v1::SendMessageResponse::Task(task.into()),
            Ok(ops::Answer::Message(message)) => v1::SendMessageResponse::Message(message.into()),
            Err(error) => return Err(failed(error)),
        };
        Ok(Response::new(answer.into()))
    }

    type SendStreamingMessageStream = Updates;

    async fn send_streaming_message(
        &self,
        request: Request<proto::SendMessageRequest>,
    ) -> Result<Response<Updates>, Status> {
        let caller = self.admit(&request)?;
        let request = v1::SendMessageRequest::try_from(request.into_inner()).map_err(invalid)?;
        let send = v1_requests::send_of_request(request);
        let opened = open::open(&self.state, &caller, send.map(Target::send), None)
            .await
            .map_err(failed)?;
        Ok(Response::new(updates(opened)))
    }

    async fn get_task(
        &self,
        request: Request<proto::GetTaskRequest>,
    ) -> Result<Response<proto::Task>, Status> {
        let caller = self.admit(&request)?;
        let request = request.into_inner();
        let history = request.history_length.map(i64::from);
        let task = ops::get_task(&self.state, &caller, &TaskId::from(request.id), history)
            .await
            .map(v1::Task::from)
            .map_err(failed)?;
        Ok(Response::new(task.into()))
    }

    async fn list_tasks(
        &self,
        request: Request<proto::ListTasksRequest>,
    ) -> Result<Response<proto::ListTasksResponse>, Status> {
        let caller = self.admit(&request)?;
        let request = v1::ListTasksRequest::try_from(request.into_inner()).map_err(invalid)?;
        let page = v1_requests::list_tasks_page(&self.state, &caller, request)
            .await
            .map_err(failed)?;
        Ok(Response::new(page.into()))
    }

    async fn cancel_task(
        &self,
        request: Request<proto::CancelTaskRequest>,
    ) -> Result<Response<proto::Task>, Status> {
        let caller = self.admit(&request)?;
        let id = TaskId::from(request.into_inner().id);
        let task = ops::cancel_task(&self.state, &caller, &id)
            .await
            .map(v1::Task::from)
            .map_err(failed)?;
        Ok(Response::new(task.into()))
    }

    type SubscribeToTaskStream = Updates;

    async fn subscribe_to_task(
        &self,
        request: Request<proto::SubscribeToTaskRequest>,
    ) -> Result<Response<Updates>, Status> {
        let caller = self.admit(&request)?;
        let target = Target::Task {
            id: TaskId::from(request.into_inner().id),
            until_end: true,
        };
        let opened = open::open(&self.state, &caller, Ok(target), None)
            .await
            .map_err(failed)?;
        Ok(Response::new(updates(opened)))
    }

    async fn create_task_push_notification_config(
        &self,
        request: Request<proto::TaskPushNotificationConfig>,
    ) -> Result<Response<proto::TaskPushNotificationConfig>, Status> {
        let caller = self.admit(&request)?;
        let config = v1::TaskPushNotificationConfig::from(request.into_inner());
        let made = v1_requests::create_push(&self.state, &caller, config)
            .await
            .map_err(failed)?;
        Ok(Response::new(made.into()))
    }

    async fn get_task_push_notification_config(
        &self,
        request: Request<proto::GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<proto::TaskPushNotificationConfig>, Status> {
        let caller = self.admit(&request)?;
        let request = v1::GetTaskPushNotificationConfigRequest::from(request.into_inner());
        let config = v1_requests::get_push(&self.state, &caller, request)
            .await
            .map_err(failed)?;
        Ok(Response::new(config.into()))
    }

    async fn list_task_push_notification_configs(
        &self,
        request: Request<proto::ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<proto::ListTaskPushNotificationConfigsResponse>, Status> {
        let caller = self.admit(&request)?;
        let request = v1::ListTaskPushNotificationConfigsRequest::from(request.into_inner());
        let page = v1_requests::list_push(&self.state, &caller, request)
            .await
            .map_err(failed)?;
        Ok(Response::new(page.into()))
    }

    async fn get_extended_agent_card(
        &self,
        request: Request<proto::GetExtendedAgentCardRequest>,
    ) -> Result<Response<proto::AgentCard>, Status> {
        let caller = self.admit(&request)?;
        let card = card::extended_card_v1(&self.state, &caller).map_err(failed)?;
        Ok(Response::new(card.into()))
    }

    async fn delete_task_push_notification_config(
        &self,
        request: Request<proto::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<()>, Status> {
        let caller = self.admit(&request)?;
        let request = v1::DeleteTaskPushNotificationConfigRequest::from(request.into_inner());
        v1_requests::delete_push(&self.state, &caller, request)
            .await
            .map_err(failed)?;
        Ok(Response::new(()))
    }
}
