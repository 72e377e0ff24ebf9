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

/// The gRPC target of the server at `url`: its `host:port` (the scheme's port when it names none),
/// as gRPC clients and the A2A TCK's reference agents write a `GRPC` interface's URL. gRPC has no
/// path prefix: behind a proxy that serves the agent under a path, the proxy must route
/// `/lf.a2a.v1.A2AService/*` too. A URL that does not parse is given as it is.
fn grpc_target(url: &str) -> String {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return url.to_owned();
    };
    match (parsed.host_str(), parsed.port_or_known_default()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        _ => url.to_owned(),
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
        // base URL. gRPC (HTTP/2) is served on the same port, named as gRPC clients take a target:
        // `host:port`.
        supported_interfaces: [
            ("JSONRPC", "1.0", config.url.clone()),
            ("HTTP+JSON", "1.0", config.url.clone()),
            ("GRPC", "1.0", grpc_target(&config.url)),
            ("JSONRPC", "0.3", config.url.clone()),
        ]
        .into_iter()
        .map(|(binding, version, url)| crate::model::v1::AgentInterface {
            url,
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

#[cfg(test)]
mod tests {
    use super::grpc_target;

    #[test]
    fn the_grpc_interface_is_the_servers_host_and_port() {
        for (url, target) in [
            ("http://127.0.0.1:8080/", "127.0.0.1:8080"),
            ("https://agent.example.com/a2a/", "agent.example.com:443"),
            ("http://agent.example.com", "agent.example.com:80"),
            ("http://[::1]:9000/", "[::1]:9000"),
            ("not a url", "not a url"),
        ] {
            assert_eq!(grpc_target(url), target, "{url}");
        }
    }
}
