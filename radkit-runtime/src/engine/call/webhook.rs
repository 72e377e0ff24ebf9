//! Push notifications as a call's wake-up: when this engine knows the public URL of its A2A
//! server (`EngineBuilder::call_webhook`), a call to a remote agent asks the agent to post the
//! callee task's updates to `{url}/radkit/calls/{caller task id}` with a token only this engine
//! can make (HMAC-SHA256 of the caller's task id under a key made from the configured secret, else
//! drawn when the engine is built). A post with a good token wakes the caller, which asks the callee
//! where it stands: a post says only "look now", so a replayed one costs a `get`, never a wrong
//! answer. Without a secret the key is not kept: after a restart the callees' posts for earlier
//! calls are refused, and those calls are found by their recheck.

use ring::hmac;

use crate::client::PushTarget;

/// The webhook of one engine.
pub(crate) struct CallWebhook {
    base: String,
    key: hmac::Key,
}

impl CallWebhook {
    /// A webhook under `base` (the server's public URL), its key made from `secret` (so tokens
    /// stay good across restarts), else drawn at random.
    pub fn new(base: &str, secret: Option<&[u8]>) -> Result<Self, ring::error::Unspecified> {
        let key = match secret {
            Some(secret) => hmac::Key::new(hmac::HMAC_SHA256, secret),
            None => hmac::Key::generate(hmac::HMAC_SHA256, &ring::rand::SystemRandom::new())?,
        };
        Ok(CallWebhook {
            base: base.trim_end_matches('/').to_owned(),
            key,
        })
    }

    /// Where a callee of task `task_id` posts, and the token it sends.
    pub fn target(&self, task_id: &str) -> PushTarget {
        let tag = hmac::sign(&self.key, task_id.as_bytes());
        PushTarget {
            url: format!("{}/radkit/calls/{task_id}", self.base),
            token: hex(tag.as_ref()),
        }
    }

    /// True when `token` is the one [`CallWebhook::target`] gave for `task_id`.
    pub fn verify(&self, task_id: &str, token: &str) -> bool {
        let Some(tag) = unhex(token) else {
            return false;
        };
        hmac::verify(&self.key, task_id.as_bytes(), &tag).is_ok()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || text.len() > 128 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_wakes_only_the_task_it_was_made_for_and_only_on_this_engine() {
        let hook = CallWebhook::new("http://agent.example/", None).unwrap();
        let target = hook.target("task-1");
        assert_eq!(target.url, "http://agent.example/radkit/calls/task-1");
        assert!(hook.verify("task-1", &target.token));
        assert!(!hook.verify("task-2", &target.token));
        assert!(!hook.verify("task-1", "zz"));
        assert!(!hook.verify("task-1", ""));
        let other = CallWebhook::new("http://agent.example", None).unwrap();
        assert!(!other.verify("task-1", &target.token));
    }

    #[test]
    fn a_configured_secret_keeps_tokens_good_across_restarts() {
        let before = CallWebhook::new("http://a", Some(b"s3cret")).unwrap();
        let after = CallWebhook::new("http://a", Some(b"s3cret")).unwrap();
        assert!(after.verify("t", &before.target("t").token));
        let other = CallWebhook::new("http://a", Some(b"other")).unwrap();
        assert!(!other.verify("t", &before.target("t").token));
    }
}
