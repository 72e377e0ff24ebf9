//! The agent card served at `/.well-known/agent-card.json`: the A2A 0.3 card types, and
//! [`served_json`], the one document both protocol versions' clients read. It owns the card's JSON
//! shape, never how the card is built (the registry) or served (the server).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::v1;

/// Self-describing manifest of an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    /// A2A protocol version, `"0.3.0"`.
    pub protocol_version: String,
    /// Agent name.
    pub name: String,
    /// What the agent does.
    pub description: String,
    /// The JSON-RPC endpoint.
    pub url: String,
    /// Transport at `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_transport: Option<String>,
    /// A2A 1.0: every URL, binding and protocol version the agent is reachable at, the preferred
    /// first (0.3 clients ignore it and use `url` with `preferredTransport`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supported_interfaces: Vec<super::v1::AgentInterface>,
    /// Agent version.
    pub version: String,
    /// The agent serves `agent/getAuthenticatedExtendedCard` to authenticated callers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_authenticated_extended_card: Option<bool>,
    /// Optional capabilities.
    pub capabilities: AgentCapabilities,
    /// Security schemes by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_schemes: Option<BTreeMap<String, SecurityScheme>>,
    /// Required schemes (OR of ANDs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<Vec<BTreeMap<String, Vec<String>>>>,
    /// Default accepted input MIME types.
    pub default_input_modes: Vec<String>,
    /// Default produced output MIME types.
    pub default_output_modes: Vec<String>,
    /// Skills.
    pub skills: Vec<AgentSkill>,
    /// Documentation URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documentation_url: Option<String>,
}

/// Optional capabilities of an agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// Supports `message/stream` and `tasks/resubscribe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    /// Supports push notifications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notifications: Option<bool>,
    /// Provides state transition history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_transition_history: Option<bool>,
    /// A2A 1.0: the agent serves an extended card to authenticated callers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_agent_card: Option<bool>,
}

/// A security scheme (only the HTTP bearer form is produced by radkit).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityScheme {
    /// `"http"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `"bearer"`.
    pub scheme: String,
    /// Token format hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_format: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One skill the agent offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    /// Unique id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Keywords.
    pub tags: Vec<String>,
    /// Example prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub examples: Option<Vec<String>>,
    /// Accepted input MIME types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_modes: Option<Vec<String>>,
    /// Produced output MIME types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_modes: Option<Vec<String>>,
}

/// The agent card document for both protocol versions: `card` in A2A 1.0 ProtoJSON, with the 0.3
/// members a 0.3 client needs merged in where the 1.0 card has no member of that name (the way the
/// official Python SDK 1.x serves its card, `agent_card_to_dict`). So `protocolVersion`, `url`,
/// `preferredTransport` (the first 0.3 interface), `supportsAuthenticatedExtendedCard`, `security`
/// and each skill's `security` sit beside `supportedInterfaces` and `securityRequirements`, and each
/// security scheme holds both shapes at once: the 1.0 oneof member (`httpAuthSecurityScheme`) and
/// the 0.3 `type` with the same fields beside it. The 0.3 SDK's models ignore the 1.0 members;
/// the 1.0 SDKs ignore the 0.3 ones (Python 1.x re-reads a scheme that has a `type` from its 0.3
/// fields, which carry the same values, so both readings give the same card).
pub fn served_json(card: &v1::AgentCard) -> Value {
    let mut doc = serde_json::to_value(card).unwrap_or_else(|_| Value::Object(Map::new()));
    merge(&mut doc, v0_3_members(card));
    doc
}

/// The members of the 0.3 card that the 1.0 card names differently or not at all.
fn v0_3_members(card: &v1::AgentCard) -> Value {
    let mut out = Map::new();
    let old: Vec<&v1::AgentInterface> = card
        .supported_interfaces
        .iter()
        .filter(|i| i.protocol_version.starts_with("0."))
        .collect();
    let primary = old.first().copied().or(card.supported_interfaces.first());
    out.insert(
        "protocolVersion".into(),
        super::v0_3::PROTOCOL_VERSION.into(),
    );
    if let Some(primary) = primary {
        out.insert("url".into(), primary.url.clone().into());
        out.insert(
            "preferredTransport".into(),
            primary.protocol_binding.clone().into(),
        );
    }
    let additional: Vec<Value> = old
        .iter()
        .skip(1)
        .map(|i| serde_json::json!({"url": i.url, "transport": i.protocol_binding}))
        .collect();
    if !additional.is_empty() {
        out.insert("additionalInterfaces".into(), additional.into());
    }
    if card.capabilities.extended_agent_card == Some(true) {
        out.insert("supportsAuthenticatedExtendedCard".into(), true.into());
    }
    if !card.security_schemes.is_empty() {
        let schemes: Map<String, Value> = card
            .security_schemes
            .iter()
            .map(|(name, scheme)| (name.clone(), v0_3_scheme(scheme)))
            .collect();
        out.insert("securitySchemes".into(), schemes.into());
    }
    if !card.security_requirements.is_empty() {
        out.insert(
            "security".into(),
            v0_3_requirements(&card.security_requirements),
        );
    }
    if card
        .skills
        .iter()
        .any(|s| !s.security_requirements.is_empty())
    {
        let skills: Vec<Value> = card
            .skills
            .iter()
            .map(|s| {
                if s.security_requirements.is_empty() {
                    Value::Object(Map::new())
                } else {
                    serde_json::json!({"security": v0_3_requirements(&s.security_requirements)})
                }
            })
            .collect();
        out.insert("skills".into(), skills.into());
    }
    Value::Object(out)
}

/// A 1.0 scheme's 0.3 form: the oneof member's fields with the 0.3 `type` (and `in` for an API
/// key's `location`).
fn v0_3_scheme(scheme: &v1::SecurityScheme) -> Value {
    let kind = match scheme {
        v1::SecurityScheme::ApiKey(_) => "apiKey",
        v1::SecurityScheme::HttpAuth(_) => "http",
        v1::SecurityScheme::OAuth2(_) => "oauth2",
        v1::SecurityScheme::OpenIdConnect(_) => "openIdConnect",
        v1::SecurityScheme::MutualTls(_) => "mutualTLS",
    };
    let mut fields = match serde_json::to_value(scheme) {
        Ok(Value::Object(member)) => match member.into_iter().next() {
            Some((_, Value::Object(fields))) => fields,
            _ => Map::new(),
        },
        _ => Map::new(),
    };
    if let Some(location) = fields.remove("location") {
        fields.insert("in".into(), location);
    }
    fields.insert("type".into(), kind.into());
    Value::Object(fields)
}

/// 1.0 `securityRequirements` as 0.3 `security`: a list of maps from scheme name to scopes.
fn v0_3_requirements(requirements: &[v1::SecurityRequirement]) -> Value {
    requirements
        .iter()
        .map(|r| {
            r.schemes
                .iter()
                .map(|(name, scopes)| (name.clone(), Value::from(scopes.list.clone())))
                .collect::<Map<String, Value>>()
                .into()
        })
        .collect::<Vec<Value>>()
        .into()
}

/// Add `extra`'s members to `base` where `base` has none of that name: objects merge member by
/// member, lists element by element, and a value `base` has wins.
fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (key, value) in extra {
                match base.get_mut(&key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (Value::Array(base), Value::Array(extra)) => {
            for (existing, value) in base.iter_mut().zip(extra) {
                merge(existing, value);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_served_document_holds_the_1_0_card_and_the_0_3_members_beside_it() {
        let card: v1::AgentCard = serde_json::from_value(json!({
            "name": "A", "description": "d", "version": "1",
            "supportedInterfaces": [
                {"url": "http://h/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "http://h/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": "http://h/grpc", "protocolBinding": "GRPC", "protocolVersion": "0.3"}
            ],
            "capabilities": {"streaming": true, "extendedAgentCard": true},
            "securitySchemes": {
                "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "t"}},
                "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}}
            },
            "securityRequirements": [{"schemes": {"bearer": {}}}, {"schemes": {"key": {"list": ["r"]}}}],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [
                {"id": "a", "name": "A", "description": "a", "tags": []},
                {"id": "b", "name": "B", "description": "b", "tags": [], "securityRequirements": [{"schemes": {"key": {}}}]}
            ]
        }))
        .unwrap();
        let doc = served_json(&card);
        // The 1.0 members are untouched: a 1.0 reader gets the card back.
        assert_eq!(
            serde_json::from_value::<v1::AgentCard>(doc.clone()).unwrap(),
            card
        );
        assert_eq!(doc["protocolVersion"], "0.3.0");
        assert_eq!(doc["url"], "http://h/");
        assert_eq!(doc["preferredTransport"], "JSONRPC");
        assert_eq!(
            doc["additionalInterfaces"],
            json!([{"url": "http://h/grpc", "transport": "GRPC"}])
        );
        assert_eq!(doc["supportsAuthenticatedExtendedCard"], true);
        assert_eq!(
            doc["securitySchemes"]["bearer"],
            json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "t"}, "type": "http", "scheme": "Bearer", "description": "t"})
        );
        assert_eq!(
            doc["securitySchemes"]["key"],
            json!({"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}, "type": "apiKey", "in": "header", "name": "X-Key"})
        );
        assert_eq!(doc["security"], json!([{"bearer": []}, {"key": ["r"]}]));
        assert_eq!(doc["skills"][0].get("security"), None);
        assert_eq!(doc["skills"][1]["security"], json!([{"key": []}]));
        // And the 0.3 reading of the same document (radkit's 0.3 types hold HTTP schemes only).
        let mut doc = doc;
        doc["securitySchemes"]
            .as_object_mut()
            .unwrap()
            .remove("key");
        let old: AgentCard = serde_json::from_value(doc).unwrap();
        assert_eq!(old.url, "http://h/");
        assert_eq!(old.supports_authenticated_extended_card, Some(true));
        assert_eq!(old.security.unwrap()[0]["bearer"], Vec::<String>::new());
    }
}
