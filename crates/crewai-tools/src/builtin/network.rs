//! The private-network guard of the fetching tools: a URL a model names must not reach loopback,
//! private, link-local or other internal addresses (cloud metadata at 169.254.169.254, admin
//! endpoints on localhost), unless the tool was told that it may.
//!
//! Domain names are checked where they are resolved, inside the HTTP client, so the connection
//! goes only to addresses that passed the check (a DNS answer that changes between a check and
//! the connect cannot slip through). Literal IP addresses, which the client does not resolve, are
//! checked before the request and on every redirect.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Setting this environment variable to `1` (or `true`/`yes`) lets the fetching tools reach
/// private-network addresses when a tool does not say otherwise.
pub const ALLOW_PRIVATE_NETWORK_ENV: &str = "CREWAI_TOOLS_ALLOW_PRIVATE_NETWORK";

/// A URL refused because its host is, or resolves to, a non-public address. Its text, which the
/// model sees, says why and how a project opts in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateAddressRefused {
    /// The host as the URL names it.
    pub host: String,
    pub address: IpAddr,
    /// What kind of address it is ("loopback", "private", "link-local", ...).
    pub kind: &'static str,
}

impl std::fmt::Display for PrivateAddressRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let PrivateAddressRefused {
            host,
            address,
            kind,
        } = self;
        let is_literal = host.trim_matches(['[', ']']).parse::<IpAddr>().is_ok();
        if is_literal {
            write!(f, "{host} is a {kind} address")?;
        } else {
            write!(f, "{host} resolves to {address}, a {kind} address")?;
        }
        write!(
            f,
            "; web tools do not read private-network addresses, so that a page or prompt cannot \
             make an agent reach internal services (a project that means to can opt in with \
             allow_private_network or {ALLOW_PRIVATE_NETWORK_ENV}=1)"
        )
    }
}

impl std::error::Error for PrivateAddressRefused {}

/// Whether the environment opts in to private-network fetches.
pub(crate) fn private_network_allowed_by_env() -> bool {
    std::env::var(ALLOW_PRIVATE_NETWORK_ENV).is_ok_and(|value| opts_in(&value))
}

fn opts_in(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes"
    )
}

/// The kind of a non-public address, or `None` for an address on the public internet.
pub(crate) fn non_public_kind(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => non_public_v4_kind(v4),
        IpAddr::V6(v6) => non_public_v6_kind(v6),
    }
}

fn non_public_v4_kind(address: Ipv4Addr) -> Option<&'static str> {
    let [first, second, ..] = address.octets();
    if address.is_loopback() {
        Some("loopback")
    } else if address.is_private() {
        Some("private")
    } else if address.is_link_local() {
        Some("link-local")
    } else if address.is_unspecified() || first == 0 {
        Some("unspecified")
    } else if address.is_multicast() {
        Some("multicast")
    } else if address.is_broadcast() {
        Some("broadcast")
    } else if first == 100 && (64..128).contains(&second) {
        Some("carrier-grade NAT")
    } else {
        None
    }
}

fn non_public_v6_kind(address: Ipv6Addr) -> Option<&'static str> {
    // `::ffff:127.0.0.1` reaches 127.0.0.1: judge the IPv4 address inside.
    if let Some(v4) = address.to_ipv4_mapped() {
        return non_public_v4_kind(v4);
    }
    let first = address.segments()[0];
    if address.is_loopback() {
        Some("loopback")
    } else if address.is_unspecified() {
        Some("unspecified")
    } else if first & 0xfe00 == 0xfc00 {
        Some("unique-local (private)")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if address.is_multicast() {
        Some("multicast")
    } else {
        None
    }
}

/// Refuses `address` (reached as `host`) if it is not public.
pub(crate) fn check_address(host: &str, address: IpAddr) -> Result<(), PrivateAddressRefused> {
    match non_public_kind(address) {
        Some(kind) => Err(PrivateAddressRefused {
            host: host.to_string(),
            address,
            kind,
        }),
        None => Ok(()),
    }
}

/// Refuses a URL whose host is a literal non-public IP address; domain names are left to
/// [`PublicOnlyResolver`].
pub(crate) fn check_literal_host(url: &reqwest::Url) -> Result<(), PrivateAddressRefused> {
    let address = match url.host() {
        Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
        Some(url::Host::Domain(_)) | None => return Ok(()),
    };
    check_address(url.host_str().unwrap_or_default(), address)
}

/// Refuses a URL whose domain name resolves to a non-public address. The client's resolver
/// enforces this for every connection; checking before the request as well covers requests
/// sent through an HTTP proxy, which resolves the name itself. A name that does not resolve
/// here is left for the request to report.
pub(crate) async fn check_domain_host(url: &reqwest::Url) -> Result<(), PrivateAddressRefused> {
    let Some(url::Host::Domain(domain)) = url.host() else {
        return Ok(());
    };
    let Ok(addresses) = tokio::net::lookup_host((domain, 0)).await else {
        return Ok(());
    };
    for address in addresses {
        check_address(domain, address.ip())?;
    }
    Ok(())
}

/// The HTTP client's resolver when private networks are off limits: resolves with the system
/// resolver and fails if any address of the name is not public, so the client only ever
/// connects to checked addresses.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PublicOnlyResolver;

impl Resolve for PublicOnlyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addresses: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            for address in &addresses {
                check_address(&host, address.ip())?;
            }
            let addresses: Addrs = Box::new(addresses.into_iter());
            Ok(addresses)
        })
    }
}

/// The refusal somewhere in an error's chain of causes, if the error is one.
pub(crate) fn find_refusal<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a PrivateAddressRefused> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(refusal) = error.downcast_ref::<PrivateAddressRefused>() {
            return Some(refusal);
        }
        current = error.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(address: &str) -> Option<&'static str> {
        non_public_kind(address.parse().unwrap())
    }

    #[test]
    fn internal_addresses_are_classified() {
        assert_eq!(kind("127.0.0.1"), Some("loopback"));
        assert_eq!(kind("127.5.6.7"), Some("loopback"));
        assert_eq!(kind("10.1.2.3"), Some("private"));
        assert_eq!(kind("172.16.0.1"), Some("private"));
        assert_eq!(kind("172.31.255.255"), Some("private"));
        assert_eq!(kind("192.168.1.1"), Some("private"));
        assert_eq!(kind("169.254.169.254"), Some("link-local"));
        assert_eq!(kind("0.0.0.0"), Some("unspecified"));
        assert_eq!(kind("224.0.0.1"), Some("multicast"));
        assert_eq!(kind("255.255.255.255"), Some("broadcast"));
        assert_eq!(kind("100.64.0.1"), Some("carrier-grade NAT"));
        assert_eq!(kind("100.127.255.254"), Some("carrier-grade NAT"));
        assert_eq!(kind("::1"), Some("loopback"));
        assert_eq!(kind("::"), Some("unspecified"));
        assert_eq!(kind("fd00::1"), Some("unique-local (private)"));
        assert_eq!(kind("fc00::1"), Some("unique-local (private)"));
        assert_eq!(kind("fe80::1"), Some("link-local"));
        assert_eq!(kind("ff02::1"), Some("multicast"));
        assert_eq!(kind("::ffff:127.0.0.1"), Some("loopback"));
        assert_eq!(kind("::ffff:169.254.169.254"), Some("link-local"));
    }

    #[test]
    fn public_addresses_pass() {
        for address in [
            "93.184.216.34",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(kind(address), None, "{address}");
        }
    }

    #[tokio::test]
    async fn the_resolver_refuses_names_of_loopback_addresses() {
        let name: Name = "localhost".parse().unwrap();
        let error = match PublicOnlyResolver.resolve(name).await {
            Ok(addresses) => panic!("localhost resolved to {:?}", addresses.collect::<Vec<_>>()),
            Err(error) => error,
        };
        let refusal = find_refusal(error.as_ref()).expect("a refusal");
        assert_eq!(refusal.host, "localhost");
        assert_eq!(refusal.kind, "loopback");
        assert!(
            refusal.to_string().starts_with(&format!(
                "localhost resolves to {}, a loopback address; ",
                refusal.address
            )),
            "{refusal}"
        );
    }

    #[test]
    fn the_environment_opts_in_with_yes_words_only() {
        for value in ["1", "true", " TRUE ", "yes"] {
            assert!(opts_in(value), "{value}");
        }
        for value in ["", "0", "false", "no", "off"] {
            assert!(!opts_in(value), "{value}");
        }
    }

    #[test]
    fn literal_addresses_are_named_once() {
        let refusal = check_address("[::1]", "::1".parse().unwrap()).unwrap_err();
        assert!(
            refusal
                .to_string()
                .starts_with("[::1] is a loopback address; "),
            "{refusal}"
        );
        assert!(
            refusal
                .to_string()
                .ends_with("CREWAI_TOOLS_ALLOW_PRIVATE_NETWORK=1)")
        );
    }
}
