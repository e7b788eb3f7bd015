//! What a `zk://` URL names: `zk://[user:password@]host[:port][,host[:port]…][/chroot][?tls=true&ca=…&cert=…&key=…]`.
//! The user-info is ZooKeeper digest authentication (user and password percent-decoded, the user-info ending at the
//! last `@` as redaction reads it); `tls=true` means the servers' secureClientPort, with the files of `ca=`, `cert=`
//! and `key=` (backend/tls.rs).

use std::fmt;

use url::form_urlencoded;

use super::ZK_PORT;
use crate::backend::tls::{self, TlsFiles};
use crate::backend::{Host, parse_hosts};
use crate::error::{Error, Result};
use crate::redact::{percent_decode, userinfo_end};

const USAGE: &str = "expected zk://[user:password@]host:port[,host:port…][/chroot][?tls=true&ca=…&cert=…&key=…]";

/// Digest credentials. Debug shows the user only.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Digest {
    user: String,
    password: String,
}

impl Digest {
    /// `user:password`, as the digest scheme takes it.
    pub(super) fn auth(&self) -> Vec<u8> {
        format!("{}:{}", self.user, self.password).into_bytes()
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Digest").field("user", &self.user).finish_non_exhaustive()
    }
}

/// The parts of a `zk://` URL.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) hosts: Vec<Host>,
    pub(super) chroot: Option<String>,
    pub(super) digest: Option<Digest>,
    /// The TLS files, if `tls=true`.
    pub(super) tls: Option<TlsFiles>,
}

/// Parses `url`; errors show it as `shown` (redacted).
pub(super) fn parse(url: &str, shown: &str) -> Result<Target> {
    let bad = |what: &str| Error::invalid(format!("URL {shown:?}: {what}; {USAGE}"));
    let rest = url.split_once("://").map(|(_, rest)| rest).ok_or_else(|| bad("no //"))?;
    let (digest, rest) = match userinfo_end(rest) {
        Some(at) => {
            (Some(digest(&rest[..at]).ok_or_else(|| bad("the user-info must be user:password"))?), &rest[at + 1..])
        }
        None => (None, rest),
    };
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (hosts, chroot) = match rest.split_once('/') {
        Some((hosts, root)) => (hosts, Some(format!("/{}", root.trim_end_matches('/'))).filter(|r| r != "/")),
        None => (rest, None),
    };
    let hosts = parse_hosts(hosts, ZK_PORT).map_err(|e| Error::invalid(format!("URL {shown:?}: {e}")))?;
    let (files, rest) = TlsFiles::take(form_urlencoded::parse(query.as_bytes()).into_owned().collect());
    let mut tls = false;
    for (name, value) in rest {
        match (name.as_str(), value.as_str()) {
            ("tls", _) => tls = tls::flag(&value, shown)?,
            _ => return Err(bad(&format!("unknown parameter {name:?}"))),
        }
    }
    files.require_tls(tls, shown, "add tls=true")?;
    Ok(Target { hosts, chroot, digest, tls: tls.then_some(files) })
}

fn digest(info: &str) -> Option<Digest> {
    let (user, password) = info.split_once(':')?;
    let digest = Digest { user: percent_decode(user), password: percent_decode(password) };
    (!digest.user.is_empty()).then_some(digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn parsed(url: &str) -> Result<Target> {
        parse(url, &crate::redact::redact(url))
    }

    #[test]
    fn reads_credentials_chroot_and_tls() {
        let t = parsed("zk://app:p%40ss/w@h1,h2:2182/locks/x?tls=true&ca=/c.pem&cert=/a.pem&key=/a.key").unwrap();
        assert_eq!(t.hosts.iter().map(Host::to_string).collect::<Vec<_>>(), ["h1:2181", "h2:2182"]);
        assert_eq!(t.chroot.as_deref(), Some("/locks/x"));
        assert_eq!(t.digest.as_ref().unwrap().auth(), b"app:p@ss/w");
        assert!(!format!("{:?}", t.digest).contains("p@ss"));
        let files = t.tls.unwrap();
        assert_eq!((files.ca.as_deref(), files.key.as_deref()), (Some("/c.pem"), Some("/a.key")));

        let plain = parsed("zk://h/").unwrap();
        assert_eq!((plain.chroot, plain.digest, plain.tls), (None, None, None));
        assert!(parsed("zk://h?tls=false").unwrap().tls.is_none());
    }

    #[test]
    fn refuses_what_it_cannot_use_without_showing_the_password() {
        for (url, says) in [
            ("zk://h?tls=yes", "tls=\"yes\" is neither true nor false"),
            ("zk://h?timeout=3", "unknown parameter \"timeout\""),
            ("zk://h?ca=/c.pem", "ca= given but TLS is off (add tls=true)"),
            ("zk://nopass@h", "the user-info must be user:password"),
            ("zk://:secretpw@h", "the user-info must be user:password"),
        ] {
            let e = parsed(url).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{url}");
            assert!(e.message().contains(says), "{url}: {e}");
            assert!(!e.message().contains("secretpw"), "{e}");
        }
    }
}
