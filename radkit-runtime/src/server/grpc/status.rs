//! A2A errors as gRPC statuses (spec §10.6, §5.4): the status code of the same table REST writes
//! (`errors::Kind::spelling`), the message, and in `grpc-status-details-bin` a `google.rpc.Status` whose
//! details hold a `google.rpc.ErrorInfo` naming the error (`TASK_NOT_FOUND`, domain
//! `a2a-protocol.org`; radkit's own errors in the `radkit` domain).

use std::collections::HashMap;

use prost::Message as _;
use tonic::{Code, Status};

use crate::model::grpc::{ErrorInfo, RpcStatus, ERROR_INFO_TYPE};
use crate::server::errors::{OpError, Spelling};

/// The gRPC code of a `google.rpc.Code` name.
fn code_of(name: &str) -> Code {
    match name {
        "INVALID_ARGUMENT" => Code::InvalidArgument,
        "NOT_FOUND" => Code::NotFound,
        "FAILED_PRECONDITION" => Code::FailedPrecondition,
        "UNAVAILABLE" => Code::Unavailable,
        "RESOURCE_EXHAUSTED" => Code::ResourceExhausted,
        "UNAUTHENTICATED" => Code::Unauthenticated,
        "PERMISSION_DENIED" => Code::PermissionDenied,
        _ => Code::Internal,
    }
}

/// An A2A error as a gRPC status.
pub(crate) fn status(error: &OpError) -> Status {
    let Spelling {
        status,
        reason: (reason, domain),
        ..
    } = error.kind.spelling();
    let code = code_of(status);
    let details = vec![prost_types::Any {
        type_url: ERROR_INFO_TYPE.to_owned(),
        value: ErrorInfo {
            reason: reason.to_owned(),
            domain: domain.to_owned(),
            metadata: HashMap::new(),
        }
        .encode_to_vec(),
    }];
    let body = RpcStatus {
        code: code as i32,
        message: error.message.clone(),
        details,
    };
    Status::with_details(code, error.message.clone(), body.encode_to_vec().into())
}

/// The status of a request without a valid bearer token.
pub(crate) fn unauthenticated() -> Status {
    Status::unauthenticated("missing or invalid bearer token (metadata `authorization: Bearer …`)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::errors::Kind;

    fn error_info(status: &Status) -> Option<ErrorInfo> {
        let body = RpcStatus::decode(status.details()).unwrap();
        assert_eq!(body.code, status.code() as i32);
        assert_eq!(body.message, status.message());
        let any = body.details.first()?;
        assert_eq!(any.type_url, ERROR_INFO_TYPE);
        Some(ErrorInfo::decode(any.value.as_slice()).unwrap())
    }

    #[test]
    fn a2a_errors_get_the_spec_code_and_an_error_info_naming_them() {
        for (kind, grpc, reason) in [
            (Kind::TaskNotFound, Code::NotFound, "TASK_NOT_FOUND"),
            (
                Kind::TaskNotCancelable,
                Code::FailedPrecondition,
                "TASK_NOT_CANCELABLE",
            ),
            (
                Kind::PushNotSupported,
                Code::FailedPrecondition,
                "PUSH_NOTIFICATION_NOT_SUPPORTED",
            ),
            (
                Kind::Unsupported,
                Code::FailedPrecondition,
                "UNSUPPORTED_OPERATION",
            ),
            (
                Kind::ContentTypeNotSupported,
                Code::InvalidArgument,
                "CONTENT_TYPE_NOT_SUPPORTED",
            ),
            (
                Kind::InvalidAgentResponse,
                Code::Internal,
                "INVALID_AGENT_RESPONSE",
            ),
            (
                Kind::NoExtendedCard,
                Code::FailedPrecondition,
                "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            ),
            (
                Kind::ExtensionRequired,
                Code::FailedPrecondition,
                "EXTENSION_SUPPORT_REQUIRED",
            ),
            (
                Kind::VersionNotSupported,
                Code::FailedPrecondition,
                "VERSION_NOT_SUPPORTED",
            ),
        ] {
            let s = status(&OpError::new(kind, "why"));
            assert_eq!(s.code(), grpc, "{reason}");
            assert_eq!(s.message(), "why");
            let info = error_info(&s).expect(reason);
            assert_eq!(
                (info.reason.as_str(), info.domain.as_str()),
                (reason, "a2a-protocol.org")
            );
        }
    }

    #[test]
    fn bad_input_is_invalid_argument_and_radkit_limits_name_themselves() {
        let s = status(&OpError::new(Kind::InvalidInput, "no parts"));
        assert_eq!(s.code(), Code::InvalidArgument);
        let info = error_info(&s).expect("bad input names itself");
        assert_eq!(
            (info.reason.as_str(), info.domain.as_str()),
            ("INVALID_PARAMS", "a2a-protocol.org")
        );
        let s = status(&OpError::new(Kind::TooManyStreams, "limit"));
        assert_eq!(s.code(), Code::ResourceExhausted);
        let info = error_info(&s).unwrap();
        assert_eq!(
            (info.reason.as_str(), info.domain.as_str()),
            ("TOO_MANY_STREAMS", "radkit")
        );
        let s = status(&OpError::new(Kind::Internal, "oops"));
        assert_eq!(s.code(), Code::Internal);
    }
}
