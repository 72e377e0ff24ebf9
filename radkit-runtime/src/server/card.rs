//! The agent cards the server serves: the public card at `/.well-known/agent-card.json`, the
//! extended card for authenticated callers, and the public key of signed cards as a JWK Set at
//! `/.well-known/jwks.json`. They are built (in the registry), extended and signed
//! once, when the router is made: the skills an engine serves and the configuration never change
//! while it serves. Every binding answers the extended card through `extended_card_v1` or
//! `extended_card_v0_3`; none builds a card of its own.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;

use super::errors::{Kind, OpError};
use super::version::Version;
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

/// A card document as served: its bytes and its validators.
pub(crate) struct Document {
    /// The serialized JSON.
    pub(crate) body: String,
    /// A strong `ETag`: 32 hex digits of a SHA-256 of `body`, quoted.
    pub(crate) etag: String,
    /// When it was built (the server's start): its `Last-Modified`, in seconds since the epoch.
    pub(crate) built_at: i64,
}

impl Document {
    fn new(json: &Value) -> Document {
        let body = json.to_string();
        Document {
            etag: etag(&body),
            body,
            built_at: chrono::Utc::now().timestamp(),
        }
    }

    /// `Last-Modified` (an IMF-fixdate).
    fn last_modified(&self) -> String {
        chrono::DateTime::from_timestamp(self.built_at, 0)
            .unwrap_or_default()
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string()
    }

    /// Whether a conditional request already holds this document: `If-None-Match` names its tag
    /// (or `*`), or, without `If-None-Match` (which wins, RFC 9110 §13.2.2), `If-Modified-Since`
    /// is not before it was built.
    fn held_by(&self, headers: &HeaderMap) -> bool {
        use axum::http::header::{IF_MODIFIED_SINCE, IF_NONE_MATCH};
        if headers.contains_key(IF_NONE_MATCH) {
            return headers
                .get_all(IF_NONE_MATCH)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .map(|tag| tag.trim().trim_start_matches("W/"))
                .any(|tag| tag == self.etag || tag == "*");
        }
        headers
            .get(IF_MODIFIED_SINCE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| chrono::DateTime::parse_from_rfc2822(v).ok())
            .is_some_and(|since| since.timestamp() >= self.built_at)
    }
}

/// The cards as served, signed when `ServerConfig::card_signer` is set.
pub(crate) struct Cards {
    /// The public card with the 0.3 members beside the 1.0 card: for clients that send no
    /// `A2A-Version: 1.0` (`None` when `ServerConfig::card_0_3_members` is off).
    public_both: Option<Document>,
    /// The public card in its 1.0 form alone: for clients that send `A2A-Version: 1.0`.
    public_v1: Document,
    /// The extended card, if served: its 1.0 form and its document for 0.3 callers.
    extended: Option<(v1::AgentCard, Value)>,
    /// The JWK Set of the signing key, if cards are signed.
    jwks: Option<Value>,
}

impl Cards {
    /// Build, extend and sign the cards for `skills` served with `config`; `push` says whether the
    /// engine keeps push-notification configs (its store does).
    pub(crate) fn new(skills: &[SkillInfo], config: &ServerConfig, push: bool) -> Cards {
        let mut public = agent_card(skills, config);
        public.capabilities.push_notifications = Some(push);
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
        if extended.is_none() {
            public.capabilities.extended_agent_card = Some(false);
        }
        let public = sign(config, public);
        Cards {
            public_both: config
                .card_0_3_members
                .then(|| Document::new(&served_json(&public))),
            public_v1: Document::new(&serde_json::to_value(&public).unwrap_or_default()),
            jwks: config
                .card_signer
                .as_ref()
                .map(|signer| serde_json::json!({ "keys": [signer.public_jwk()] })),
            extended: extended.map(|card| {
                let card = sign(config, card);
                let doc = served_json(&card);
                (card, doc)
            }),
        }
    }

    /// The public card document: the 1.0 card alone when `v1_only` (the request says
    /// `A2A-Version: 1.0`) or the server serves no other, else the card for both versions.
    pub(crate) fn public(&self, v1_only: bool) -> &Document {
        match (&self.public_both, v1_only) {
            (Some(both), false) => both,
            _ => &self.public_v1,
        }
    }

    /// The JWK Set (RFC 7517) holding the public key the cards are signed with, if they are.
    pub(crate) fn jwks(&self) -> Option<&Value> {
        self.jwks.as_ref()
    }
}

/// A strong entity tag of `body`: 32 hex digits of its SHA-256, quoted.
fn etag(body: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(body.as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
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

/// The public card, with the caching headers of spec 1.0 §8.6.1: `Cache-Control: public,
/// max-age=<ServerConfig::card_max_age>`, a strong `ETag` of the document and `Last-Modified`; a
/// conditional request that holds it (`If-None-Match`, `If-Modified-Since`) gets 304 without a body. A request that says
/// `A2A-Version: 1.0` gets the 1.0 card alone, any other the card both versions read (so the
/// answer varies with that header).
pub(crate) async fn public_card(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let v1_only = matches!(
        Version::of_request(&headers, uri.query()),
        Ok(Version::V1_0)
    );
    let document = state.cards.public(v1_only);
    let cache = format!("public, max-age={}", state.config.card_max_age.as_secs());
    let mut response = if document.held_by(&headers) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            document.body.clone(),
        )
            .into_response()
    };
    for (name, value) in [
        (axum::http::header::ETAG, document.etag.clone()),
        (axum::http::header::LAST_MODIFIED, document.last_modified()),
        (axum::http::header::CACHE_CONTROL, cache),
        (axum::http::header::VARY, "A2A-Version".to_owned()),
    ] {
        if let Ok(value) = axum::http::HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// The key that signs the cards, for verifiers that fetch it (`--card-jwks-url` names this URL in
/// the signatures' `jku`); 404 when cards are not signed.
pub(crate) async fn jwks(State(state): State<Arc<AppState>>) -> Response {
    match state.cards.jwks() {
        Some(jwks) => Json(jwks).into_response(),
        None => (StatusCode::NOT_FOUND, "the agent cards are not signed").into_response(),
    }
}

/// A 1.0 `GetExtendedAgentCard` for `caller`: the extended card, or `UnsupportedOperationError`
/// when the public card declares none (`capabilities.extendedAgentCard` false, spec 1.0 §3.3.4).
/// An unauthenticated request never gets here: with tokens configured, the binding refuses it
/// first, and without tokens no extended card is declared.
pub(crate) fn extended_card_v1(
    state: &AppState,
    caller: &Caller,
) -> Result<v1::AgentCard, OpError> {
    match (&state.cards.extended, caller) {
        (Some((card, _)), Caller::Principal(_)) => Ok(card.clone()),
        _ => Err(OpError::new(
            Kind::Unsupported,
            "this agent declares no extended agent card (capabilities.extendedAgentCard is false)",
        )),
    }
}

/// A 0.3 `agent/getAuthenticatedExtendedCard` for `caller`: the extended card document, or
/// `AuthenticatedExtendedCardNotConfiguredError` (-32007).
pub(crate) fn extended_card_v0_3(state: &AppState, caller: &Caller) -> Result<Value, OpError> {
    match (&state.cards.extended, caller) {
        (Some((_, doc)), Caller::Principal(_)) => Ok(doc.clone()),
        _ => Err(OpError::new(
            Kind::NoExtendedCard,
            "this agent has no authenticated extended card",
        )),
    }
}

/// A 1.0 card as a JSON-RPC result or REST body.
pub(crate) fn to_json(card: v1::AgentCard) -> Result<Value, OpError> {
    serde_json::to_value(card).map_err(|e| {
        OpError::new(
            Kind::Internal,
            format!("the agent card does not serialize: {e}"),
        )
    })
}
