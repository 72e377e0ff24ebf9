//! [`WireError`]: a value read from one of the wire versions that radkit's model cannot hold.

/// A value read from A2A 0.3 or 1.0 that radkit's model has no value for. Writing radkit's model in
/// either version never fails; reading may, and names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// A 1.0 enum holds its `*_UNSPECIFIED` zero value.
    #[error("`{field}` is unspecified")]
    Unspecified {
        /// The field (`Message.role`, `TaskStatus.state`).
        field: &'static str,
    },
    /// A 0.3 task state is `unknown`, which names no state a task can be in.
    #[error("`{field}` is `unknown`, which names no state a task can be in")]
    UnknownState {
        /// The field (`TaskStatus.state`).
        field: &'static str,
    },
    /// A 1.0 part sets none of `text`, `raw`, `url` and `data`.
    #[error("`{field}` is not set: the part has none of `text`, `raw`, `url` and `data`")]
    NoContent {
        /// The field (`Part.content`).
        field: &'static str,
    },
    /// A 1.0 data part holds a JSON value other than an object; data parts hold objects (the one
    /// kind of data A2A 0.3 can carry too).
    #[error("`{field}` is not a JSON object; data parts hold objects")]
    DataNotObject {
        /// The field (`Part.data`).
        field: &'static str,
    },
    /// 0.3 inline file content is not base64.
    #[error("`{field}` is not valid base64")]
    InvalidBase64 {
        /// The field (`file.bytes`).
        field: &'static str,
        /// Why decoding failed.
        source: base64::DecodeError,
    },
}
