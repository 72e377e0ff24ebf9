//! Which A2A protocol version a request speaks: its `A2A-Version` header (or `A2A-Version` query
//! parameter), `Major.Minor`; a request without one is 0.3, as the 1.0 specification says for
//! clients that predate the header. Any other version is refused with `VersionNotSupportedError`
//! (-32009) naming the versions served.

use axum::http::HeaderMap;

use super::errors::{Kind, OpError};

/// A protocol version this server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Version {
    /// A2A 0.3: `message/send` and the other slash-named methods, `kind` discriminators.
    V0_3,
    /// A2A 1.0 (1.0.1): PascalCase methods, ProtoJSON payloads.
    V1_0,
}

impl Version {
    /// The version a header or query value names (`Major.Minor`, a patch level ignored), if served.
    pub(crate) fn parse(value: &str) -> Result<Version, OpError> {
        let value = value.trim();
        let mut numbers = value.split('.');
        let major_minor = (numbers.next(), numbers.next());
        let patch_ok = numbers.all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        match major_minor {
            (Some("0"), Some("3")) if patch_ok => Ok(Version::V0_3),
            (Some("1"), Some("0")) if patch_ok => Ok(Version::V1_0),
            _ => Err(OpError::new(
                Kind::VersionNotSupported,
                format!(
                    "A2A version `{}` is not supported; this agent speaks 0.3 and 1.0",
                    value.chars().take(32).collect::<String>()
                ),
            )),
        }
    }

    /// The version of a request: its `A2A-Version` header, else its `A2A-Version` query parameter,
    /// else 0.3.
    pub(crate) fn of_request(headers: &HeaderMap, query: Option<&str>) -> Result<Version, OpError> {
        if let Some(header) = headers.get("a2a-version") {
            let value = header.to_str().map_err(|_| {
                OpError::new(Kind::VersionNotSupported, "`A2A-Version` is not text")
            })?;
            return Version::parse(value);
        }
        let from_query = query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .find_map(|pair| {
                let (key, value) = pair.split_once('=')?;
                key.eq_ignore_ascii_case("A2A-Version").then_some(value)
            });
        match from_query {
            Some(value) => Version::parse(value),
            None => Ok(Version::V0_3),
        }
    }
}

/// 0.3 method names and their 1.0 counterparts, for the error a 0.3 call with `A2A-Version: 1.0`
/// gets.
pub(crate) const RENAMED: [(&str, &str); 10] = [
    ("message/send", "SendMessage"),
    ("message/stream", "SendStreamingMessage"),
    ("tasks/get", "GetTask"),
    ("tasks/cancel", "CancelTask"),
    ("tasks/resubscribe", "SubscribeToTask"),
    ("agent/getAuthenticatedExtendedCard", "GetExtendedAgentCard"),
    (
        "tasks/pushNotificationConfig/set",
        "CreateTaskPushNotificationConfig",
    ),
    (
        "tasks/pushNotificationConfig/get",
        "GetTaskPushNotificationConfig",
    ),
    (
        "tasks/pushNotificationConfig/list",
        "ListTaskPushNotificationConfigs",
    ),
    (
        "tasks/pushNotificationConfig/delete",
        "DeleteTaskPushNotificationConfig",
    ),
];

/// The error a 0.3 request gets for a 1.0 method name (it sent no `A2A-Version: 1.0`).
pub(crate) fn needs_version(method: &str) -> Option<OpError> {
    RENAMED
        .iter()
        .chain(&[("", "ListTasks")])
        .any(|(_, new)| *new == method)
        .then(|| {
            OpError::new(
                Kind::NoSuchMethod,
                format!(
                    "method `{method}` is A2A 1.0: send the header `A2A-Version: 1.0` (a request without it speaks 0.3)"
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_without_a_version_speaks_0_3() {
        assert_eq!(
            Version::of_request(&HeaderMap::new(), None),
            Ok(Version::V0_3)
        );
    }

    #[test]
    fn major_minor_selects_the_version_and_a_patch_level_is_ignored() {
        for (value, version) in [
            ("0.3", Version::V0_3),
            ("1.0", Version::V1_0),
            ("1.0.1", Version::V1_0),
            (" 1.0 ", Version::V1_0),
        ] {
            assert_eq!(Version::parse(value), Ok(version), "{value}");
        }
    }

    #[test]
    fn other_versions_are_version_not_supported() {
        for value in ["0.2", "1.1", "2.0", "1", "", "1.0.x", "latest"] {
            let e = Version::parse(value).unwrap_err();
            assert_eq!(e.kind, Kind::VersionNotSupported, "{value}");
            assert!(e.message.contains("0.3 and 1.0"), "{}", e.message);
        }
    }

    #[test]
    fn the_header_wins_over_the_query_parameter() {
        let mut headers = HeaderMap::new();
        assert_eq!(
            Version::of_request(&headers, Some("x=1&a2a-version=1.0")),
            Ok(Version::V1_0)
        );
        headers.insert("a2a-version", "0.3".parse().unwrap());
        assert_eq!(
            Version::of_request(&headers, Some("A2A-Version=1.0")),
            Ok(Version::V0_3)
        );
    }
}
