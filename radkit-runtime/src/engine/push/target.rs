//! Where a webhook may point (spec 1.0 §13.2, SSRF): an `http`/`https` URL whose host resolves only
//! to public addresses. Private, loopback, link-local, unspecified, multicast, broadcast, shared
//! (CGNAT) and reserved ranges are refused, in IPv4 and IPv6 (IPv4 addresses embedded in IPv6 —
//! mapped, translated, compatible, NAT64, 6to4, Teredo — are judged as the IPv4 address; the
//! local-use NAT64 prefix is refused outright), unless the engine allows
//! private targets (tests, a trusted network). The check runs when a config is set and again at
//! every delivery, in the HTTP client's resolver, so a name that later resolves to a private
//! address (DNS rebinding) is refused at connect time; the client follows no redirect and uses no
//! proxy.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::Url;

/// True when `ip` is an address a webhook may reach without `allow_private`.
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    match embedded(ip) {
        Embedded::V4(v4) => return is_public_v4(v4),
        Embedded::Teredo { server, client } => return is_public_v4(server) && is_public_v4(client),
        Embedded::Local => return false,
        Embedded::None => {}
    }
    let s = ip.segments();
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (s[0] & 0xffc0) == 0xfe80 // link-local
        || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        || (s[0] & 0xfe00) == 0xfc00 // unique local
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] & 0xfff0) == 0x3ff0 // documentation (3fff::/20)
        || (s[0] == 0x2001 && s[1] == 0x0002 && s[2] == 0) // benchmarking (2001:2::/48)
        || s[..4] == [0x0100, 0, 0, 0]) // discard-only (100::/64)
}

/// What an IPv6 address says of IPv4.
#[derive(Debug, PartialEq, Eq)]
enum Embedded {
    /// It stands for this IPv4 address: judge that one.
    V4(Ipv4Addr),
    /// Teredo (`2001::/32`): a relay reaches the client's IPv4 address through the server's.
    Teredo { server: Ipv4Addr, client: Ipv4Addr },
    /// A translation prefix whose IPv4 address has no public meaning (local-use NAT64,
    /// `64:ff9b:1::/48`: each network places the IPv4 address where its translator wants it, and
    /// translates to its own networks).
    Local,
    /// It embeds no IPv4 address.
    None,
}

/// The IPv4 address an IPv6 address embeds, in every form a translator or tunnel reaches it by:
/// mapped (`::ffff:a.b.c.d`), translated (SIIT, `::ffff:0:a.b.c.d`), compatible (`::a.b.c.d`),
/// NAT64 (`64:ff9b::a.b.c.d`; the local-use `64:ff9b:1::/48` is refused outright), 6to4
/// (`2002:AABB:CCDD::`) and Teredo (`2001:0:SSSS:SSSS:…:CCCC:CCCC`, the client's address
/// inverted). A form missed here would let `http://[…]` reach what its IPv4 address refuses.
fn embedded(ip: Ipv6Addr) -> Embedded {
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Embedded::V4(v4);
    }
    if s[..6] == [0, 0, 0, 0, 0xffff, 0] {
        return Embedded::V4(v4(s[6], s[7]));
    }
    // `::` and `::1` are the IPv6 unspecified and loopback addresses (refused as such).
    if s[..6] == [0, 0, 0, 0, 0, 0] && !(s[6] == 0 && s[7] <= 1) {
        return Embedded::V4(v4(s[6], s[7]));
    }
    if s[..6] == [0x0064, 0xff9b, 0, 0, 0, 0] {
        return Embedded::V4(v4(s[6], s[7]));
    }
    if s[..3] == [0x0064, 0xff9b, 0x0001] {
        return Embedded::Local;
    }
    if s[0] == 0x2002 {
        return Embedded::V4(v4(s[1], s[2]));
    }
    if s[..2] == [0x2001, 0] {
        return Embedded::Teredo {
            server: v4(s[2], s[3]),
            client: v4(!s[6], !s[7]),
        };
    }
    Embedded::None
}

/// Why a webhook URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Not an absolute `http`/`https` URL with a host.
    #[error("push notification url `{url}` is not usable: {why}")]
    Malformed {
        /// The URL.
        url: String,
        /// Why.
        why: String,
    },
    /// The host is or resolves to an address in a refused range.
    #[error("push notification url `{url}` points at {ip}, a private, loopback, link-local or otherwise non-public address; such targets are refused (the server can allow them: `radkit serve --push-allow-private`)")]
    Private {
        /// The URL.
        url: String,
        /// The refused address.
        ip: IpAddr,
    },
}

/// The URL, if it is an absolute `http`/`https` URL with a host and no credentials.
pub(crate) fn parse(url: &str) -> Result<Url, TargetError> {
    let malformed = |why: &str| TargetError::Malformed {
        url: url.to_owned(),
        why: why.to_owned(),
    };
    let parsed = Url::parse(url).map_err(|e| malformed(&e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(malformed("only http and https URLs are allowed"));
    }
    if parsed.host().is_none() {
        return Err(malformed("it has no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(malformed(
            "credentials in the URL are refused; use `authentication`",
        ));
    }
    Ok(parsed)
}

/// The IP address of a URL whose host is a literal address.
fn literal(url: &Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// Check a webhook URL when a config is set: its form, and (unless `allow_private`) every address
/// its host resolves to now. A host that does not resolve now is accepted: DNS may be down or the
/// name not yet published, and every delivery is checked again as it connects.
pub(crate) async fn check(url: &str, allow_private: bool) -> Result<Url, TargetError> {
    let parsed = parse(url)?;
    if allow_private {
        return Ok(parsed);
    }
    if let Some(ip) = literal(&parsed) {
        return public(url, ip).map(|()| parsed);
    }
    let host = parsed.host_str().unwrap_or_default().to_owned();
    let port = parsed.port_or_known_default().unwrap_or(443);
    let Ok(addrs) = tokio::net::lookup_host((host.as_str(), port)).await else {
        return Ok(parsed);
    };
    for addr in addrs {
        public(url, addr.ip())?;
    }
    Ok(parsed)
}

fn public(url: &str, ip: IpAddr) -> Result<(), TargetError> {
    if is_public(ip) {
        Ok(())
    } else {
        Err(TargetError::Private {
            url: url.to_owned(),
            ip,
        })
    }
}

/// Check the URL of a delivery: its form, and its host if it is a literal address (names are
/// checked by the client's resolver as it connects).
pub(crate) fn check_literal(url: &str, allow_private: bool) -> Result<Url, TargetError> {
    let parsed = parse(url)?;
    match literal(&parsed) {
        Some(ip) if !allow_private => public(url, ip).map(|()| parsed),
        _ => Ok(parsed),
    }
}

/// A resolver that drops refused addresses, failing a name that has no other.
struct PublicResolver;

impl Resolve for PublicResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| is_public(a.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(format!(
                    "`{host}` resolves to no public address (private targets are refused)"
                )
                .into());
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The webhook client: no redirects, no proxy, bounded connect and request times, and (unless
/// `allow_private`) the resolver that refuses non-public addresses.
pub(crate) fn client(allow_private: bool, timeout: Duration) -> reqwest::Result<reqwest::Client> {
    let builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .timeout(timeout)
        .user_agent(concat!("radkit/", env!("CARGO_PKG_VERSION"), " (A2A push)"));
    let builder = if allow_private {
        builder
    } else {
        builder.dns_resolver(Arc::new(PublicResolver))
    };
    builder.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_ranges_are_refused_in_v4_and_v6_and_embedded_forms() {
        for refused in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:c0a8:0101::1",
        ] {
            let ip: IpAddr = refused.parse().expect(refused);
            assert!(!is_public(ip), "{refused} must be refused");
        }
        for allowed in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            let ip: IpAddr = allowed.parse().expect(allowed);
            assert!(is_public(ip), "{allowed} must be allowed");
        }
    }

    /// Every IPv6 form that embeds an IPv4 address is judged by that address (or refused where
    /// it has no public meaning): each row is an address and whether a webhook may reach it.
    #[test]
    fn every_ipv6_form_that_embeds_ipv4_is_judged_by_its_ipv4_address() {
        for (ip, public) in [
            // IPv4-mapped, ::ffff:0:0/96
            ("::ffff:127.0.0.1", false),
            ("::ffff:a9fe:a9fe", false),
            ("::ffff:8.8.8.8", true),
            // IPv4-translated (SIIT), ::ffff:0:0:0/96
            ("::ffff:0:7f00:1", false),
            ("::ffff:0:a00:1", false),
            ("::ffff:0:a9fe:a9fe", false),
            ("::ffff:0:808:808", true),
            // IPv4-compatible, ::/96
            ("::7f00:1", false),
            ("::c0a8:101", false),
            ("::808:808", true),
            // NAT64 well-known prefix, 64:ff9b::/96
            ("64:ff9b::7f00:1", false),
            ("64:ff9b::a9fe:a9fe", false),
            ("64:ff9b::808:808", true),
            // NAT64 local-use prefix, 64:ff9b:1::/48: no public meaning, refused outright
            ("64:ff9b:1::7f00:1", false),
            ("64:ff9b:1::808:808", false),
            ("64:ff9b:1:7f00:1::", false),
            // 6to4, 2002::/16
            ("2002:7f00:1::1", false),
            ("2002:c0a8:101::1", false),
            ("2002:808:808::1", true),
            // Teredo, 2001::/32: server 65.54.227.120, client inverted in the last 32 bits
            ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", true),
            ("2001:0:4136:e378:8000:63bf:80ff:fffe", false),
            ("2001:0:4136:e378:8000:63bf:f5ff:fffe", false),
            ("2001:0:a00:1:8000:63bf:f7f7:f7f7", false),
        ] {
            let addr: IpAddr = ip.parse().expect(ip);
            assert_eq!(is_public(addr), public, "{ip}");
        }
    }

    #[tokio::test]
    async fn the_siit_and_local_use_nat64_forms_of_loopback_are_refused_as_webhook_urls() {
        for url in [
            "http://[::ffff:0:7f00:1]/hook",
            "http://[64:ff9b:1::7f00:1]/hook",
            "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/hook",
        ] {
            let err = check(url, false).await.expect_err(url);
            assert!(matches!(err, TargetError::Private { .. }), "{url}: {err}");
            let err = check_literal(url, false).expect_err(url);
            assert!(matches!(err, TargetError::Private { .. }), "{url}: {err}");
        }
    }

    #[test]
    fn reserved_ipv6_ranges_without_an_ipv4_address_are_refused() {
        for refused in ["100::1", "2001:2::1", "3fff::1", "2001:db8::1"] {
            let ip: IpAddr = refused.parse().expect(refused);
            assert!(!is_public(ip), "{refused} must be refused");
        }
        for allowed in ["2001:4860:4860::8888", "2a00:1450::1", "100:0:0:1::1"] {
            let ip: IpAddr = allowed.parse().expect(allowed);
            assert!(is_public(ip), "{allowed} must be allowed");
        }
    }

    #[tokio::test]
    async fn a_loopback_or_non_http_url_is_refused_unless_private_targets_are_allowed() {
        for url in [
            "http://127.0.0.1:9/hook",
            "http://[::1]/hook",
            "http://[::ffff:7f00:1]/hook",
            "http://localhost/hook",
        ] {
            let err = check(url, false).await.expect_err(url);
            assert!(matches!(err, TargetError::Private { .. }), "{url}: {err}");
            check(url, true).await.expect(url);
        }
        // A name that does not resolve now is left to the check at connect time.
        check("http://no-such-host.invalid/hook", false)
            .await
            .expect("an unresolvable name is accepted when set");
        for url in [
            "ftp://example.com/x",
            "file:///etc/passwd",
            "not a url",
            "http://u:p@example.com/",
        ] {
            assert!(
                matches!(check(url, true).await, Err(TargetError::Malformed { .. })),
                "{url}"
            );
        }
    }

    /// A server on 127.0.0.1 that answers every request with `response`; its port.
    async fn answering(response: &'static [u8]) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = socket.read(&mut buf).await;
                    let _ = socket.write_all(response).await;
                });
            }
        });
        port
    }

    #[tokio::test]
    async fn the_client_refuses_at_connect_a_name_that_resolves_to_loopback_and_follows_no_redirect(
    ) {
        let ok =
            answering(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
        let url = format!("http://localhost:{ok}/hook");
        let timeout = Duration::from_secs(5);
        let refused = client(false, timeout).unwrap().post(&url).send().await;
        assert!(
            refused.is_err(),
            "a name resolving to loopback is refused: {refused:?}"
        );
        let allowed = client(true, timeout).unwrap().post(&url).send().await;
        assert!(allowed
            .expect("allowed when private targets are")
            .status()
            .is_success());
        let moved = answering(
            b"HTTP/1.1 302 Found\r\nlocation: http://169.254.169.254/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        )
        .await;
        let answer = client(true, timeout)
            .unwrap()
            .post(format!("http://127.0.0.1:{moved}/hook"))
            .send()
            .await
            .expect("an answer");
        assert_eq!(
            answer.status(),
            302,
            "the redirect is the answer, not followed"
        );
    }
}
