//! The A2A agent card: built from the skills an agent serves and the [`ServerConfig`] it presents
//! itself with, as an A2A 1.0 card (`model::v1::AgentCard`); `model::served_json` writes the
//! document both versions read, and the server signs and serves it. Nothing here touches HTTP, the
//! engine or a key.

use std::collections::BTreeMap;

use super::{build_all, DuplicateSkill};
use crate::config::ServerConfig;
use crate::flow::SkillInfo;
use crate::model::v1::{
    AgentCapabilities, AgentCard, AgentInterface, AgentSkill, HttpAuthSecurityScheme,
    SecurityRequirement, SecurityScheme, StringList,
};
use crate::model::Binding;

/// The name of the bearer scheme on the card when `ServerConfig::tokens` is set.
const BEARER_SCHEME: &str = "bearer";

/// The public agent card of every registered skill, unsigned (`model::served_json` writes the
/// document served at `/.well-known/agent-card.json`).
pub fn agent_card(config: &ServerConfig) -> Result<AgentCard, DuplicateSkill> {
    let infos: Vec<SkillInfo> = build_all()?.iter().map(|s| s.info().clone()).collect();
    Ok(card_for(&infos, config))
}

/// The extended agent card is served: one is configured, and callers authenticate (an extended
/// card is for authenticated callers only, spec 1.0 §13.3, so a server without tokens declares
/// none).
pub(crate) fn serves_extended_card(config: &ServerConfig) -> bool {
    config.extended_card.is_some() && !config.tokens.is_empty()
}

/// The gRPC target of the server at `url`: its `host:port` (the scheme's port when it names none),
/// as gRPC clients and the A2A TCK's reference agents write a `GRPC` interface's URL. gRPC has no
/// path prefix: behind a proxy that serves the agent under a path, the proxy must route
/// `/lf.a2a.v1.A2AService/*` too. A URL that does not parse is given as it is.
#[cfg(feature = "grpc")]
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

/// The public A2A 1.0 card for `skills` served with `config`, unsigned.
pub(crate) fn card_for(skills: &[SkillInfo], config: &ServerConfig) -> AgentCard {
    let (security_schemes, security_requirements) = if config.tokens.is_empty() {
        (BTreeMap::new(), Vec::new())
    } else {
        // "Bearer" as RFC 7235 spells it (and the 1.0 examples): the 0.3 copy of the scheme says
        // the same, so a client that reads either finds the same card.
        let scheme = SecurityScheme::HttpAuth(HttpAuthSecurityScheme {
            description: "A token configured with `radkit serve --token`.".to_owned(),
            scheme: "Bearer".to_owned(),
            bearer_format: String::new(),
        });
        (
            BTreeMap::from([(BEARER_SCHEME.to_owned(), scheme)]),
            vec![SecurityRequirement {
                schemes: BTreeMap::from([(BEARER_SCHEME.to_owned(), StringList::default())]),
            }],
        )
    };
    AgentCard {
        name: config.name.clone(),
        description: config.description.clone(),
        // One entry per binding and version served, 1.0 first (the version a JSON-RPC request
        // speaks is its `A2A-Version` header; the URL is the same). REST's paths hang off the same
        // base URL. gRPC (HTTP/2) is served on the same port, named as gRPC clients take a target:
        // `host:port`; a build without the `grpc` feature does not serve it, so does not list it.
        // HTTP+JSON's URL is the base its paths are appended to, without a trailing slash
        // (`{url}/message:send`, as the spec's examples write it and clients join it). A 0.3
        // client reads the first 0.3 entry as `url` with `preferredTransport`.
        // Only the bindings the configuration offers (`ServerConfig::bindings`).
        supported_interfaces: [
            (Binding::JsonRpc, "1.0", config.url.clone()),
            (
                Binding::HttpJson,
                "1.0",
                config.url.trim_end_matches('/').to_owned(),
            ),
            #[cfg(feature = "grpc")]
            (Binding::Grpc, "1.0", grpc_target(&config.url)),
            (Binding::JsonRpc, "0.3", config.url.clone()),
        ]
        .into_iter()
        .filter(|(binding, _, _)| config.offers(*binding))
        .map(|(binding, version, url)| AgentInterface {
            url,
            protocol_binding: binding.name().to_owned(),
            tenant: String::new(),
            protocol_version: version.to_owned(),
        })
        .collect(),
        provider: None,
        version: config.version.clone(),
        documentation_url: None,
        capabilities: AgentCapabilities {
            streaming: Some(true),
            // Every store of the crate keeps push configs; the server says so per engine
            // (`server::card::Cards`).
            push_notifications: Some(true),
            extensions: Vec::new(),
            extended_agent_card: Some(serves_extended_card(config)),
        },
        security_schemes,
        security_requirements,
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
                examples: s.examples.clone(),
                input_modes: s.input_modes.clone(),
                output_modes: s.output_modes.clone(),
                security_requirements: Vec::new(),
            })
            .collect(),
        signatures: Vec::new(),
        icon_url: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_lists_grpc_exactly_when_the_build_serves_it() {
        let card = card_for(&[], &ServerConfig::new("http://h:1/"));
        let bindings: Vec<&str> = card
            .supported_interfaces
            .iter()
            .map(|i| i.protocol_binding.as_str())
            .collect();
        assert_eq!(
            bindings.contains(&"GRPC"),
            cfg!(feature = "grpc"),
            "{bindings:?}"
        );
        assert!(bindings.contains(&"JSONRPC") && bindings.contains(&"HTTP+JSON"));
    }

    #[test]
    fn the_card_lists_only_the_bindings_the_configuration_offers() {
        let mut config = ServerConfig::new("http://h:1/");
        config.bindings = vec![Binding::HttpJson];
        let card = card_for(&[], &config);
        let listed: Vec<(&str, &str)> = card
            .supported_interfaces
            .iter()
            .map(|i| (i.protocol_binding.as_str(), i.url.as_str()))
            .collect();
        assert_eq!(listed, [("HTTP+JSON", "http://h:1")]);
        config.bindings = vec![Binding::Grpc];
        let card = card_for(&[], &config);
        let listed: Vec<&str> = card
            .supported_interfaces
            .iter()
            .map(|i| i.protocol_binding.as_str())
            .collect();
        let expected: &[&str] = if cfg!(feature = "grpc") {
            &["GRPC"]
        } else {
            &[]
        };
        assert_eq!(listed, expected);
    }

    #[cfg(feature = "grpc")]
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
