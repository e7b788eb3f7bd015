//! The host list of `redis+cluster://`, `redlock://`, `etcd://` and `zk://` URLs, `host[:port],host[:port],…`, with
//! one set of rules for all four:
//!
//! - a host is a name or IPv4 address (letters, digits, `-`, `.`, `_`), or an IPv6 address in brackets (`[::1]`);
//! - an optional `:port` is a number from 1 to 65535; without one the backend's default port applies (6379, 2379,
//!   2181);
//! - blanks around a host are ignored; an empty host, a bare IPv6 address, or any other character is an error
//!   naming the host.
//!
//! Whether a host may be listed twice is the caller's rule (a Redlock instance must count once).

use std::fmt;

/// One host of a list, with its port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Host {
    /// The name or address; an IPv6 address keeps its brackets.
    pub(crate) name: String,
    pub(crate) port: u16,
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.name, self.port)
    }
}

/// The hosts of `list`, each with `default_port` unless it names one. The error names the problem and the host; the
/// caller puts the (redacted) URL before it.
pub(crate) fn parse_hosts(list: &str, default_port: u16) -> Result<Vec<Host>, String> {
    list.split(',').map(|host| parse_host(host.trim(), default_port)).collect()
}

/// For a URL another parser refused (`redis://h:99999`, `postgres://a,b:0/db`): the port problem, if that was it, in
/// the words of [`parse_hosts`].
pub(crate) fn bad_port(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.rsplit_once('@').map_or(rest, |(_, a)| a);
    let authority = authority.split(['/', '?', '#']).next()?;
    authority.split(',').find_map(|host| {
        let (_, port) = host.rsplit_once(':').filter(|_| !host.ends_with(']'))?;
        match port.parse::<u16>() {
            Ok(p) if p > 0 => None,
            _ => Some(format!("host {host:?}: port {port:?} is not a number from 1 to 65535")),
        }
    })
}

fn parse_host(host: &str, default_port: u16) -> Result<Host, String> {
    if host.is_empty() {
        return Err("an empty host in the list".into());
    }
    let (name, port) = if let Some(inner) = host.strip_prefix('[') {
        let (addr, after) = inner.split_once(']').ok_or_else(|| format!("host {host:?}: '[' without ']'"))?;
        if addr.is_empty() || !addr.chars().all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.')) {
            return Err(format!("host {host:?}: {addr:?} is not an IPv6 address"));
        }
        match after {
            "" => (&host[..addr.len() + 2], None),
            _ => match after.strip_prefix(':') {
                Some(port) => (&host[..addr.len() + 2], Some(port)),
                None => return Err(format!("host {host:?}: expected [address]:port")),
            },
        }
    } else {
        let (name, port) = host.split_once(':').map_or((host, None), |(n, p)| (n, Some(p)));
        if port.is_some_and(|p| p.contains(':')) {
            return Err(format!("host {host:?}: an IPv6 address needs brackets, as in [::1]:{default_port}"));
        }
        if name.is_empty() {
            return Err(format!("host {host:?} has no name"));
        }
        if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))) {
            return Err(format!("host {host:?}: {c:?} cannot be part of a host name"));
        }
        (name, port)
    };
    let port = match port {
        None => default_port,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| format!("host {host:?}: port {p:?} is not a number from 1 to 65535"))?,
    };
    Ok(Host { name: name.to_string(), port })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(list: &str) -> Vec<String> {
        parse_hosts(list, 2181).unwrap().iter().map(Host::to_string).collect()
    }

    #[test]
    fn ports_default_per_backend() {
        assert_eq!(shown("a,b:1, c.example:65535 ,10.0.0.1"), ["a:2181", "b:1", "c.example:65535", "10.0.0.1:2181"]);
        assert_eq!(shown("[::1],[fe80::1]:7,my_host-2"), ["[::1]:2181", "[fe80::1]:7", "my_host-2:2181"]);
        assert_eq!(parse_hosts("a", 6379).unwrap(), [Host { name: "a".into(), port: 6379 }]);
    }

    #[test]
    fn single_host_ports_are_named() {
        for url in ["redis://h:99999", "rediss://u:p@h:0/1", "redis://[::1]:70000?x=1", "postgres://a:99999,b/db"] {
            assert!(bad_port(url).unwrap().contains("from 1 to 65535"), "{url}");
        }
        for url in ["redis://h", "redis://h:6379/0", "redis://[::1]", "redis://u:p@[::1]:1", "postgres://a,b:7/x"] {
            assert_eq!(bad_port(url), None, "{url}");
        }
    }

    #[test]
    fn bad_hosts_name_the_problem() {
        for (list, says) in [
            ("a,,b", "empty host"),
            ("a,", "empty host"),
            (":2181", "has no name"),
            ("a:", "port \"\""),
            ("a:0", "from 1 to 65535"),
            ("a:70000", "from 1 to 65535"),
            ("a:x1", "port \"x1\""),
            ("::1", "needs brackets"),
            ("fe80::1:2181", "needs brackets"),
            ("[::1", "without ']'"),
            ("[::1]x", "expected [address]:port"),
            ("[]:1", "not an IPv6 address"),
            ("[zz]", "not an IPv6 address"),
            ("a/b", "'/' cannot be part"),
            ("u@a", "'@' cannot be part"),
        ] {
            let err = parse_hosts(list, 2181).unwrap_err();
            assert!(err.contains(says), "{list}: {err}");
        }
    }
}
