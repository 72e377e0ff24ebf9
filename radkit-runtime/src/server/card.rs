//! The agent card the server serves at `/.well-known/agent-card.json`. It is built in the registry
//! (`registry::agent_card` builds it for the registered skills), below the engine; this module only
//! keeps its public path.

use crate::config::ServerConfig;
use crate::flow::SkillInfo;
use crate::model::AgentCard;

/// The A2A 0.3 card for `skills` served with `config`.
pub fn agent_card(skills: &[SkillInfo], config: &ServerConfig) -> AgentCard {
    crate::registry::card_for(skills, config)
}
