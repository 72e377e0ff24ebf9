//! The peer's agent card: where it is fetched from, how a card of either version is read as an A2A
//! 1.0 card, and which interface (binding, URL, protocol version) the client then speaks. It reads the
//! card only; it never calls the agent.

use reqwest::Url;
use serde_json::{Map, Value};

use super::{ClientError, ProtocolVersion};
use crate::model::{v1, Binding};

/// The path a base URL's card is served at (A2A 0.3 and 1.0).
pub const WELL_KNOWN_CARD_PATH: &str = ".well-known/agent-card.json";

/// Where the client sends its requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// The binding spoken there.
    pub binding: Binding,
    /// The interface's URL: JSON-RPC's endpoint, HTTP+JSON's base, gRPC's `http://host:port`.
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

/// The bindings this build of the client speaks, in the order it prefers them by default:
/// JSON-RPC, then HTTP+JSON, then gRPC (with the `grpc` feature).
pub(crate) fn spoken() -> Vec<Binding> {
    Binding::ALL
        .into_iter()
        .filter(|b| cfg!(feature = "grpc") || *b != Binding::Grpc)
        .collect()
}

/// The endpoint to use: for each binding of `preferred` in turn, the card's first interface of it
/// that the client can speak; the first found wins. JSON-RPC is spoken in 1.0 or 0.3 (with
/// `forced` unset, a 1.0 interface before a 0.3 one; with `forced`, an interface of that version,
/// else the other, spoken in the forced version: a peer whose card lists one URL for both);
/// HTTP+JSON and gRPC only in 1.0 (so not when 0.3 is forced), and gRPC only in plaintext
/// (`http://` or a bare `host:port`, as gRPC targets are written).
pub(crate) fn endpoint(
    card: &v1::AgentCard,
    from: &Url,
    preferred: &[Binding],
    forced: Option<ProtocolVersion>,
) -> Result<Endpoint, ClientError> {
    let found = preferred.iter().find_map(|binding| match binding {
        Binding::JsonRpc => jsonrpc(card, forced),
        _ if forced == Some(ProtocolVersion::V0_3) => None,
        other => card
            .supported_interfaces
            .iter()
            .find(|i| {
                Binding::from_name(&i.protocol_binding) == Some(*other)
                    && version_of(&i.protocol_version) == Some(ProtocolVersion::V1_0)
                    && (*other != Binding::Grpc || grpc_target(&i.url).is_some())
            })
            .map(|i| (i, *other, ProtocolVersion::V1_0)),
    });
    let Some((interface, binding, found_version)) = found else {
        return Err(nothing_spoken(card, from, preferred, forced));
    };
    let url = match binding {
        Binding::Grpc => grpc_target(&interface.url),
        _ => from.join(&interface.url).ok(),
    };
    let url = url.ok_or_else(|| {
        ClientError::Card(format!(
            "the agent card at `{from}` names the interface URL `{}`, which is not a URL",
            interface.url
        ))
    })?;
    let version = match binding {
        Binding::JsonRpc => forced.unwrap_or(found_version),
        _ => ProtocolVersion::V1_0,
    };
    Ok(Endpoint {
        binding,
        url,
        version,
        tenant: match version {
            ProtocolVersion::V1_0 => interface.tenant.clone(),
            ProtocolVersion::V0_3 => String::new(),
        },
    })
}

/// The card's JSON-RPC interface for `forced` (see [`endpoint`]) and the version it lists.
fn jsonrpc(
    card: &v1::AgentCard,
    forced: Option<ProtocolVersion>,
) -> Option<(&v1::AgentInterface, Binding, ProtocolVersion)> {
    let of = |version: ProtocolVersion| {
        card.supported_interfaces.iter().find(|i| {
            Binding::from_name(&i.protocol_binding) == Some(Binding::JsonRpc)
                && version_of(&i.protocol_version) == Some(version)
        })
    };
    let order = match forced {
        Some(ProtocolVersion::V0_3) => [ProtocolVersion::V0_3, ProtocolVersion::V1_0],
        _ => [ProtocolVersion::V1_0, ProtocolVersion::V0_3],
    };
    order
        .into_iter()
        .find_map(|v| of(v).map(|i| (i, Binding::JsonRpc, v)))
}

/// A gRPC interface's URL as the `http://host:port` the client connects to: `host:port` (how
/// gRPC targets are written) or an `http://` URL; `None` for TLS (`https://`, which this client
/// does not speak over gRPC) and for anything that is not a host and port.
pub(crate) fn grpc_target(url: &str) -> Option<Url> {
    let url = url.trim();
    let with_scheme = if url.contains("://") {
        url.to_owned()
    } else {
        format!("http://{url}")
    };
    let parsed = Url::parse(&with_scheme).ok()?;
    (parsed.scheme() == "http" && parsed.host_str().is_some()).then_some(parsed)
}

/// The error for a card with nothing the client can speak: what it offers, and what was asked.
fn nothing_spoken(
    card: &v1::AgentCard,
    from: &Url,
    preferred: &[Binding],
    forced: Option<ProtocolVersion>,
) -> ClientError {
    let offered: Vec<String> = card
        .supported_interfaces
        .iter()
        .map(|i| format!("{} {} at {}", i.protocol_binding, i.protocol_version, i.url))
        .collect();
    let asked: Vec<&str> = preferred.iter().map(|b| b.name()).collect();
    let version = match forced {
        Some(ProtocolVersion::V0_3) => " in A2A 0.3 (HTTP+JSON and gRPC are 1.0 only)",
        Some(ProtocolVersion::V1_0) => " in A2A 1.0",
        None => "",
    };
    ClientError::Card(format!(
        "the agent card at `{from}` offers no interface this client speaks (it offers: {}); the client speaks {}{version}, gRPC in plaintext only",
        if offered.is_empty() { "nothing".to_owned() } else { offered.join(", ") },
        if asked.is_empty() { "nothing".to_owned() } else { asked.join(", ") },
    ))
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
        let picked = endpoint(&card, &from(), &spoken(), None).unwrap();
        assert_eq!(picked.url.as_str(), "http://agent.example/rpc");
        assert_eq!(picked.version, ProtocolVersion::V0_3);
        // Forced to 1.0, the only JSON-RPC URL is used with the 1.0 header.
        let forced = endpoint(&card, &from(), &spoken(), Some(ProtocolVersion::V1_0)).unwrap();
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
        let picked = endpoint(&card, &from(), &spoken(), None).unwrap();
        assert_eq!(
            (picked.url.as_str(), picked.version, picked.tenant.as_str()),
            ("http://agent.example/v1", ProtocolVersion::V1_0, "t")
        );
        let old = endpoint(&card, &from(), &spoken(), Some(ProtocolVersion::V0_3)).unwrap();
        assert_eq!(
            (old.url.as_str(), old.version, old.tenant.as_str()),
            ("http://agent.example/old", ProtocolVersion::V0_3, "")
        );
    }

    fn card_offering(interfaces: Value) -> v1::AgentCard {
        let doc = json!({
            "name": "A", "description": "d", "version": "1", "capabilities": {},
            "supportedInterfaces": interfaces
        });
        read_card(doc, &from()).unwrap()
    }

    fn every_binding() -> v1::AgentCard {
        card_offering(json!([
            {"url": "h:7", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "http://h/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0", "tenant": "t"},
            {"url": "http://h/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ]))
    }

    #[test]
    fn the_binding_is_the_first_of_the_preference_the_card_offers() {
        let card = every_binding();
        let picked = |preferred: &[Binding]| {
            let e = endpoint(&card, &from(), preferred, None).unwrap();
            (e.binding, e.url.to_string(), e.tenant)
        };
        assert_eq!(
            picked(&spoken()),
            (Binding::JsonRpc, "http://h/rpc".into(), String::new()),
            "JSON-RPC by default, whatever the card's order"
        );
        assert_eq!(
            picked(&[Binding::HttpJson, Binding::JsonRpc]),
            (Binding::HttpJson, "http://h/rest".into(), "t".into())
        );
        assert_eq!(
            picked(&[Binding::Grpc]),
            (Binding::Grpc, "http://h:7/".into(), String::new()),
            "a gRPC target `host:port` is spoken in plaintext"
        );
        let rest_only = card_offering(json!([
            {"url": "/a2a", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
        ]));
        let e = endpoint(&rest_only, &from(), &spoken(), None).unwrap();
        assert_eq!(
            (e.binding, e.url.as_str(), e.version),
            (
                Binding::HttpJson,
                "http://agent.example/a2a",
                ProtocolVersion::V1_0
            ),
            "the next preferred binding when the card lacks the first"
        );
    }

    #[test]
    fn a_forced_binding_the_card_lacks_is_a_card_error_naming_what_it_offers() {
        let rest_only = card_offering(json!([
            {"url": "http://h/", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
        ]));
        let e = endpoint(&rest_only, &from(), &[Binding::Grpc], None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("offers no interface this client speaks")
                && e.contains("HTTP+JSON 1.0 at http://h/")
                && e.contains("the client speaks GRPC"),
            "{e}"
        );
        // HTTP+JSON is 1.0 only: forcing 0.3 leaves nothing.
        let e = endpoint(&rest_only, &from(), &spoken(), Some(ProtocolVersion::V0_3))
            .unwrap_err()
            .to_string();
        assert!(e.contains("in A2A 0.3"), "{e}");
    }

    #[test]
    fn a_card_with_nothing_speakable_or_not_a_card_is_a_card_error() {
        let card = card_offering(json!([
            {"url": "https://h:443", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "http://h/", "protocolBinding": "JSONRPC", "protocolVersion": "2.0"},
            {"url": "http://h/", "protocolBinding": "CARRIER-PIGEON", "protocolVersion": "1.0"}
        ]));
        let e = endpoint(&card, &from(), &spoken(), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("GRPC 1.0 at https://h:443")
                && e.contains("JSONRPC 2.0 at http://h/")
                && e.contains("CARRIER-PIGEON"),
            "{e}"
        );
        assert_eq!(grpc_target("https://h:443"), None, "no TLS over gRPC");
        assert_eq!(grpc_target("h:1").unwrap().as_str(), "http://h:1/");
        for garbage in [json!([1]), json!({"name": 3})] {
            assert!(matches!(
                read_card(garbage, &from()),
                Err(ClientError::Card(_))
            ));
        }
    }
}
