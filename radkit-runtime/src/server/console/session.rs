//! Who looks at the console, and the defences of what it changes. With no tokens configured the
//! console is the operator's, as the API is. With tokens, a browser signs in once with one: the
//! console sets a session cookie (HttpOnly, SameSite=Strict, path `/console`) that names the
//! token's principal for twelve hours, signed with HMAC-SHA-256 under a key derived from every
//! configured token, so that every worker with the same tokens accepts it and changing the tokens
//! signs everyone out. A principal sees only its own tasks; one of `ServerConfig::console_admins`
//! sees every task, as the operator.
//!
//! Nothing changes without a CSRF defence: every state-changing request must come from the
//! console's own origin (its `Origin`, or `Sec-Fetch-Site`, when the browser sends one) and carry
//! the page's CSRF token in `X-Radkit-Csrf` (an HMAC of the session, which a page of another
//! origin can neither read nor send without a CORS preflight the server never grants). The sign-in
//! form, which has no session yet, is checked by origin.

use axum::http::{header, HeaderMap, HeaderValue};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::hmac;
use sha2::{Digest, Sha256};

use super::super::AppState;
use crate::engine::Caller;

/// The session cookie's name.
const COOKIE: &str = "radkit_console";

/// How long a session lasts.
const LIFETIME_MS: i64 = 12 * 3_600_000;

/// The header that carries the CSRF token.
pub(super) const CSRF_HEADER: &str = "x-radkit-csrf";

/// Who looks at the console.
#[derive(Debug, Clone)]
pub(super) struct Viewer {
    /// What the engine is asked as.
    pub caller: Caller,
    /// The signed-in principal; `None` when the server has no tokens.
    pub principal: Option<String>,
    /// Sees every task.
    pub admin: bool,
    /// The token the page's script sends with each change.
    pub csrf: String,
}

impl Viewer {
    /// Who, as the page header says it.
    pub(super) fn label(&self) -> String {
        match (&self.principal, self.admin) {
            (Some(p), true) => format!("{p} (admin)"),
            (Some(p), false) => p.clone(),
            (None, _) => "operator (no authentication)".to_owned(),
        }
    }

    /// Signed in with a session (and so able to sign out).
    pub(super) fn signed_in(&self) -> bool {
        self.principal.is_some()
    }
}

/// The request has no valid session on a server with tokens.
#[derive(Debug)]
pub(super) struct SignIn;

/// The key sessions and CSRF tokens are signed with.
pub(crate) struct Sessions {
    key: hmac::Key,
    /// The cookie is `Secure` (the agent's URL is HTTPS).
    secure: bool,
}

impl Sessions {
    /// The key for `config`: derived from its tokens, or random for this process when it has none
    /// (only CSRF tokens are signed then).
    pub(crate) fn new(config: &crate::config::ServerConfig) -> Self {
        let mut tokens: Vec<&(String, String)> = config.tokens.iter().collect();
        tokens.sort();
        let secret: [u8; 32] = if tokens.is_empty() {
            let mut bytes = [0u8; 32];
            bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
            bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
            bytes
        } else {
            let mut hasher = Sha256::new();
            hasher.update(b"radkit console sessions v1\0");
            for (token, principal) in tokens {
                hasher.update(Sha256::digest(token.as_bytes()));
                hasher.update(principal.as_bytes());
                hasher.update(b"\0");
            }
            hasher.finalize().into()
        };
        Sessions {
            key: hmac::Key::new(hmac::HMAC_SHA256, &secret),
            secure: config.url.starts_with("https://"),
        }
    }

    fn sign(&self, purpose: &str, text: &str) -> String {
        let mut context = hmac::Context::with_key(&self.key);
        context.update(purpose.as_bytes());
        context.update(b"\0");
        context.update(text.as_bytes());
        URL_SAFE_NO_PAD.encode(context.sign().as_ref())
    }

    fn verify(&self, purpose: &str, text: &str, signature: &str) -> bool {
        let Ok(signature) = URL_SAFE_NO_PAD.decode(signature) else {
            return false;
        };
        let mut message = Vec::with_capacity(purpose.len() + 1 + text.len());
        message.extend_from_slice(purpose.as_bytes());
        message.push(0);
        message.extend_from_slice(text.as_bytes());
        hmac::verify(&self.key, &message, &signature).is_ok()
    }

    /// A session cookie's value for `principal`, valid until `now_ms` plus the lifetime.
    fn issue(&self, principal: &str, now_ms: i64) -> String {
        let body = format!(
            "{}.{}",
            now_ms + LIFETIME_MS,
            URL_SAFE_NO_PAD.encode(principal)
        );
        let signature = self.sign("session", &body);
        format!("{body}.{signature}")
    }

    /// The principal of a session cookie's value, if it is ours and not expired.
    fn principal(&self, value: &str, now_ms: i64) -> Option<String> {
        let (body, signature) = value.rsplit_once('.')?;
        if !self.verify("session", body, signature) {
            return None;
        }
        let (expires, principal) = body.split_once('.')?;
        if expires.parse::<i64>().ok()? <= now_ms {
            return None;
        }
        String::from_utf8(URL_SAFE_NO_PAD.decode(principal).ok()?).ok()
    }
}

/// The value of cookie `name` in the request.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// Who sent the request, from its session (or the operator on a server without tokens).
pub(super) fn viewer(state: &AppState, headers: &HeaderMap) -> Result<Viewer, SignIn> {
    let sessions = &state.sessions;
    if state.config.tokens.is_empty() {
        return Ok(Viewer {
            caller: Caller::Operator,
            principal: None,
            admin: true,
            csrf: sessions.sign("csrf", "operator"),
        });
    }
    let value = cookie(headers, COOKIE).ok_or(SignIn)?;
    let principal = sessions
        .principal(value, crate::journal::now_ms())
        .ok_or(SignIn)?;
    let admin = state.config.console_admins.contains(&principal);
    Ok(Viewer {
        caller: match admin {
            true => Caller::Operator,
            false => Caller::principal(principal.clone()),
        },
        csrf: sessions.sign("csrf", value),
        principal: Some(principal),
        admin,
    })
}

/// A state-changing request of `viewer` carries its CSRF token and comes from the console's origin.
pub(super) fn check_change(state: &AppState, viewer: &Viewer, headers: &HeaderMap) -> bool {
    let basis = match &viewer.principal {
        None => "operator",
        Some(_) => match cookie(headers, COOKIE) {
            Some(value) => value,
            None => return false,
        },
    };
    let presented = headers
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    same_origin(headers) && state.sessions.verify("csrf", basis, presented)
}

/// The request comes from a page of this server's origin, as far as the browser says: its
/// `Origin` names the `Host` it was sent to, or (without `Origin`) `Sec-Fetch-Site` says
/// `same-origin`. A client that sends neither is not a browser, and a cross-site request of a
/// browser always carries one of them.
pub(super) fn same_origin(headers: &HeaderMap) -> bool {
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        let origin_host = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        return matches!((origin_host, host), (Some(o), Some(h)) if o.eq_ignore_ascii_case(h));
    }
    match headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        Some(site) => site == "same-origin" || site == "none",
        None => true,
    }
}

/// The principal a token authenticates, if it is one of the server's.
pub(super) fn principal_of_token(state: &AppState, token: &str) -> Option<String> {
    let value = HeaderValue::from_str(&format!("Bearer {}", token.trim())).ok()?;
    let mut headers = HeaderMap::new();
    headers.insert(header::AUTHORIZATION, value);
    match state.tokens.caller(&headers) {
        Ok(Caller::Principal(principal)) => Some(principal),
        _ => None,
    }
}

/// The `Set-Cookie` of a new session for `principal`.
pub(super) fn session_cookie(state: &AppState, principal: &str) -> String {
    let value = state.sessions.issue(principal, crate::journal::now_ms());
    format!(
        "{COOKIE}={value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}{}",
        LIFETIME_MS / 1000,
        if state.sessions.secure {
            "; Secure"
        } else {
            ""
        }
    )
}

/// The `Set-Cookie` that ends the session.
pub(super) fn cleared_cookie(state: &AppState) -> String {
    format!(
        "{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0{}",
        if state.sessions.secure {
            "; Secure"
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions(tokens: &[(&str, &str)]) -> Sessions {
        let mut config = crate::config::ServerConfig::new("http://localhost");
        config.tokens = tokens
            .iter()
            .map(|(t, p)| ((*t).to_owned(), (*p).to_owned()))
            .collect();
        Sessions::new(&config)
    }

    #[test]
    fn a_session_names_its_principal_until_it_expires_and_no_longer() {
        let sessions = sessions(&[("s3cret", "alice")]);
        let value = sessions.issue("alice", 1_000);
        assert_eq!(sessions.principal(&value, 2_000).as_deref(), Some("alice"));
        assert_eq!(sessions.principal(&value, 1_000 + LIFETIME_MS), None);
    }

    #[test]
    fn a_forged_or_foreign_session_is_refused() {
        let ours = sessions(&[("s3cret", "alice"), ("other", "bob")]);
        let value = ours.issue("bob", 1_000);
        // Another principal's name under bob's signature.
        let (_, rest) = value.split_once('.').unwrap();
        let (_, signature) = rest.split_once('.').unwrap();
        let forged = format!(
            "{}.{}.{signature}",
            1_000 + LIFETIME_MS,
            URL_SAFE_NO_PAD.encode("alice")
        );
        assert_eq!(ours.principal(&forged, 2_000), None);
        // A later expiry under the same signature.
        let longer = value.replacen(&(1_000 + LIFETIME_MS).to_string(), "9999999999999", 1);
        assert_eq!(ours.principal(&longer, 2_000), None);
        // Signed by a server with other tokens.
        let theirs = sessions(&[("s3cret", "alice")]);
        assert_eq!(theirs.principal(&value, 2_000), None);
        for junk in ["", ".", "..", "1.2.3", "a.b", "x.y.z.w"] {
            assert_eq!(ours.principal(junk, 2_000), None, "{junk}");
        }
    }

    #[test]
    fn the_same_tokens_make_the_same_key_on_every_worker() {
        let one = sessions(&[("a", "alice"), ("b", "bob")]);
        let two = sessions(&[("b", "bob"), ("a", "alice")]);
        let value = one.issue("alice", 1_000);
        assert_eq!(two.principal(&value, 2_000).as_deref(), Some("alice"));
    }

    #[test]
    fn a_cross_origin_request_is_not_same_origin() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        assert!(same_origin(&headers), "no browser headers: not a browser");
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8080"),
        );
        assert!(same_origin(&headers));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert!(!same_origin(&headers));
        headers.insert(header::ORIGIN, HeaderValue::from_static("null"));
        assert!(!same_origin(&headers));
        headers.remove(header::ORIGIN);
        headers.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(!same_origin(&headers));
    }
}
