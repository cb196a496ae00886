//! Where `http_fetch` may connect: the address a name resolves to is checked once, and the
//! connection goes to that checked address. An internal address (loopback, private,
//! link-local, the metadata address, shared address space, multicast, unspecified, and the
//! IPv4-mapped, IPv4-compatible, NAT64, 6to4 and ISATAP forms of these) is refused unless the
//! grant that allowed the call names that address literally. A NAT64 of the operator's own
//! (a network-specific prefix rather than `64:ff9b::/96`) cannot be told from a public IPv6
//! address here; a host behind one keeps internal IPv4 addresses out with its firewall.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Where a connection to `host` (a name, or an address literal without brackets) at `port`
/// may go: the name resolved once (`None` for a literal: nothing to pin), and the addresses
/// that pass: public ones, and an internal one only when `literal` (the hosts of the grant
/// that allowed it) names that very address, at this port when the entry names one. None
/// passing is the refusal, naming the host.
pub async fn checked(
    host: &str,
    port: u16,
    literal: &[String],
) -> Result<(Option<String>, Vec<SocketAddr>), String> {
    let named = |ip: IpAddr| {
        literal.iter().any(|entry| {
            let (address, want) = broker::args::split_port(entry);
            address.parse() == Ok(ip) && want.is_none_or(|p| p == port)
        })
    };
    let (name, addresses) = match host.parse::<IpAddr>() {
        Ok(ip) => (None, vec![SocketAddr::new(ip, port)]),
        Err(_) => {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
                .await
                .map_err(|_| format!("{host} does not resolve"))?
                .collect();
            (Some(host.to_owned()), found)
        }
    };
    let (allowed, internal): (Vec<SocketAddr>, Vec<SocketAddr>) = addresses
        .into_iter()
        .partition(|a| !is_internal(a.ip()) || named(a.ip()));
    if allowed.is_empty() {
        let first = internal
            .first()
            .map_or_else(|| "nothing".to_owned(), |a| a.ip().to_string());
        return Err(format!(
            "{host} resolves to {first}, an internal address; a grant must name that address itself to reach it"
        ));
    }
    Ok((name, allowed))
}

/// Whether `ip` is internal: not somewhere a grant's host name may lead without naming it.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => internal_v6(v6),
    }
}

fn internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback() // 127.0.0.0/8
        || ip.is_private() // 10/8, 172.16/12, 192.168/16
        || ip.is_link_local() // 169.254/16, the metadata address among them
        || ip.is_multicast() // 224/4
        || ip.is_broadcast()
        || a == 0 // 0.0.0.0/8
        || (a == 100 && (64..=127).contains(&b)) // 100.64/10, shared address space
        || a >= 240 // reserved
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // 192.0.0.0/24, protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // 198.18/15, benchmarking
}

fn internal_v6(ip: Ipv6Addr) -> bool {
    // An embedded internal v4 address is internal; a public one says nothing about the v6
    // prefix around it (`fd00::5efe:8.8.8.8` is still unique local), so go on to the prefixes.
    if embedded_v4(ip).is_some_and(internal_v4) {
        return true;
    }
    let first = ip.segments()[0];
    ip.is_loopback() // ::1
        || ip.is_unspecified() // ::
        || ip.is_multicast() // ff00::/8
        || (first & 0xfe00) == 0xfc00 // fc00::/7, unique local
        || (first & 0xffc0) == 0xfe80 // fe80::/10, link-local
        || (first & 0xffc0) == 0xfec0 // fec0::/10, site-local (deprecated)
        || ip.segments()[..3] == [0x64, 0xff9b, 1] // 64:ff9b:1::/48, local-use NAT64
        || ip.segments()[..2] == [0x2001, 0] // 2001::/32, Teredo (a tunnel to any v4)
        || ip.segments()[..4] == [0x100, 0, 0, 0] // 100::/64, discard-only
}

/// The IPv4 address an IPv6 address carries: mapped (`::ffff:a.b.c.d`), compatible
/// (`::a.b.c.d`), translated (`::ffff:0:a.b.c.d`), NAT64 (`64:ff9b::/96`) or 6to4
/// (`2002:AABB:CCDD::/48`), or in an ISATAP interface identifier (`…:0:5efe:a.b.c.d` and
/// its `200:5efe` global form, under any prefix).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = || Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[..6] == [0, 0, 0, 0, 0, 0] && !ip.is_loopback() && !ip.is_unspecified() {
        return Some(tail());
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || s[..6] == [0, 0, 0, 0, 0xffff, 0] {
        return Some(tail());
    }
    if s[4] & 0xfcff == 0 && s[5] == 0x5efe {
        return Some(tail());
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_in_every_form() {
        for internal in [
            "127.0.0.1",
            "127.255.0.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "239.255.255.255",
            "255.255.255.255",
            "240.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::1",
            "::ffff:0:127.0.0.1",
            "::ffff:0:a9fe:a9fe",
            "64:ff9b:1::a9fe:a9fe",
            "64:ff9b:1:7f00:1::",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "100::1",
            "2001:db8:1:2:0:5efe:7f00:1",
            "2606:4700:1:2:200:5efe:a9fe:a9fe",
            "fe80::5efe:10.0.0.1",
            // A public v4 address inside an internal v6 prefix is still internal.
            "fd00::5efe:808:808",
            "fe80::5efe:808:808",
            "fe80::200:5efe:808:808",
            "64:ff9b:1:0:0:5efe:808:808",
            "ff02::5efe:808:808",
        ] {
            let ip: IpAddr = internal.parse().unwrap();
            assert!(is_internal(ip), "{internal} passed as public");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for public in [
            "93.184.216.34",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "::ffff:93.184.216.34",
            "64:ff9b::808:808",
            "2002:0808:0808::1",
            "::ffff:0:808:808",
            "2001:4860:4860::8888",
            "2606:4700:1:2:200:5efe:808:808",
        ] {
            let ip: IpAddr = public.parse().unwrap();
            assert!(!is_internal(ip), "{public} refused as internal");
        }
    }
}
