//! JSON-RPC 2.0 envelopes, and operation errors as JSON-RPC error objects (their codes are
//! `errors::codes`).

use serde::Serialize;
use serde_json::Value;

#[cfg(test)]
use super::errors::codes;
use super::errors::{Kind, OpError};

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RpcError {
    /// Code.
    pub code: i64,
    /// Message.
    pub message: String,
    /// Detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with a code and message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// The JSON-RPC error object of an operation error (1.0's `data` is added by its binding).
impl From<OpError> for RpcError {
    fn from(error: OpError) -> Self {
        RpcError::new(error.kind.spelling().jsonrpc, error.message)
    }
}

/// A parsed request.
pub(crate) struct Request {
    pub id: Value,
    pub method: String,
    pub params: Value,
}

/// A method's params as `T`, or the invalid-params error saying why not.
pub(crate) fn decode_params<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, OpError> {
    serde_json::from_value(value)
        .map_err(|e| OpError::new(Kind::InvalidInput, format!("invalid params: {e}")))
}

/// A response envelope.
pub(crate) fn ok(id: &Value, result: impl Serialize) -> Value {
    match serde_json::to_value(result) {
        Ok(result) => serde_json::json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err(e) => error(
            id,
            OpError::new(Kind::Internal, format!("result does not serialize: {e}")),
        ),
    }
}

/// An error envelope.
pub(crate) fn error(id: &Value, error: impl Into<RpcError>) -> Value {
    serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": error.into() })
}

pub(crate) fn unauthorized() -> Value {
    error(
        &Value::Null,
        OpError::new(
            Kind::BadRequest,
            "missing or invalid bearer token; send `Authorization: Bearer <token>`",
        ),
    )
}

/// The answer to a body over the server's limit (sent with HTTP 413): no id could be read.
pub(crate) fn too_large(limit: usize) -> Value {
    error(
        &Value::Null,
        OpError::new(
            Kind::BadRequest,
            format!("the request body is larger than the limit of {limit} bytes"),
        ),
    )
}

/// The answer on a connection over the server's limit (sent with HTTP 503): no request was read.
pub(crate) fn too_many_connections(limit: usize) -> Value {
    error(
        &Value::Null,
        OpError::new(
            Kind::TooManyConnections,
            format!("too many connections: the server serves at most {limit} at once; retry later"),
        ),
    )
}

/// Parse a request body: -32700 for bad JSON, -32600 for a bad envelope.
pub(crate) fn parse(body: &[u8]) -> Result<Request, Value> {
    // JSON text is UTF-8 (RFC 8259 §8.1): other bytes are not JSON, whatever `IgnoredAny` (which
    // skips strings unread) would say below.
    if let Err(e) = std::str::from_utf8(body) {
        return Err(error(
            &Value::Null,
            OpError::new(
                Kind::Unparsable,
                format!("parse error: the body is not UTF-8 ({e})"),
            ),
        ));
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        // Valid JSON that `Value` cannot hold (a number beyond f64, e.g. a 5,000-digit `id`) is an
        // invalid request, not a parse error: JSON-RPC keeps -32700 for text that is not JSON.
        // `IgnoredAny` checks the syntax only, without converting numbers.
        if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
            error(
                &Value::Null,
                OpError::new(
                    Kind::BadRequest,
                    format!("invalid request: the JSON holds a value out of range ({e})"),
                ),
            )
        } else {
            error(
                &Value::Null,
                OpError::new(Kind::Unparsable, format!("parse error: {e}")),
            )
        }
    })?;
    let Value::Object(mut object) = value else {
        return Err(error(
            &Value::Null,
            OpError::new(
                Kind::BadRequest,
                "the request must be a JSON object (batches are not supported)",
            ),
        ));
    };
    let id = object.remove("id").unwrap_or(Value::Null);
    if !matches!(id, Value::String(_) | Value::Number(_) | Value::Null) {
        return Err(error(
            &Value::Null,
            OpError::new(Kind::BadRequest, "`id` must be a string, a number or null"),
        ));
    }
    if object.get("jsonrpc") != Some(&Value::String("2.0".to_owned())) {
        return Err(error(
            &id,
            OpError::new(Kind::BadRequest, "`jsonrpc` must be \"2.0\""),
        ));
    }
    let method = match object.remove("method") {
        Some(Value::String(m)) => m,
        _ => {
            return Err(error(
                &id,
                OpError::new(Kind::BadRequest, "`method` must be a string"),
            ))
        }
    };
    let params = object.remove("params").unwrap_or(Value::Null);
    if !matches!(params, Value::Object(_) | Value::Null) {
        return Err(error(
            &id,
            OpError::new(Kind::InvalidInput, "`params` must be an object"),
        ));
    }
    Ok(Request { id, method, params })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &[u8]) -> Value {
        match parse(body) {
            Ok(_) => panic!("{body:?} parsed"),
            Err(envelope) => envelope["error"]["code"].clone(),
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_are_a_parse_error_and_out_of_range_json_an_invalid_request() {
        let invalid_utf8 =
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/get\",\"params\":{\"id\":\"\xff\"}}";
        assert_eq!(code(invalid_utf8), codes::PARSE_ERROR);
        assert_eq!(code(b"{not json"), codes::PARSE_ERROR);
        let huge = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1{},\"method\":\"x\"}}",
            "0".repeat(400)
        );
        assert_eq!(code(huge.as_bytes()), codes::INVALID_REQUEST);
    }
}
