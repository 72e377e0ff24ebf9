//! The agent card's protobuf form, for `GetExtendedAgentCard`: `v1::AgentCard` (which the card
//! code builds) to `proto::AgentCard`, field for field, security schemes and OAuth flows included.
//! Like the answers in `convert`, it cannot fail.

use super::proto;
use crate::model::v1;

fn scopes(
    scopes: std::collections::BTreeMap<String, String>,
) -> std::collections::HashMap<String, String> {
    scopes.into_iter().collect()
}

impl From<v1::OAuthFlows> for proto::OAuthFlows {
    // `implicit` and `password` are deprecated in the proto, and still part of it.
    #[allow(deprecated)]
    fn from(flows: v1::OAuthFlows) -> Self {
        use proto::o_auth_flows::Flow;
        let flow = match flows {
            v1::OAuthFlows::AuthorizationCode(f) => {
                Flow::AuthorizationCode(proto::AuthorizationCodeOAuthFlow {
                    authorization_url: f.authorization_url,
                    token_url: f.token_url,
                    refresh_url: f.refresh_url,
                    scopes: scopes(f.scopes),
                    pkce_required: f.pkce_required,
                })
            }
            v1::OAuthFlows::ClientCredentials(f) => {
                Flow::ClientCredentials(proto::ClientCredentialsOAuthFlow {
                    token_url: f.token_url,
                    refresh_url: f.refresh_url,
                    scopes: scopes(f.scopes),
                })
            }
            v1::OAuthFlows::Implicit(f) => Flow::Implicit(proto::ImplicitOAuthFlow {
                authorization_url: f.authorization_url,
                refresh_url: f.refresh_url,
                scopes: scopes(f.scopes),
            }),
            v1::OAuthFlows::Password(f) => Flow::Password(proto::PasswordOAuthFlow {
                token_url: f.token_url,
                refresh_url: f.refresh_url,
                scopes: scopes(f.scopes),
            }),
            v1::OAuthFlows::DeviceCode(f) => Flow::DeviceCode(proto::DeviceCodeOAuthFlow {
                device_authorization_url: f.device_authorization_url,
                token_url: f.token_url,
                refresh_url: f.refresh_url,
                scopes: scopes(f.scopes),
            }),
        };
        proto::OAuthFlows { flow: Some(flow) }
    }
}

impl From<v1::SecurityScheme> for proto::SecurityScheme {
    fn from(scheme: v1::SecurityScheme) -> Self {
        use proto::security_scheme::Scheme;
        let scheme = match scheme {
            v1::SecurityScheme::ApiKey(s) => {
                Scheme::ApiKeySecurityScheme(proto::ApiKeySecurityScheme {
                    description: s.description,
                    location: s.location,
                    name: s.name,
                })
            }
            v1::SecurityScheme::HttpAuth(s) => {
                Scheme::HttpAuthSecurityScheme(proto::HttpAuthSecurityScheme {
                    description: s.description,
                    scheme: s.scheme,
                    bearer_format: s.bearer_format,
                })
            }
            v1::SecurityScheme::OAuth2(s) => {
                Scheme::Oauth2SecurityScheme(proto::OAuth2SecurityScheme {
                    description: s.description,
                    flows: Some(s.flows.into()),
                    oauth2_metadata_url: s.oauth2_metadata_url,
                })
            }
            v1::SecurityScheme::OpenIdConnect(s) => {
                Scheme::OpenIdConnectSecurityScheme(proto::OpenIdConnectSecurityScheme {
                    description: s.description,
                    open_id_connect_url: s.open_id_connect_url,
                })
            }
            v1::SecurityScheme::MutualTls(s) => {
                Scheme::MtlsSecurityScheme(proto::MutualTlsSecurityScheme {
                    description: s.description,
                })
            }
        };
        proto::SecurityScheme {
            scheme: Some(scheme),
        }
    }
}

impl From<v1::SecurityRequirement> for proto::SecurityRequirement {
    fn from(r: v1::SecurityRequirement) -> Self {
        proto::SecurityRequirement {
            schemes: r
                .schemes
                .into_iter()
                .map(|(k, v)| (k, proto::StringList { list: v.list }))
                .collect(),
        }
    }
}

fn struct_of(map: Option<crate::model::Metadata>) -> Option<prost_types::Struct> {
    map.map(|m| {
        let value = super::convert::value_out(serde_json::Value::Object(m));
        match value.kind {
            Some(prost_types::value::Kind::StructValue(s)) => s,
            _ => prost_types::Struct::default(),
        }
    })
}

impl From<v1::AgentCard> for proto::AgentCard {
    fn from(card: v1::AgentCard) -> Self {
        proto::AgentCard {
            name: card.name,
            description: card.description,
            supported_interfaces: card
                .supported_interfaces
                .into_iter()
                .map(|i| proto::AgentInterface {
                    url: i.url,
                    protocol_binding: i.protocol_binding,
                    tenant: i.tenant,
                    protocol_version: i.protocol_version,
                })
                .collect(),
            provider: card.provider.map(|p| proto::AgentProvider {
                url: p.url,
                organization: p.organization,
            }),
            version: card.version,
            documentation_url: card.documentation_url,
            capabilities: Some(proto::AgentCapabilities {
                streaming: card.capabilities.streaming,
                push_notifications: card.capabilities.push_notifications,
                extensions: card
                    .capabilities
                    .extensions
                    .into_iter()
                    .map(|e| proto::AgentExtension {
                        uri: e.uri,
                        description: e.description,
                        required: e.required,
                        params: struct_of(e.params),
                    })
                    .collect(),
                extended_agent_card: card.capabilities.extended_agent_card,
            }),
            security_schemes: card
                .security_schemes
                .into_iter()
                .map(|(k, v)| (k, v.into()))
                .collect(),
            security_requirements: card
                .security_requirements
                .into_iter()
                .map(Into::into)
                .collect(),
            default_input_modes: card.default_input_modes,
            default_output_modes: card.default_output_modes,
            skills: card
                .skills
                .into_iter()
                .map(|s| proto::AgentSkill {
                    id: s.id,
                    name: s.name,
                    description: s.description,
                    tags: s.tags,
                    examples: s.examples,
                    input_modes: s.input_modes,
                    output_modes: s.output_modes,
                    security_requirements: s
                        .security_requirements
                        .into_iter()
                        .map(Into::into)
                        .collect(),
                })
                .collect(),
            signatures: card
                .signatures
                .into_iter()
                .map(|s| proto::AgentCardSignature {
                    protected: s.protected,
                    signature: s.signature,
                    header: struct_of(s.header),
                })
                .collect(),
            icon_url: card.icon_url,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_keeps_its_interfaces_capabilities_schemes_and_skills() {
        let card: v1::AgentCard = serde_json::from_value(serde_json::json!({
            "name": "radkit", "description": "d", "version": "1",
            "supportedInterfaces": [
                {"url": "http://h/", "protocolBinding": "GRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {"streaming": true, "extendedAgentCard": true},
            "securitySchemes": {
                "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}},
                "oauth": {"oauth2SecurityScheme": {"flows": {"clientCredentials": {
                    "tokenUrl": "https://t", "scopes": {"read": "Read"}
                }}}}
            },
            "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "s", "name": "S", "description": "x", "tags": ["t"]}]
        }))
        .unwrap();
        let out = proto::AgentCard::from(card);
        assert_eq!(out.supported_interfaces[0].protocol_binding, "GRPC");
        let caps = out.capabilities.unwrap();
        assert_eq!(
            (caps.streaming, caps.extended_agent_card),
            (Some(true), Some(true))
        );
        match &out.security_schemes["bearer"].scheme {
            Some(proto::security_scheme::Scheme::HttpAuthSecurityScheme(s)) => {
                assert_eq!(s.scheme, "Bearer")
            }
            other => panic!("{other:?}"),
        }
        match &out.security_schemes["oauth"].scheme {
            Some(proto::security_scheme::Scheme::Oauth2SecurityScheme(s)) => {
                match &s.flows.as_ref().unwrap().flow {
                    Some(proto::o_auth_flows::Flow::ClientCredentials(f)) => {
                        assert_eq!(f.scopes["read"], "Read")
                    }
                    other => panic!("{other:?}"),
                }
            }
            other => panic!("{other:?}"),
        }
        assert!(out.security_requirements[0].schemes.contains_key("bearer"));
        assert_eq!(out.skills[0].tags, ["t"]);
    }
}
