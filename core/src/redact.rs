//! Redaction: the one routine that keeps secrets out of messages, logs and `describe()`.
//!
//! fencelock URLs are not all RFC 3986 URLs: `redlock://`, `redis+cluster://`, `etcd://` and `zk://` list several
//! hosts in one authority, and users put passwords with `@`, `/` or `:` in them unescaped. So the authority is split
//! by hand, with the user-info ending at the *last* `@` before the host list (a password may contain `@` and `/`;
//! a host list contains neither), and the url crate parses the rest: every host of the list, the path and the query,
//! whose parameter names it decodes (`pass%77ord=` is a password too). A URL that does not parse that way is still
//! masked, more bluntly: everything between `://` and the last `@`, and every secret-looking query value.

use url::{Host, Url, form_urlencoded};

/// What replaces a secret.
const MASK: &str = "***";

/// Query parameter names whose values are secrets (compared case-insensitively, after percent-decoding).
const SECRET_PARAMS: &[&str] = &["password", "pass", "pwd", "passwd", "secret", "token", "key", "sslpassword", "auth"];

/// Secrets shorter than this are not searched for in free text ([`scrub`]): a one-letter password would mangle
/// every message. The URL itself is masked whatever the length.
const SCRUB_MIN: usize = 4;

/// `url` with every secret replaced by `***`: the user-info password and the value of every query parameter whose
/// name looks like a secret. Hosts, ports, paths and other parameters (`ca=`, `sslmode=`) stay, so a message still
/// names where and what.
pub(crate) fn redact(url: &str) -> String {
    let parts = Parts::split(url);
    parts.show(!parts.parses())
}

/// `text` with every secret of `url` (as written and percent-decoded) replaced by `***`: the last line of defence
/// for messages that quote what a driver said about the URL.
pub(crate) fn scrub(text: &str, url: &str) -> String {
    let mut out = text.to_string();
    let mut secrets = Parts::split(url).secrets();
    // Longest first, so a secret that contains another is masked whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    for secret in secrets.iter().filter(|s| s.chars().count() >= SCRUB_MIN) {
        out = out.replace(secret.as_str(), MASK);
    }
    out
}

/// Whether `text` mentions a secret of `url` (as [`scrub`] would find it).
#[cfg(test)]
pub(crate) fn mentions_secret(text: &str, url: &str) -> bool {
    scrub(text, url) != text
}

/// A URL cut into the pieces redaction treats differently.
#[derive(Debug)]
struct Parts<'a> {
    /// `redis://` or `sqlite:`: the scheme and its separator.
    scheme: &'a str,
    /// Between the separator and the last `@` before the hosts, if there is one.
    userinfo: Option<&'a str>,
    /// The host list: up to the first `/`, `?` or `#` after the user-info (empty for `sqlite:path`).
    hosts: &'a str,
    /// The path, query and fragment.
    tail: &'a str,
}

impl<'a> Parts<'a> {
    fn split(url: &'a str) -> Parts<'a> {
        let Some(colon) = url.find(':') else { return Parts { scheme: "", userinfo: None, hosts: "", tail: url } };
        let (scheme, rest) = match url[colon..].starts_with("://") {
            true => url.split_at(colon + 3),
            // An opaque URL (`sqlite:path?key=…`): no authority, only a path and a query. Another scheme with a `@`
            // (`user:pass@host`, the `//` forgotten) keeps what comes before it as user-info, shown masked whole.
            false => {
                let (scheme, rest) = url.split_at(colon + 1);
                let at = rest.split('?').next().and_then(|r| r.rfind('@')).filter(|_| scheme != "sqlite:");
                return match at {
                    Some(at) => Parts { scheme, userinfo: Some(&rest[..at]), hosts: "", tail: &rest[at + 1..] },
                    None => Parts { scheme, userinfo: None, hosts: "", tail: rest },
                };
            }
        };
        let (userinfo, after) = match userinfo_end(rest) {
            Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
            None => (None, rest),
        };
        let end = after.find(['/', '?', '#']).unwrap_or(after.len());
        Parts { scheme, userinfo, hosts: &after[..end], tail: &after[end..] }
    }

    /// Whether the url crate accepts every host of the list and the path, query and fragment.
    fn parses(&self) -> bool {
        let hosts_ok = self.hosts.is_empty() || self.hosts.split(',').all(host_parses);
        let tail_ok = match self.scheme.ends_with("://") {
            true => Url::parse(&format!("fencelock://h{}", self.tail)).is_ok(),
            false => Url::parse(&format!("fencelock:{}", self.tail)).is_ok(),
        };
        // User-info before no host at all is not a URL anyone meant.
        let info_ok = self.userinfo.is_none_or(|u| !u.is_empty() && !self.hosts.is_empty());
        hosts_ok && tail_ok && info_ok
    }

    /// The URL to show. `blunt` masks the whole user-info, user name included.
    fn show(&self, blunt: bool) -> String {
        let mut out = String::with_capacity(self.scheme.len() + self.hosts.len() + self.tail.len() + 8);
        out.push_str(self.scheme);
        if let Some(info) = self.userinfo {
            match info.split_once(':') {
                _ if blunt => out.push_str(MASK),
                Some((user, _)) => {
                    out.push_str(user);
                    out.push(':');
                    out.push_str(MASK);
                }
                None => out.push_str(info),
            }
            out.push('@');
        }
        out.push_str(self.hosts);
        let (before, query) = self.tail.split_once('?').unwrap_or((self.tail, ""));
        out.push_str(before);
        if self.tail.contains('?') {
            out.push('?');
            let (query, fragment) = query.split_once('#').map_or((query, None), |(q, f)| (q, Some(f)));
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, _)) if is_secret_param(name) => format!("{name}={MASK}"),
                    _ => pair.to_string(),
                })
                .collect();
            out.push_str(&pairs.join("&"));
            if let Some(fragment) = fragment {
                out.push('#');
                out.push_str(fragment);
            }
        }
        out
    }

    /// The secrets this URL carries, as written and decoded.
    fn secrets(&self) -> Vec<String> {
        let mut found = Vec::new();
        let mut add = |raw: &str| {
            for s in [raw.to_string(), percent_decode(raw)] {
                if !s.is_empty() && !found.contains(&s) {
                    found.push(s);
                }
            }
        };
        // A user-info without a colon is a user name (PostgreSQL, MySQL and redis-rs read it so), not a secret.
        if let Some((_, password)) = self.userinfo.and_then(|info| info.split_once(':')) {
            add(password);
        }
        if let Some((_, query)) = self.tail.split_once('?') {
            for pair in query.split('#').next().unwrap_or_default().split('&') {
                if let Some((name, value)) = pair.split_once('=')
                    && is_secret_param(name)
                {
                    add(value);
                    if let Some((_, decoded)) = form_urlencoded::parse(pair.as_bytes()).next() {
                        add(&decoded);
                    }
                }
            }
        }
        found
    }
}

/// Where the user-info ends: the last `@` of the authority. A `@` inside a query value (`?x=a@b`) does not count;
/// one after a `/` does, since a password may contain `/` but a host list may not.
pub(crate) fn userinfo_end(rest: &str) -> Option<usize> {
    let mut end = rest.len();
    loop {
        let at = rest[..end].rfind('@')?;
        match rest[..at].find('?') {
            Some(q) if rest[q + 1..at].contains('=') => end = q,
            _ => return Some(at),
        }
    }
}

/// One `host[:port]` of a host list, as the url crate reads hosts: a domain, IPv4 or `[IPv6]`, and a numeric port.
fn host_parses(entry: &str) -> bool {
    let (host, port) = match entry.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, rest)) => {
                (&entry[..addr.len() + 2], rest.strip_prefix(':').or(Some(rest).filter(|r| r.is_empty())))
            }
            None => return false,
        },
        None => match entry.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (entry, Some("")),
        },
    };
    let port_ok = port.is_some_and(|p| p.is_empty() || p.parse::<u16>().is_ok());
    port_ok && !host.is_empty() && Host::parse(host).is_ok()
}

fn is_secret_param(raw_name: &str) -> bool {
    let name = form_urlencoded::parse(raw_name.as_bytes()).next().map(|(n, _)| n.into_owned()).unwrap_or_default();
    let name = name.trim().to_ascii_lowercase();
    SECRET_PARAMS.contains(&name.as_str())
        || ["password", "passwd", "secret", "token"].iter().any(|s| name.contains(s))
        || name.ends_with("_key")
        || name.ends_with("-key")
}

/// `%XX` escapes decoded; anything else kept.
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (URL, what redact shows, the secrets that must not show).
    const TABLE: &[(&str, &str, &[&str])] = &[
        ("redis://u:secret@h:1/0", "redis://u:***@h:1/0", &["secret"]),
        ("redis://h:1", "redis://h:1", &[]),
        ("redis://:onlypass@h:6379", "redis://:***@h:6379", &["onlypass"]),
        (
            "rediss://default:s3cr3t@cache.example.com:6380/2",
            "rediss://default:***@cache.example.com:6380/2",
            &["s3cr3t"],
        ),
        ("etcd://root:pa/ss@h:2379", "etcd://root:***@h:2379", &["pa/ss", "ss@h"]),
        ("etcd://root:pa/ss@h1,h2", "etcd://root:***@h1,h2", &["pa/ss"]),
        ("etcd://u:p:q:r@h1:2379,h2:2379", "etcd://u:***@h1:2379,h2:2379", &["p:q:r"]),
        ("redlock://u:p@ss@h1,h2", "redlock://u:***@h1,h2", &["p@ss", "ss@"]),
        (
            "redlock://u:p@h1:1,h2:2,h3:3/0?instance_timeout_ms=50",
            "redlock://u:***@h1:1,h2:2,h3:3/0?instance_timeout_ms=50",
            &[],
        ),
        (
            "redis+cluster://u:cl%40ster@n1:7000,n2:7001",
            "redis+cluster://u:***@n1:7000,n2:7001",
            &["cl%40ster", "cl@ster"],
        ),
        ("redis://u:v6secret@[::1]:6379", "redis://u:***@[::1]:6379", &["v6secret"]),
        ("redlock://u:pw6@[::1]:1,[::1]:2,127.0.0.1:3", "redlock://u:***@[::1]:1,[::1]:2,127.0.0.1:3", &["pw6"]),
        ("zk://user:zkpassW@h1:2181,h2:2181/chroot", "zk://user:***@h1:2181,h2:2181/chroot", &["zkpassW"]),
        (
            "postgres://u@h/db?password=qpass&sslmode=verify-full&ca=/etc/ca.pem",
            "postgres://u@h/db?password=***&sslmode=verify-full&ca=/etc/ca.pem",
            &["qpass"],
        ),
        (
            "postgres://u:p1@h/db?PassWord=p2&sslpassword=p3",
            "postgres://u:***@h/db?PassWord=***&sslpassword=***",
            &["p2", "p3"],
        ),
        (
            "mysql://h/db?pwd=a1&Token=a2&auth=a3&key=a4&ca=/k.pem",
            "mysql://h/db?pwd=***&Token=***&auth=***&key=***&ca=/k.pem",
            &["a1", "a2", "a4"],
        ),
        ("redis://h/0?pass%77ord=enc0ded", "redis://h/0?pass%77ord=***", &["enc0ded"]),
        ("sqlite:locks.db", "sqlite:locks.db", &[]),
        ("sqlite:/var/lib/a@b.db?key=sqlkey", "sqlite:/var/lib/a@b.db?key=***", &["sqlkey"]),
        ("etcd://h:2379?user=a@b.example&pass=x@y", "etcd://h:2379?user=a@b.example&pass=***", &["x@y"]),
        // Unparseable: the whole user-info goes.
        ("redis://us er:bad pass@h o s t:1", "redis://***@h o s t:1", &["bad pass", "us er"]),
        ("etcd://root:pa/ss@h:99999", "etcd://***@h:99999", &["pa/ss"]),
        ("zk://user:zk@pass@", "zk://***@", &["zk@pass"]),
        ("nonsense", "nonsense", &[]),
        ("u:noscheme@h:1", "u:***@h:1", &["noscheme"]),
    ];

    #[test]
    fn the_table_hides_every_secret_and_keeps_the_rest() {
        for (url, shown, secrets) in TABLE {
            let got = redact(url);
            assert_eq!(&got, shown, "{url}");
            for secret in *secrets {
                assert!(!got.contains(secret), "{url} shows {secret:?}: {got}");
            }
        }
    }

    #[test]
    fn redacting_twice_changes_nothing() {
        for (url, _, _) in TABLE {
            assert_eq!(redact(&redact(url)), redact(url), "{url}");
        }
    }

    #[test]
    fn scrub_finds_secrets_as_written_and_decoded() {
        let url = "redis+cluster://u:cl%40ster@n1:7000?token=t%2Bk+n";
        let text = "driver said: auth cl@ster refused for cl%40ster (t+k n, t%2Bk+n)";
        let clean = scrub(text, url);
        for secret in ["cl@ster", "cl%40ster", "t+k n", "t%2Bk+n"] {
            assert!(!clean.contains(secret), "{clean}");
        }
        assert!(clean.starts_with("driver said: auth *** refused"), "{clean}");
        assert!(mentions_secret(text, url) && !mentions_secret("n1:7000 refused", url));
        // Short secrets are masked in the URL but not hunted in free text.
        assert_eq!(scrub("h1 up", "redlock://u:h@h1,h2,h3"), "h1 up");
    }
}
