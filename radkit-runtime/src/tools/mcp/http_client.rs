//! The MCP client's streamable HTTP transport: rmcp's, on radkit's reqwest 0.13 client, wrapped so
//! that a tool call's W3C trace context (which the call puts in its request's `_meta`, MCP's
//! SEP-414) also goes out as the HTTP request's `traceparent` and `tracestate` headers, for the
//! proxies and HTTP instrumentation between radkit and the server.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use rmcp::transport::StreamableHttpClientTransport;
use sse_stream::{Error as SseError, Sse};

use super::Secret;

/// The streamable HTTP transport to `url`: radkit's reqwest 0.13 client (the platform's roots and
/// `roots`, no redirects followed), `bearer` and `headers` on every request. The error says what
/// is wrong.
pub(super) fn http_transport(
    url: &str,
    bearer: Option<&Secret>,
    headers: &[(String, Secret)],
    roots: &[Vec<u8>],
) -> Result<StreamableHttpClientTransport<TracedClient>, String> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!("`{url}` is not an http:// or https:// URL"));
    }
    // No redirects: a redirect to another host would carry the session id and the headers
    // there, and one that turns the POST into a GET would lose the message (rmcp's own client
    // follows only same-origin 307/308). No idle connections kept: as rmcp's own client.
    let mut client = reqwest_mcp::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest_mcp::redirect::Policy::none())
        .pool_max_idle_per_host(0);
    for pem in roots {
        let certs = reqwest_mcp::Certificate::from_pem_bundle(pem)
            .map_err(|e| format!("a root certificate is not PEM: {e}"))?;
        if certs.is_empty() {
            return Err("a root certificate PEM holds no certificate".to_owned());
        }
        for cert in certs {
            client = client.add_root_certificate(cert);
        }
    }
    let client = client
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let mut custom = HashMap::new();
    for (name, Secret(value)) in headers {
        let name = http::HeaderName::try_from(name.as_str())
            .map_err(|e| format!("header name `{name}`: {e}"))?;
        let value = http::HeaderValue::try_from(value.as_str())
            .map_err(|e| format!("the value of header `{name}`: {e}"))?;
        custom.insert(name, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    if let Some(Secret(token)) = bearer {
        config = config.auth_header(token.clone());
    }
    Ok(StreamableHttpClientTransport::with_client(
        TracedClient(client),
        config,
    ))
}

/// rmcp's reqwest client, adding a tool call's trace context (from its `_meta`) to the headers of
/// the request that carries it. Every other request goes out as rmcp's client sends it.
#[derive(Clone)]
pub(super) struct TracedClient(reqwest_mcp::Client);

/// `headers` with the `traceparent` and `tracestate` of `message`'s `_meta`, when it is a tool
/// call that carries them.
fn traced(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    let JsonRpcMessage::Request(request) = message else {
        return headers;
    };
    let ClientRequest::CallToolRequest(call) = &request.request else {
        return headers;
    };
    let Some(meta) = &call.params.meta else {
        return headers;
    };
    let fields = [
        ("traceparent", meta.get_traceparent()),
        ("tracestate", meta.get_tracestate()),
    ];
    for (name, value) in fields {
        if let Some(Ok(value)) = value.map(HeaderValue::try_from) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    headers
}

type Failure = StreamableHttpError<reqwest_mcp::Error>;

impl StreamableHttpClient for TracedClient {
    type Error = reqwest_mcp::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let headers = traced(&message, custom_headers);
        self.0
            .post_message(uri, message, session_id, auth_header, headers)
            .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let headers = traced(&message, custom_headers);
        self.0
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                max_sse_event_size,
            )
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let headers = traced(&message, custom_headers);
        self.0
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                limits,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failure> {
        self.0
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failure> {
        self.0
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failure> {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, JsonRpcRequest, MetaObject, RequestId,
        RequestMetaObject,
    };

    fn call(meta: Option<MetaObject>) -> ClientJsonRpcMessage {
        let mut params = CallToolRequestParams::new("echo");
        params.meta = meta.map(RequestMetaObject);
        JsonRpcMessage::Request(JsonRpcRequest::new(
            RequestId::Number(1),
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
        ))
    }

    #[test]
    fn a_tool_calls_trace_context_goes_out_as_headers_too() {
        let parent = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";
        let mut meta = MetaObject::new();
        meta.set_traceparent(parent);
        meta.set_tracestate("radkit=1");
        let mut custom = HashMap::new();
        custom.insert(
            HeaderName::from_static("x-api-key"),
            HeaderValue::from_static("k"),
        );
        let headers = traced(&call(Some(meta)), custom);
        let header = |name: &'static str| headers[&HeaderName::from_static(name)].clone();
        assert_eq!(header("traceparent"), parent);
        assert_eq!(header("tracestate"), "radkit=1");
        assert_eq!(header("x-api-key"), "k", "the configured headers stay");
        assert_eq!(traced(&call(None), HashMap::new()).len(), 0);
    }
}
