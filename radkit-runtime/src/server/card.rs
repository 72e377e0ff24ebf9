//! The agent cards the server serves: the public card at `/.well-known/agent-card.json`, the
//! extended card for authenticated callers, and the public key of signed cards as a JWK Set at
//! `/.well-known/jwks.json`. They are built (in the registry), extended and signed
//! once, when the router is made: the skills an engine serves and the configuration never change
//! while it serves. Every binding answers the extended card through `extended_card_v1` or
//! `extended_card_v0_3`; none builds a card of its own.

use serde_json::Value;

use super::jsonrpc::{codes, RpcError};
use super::AppState;
use crate::config::ServerConfig;
use crate::engine::Caller;
use crate::flow::SkillInfo;
use crate::model::{served_json, v1};

/// The public A2A 1.0 card for `skills` served with `config`, unsigned
/// ([`crate::model::served_json`] writes the document both versions read).
pub fn agent_card(skills: &[SkillInfo], config: &ServerConfig) -> v1::AgentCard {
    crate::registry::card_for(skills, config)
}

/// The cards as served, signed when `ServerConfig::card_signer` is set.
pub(crate) struct Cards {
    /// The public card document (1.0 with the 0.3 members).
    public: Value,
    /// The extended card, if served: its 1.0 form and its document for 0.3 callers.
    extended: Option<(v1::AgentCard, Value)>,
    /// The JWK Set of the signing key, if cards are signed.
    jwks: Option<Value>,
}

impl Cards {
    /// Build, extend and sign the cards for `skills` served with `config`.
    pub(crate) fn new(skills: &[SkillInfo], config: &ServerConfig) -> Cards {
        let public = agent_card(skills, config);
        let extended = match &config.extended_card {
            Some(extension) if crate::registry::serves_extended_card(config) => {
                match extension.apply(&public) {
                    Ok(card) => Some(card),
                    Err(e) => {
                        // `ExtendedCard::from_json` tried the addition on a card already; a card it
                        // still cannot extend is declared as none rather than served half-made.
                        tracing::error!("{e}; no extended agent card is served");
                        None
                    }
                }
            }
            _ => None,
        };
        let mut public = sign(config, public);
        if extended.is_none() {
            public.capabilities.extended_agent_card = Some(false);
        }
        Cards {
            jwks: config
                .card_signer
                .as_ref()
                .map(|signer| serde_json::json!({ "keys": [signer.public_jwk()] })),
            public: served_json(&public),
            extended: extended.map(|card| {
                let card = sign(config, card);
                let doc = served_json(&card);
                (card, doc)
            }),
        }
    }

    /// The public card document.
    pub(crate) fn public(&self) -> &Value {
        &self.public
    }

    /// The JWK Set (RFC 7517) holding the public key the cards are signed with, if they are.
    pub(crate) fn jwks(&self) -> Option<&Value> {
        self.jwks.as_ref()
    }
}

/// `card` signed with the configured key; unsigned (and the failure logged) if signing fails.
fn sign(config: &ServerConfig, card: v1::AgentCard) -> v1::AgentCard {
    let Some(signer) = &config.card_signer else {
        return card;
    };
    match signer.sign(card.clone()) {
        Ok(signed) => signed,
        Err(e) => {
            tracing::error!("{e}; the agent card is served unsigned");
            card
        }
    }
}

/// A 1.0 `GetExtendedAgentCard` for `caller`: the extended card, or `UnsupportedOperationError`
/// when the public card declares none (`capabilities.extendedAgentCard` false, spec 1.0 §3.3.4).
/// An unauthenticated request never gets here: with tokens configured, the binding refuses it
/// first, and without tokens no extended card is declared.
pub(crate) fn extended_card_v1(
    state: &AppState,
    caller: &Caller,
) -> Result<v1::AgentCard, RpcError> {
    match (&state.cards.extended, caller) {
        (Some((card, _)), Caller::Principal(_)) => Ok(card.clone()),
        _ => Err(RpcError::new(
            codes::UNSUPPORTED_OPERATION,
            "this agent declares no extended agent card (capabilities.extendedAgentCard is false)",
        )),
    }
}

/// A 0.3 `agent/getAuthenticatedExtendedCard` for `caller`: the extended card document, or
/// `AuthenticatedExtendedCardNotConfiguredError` (-32007).
pub(crate) fn extended_card_v0_3(state: &AppState, caller: &Caller) -> Result<Value, RpcError> {
    match (&state.cards.extended, caller) {
        (Some((_, doc)), Caller::Principal(_)) => Ok(doc.clone()),
        _ => Err(RpcError::new(
            codes::EXTENDED_CARD_NOT_CONFIGURED,
            "this agent has no authenticated extended card",
        )),
    }
}

/// A 1.0 card as a JSON-RPC result or REST body.
pub(crate) fn to_json(card: v1::AgentCard) -> Result<Value, RpcError> {
    serde_json::to_value(card).map_err(|e| {
        RpcError::new(
            codes::INTERNAL_ERROR,
            format!("the agent card does not serialize: {e}"),
        )
    })
}
