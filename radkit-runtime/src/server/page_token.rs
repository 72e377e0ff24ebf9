//! Page tokens (`pageToken` / `nextPageToken`): a position in a listing, written as base64url text
//! so that clients treat it as opaque. `ListTasks` and `ListTaskPushNotificationConfigs` both page
//! with them; each decides what the position holds.

use base64::Engine as _;

use super::errors::{Kind, OpError};

/// The token of `position`.
pub(crate) fn encode(position: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(position)
}

/// The position a token holds, or `-32602` naming the token when this agent did not write it.
pub(crate) fn decode(token: &str) -> Result<String, OpError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| not_ours(token))
}

/// The error of a token this agent did not write.
pub(crate) fn not_ours(token: &str) -> OpError {
    OpError::new(
        Kind::InvalidInput,
        format!("`pageToken` `{token}` is not a token this agent gave"),
    )
}
