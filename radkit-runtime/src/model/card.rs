//! The agent card served at `/.well-known/agent-card.json`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
