//! Agent card signatures (A2A 1.0 §8.4): the RFC 8785 (JCS) canonical form of a 1.0 card without
//! its `signatures`, and a JWS (RFC 7515) with a detached payload over it, made with a private key
//! read from a PKCS#8 PEM block. The algorithm follows the key: ES256 (P-256), ES384 (P-384), EdDSA
//! (Ed25519) or RS256 (RSA, 2048 bits or more). It owns the cryptography and the canonical form; it
//! reads no file and keeps no state but the key.
//!
//! The payload is the card as a 1.0 client reads it (`v1::AgentCard` in ProtoJSON, which already
//! omits unset optional and default-valued fields as §8.4.1 asks), never the served document with
//! its 0.3 members beside it: a 1.0 client drops those before it verifies.

use std::fmt;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{self, KeyPair};
use serde_json::Value;

use super::v1::{AgentCard, AgentCardSignature};

/// Why a key cannot sign cards, or a card could not be signed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SigningError {
    /// The text holds no PEM block.
    #[error("the card signing key is not PEM: {0}")]
    NotPem(String),
    /// A PEM block of another kind than PKCS#8 `PRIVATE KEY`.
    #[error(
        "the card signing key is a `{label}` PEM block; radkit reads PKCS#8 `PRIVATE KEY` blocks (convert it with `openssl pkcs8 -topk8 -nocrypt -in key.pem -out key.pkcs8.pem`)"
    )]
    NotPkcs8 {
        /// The block's label.
        label: String,
    },
    /// A PKCS#8 key of an algorithm radkit does not sign with.
    #[error(
        "the card signing key is not an ECDSA P-256 or P-384, Ed25519 or RSA (2048 bits or more) private key"
    )]
    UnsupportedKey,
    /// The card has no JSON form (it holds a value JSON cannot express).
    #[error("the card cannot be canonicalized: {0}")]
    Canonical(String),
    /// The cryptographic library refused to sign.
    #[error("signing the card failed")]
    Sign,
}

enum Key {
    Ecdsa(signature::EcdsaKeyPair),
    Ed25519(signature::Ed25519KeyPair),
    Rsa(signature::RsaKeyPair),
}

/// A private key that signs agent cards, with the `kid` (and optionally `jku`) its signatures name.
pub struct CardSigner {
    key: Key,
    alg: &'static str,
    kid: String,
    jku: Option<String>,
    rng: SystemRandom,
}

impl fmt::Debug for CardSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key.
        f.debug_struct("CardSigner")
            .field("alg", &self.alg)
            .field("kid", &self.kid)
            .field("jku", &self.jku)
            .finish_non_exhaustive()
    }
}

impl CardSigner {
    /// A signer for the first PKCS#8 `PRIVATE KEY` block of `pem`. Its `kid` is the key's RFC 7638
    /// JWK thumbprint until [`CardSigner::with_key_id`] names another.
    pub fn from_pem(pem: &str) -> Result<CardSigner, SigningError> {
        let der = pkcs8_der(pem)?;
        let rng = SystemRandom::new();
        let (key, alg) = if let Ok(k) = signature::EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &der,
            &rng,
        ) {
            (Key::Ecdsa(k), "ES256")
        } else if let Ok(k) = signature::EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P384_SHA384_FIXED_SIGNING,
            &der,
            &rng,
        ) {
            (Key::Ecdsa(k), "ES384")
        } else if let Ok(k) = signature::Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der) {
            (Key::Ed25519(k), "EdDSA")
        } else if let Ok(k) = signature::RsaKeyPair::from_pkcs8(&der) {
            (Key::Rsa(k), "RS256")
        } else {
            return Err(SigningError::UnsupportedKey);
        };
        let mut signer = CardSigner {
            key,
            alg,
            kid: String::new(),
            jku: None,
            rng,
        };
        signer.kid = thumbprint(&signer.public_jwk());
        Ok(signer)
    }

    /// The same signer, its signatures naming `kid`.
    pub fn with_key_id(mut self, kid: impl Into<String>) -> CardSigner {
        self.kid = kid.into();
        self
    }

    /// The same signer, its signatures naming `jku`, the URL of a JWK Set holding the public key.
    pub fn with_jwks_url(mut self, jku: impl Into<String>) -> CardSigner {
        self.jku = Some(jku.into());
        self
    }

    /// The JWS algorithm: `ES256`, `ES384`, `EdDSA` or `RS256`.
    pub fn algorithm(&self) -> &'static str {
        self.alg
    }

    /// The `kid` its signatures carry.
    pub fn key_id(&self) -> &str {
        &self.kid
    }

    /// The public key as a JWK (RFC 7517), with `kid`, `alg` and `use`: what a verifier needs.
    pub fn public_jwk(&self) -> Value {
        let b64 = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
        let mut jwk = match &self.key {
            Key::Ecdsa(k) => {
                // An uncompressed point: 0x04, then x and y of equal length.
                let point = &k.public_key().as_ref()[1..];
                let (x, y) = point.split_at(point.len() / 2);
                let crv = if self.alg == "ES256" {
                    "P-256"
                } else {
                    "P-384"
                };
                serde_json::json!({"kty": "EC", "crv": crv, "x": b64(x), "y": b64(y)})
            }
            Key::Ed25519(k) => {
                serde_json::json!({"kty": "OKP", "crv": "Ed25519", "x": b64(k.public_key().as_ref())})
            }
            Key::Rsa(k) => {
                let c = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(k.public());
                serde_json::json!({"kty": "RSA", "n": b64(&c.n), "e": b64(&c.e)})
            }
        };
        if let Some(o) = jwk.as_object_mut() {
            if !self.kid.is_empty() {
                o.insert("kid".into(), self.kid.clone().into());
            }
            o.insert("alg".into(), self.alg.into());
            o.insert("use".into(), "sig".into());
        }
        jwk
    }

    /// `card` with this signer's signatures added to its `signatures`: over its canonical payload
    /// ([`canonical_payload`]), then over the forms the official Python SDKs verify where they
    /// differ from it and from each other ([`python_sdk_payload`] for 1.x,
    /// [`python_sdk_0_3_payload`] for 0.3, which reads the card's 0.3 members). A verifier accepts a
    /// card when one signature verifies (spec 1.0 §8.4.3: multiple signatures may be present), so
    /// every kind of verifier accepts it.
    pub fn sign(&self, mut card: AgentCard) -> Result<AgentCard, SigningError> {
        let mut payloads: Vec<Vec<u8>> = Vec::with_capacity(3);
        for payload in [
            canonical_payload(&card)?,
            python_sdk_payload(&card)?,
            python_sdk_0_3_payload(&card)?,
        ] {
            if !payloads.contains(&payload) {
                payloads.push(payload);
            }
        }
        for payload in payloads {
            let signature = self.signature(&payload)?;
            card.signatures.push(signature);
        }
        Ok(card)
    }

    /// A detached JWS over `payload`.
    fn signature(&self, payload: &[u8]) -> Result<AgentCardSignature, SigningError> {
        let mut header = serde_json::json!({"alg": self.alg, "typ": "JOSE", "kid": self.kid});
        if let (Some(jku), Some(o)) = (&self.jku, header.as_object_mut()) {
            o.insert("jku".into(), jku.clone().into());
        }
        let protected = URL_SAFE_NO_PAD.encode(header.to_string());
        let input = format!("{protected}.{}", URL_SAFE_NO_PAD.encode(payload));
        let signature = match &self.key {
            Key::Ecdsa(k) => k
                .sign(&self.rng, input.as_bytes())
                .map_err(|_| SigningError::Sign)?
                .as_ref()
                .to_vec(),
            Key::Ed25519(k) => k.sign(input.as_bytes()).as_ref().to_vec(),
            Key::Rsa(k) => {
                let mut out = vec![0; k.public().modulus_len()];
                k.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &self.rng,
                    input.as_bytes(),
                    &mut out,
                )
                .map_err(|_| SigningError::Sign)?;
                out
            }
        };
        Ok(AgentCardSignature {
            protected,
            signature: URL_SAFE_NO_PAD.encode(signature),
            header: None,
        })
    }
}

/// The bytes a card's signatures sign: its RFC 8785 canonical JSON without `signatures`
/// (spec 1.0 §8.4.1).
pub fn canonical_payload(card: &AgentCard) -> Result<Vec<u8>, SigningError> {
    let mut value =
        serde_json::to_value(card).map_err(|e| SigningError::Canonical(e.to_string()))?;
    if let Some(o) = value.as_object_mut() {
        o.remove("signatures");
    }
    canonical_json(&value)
}

/// The bytes the official Python SDK 1.x (1.3) verifies a card's signatures against
/// (`a2a.utils.signing._canonicalize_agent_card`): the canonical payload with every empty string,
/// list and object removed, recursively (its `_clean_empty`), then RFC 8785. It differs from
/// §8.4.1, which keeps an empty object in a map (the `{"bearer": {}}` of a security requirement
/// without scopes) and an empty required field (a skill's `tags: []`): for such cards the SDK's
/// verifier needs a signature of its own.
pub fn python_sdk_payload(card: &AgentCard) -> Result<Vec<u8>, SigningError> {
    let mut value =
        serde_json::to_value(card).map_err(|e| SigningError::Canonical(e.to_string()))?;
    if let Some(o) = value.as_object_mut() {
        o.remove("signatures");
    }
    canonical_json(&clean_empty(value).unwrap_or(Value::Object(Default::default())))
}

/// The bytes the official Python SDK 0.3 verifies a card's signatures against
/// (`a2a.utils.helpers.canonicalize_agent_card`): the card as its 0.3 models read the served
/// document (`model::served_json`: only the members they know, those equal to the models' defaults
/// left out, `preferredTransport: JSONRPC` and `protocolVersion: 0.3.0` among them), every empty
/// string, list and object removed, keys sorted, no whitespace and every non-ASCII character as a
/// `\uXXXX` escape (Python's `json.dumps`).
pub fn python_sdk_0_3_payload(card: &AgentCard) -> Result<Vec<u8>, SigningError> {
    let mut card = card.clone();
    card.signatures.clear();
    let view = v0_3_view(&super::card::served_json(&card));
    let cleaned = clean_empty(view).unwrap_or(Value::Object(Default::default()));
    let text = String::from_utf8(canonical_json(&cleaned)?)
        .map_err(|e| SigningError::Canonical(e.to_string()))?;
    let mut ascii = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            ascii.push(c);
        } else {
            for unit in c.encode_utf16(&mut [0; 2]) {
                ascii.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    Ok(ascii.into_bytes())
}

/// The members of `value` named in `keys`.
fn pick(value: &Value, keys: &[&str]) -> serde_json::Map<String, Value> {
    keys.iter()
        .filter_map(|k| value.get(*k).map(|v| ((*k).to_owned(), v.clone())))
        .collect()
}

/// Each element of the list `value[key]` through `f`, if it is a list.
fn each(map: &mut serde_json::Map<String, Value>, key: &str, f: impl Fn(&Value) -> Value) {
    if let Some(Value::Array(items)) = map.get(key) {
        let items = items.iter().map(f).collect();
        map.insert(key.to_owned(), Value::Array(items));
    }
}

/// The served document as the 0.3 SDK's pydantic models dump it (`exclude_defaults`).
fn v0_3_view(doc: &Value) -> Value {
    let mut card = pick(
        doc,
        &[
            "additionalInterfaces",
            "capabilities",
            "defaultInputModes",
            "defaultOutputModes",
            "description",
            "documentationUrl",
            "iconUrl",
            "name",
            "preferredTransport",
            "protocolVersion",
            "provider",
            "security",
            "securitySchemes",
            "skills",
            "supportsAuthenticatedExtendedCard",
            "url",
            "version",
        ],
    );
    for (key, default) in [
        ("preferredTransport", "JSONRPC"),
        ("protocolVersion", "0.3.0"),
    ] {
        if card.get(key).and_then(Value::as_str) == Some(default) {
            card.remove(key);
        }
    }
    if let Some(caps) = card.get("capabilities") {
        let mut caps = pick(
            caps,
            &[
                "extensions",
                "pushNotifications",
                "stateTransitionHistory",
                "streaming",
            ],
        );
        each(&mut caps, "extensions", |e| {
            pick(e, &["description", "params", "required", "uri"]).into()
        });
        card.insert("capabilities".into(), caps.into());
    }
    each(&mut card, "skills", |s| {
        pick(
            s,
            &[
                "description",
                "examples",
                "id",
                "inputModes",
                "name",
                "outputModes",
                "security",
                "tags",
            ],
        )
        .into()
    });
    each(&mut card, "additionalInterfaces", |i| {
        pick(i, &["transport", "url"]).into()
    });
    if let Some(provider) = card.get("provider") {
        let provider = pick(provider, &["organization", "url"]);
        card.insert("provider".into(), provider.into());
    }
    if let Some(Value::Object(schemes)) = card.get("securitySchemes") {
        let schemes: serde_json::Map<String, Value> = schemes
            .iter()
            .map(|(name, scheme)| (name.clone(), v0_3_scheme_view(scheme)))
            .collect();
        card.insert("securitySchemes".into(), schemes.into());
    }
    Value::Object(card)
}

/// A security scheme as the 0.3 model of its `type` dumps it (`type` itself is the default).
fn v0_3_scheme_view(scheme: &Value) -> Value {
    let keys: &[&str] = match scheme.get("type").and_then(Value::as_str) {
        Some("apiKey") => &["description", "in", "name"],
        Some("http") => &["bearerFormat", "description", "scheme"],
        Some("oauth2") => &["description", "flows", "oauth2MetadataUrl"],
        Some("openIdConnect") => &["description", "openIdConnectUrl"],
        _ => &["description"],
    };
    let mut fields = pick(scheme, keys);
    if let Some(flows) = fields.get("flows") {
        let mut kept = serde_json::Map::new();
        for (flow, keys) in [
            (
                "authorizationCode",
                &["authorizationUrl", "refreshUrl", "scopes", "tokenUrl"][..],
            ),
            (
                "clientCredentials",
                &["refreshUrl", "scopes", "tokenUrl"][..],
            ),
            (
                "implicit",
                &["authorizationUrl", "refreshUrl", "scopes"][..],
            ),
            ("password", &["refreshUrl", "scopes", "tokenUrl"][..]),
        ] {
            if let Some(f) = flows.get(flow) {
                kept.insert(flow.to_owned(), pick(f, keys).into());
            }
        }
        fields.insert("flows".into(), kept.into());
    }
    Value::Object(fields)
}

/// `value` without empty strings, lists and objects (what is left empty by their removal too);
/// `None` when nothing is left.
fn clean_empty(value: Value) -> Option<Value> {
    match value {
        Value::String(s) if s.is_empty() => None,
        Value::Array(items) => {
            let items: Vec<Value> = items.into_iter().filter_map(clean_empty).collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        Value::Object(members) => {
            let members: serde_json::Map<String, Value> = members
                .into_iter()
                .filter_map(|(k, v)| clean_empty(v).map(|v| (k, v)))
                .collect();
            (!members.is_empty()).then_some(Value::Object(members))
        }
        other => Some(other),
    }
}

/// `value` in the JSON Canonicalization Scheme of RFC 8785.
pub fn canonical_json(value: &Value) -> Result<Vec<u8>, SigningError> {
    serde_json_canonicalizer::to_vec(value).map_err(|e| SigningError::Canonical(e.to_string()))
}

/// The RFC 7638 thumbprint of a public JWK: base64url SHA-256 of its required members in JCS form.
fn thumbprint(jwk: &Value) -> String {
    let required: &[&str] = match jwk["kty"].as_str() {
        Some("EC") => &["crv", "kty", "x", "y"],
        Some("OKP") => &["crv", "kty", "x"],
        _ => &["e", "kty", "n"],
    };
    let members: serde_json::Map<String, Value> = required
        .iter()
        .map(|k| ((*k).to_owned(), jwk[*k].clone()))
        .collect();
    let text = canonical_json(&Value::Object(members)).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, &text))
}

/// The DER of the first `PRIVATE KEY` block of `pem`.
fn pkcs8_der(pem: &str) -> Result<Vec<u8>, SigningError> {
    let mut lines = pem.lines().map(str::trim);
    let label = lines
        .by_ref()
        .find_map(|l| {
            l.strip_prefix("-----BEGIN ")
                .and_then(|l| l.strip_suffix("-----"))
        })
        .ok_or_else(|| SigningError::NotPem("no `-----BEGIN …-----` line".to_owned()))?
        .to_owned();
    if label != "PRIVATE KEY" {
        return Err(SigningError::NotPkcs8 { label });
    }
    let mut body = String::new();
    for line in lines {
        if line.starts_with("-----END ") {
            return STANDARD
                .decode(body.as_bytes())
                .map_err(|e| SigningError::NotPem(format!("the key's base64 is invalid ({e})")));
        }
        body.push_str(line);
    }
    Err(SigningError::NotPem(
        "no `-----END PRIVATE KEY-----` line".to_owned(),
    ))
}

#[cfg(test)]
#[path = "card_signing_tests.rs"]
mod tests;
