//! The A2A agent card: built from the skills an agent serves and the [`ServerConfig`] it presents
//! itself with. The server serves it; the registry builds it for the registered skills. Nothing here
//! touches HTTP or the engine.

use std::collections::BTreeMap;

use super::{build_all, DuplicateSkill};
use crate::config::ServerConfig;
use crate::flow::SkillInfo;
use crate::model::{AgentCapabilities, AgentCard, AgentSkill, SecurityScheme, PROTOCOL_VERSION};

/// The agent card of every registered skill.
pub fn agent_card(config: &ServerConfig) -> Result<AgentCard, DuplicateSkill> {
    let infos: Vec<SkillInfo> = build_all()?.iter().map(|s| s.info().clone()).collect();
    Ok(card_for(&infos, config))
}

fn modes(modes: &[String]) -> Option<Vec<String>> {
    if modes.is_empty() {
        None
    } else {
        Some(modes.to_vec())
    }
}

/// The A2A 0.3 card for `skills` served with `config`.
pub(crate) fn card_for(skills: &[SkillInfo], config: &ServerConfig) -> AgentCard {
    let (security_schemes, security) = if config.tokens.is_empty() {
        (None, None)
    } else {
        let scheme = SecurityScheme {
            kind: "http".to_owned(),
            scheme: "bearer".to_owned(),
            bearer_format: None,
            description: Some("A token configured with `radkit serve --token`.".to_owned()),
        };
        (
            Some(BTreeMap::from([("bearer".to_owned(), scheme)])),
            Some(vec![BTreeMap::from([("bearer".to_owned(), Vec::new())])]),
        )
    };
    AgentCard {
        protocol_version: PROTOCOL_VERSION.to_owned(),
        name: config.name.clone(),
        description: config.description.clone(),
        url: config.url.clone(),
        preferred_transport: Some("JSONRPC".to_owned()),
        // One entry per binding and version served, 1.0 first (the version a JSON-RPC request
        // speaks is its `A2A-Version` header; the URL is the same). REST's paths hang off the same
        // base URL, and gRPC (HTTP/2) is served on the same port.
        supported_interfaces: [
            ("JSONRPC", "1.0"),
            ("HTTP+JSON", "1.0"),
            ("GRPC", "1.0"),
            ("JSONRPC", "0.3"),
        ]
        .into_iter()
        .map(|(binding, version)| crate::model::v1::AgentInterface {
            url: config.url.clone(),
            protocol_binding: binding.to_owned(),
            tenant: String::new(),
            protocol_version: version.to_owned(),
        })
        .collect(),
        version: config.version.clone(),
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            state_transition_history: Some(false),
            extended_agent_card: Some(false),
        },
        security_schemes,
        security,
        default_input_modes: vec!["text/plain".to_owned(), "application/json".to_owned()],
        default_output_modes: vec!["text/plain".to_owned(), "application/json".to_owned()],
        skills: skills
            .iter()
            .map(|s| AgentSkill {
                id: s.id.clone(),
                name: s.name.clone(),
                description: if s.description.is_empty() {
                    s.name.clone()
                } else {
                    s.description.clone()
                },
                tags: s.tags.clone(),
                examples: if s.examples.is_empty() {
                    None
                } else {
                    Some(s.examples.clone())
                },
                input_modes: modes(&s.input_modes),
                output_modes: modes(&s.output_modes),
            })
            .collect(),
        documentation_url: None,
    }
}
