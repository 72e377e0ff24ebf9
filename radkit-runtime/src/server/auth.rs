//! Bearer-token authentication: a configured token maps to a principal; tasks are scoped to it. It
//! compares SHA-256 digests of the presented and the configured tokens, so neither a token's bytes
//! nor its length shape the time a comparison takes, and it never writes or logs a token.

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};

use crate::engine::Caller;

/// A request without a valid bearer token, on a server that requires one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unauthorized;

/// The configured tokens as digests, each with the principal it authenticates.
pub(crate) struct Tokens(Vec<([u8; 32], String)>);

impl Tokens {
    /// Digest `tokens` (`(token, principal)` pairs, as in `ServerConfig::tokens`).
    pub(crate) fn new(tokens: &[(String, String)]) -> Self {
        Tokens(
            tokens
                .iter()
                .map(|(token, principal)| (digest(token), principal.clone()))
                .collect(),
        )
    }

    /// Who sent a request: the operator when auth is off, else the principal of its token.
    pub(crate) fn caller(&self, headers: &HeaderMap) -> Result<Caller, Unauthorized> {
        if self.0.is_empty() {
            return Ok(Caller::Operator);
        }
        let presented = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .ok_or(Unauthorized)?;
        let presented = digest(presented);
        // Every configured digest is compared, so the time does not say which one matched either.
        let mut found = None;
        for (configured, principal) in &self.0 {
            if constant_time_eq(configured, &presented) && found.is_none() {
                found = Some(principal);
            }
        }
        found
            .map(|principal| Caller::principal(principal.clone()))
            .ok_or(Unauthorized)
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Equal digests, in time that depends on neither digest's bytes.
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    std::hint::black_box(a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y))) == 0
}

/// The principal of a token configured without one: `token-` and 32 hex digits of a SHA-256 of the
/// token (domain-separated from the digests compared above). Distinct tokens get distinct
/// principals, the same token the same principal across restarts, and what is stored in the journal
/// reveals no part of the token.
pub fn token_principal(token: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"radkit token principal\0");
    hasher.update(token.as_bytes());
    let digest: [u8; 32] = hasher.finalize().into();
    let mut principal = String::with_capacity(6 + 32);
    principal.push_str("token-");
    for byte in &digest[..16] {
        principal.push(char::from(HEX[usize::from(byte >> 4)]));
        principal.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    principal
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::*;

    fn bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            axum::http::header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        headers
    }

    #[test]
    fn unnamed_tokens_get_distinct_stable_principals_that_reveal_nothing_of_the_token() {
        let one = token_principal("abcdSECRET1");
        let two = token_principal("abcdOTHER2");
        assert_ne!(one, two, "tokens sharing a prefix share no principal");
        assert_eq!(one, token_principal("abcdSECRET1"), "stable across calls");
        for principal in [&one, &two] {
            let hex = principal.strip_prefix("token-").unwrap();
            assert_eq!(hex.len(), 32, "{principal}");
            assert!(hex.bytes().all(|b| HEX.contains(&b)), "{principal}");
            assert!(!principal.contains("abcd"), "{principal}");
        }
        // Pinned: a principal names a user's tasks in every store, so it must never change.
        assert_eq!(one, "token-9f9b83773c5ef68719360cf4357c9c50");
    }

    #[test]
    fn a_token_matches_only_itself_whatever_its_length() {
        let tokens = Tokens::new(&[
            ("p,q".to_owned(), "bob".to_owned()),
            ("s3cret".to_owned(), "alice".to_owned()),
        ]);
        assert_eq!(
            tokens.caller(&bearer("p,q")),
            Ok(Caller::principal("bob".to_owned()))
        );
        assert_eq!(
            tokens.caller(&bearer("s3cret")),
            Ok(Caller::principal("alice".to_owned()))
        );
        for wrong in ["p", "q", "s3c", "s3cret2", "s3cretx", "", "bob"] {
            assert_eq!(tokens.caller(&bearer(wrong)), Err(Unauthorized), "{wrong}");
        }
        assert_eq!(tokens.caller(&HeaderMap::new()), Err(Unauthorized));
        assert_eq!(
            Tokens::new(&[]).caller(&HeaderMap::new()),
            Ok(Caller::Operator)
        );
    }
}
