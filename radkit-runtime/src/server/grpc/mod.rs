//! The A2A 1.0 gRPC binding: `lf.a2a.v1.A2AService` over the same operations as JSON-RPC and REST,
//! served on the server's own port (HTTP/2 without TLS beside HTTP/1.1: `connection` tells them
//! apart by the HTTP/2 preface) under the path `/lf.a2a.v1.A2AService/<Method>`.
//!
//! The messages, client and server are generated from the vendored `proto/a2a.proto` by prost and
//! tonic and checked in (`lf.a2a.v1.rs`; `tools/grpc-codegen` regenerates it with a protobuf compiler
//! written in Rust, so no `protoc` is needed). `convert` maps them to the `v1` types the operations
//! use (`convert_card` the agent card), `service` implements the RPCs, `status` writes errors.

mod convert;
mod convert_card;
pub use convert::FieldError;
mod service;
mod status;

use std::sync::Arc;

use super::AppState;

/// The generated protobuf messages (package `lf.a2a.v1`) and the tonic client and server of
/// `A2AService`. The client (`a2a_service_client::A2aServiceClient`) is generic over the transport:
/// a program that calls A2A agents over gRPC gives it a tonic channel.
///
/// Hidden from the docs: ~55 types of prost and tonic output, not radkit's API (they follow the
/// vendored `a2a.proto`, not semver). Public for a program that speaks gRPC to an agent with the
/// generated client, and for radkit's own gRPC tests.
#[doc(hidden)]
#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    rustdoc::broken_intra_doc_links,
    rustdoc::bare_urls,
    rustdoc::invalid_html_tags
)]
pub mod proto {
    include!("lf.a2a.v1.rs");
}

/// The service for the router: requests over `max_body_bytes` are refused by tonic.
pub(crate) fn service(
    state: Arc<AppState>,
) -> proto::a2a_service_server::A2aServiceServer<service::Service> {
    let limit = state.config.max_body_bytes;
    proto::a2a_service_server::A2aServiceServer::new(service::Service::new(state))
        .max_decoding_message_size(limit)
}

#[cfg(test)]
mod tests {
    /// The checked-in code was generated from the vendored proto as it is: a changed `a2a.proto`
    /// without a regeneration fails here.
    #[test]
    fn generated_code_matches_the_vendored_proto() {
        use sha2::Digest as _;
        let proto = include_bytes!("../../../proto/a2a.proto");
        let digest: String = sha2::Sha256::digest(proto)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let generated = include_str!("lf.a2a.v1.rs");
        assert!(
            generated.contains(&format!("// a2a.proto sha256: {digest}\n")),
            "radkit-runtime/src/server/grpc/lf.a2a.v1.rs is stale; regenerate it with \
             `cargo run --manifest-path tools/grpc-codegen/Cargo.toml`"
        );
    }
}
