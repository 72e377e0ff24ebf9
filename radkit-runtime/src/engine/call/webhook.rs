//! Push notifications as a call's wake-up: the URL and token a call gives its callee. When this
//! engine knows the public URL of its A2A server (`EngineBuilder::call_webhook`), a call to a
//! remote agent asks the agent to post the callee task's updates to
//! `{url}/radkit/calls/{caller task id}/{call}` (`{call}`: the call's `messageId`, which the callee
//! has already) with a token only this engine can make: `{expiry}.{tag}`, the expiry in seconds
//! since the Unix epoch and the tag an HMAC-SHA256, in lower-case hex, of the caller's task id, the
//! call and the expiry, under a key made from the configured secret, else drawn when the engine is
//! built. A token is good for one call of one task until it expires: a token that leaks, or one
//! of a call that settled long ago, cannot wake the task for another call.
//!
//! A post with a good token says only "look now" (`engine/call/posts.rs` turns posts into wakes):
//! a replayed one costs a `get`, never a wrong answer. Without a secret the key is not kept: after
//! a restart the callees' posts for earlier calls are refused, and those calls are found by their
//! recheck, as they are once their tokens expired. This module owns the token's form and checks
//! it; it never reads the journal.

use std::time::Duration;

use ring::hmac;

use crate::client::PushTarget;
use crate::flow::InvocationId;

/// Tag bytes in a token (HMAC-SHA256), written as twice as many lower-case hex digits.
const TAG_LEN: usize = 32;

/// Domain separation: a tag made for this purpose is never valid for another.
const PURPOSE: &[u8] = b"radkit call webhook v2";

/// The webhook of one engine.
pub(crate) struct CallWebhook {
    base: String,
    key: hmac::Key,
    ttl: Duration,
}

impl CallWebhook {
    /// A webhook under `base` (the server's public URL), its key made from `secret` (so tokens
    /// stay good across restarts), else drawn at random; its tokens are good for `ttl`.
    pub fn new(
        base: &str,
        secret: Option<&[u8]>,
        ttl: Duration,
    ) -> Result<Self, ring::error::Unspecified> {
        let key = match secret {
            Some(secret) => hmac::Key::new(hmac::HMAC_SHA256, secret),
            None => hmac::Key::generate(hmac::HMAC_SHA256, &ring::rand::SystemRandom::new())?,
        };
        Ok(CallWebhook {
            base: base.trim_end_matches('/').to_owned(),
            key,
            ttl,
        })
    }

    /// Where the callee of call `call` of task `task_id` posts, and the token it sends (good
    /// until `ttl` after `now_ms`).
    pub fn target(&self, task_id: &str, call: &InvocationId, now_ms: i64) -> PushTarget {
        let name = call_name(call);
        let ttl = i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX);
        let expires = u64::try_from(now_ms.div_euclid(1000).saturating_add(ttl)).unwrap_or(0);
        let tag = hmac::sign(&self.key, &signed(task_id, &name, expires));
        PushTarget {
            url: format!("{}/radkit/calls/{task_id}/{name}", self.base),
            token: format!("{expires}.{}", hex(tag.as_ref())),
        }
    }

    /// True when `token` is one [`CallWebhook::target`] gave for call `call` (its name in the URL)
    /// of `task_id`, and it has not expired at `now_ms`. The tag is compared in constant time; a
    /// token not written exactly as made (upper-case hex, a sign, leading zeros) is refused.
    pub fn verify(&self, task_id: &str, call: &str, token: &str, now_ms: i64) -> bool {
        let Some((expires, tag)) = parse(token) else {
            return false;
        };
        if hmac::verify(&self.key, &signed(task_id, call, expires), &tag).is_err() {
            return false;
        }
        i64::try_from(expires).is_ok_and(|e| e.saturating_mul(1000) > now_ms)
    }
}

/// How call `call` is named in its webhook URL: its `messageId` (opaque, and the callee's already).
pub(crate) fn call_name(call: &InvocationId) -> String {
    super::message_id(call)
}

/// What a tag signs: each part after its length, so no two (task, call, expiry) sign the same.
fn signed(task_id: &str, call: &str, expires: u64) -> Vec<u8> {
    let expires = expires.to_string();
    let mut msg = PURPOSE.to_vec();
    for part in [task_id, call, expires.as_str()] {
        msg.extend_from_slice(&(part.len() as u64).to_be_bytes());
        msg.extend_from_slice(part.as_bytes());
    }
    msg
}

/// A token's expiry and tag, when it is written exactly as [`CallWebhook::target`] writes one:
/// decimal digits without a sign or leading zero, a dot, and the tag in lower-case hex.
fn parse(token: &str) -> Option<(u64, Vec<u8>)> {
    let (expires, tag) = token.split_once('.')?;
    let digits = expires.bytes().all(|b| b.is_ascii_digit());
    if !digits || expires.is_empty() || expires.len() > 19 || expires.starts_with('0') {
        return None;
    }
    Some((expires.parse().ok()?, unhex(tag)?))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Lower-case hex of exactly one tag's length (`u8::from_str_radix` would take upper case and a
/// `+`).
fn unhex(text: &str) -> Option<Vec<u8>> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    if text.len() != TAG_LEN * 2 {
        return None;
    }
    text.as_bytes()
        .chunks_exact(2)
        .map(|pair| Some((digit(pair[0])? << 4) | digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);
    const NOW: i64 = 1_800_000_000_000;

    fn call(n: u32) -> InvocationId {
        InvocationId::derive("task-1", 1, n)
    }

    /// The call's name and the token a target carries.
    fn parts(target: &PushTarget) -> (String, String) {
        let name = target.url.rsplit('/').next().unwrap().to_owned();
        (name, target.token.clone())
    }

    #[test]
    fn a_token_wakes_only_the_call_it_was_made_for_and_only_on_this_engine() {
        let hook = CallWebhook::new("http://agent.example/", None, DAY).unwrap();
        let target = hook.target("task-1", &call(1), NOW);
        let (name, token) = parts(&target);
        assert_eq!(
            target.url,
            format!("http://agent.example/radkit/calls/task-1/{name}")
        );
        assert_eq!(name, crate::engine::call::message_id(&call(1)));
        assert!(hook.verify("task-1", &name, &token, NOW));
        assert!(!hook.verify("task-2", &name, &token, NOW), "another task");
        let (other_call, other_token) = parts(&hook.target("task-1", &call(2), NOW));
        assert!(
            !hook.verify("task-1", &other_call, &token, NOW),
            "another call"
        );
        assert!(hook.verify("task-1", &other_call, &other_token, NOW));
        for bad in ["zz", "", "00ff", ".", "1.", ".00"] {
            assert!(!hook.verify("task-1", &name, bad, NOW), "{bad:?}");
        }
        let other = CallWebhook::new("http://agent.example", None, DAY).unwrap();
        assert!(!other.verify("task-1", &name, &token, NOW));
    }

    #[test]
    fn a_token_expires() {
        let hook = CallWebhook::new("http://a", Some(b"s3cret"), DAY).unwrap();
        let (name, token) = parts(&hook.target("t", &call(1), NOW));
        let day_ms = 86_400_000;
        assert!(hook.verify("t", &name, &token, NOW + day_ms - 1_000));
        assert!(!hook.verify("t", &name, &token, NOW + day_ms), "expired");
        // The expiry is signed: a later one written over it is refused.
        let (_, tag) = token.split_once('.').unwrap();
        let later = format!("{}.{tag}", NOW / 1000 + 2 * 86_400);
        assert!(!hook.verify("t", &name, &later, NOW + day_ms));
    }

    #[test]
    fn a_token_is_refused_unless_written_exactly_as_made() {
        let hook = CallWebhook::new("http://a", Some(b"s3cret"), DAY).unwrap();
        let (name, token) = parts(&hook.target("t", &call(1), NOW));
        assert!(hook.verify("t", &name, &token, NOW));
        let (expires, tag) = token.split_once('.').unwrap();
        assert!(tag.bytes().any(|b| b.is_ascii_lowercase()), "{tag}");
        for variant in [
            token.to_ascii_uppercase(),
            format!("{expires}.{}", tag.to_ascii_uppercase()),
            format!("+{expires}.{tag}"),
            format!("0{expires}.{tag}"),
            format!("{expires}.{tag}00"),
            format!("{expires}.+{}", &tag[1..]),
            format!("{expires}.{tag} "),
            format!(" {token}"),
        ] {
            assert!(!hook.verify("t", &name, &variant, NOW), "{variant}");
        }
    }

    #[test]
    fn a_configured_secret_keeps_tokens_good_across_restarts() {
        let before = CallWebhook::new("http://a", Some(b"s3cret"), DAY).unwrap();
        let after = CallWebhook::new("http://a", Some(b"s3cret"), DAY).unwrap();
        let (name, token) = parts(&before.target("t", &call(1), NOW));
        assert!(after.verify("t", &name, &token, NOW));
        let other = CallWebhook::new("http://a", Some(b"other"), DAY).unwrap();
        assert!(!other.verify("t", &name, &token, NOW));
    }
}
