//! The A2A 1.0 gRPC binding: `lf.a2a.v1.A2AService` over the same operations as JSON-RPC and REST,
//! served on the server's own port (HTTP/2 without TLS beside HTTP/1.1: `connection` tells them
//! apart by the HTTP/2 preface) under the path `/lf.a2a.v1.A2AService/<Method>`.
//!
//! The messages and their conversions to the `v1` types the operations use are
//! `model::grpc`'s (the client's gRPC binding shares them); `service` implements the RPCs, `status`
//! writes errors.

pub use crate::model::grpc::{proto, FieldError};
mod service;
mod status;

use std::sync::Arc;

use super::AppState;

/// The service for the router: requests over `max_body_bytes` are refused by tonic.
pub(crate) fn service(
    state: Arc<AppState>,
) -> proto::a2a_service_server::A2aServiceServer<service::Service> {
    let limit = state.config.max_body_bytes;
    proto::a2a_service_server::A2aServiceServer::new(service::Service::new(state))
        .max_decoding_message_size(limit)
}
