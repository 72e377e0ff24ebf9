//! The peer's agent card: where it is fetched from, how a card of either version is read as an A2A
//! 1.0 card, and which JSON-RPC endpoint and protocol version the client then speaks. It reads the
//! card only; it never calls the agent.

use reqwest::Url;
use serde_json::{Map, Value};

use super::{ClientError, ProtocolVersion};
use crate::model::v1;

/// The path a base URL's card is served at (A2A 0.3 and 1.0).
pub const WELL_KNOWN_CARD_PATH: &str = ".well-known/agent-card.json";

/// Where the client sends its requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// The JSON-RPC URL.
    pub url: Url,
    /// The protocol version spoken there.
    pub version: ProtocolVersion,
    /// The 1.0 `tenant` to put in requests (`""`: none).
    pub tenant: String,
}

/// The card URL for `url`: `url` itself when its path ends in `.json`, else `url` with
/// [`WELL_KNOWN_CARD_PATH`] appended.
pub(crate) fn card_url(url: &str) -> Result<Url, ClientError> {
    let mut parsed = Url::parse(url.trim()).map_err(|e| {
        ClientError::Invalid(format!(
            "`{url}` is not a URL ({e}); pass the agent's base URL or its card URL, like `http://host:port`"
        ))
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ClientError::Invalid(format!(
            "`{url}` is not an HTTP URL; pass `http://..` or `https://..`"
        )));
    }
    if !parsed.path().ends_with(".json") {
        let path = format!(
            "{}/{WELL_KNOWN_CARD_PATH}",
            parsed.path().trim_end_matches('/')
        );
        parsed.set_path(&path);
    }
    Ok(parsed)
}

/// The card `doc` (fetched from `from`) as A2A 1.0 sees it. A card served for both versions (radkit's,
/// the official SDKs') is read as it is; a 0.3 card's members are read into their 1.0 places:
/// `url`, `preferredTransport` and `additionalInterfaces` become `supportedInterfaces` (at the
/// card's `protocolVersion`), each security scheme's `type` its 1.0 member, `security` the
/// `securityRequirements`.
pub(crate) fn read_card(mut doc: Value, from: &Url) -> Result<v1::AgentCard, ClientError> {
    let not_a_card = |problem: String| {
        ClientError::Card(format!(
            "the document at `{from}` is not an agent card this client can read: {problem}; check the URL"
        ))
    };
    let Value::Object(card) = &mut doc else {
        return Err(not_a_card("it is not a JSON object".into()));
    };
    let has_interfaces = card
        .get("supportedInterfaces")
        .and_then(Value::as_array)
        .is_some_and(|list| !list.is_empty());
    if !has_interfaces {
        let interfaces: Vec<Value> = v0_3_interfaces(card)
            .into_iter()
            .map(|(url, binding, version)| {
                serde_json::json!({"url": url, "protocolBinding": binding, "protocolVersion": version})
            })
            .collect();
        card.insert("supportedInterfaces".into(), interfaces.into());
    }
    if let Some(Value::Object(schemes)) = card.get_mut("securitySchemes") {
        for scheme in schemes.values_mut() {
            v1_scheme(scheme);
        }
    }
    v1_requirements(card);
    if let Some(Value::Array(skills)) = card.get_mut("skills") {
        for skill in skills.iter_mut().filter_map(Value::as_object_mut) {
            v1_requirements(skill);
        }
    }
    serde_json::from_value(doc).map_err(|e| not_a_card(e.to_string()))
}

/// A 0.3 card's JSON-RPC-capable interfaces as `(url, binding, version)`: `url` with its
/// `preferredTransport` (JSON-RPC when absent, as 0.3 says), then `additionalInterfaces`.
fn v0_3_interfaces(card: &Map<String, Value>) -> Vec<(String, String, String)> {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let version = text(card.get("protocolVersion")).unwrap_or_else(|| "0.3".to_owned());
    let mut out = Vec::new();
    if let Some(url) = text(card.get("url")) {
        let binding = text(card.get("preferredTransport")).unwrap_or_else(|| "JSONRPC".into());
        out.push((url, binding, version.clone()));
    }
    for extra in card
        .get("additionalInterfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let (Some(url), Some(binding)) = (text(extra.get("url")), text(extra.get("transport"))) {
            if !out.iter().any(|(u, b, _)| *u == url && *b == binding) {
                out.push((url, binding, version.clone()));
            }
        }
    }
    out
}

/// The 1.0 oneof member names of the 0.3 scheme `type`s.
const SCHEME_MEMBERS: [(&str, &str); 5] = [
    ("apiKey", "apiKeySecurityScheme"),
    ("http", "httpAuthSecurityScheme"),
    ("oauth2", "oauth2SecurityScheme"),
    ("openIdConnect", "openIdConnectSecurityScheme"),
    ("mutualTLS", "mtlsSecurityScheme"),
];

/// A 0.3 security scheme (`{"type": "http", ..}`) rewritten as its 1.0 oneof member; one that
/// already has a member is left as it is. 0.3 `in` is 1.0 `location`; of several OAuth flows the
/// first 1.0 can hold is kept (1.0 holds one).
fn v1_scheme(scheme: &mut Value) {
    let Value::Object(fields) = scheme else {
        return;
    };
    if SCHEME_MEMBERS.iter().any(|(_, m)| fields.contains_key(*m)) {
        return;
    }
    let kind = fields.get("type").and_then(Value::as_str).unwrap_or("");
    let Some((_, member)) = SCHEME_MEMBERS.iter().find(|(k, _)| *k == kind) else {
        return;
    };
    let mut inner = fields.clone();
    inner.remove("type");
    if let Some(location) = inner.remove("in") {
        inner.insert("location".into(), location);
    }
    if let Some(Value::Object(flows)) = inner.get_mut("flows") {
        let first = [
            "authorizationCode",
            "clientCredentials",
            "deviceCode",
            "implicit",
            "password",
        ]
        .into_iter()
        .find_map(|name| flows.get(name).map(|flow| (name, flow.clone())));
        flows.clear();
        if let Some((name, flow)) = first {
            flows.insert(name.into(), flow);
        }
    }
    *scheme = serde_json::json!({ *member: inner });
}

/// 0.3 `security` (`[{"name": ["scope"]}]`) as 1.0 `securityRequirements`, when the object has the
/// first and not the second.
fn v1_requirements(object: &mut Map<String, Value>) {
    if object.contains_key("securityRequirements") {
        return;
    }
    let Some(Value::Array(security)) = object.get("security") else {
        return;
    };
    let requirements: Vec<Value> = security
        .iter()
        .filter_map(Value::as_object)
        .map(|schemes| {
            let schemes: Map<String, Value> = schemes
                .iter()
                .map(|(name, scopes)| (name.clone(), serde_json::json!({ "list": scopes })))
                .collect();
            serde_json::json!({ "schemes": schemes })
        })
        .collect();
    object.insert("securityRequirements".into(), requirements.into());
}

/// The version an interface's `protocolVersion` names, if the client speaks it (`Major.Minor`, a
/// patch level ignored).
fn version_of(protocol_version: &str) -> Option<ProtocolVersion> {
    let mut numbers = protocol_version.trim().split('.');
    match (numbers.next(), numbers.next()) {
        (Some("1"), Some("0")) => Some(ProtocolVersion::V1_0),
        (Some("0"), Some("3")) => Some(ProtocolVersion::V0_3),
        _ => None,
    }
}

/// The endpoint to use: with `forced` unset, the first 1.0 JSON-RPC interface, else the first 0.3
/// one (the card's `url` for a 0.3 card); with `forced`, the first JSON-RPC interface of that
/// version, else the first of the other (a peer whose card lists one URL for both).
pub(crate) fn endpoint(
    card: &v1::AgentCard,
    from: &Url,
    forced: Option<ProtocolVersion>,
) -> Result<Endpoint, ClientError> {
    let jsonrpc = |version: ProtocolVersion| {
        card.supported_interfaces.iter().find(|i| {
            i.protocol_binding.eq_ignore_ascii_case("JSONRPC")
                && version_of(&i.protocol_version) == Some(version)
        })
    };
    let order = match forced {
        Some(ProtocolVersion::V0_3) => [ProtocolVersion::V0_3, ProtocolVersion::V1_0],
        _ => [ProtocolVersion::V1_0, ProtocolVersion::V0_3],
    };
    let found = order
        .iter()
        .find_map(|v| jsonrpc(*v).map(|interface| (interface, *v)));
    let Some((interface, found_version)) = found else {
        let offered: Vec<String> = card
            .supported_interfaces
            .iter()
            .map(|i| format!("{} {} at {}", i.protocol_binding, i.protocol_version, i.url))
            .collect();
        return Err(ClientError::Card(format!(
            "the agent card at `{from}` offers no JSON-RPC interface for A2A 0.3 or 1.0 (it offers: {}); this client speaks JSON-RPC only",
            if offered.is_empty() { "nothing".to_owned() } else { offered.join(", ") }
        )));
    };
    let url = from.join(&interface.url).map_err(|e| {
        ClientError::Card(format!(
            "the agent card at `{from}` names the interface URL `{}`, which is not a URL ({e})",
            interface.url
        ))
    })?;
    let version = forced.unwrap_or(found_version);
    Ok(Endpoint {
        url,
        version,
        tenant: match version {
            ProtocolVersion::V1_0 => interface.tenant.clone(),
            ProtocolVersion::V0_3 => String::new(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn from() -> Url {
        Url::parse("http://agent.example/.well-known/agent-card.json").unwrap()
    }

    #[test]
    fn a_base_url_gets_the_well_known_path_and_a_card_url_is_kept() {
        for (given, expected) in [
            ("http://h:1", "http://h:1/.well-known/agent-card.json"),
            ("http://h:1/", "http://h:1/.well-known/agent-card.json"),
            ("http://h/a2a/", "http://h/a2a/.well-known/agent-card.json"),
            ("http://h/card.json", "http://h/card.json"),
            (
                "https://h/.well-known/agent.json",
                "https://h/.well-known/agent.json",
            ),
        ] {
            assert_eq!(card_url(given).unwrap().as_str(), expected, "{given}");
        }
        assert!(matches!(card_url("h:1"), Err(ClientError::Invalid(_))));
        assert!(matches!(card_url("nope"), Err(ClientError::Invalid(_))));
    }

    fn card_0_3() -> Value {
        json!({
            "protocolVersion": "0.3.0", "name": "A", "description": "d", "version": "1",
            "url": "http://agent.example/rpc", "preferredTransport": "JSONRPC",
            "additionalInterfaces": [{"url": "http://agent.example/grpc", "transport": "GRPC"}],
            "capabilities": {"streaming": true, "stateTransitionHistory": false},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "key": {"type": "apiKey", "in": "header", "name": "X-Key"},
                "oauth": {"type": "oauth2", "flows": {
                    "implicit": {"authorizationUrl": "http://a", "scopes": {}},
                    "clientCredentials": {"tokenUrl": "http://t", "scopes": {"r": "read"}}
                }}
            },
            "security": [{"bearer": []}, {"key": ["r"]}],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "s", "name": "S", "description": "s", "tags": [], "security": [{"bearer": []}]}]
        })
    }

    #[test]
    fn a_0_3_card_is_read_as_1_0_and_its_url_is_the_0_3_endpoint() {
        let card = read_card(card_0_3(), &from()).unwrap();
        assert_eq!(card.supported_interfaces.len(), 2);
        assert_eq!(card.supported_interfaces[0].protocol_version, "0.3.0");
        assert!(matches!(
            card.security_schemes["key"],
            v1::SecurityScheme::ApiKey(ref k) if k.location == "header"
        ));
        assert!(matches!(
            card.security_schemes["oauth"],
            v1::SecurityScheme::OAuth2(ref o) if matches!(o.flows, v1::OAuthFlows::ClientCredentials(_))
        ));
        assert_eq!(card.security_requirements.len(), 2);
        assert_eq!(card.skills[0].security_requirements.len(), 1);
        let picked = endpoint(&card, &from(), None).unwrap();
        assert_eq!(picked.url.as_str(), "http://agent.example/rpc");
        assert_eq!(picked.version, ProtocolVersion::V0_3);
        // Forced to 1.0, the only JSON-RPC URL is used with the 1.0 header.
        let forced = endpoint(&card, &from(), Some(ProtocolVersion::V1_0)).unwrap();
        assert_eq!(forced.url.as_str(), "http://agent.example/rpc");
        assert_eq!(forced.version, ProtocolVersion::V1_0);
    }

    #[test]
    fn a_1_0_json_rpc_interface_wins_and_can_be_overridden() {
        let doc = json!({
            "name": "A", "description": "d", "version": "1", "capabilities": {},
            "url": "http://agent.example/old",
            "supportedInterfaces": [
                {"url": "http://agent.example/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
                {"url": "/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0", "tenant": "t"},
                {"url": "http://agent.example/old", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
            ]
        });
        let card = read_card(doc, &from()).unwrap();
        let picked = endpoint(&card, &from(), None).unwrap();
        assert_eq!(
            (picked.url.as_str(), picked.version, picked.tenant.as_str()),
            ("http://agent.example/v1", ProtocolVersion::V1_0, "t")
        );
        let old = endpoint(&card, &from(), Some(ProtocolVersion::V0_3)).unwrap();
        assert_eq!(
            (old.url.as_str(), old.version, old.tenant.as_str()),
            ("http://agent.example/old", ProtocolVersion::V0_3, "")
        );
    }

    #[test]
    fn a_card_without_json_rpc_or_not_a_card_is_a_card_error() {
        let doc = json!({
            "name": "A", "description": "d", "version": "1", "capabilities": {},
            "supportedInterfaces": [
                {"url": "http://h/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
                {"url": "http://h/", "protocolBinding": "JSONRPC", "protocolVersion": "2.0"}
            ]
        });
        let card = read_card(doc, &from()).unwrap();
        let e = endpoint(&card, &from(), None).unwrap_err().to_string();
        assert!(
            e.contains("no JSON-RPC interface") && e.contains("GRPC 1.0 at http://h/grpc"),
            "{e}"
        );
        for garbage in [json!([1]), json!({"name": 3})] {
            assert!(matches!(
                read_card(garbage, &from()),
                Err(ClientError::Card(_))
            ));
        }
    }
}
