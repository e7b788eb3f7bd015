//! TLS and authentication, the same for `redis://`/`rediss://`, `redis+cluster://` and `redlock://`: which query
//! parameters switch TLS on and name its files, the certificates redis-rs is given, and what a refused credential or
//! handshake becomes (DESIGN.md §8). Credentials come from the URL's user-info and redis-rs sends them (`AUTH user
//! pass` for an ACL user, `AUTH pass` for `requirepass`) on every connection it makes, reconnects included.

use redis::{ClientTlsConfig, ErrorKind as RedisErrorKind, RedisError, ServerErrorKind, TlsCertificates};

use crate::backend::tls::{self, TlsFiles};
use crate::error::{Error, Result};

/// How every connection of one Redis backend is made: with TLS (and these certificates) or in plaintext.
#[derive(Clone, Default)]
pub(crate) struct Security {
    /// The PEM bytes of `ca=`, `cert=` and `key=`, read and checked once; `None` for plaintext.
    certs: Option<TlsCertificates>,
    /// What to tell a user whose plaintext URL meets a TLS-only server: how this scheme turns TLS on.
    how: &'static str,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security").field("tls", &self.tls()).finish()
    }
}

impl Security {
    /// From the decoded query pairs of a URL: takes `ca`, `cert` and `key` (an error when `tls` is off, which `how`
    /// says how to switch on), reads and checks the files, and returns the pairs left for the backend.
    pub(crate) fn take(
        pairs: Vec<(String, String)>,
        tls: bool,
        shown: &str,
        how: &'static str,
    ) -> Result<(Security, Vec<(String, String)>)> {
        let (files, rest) = TlsFiles::take(pairs);
        files.require_tls(tls, shown, how)?;
        if !tls {
            return Ok((Security { certs: None, how }, rest));
        }
        let pem = files.read(shown)?;
        // Only to check them, with errors that name the parameter: redis-rs builds its own configuration.
        pem.client_config(&files, shown)?;
        let client_tls = match (pem.cert, pem.key) {
            (Some(client_cert), Some(client_key)) => Some(ClientTlsConfig { client_cert, client_key }),
            _ => None,
        };
        Ok((Security { certs: Some(TlsCertificates { client_tls, root_cert: pem.ca }), how }, rest))
    }

    /// Whether connections use TLS.
    pub(crate) fn tls(&self) -> bool {
        self.certs.is_some()
    }

    /// The certificates for redis-rs, when TLS is on. redis-rs builds its rustls configuration with
    /// `ClientConfig::builder()`, which takes the process default provider: [`tls::provider`] makes that ring.
    pub(crate) fn certificates(&self) -> Option<TlsCertificates> {
        let certs = self.certs.clone()?;
        tls::provider();
        Some(certs)
    }

    /// The error for a connection that could not be made (or whose first command failed): a refused credential or
    /// handshake is `InvalidArgument`, which no retry fixes; anything else is `Unavailable`.
    pub(crate) fn connect_error(&self, e: &RedisError, shown: &str) -> Error {
        if let Some(error) = refusal(e, shown) {
            return error;
        }
        // A TLS-only port resets a plaintext client's first command; say what probably happened.
        if !self.tls() && e.is_connection_dropped() && !e.is_connection_refusal() {
            return Error::unavailable(format!(
                "{shown}: cannot connect: {e} (the server closed the connection at once: if it accepts TLS only, {})",
                self.how
            ));
        }
        Error::unavailable(format!("{shown}: cannot connect: {e}"))
    }

    /// The error for a connection not made within `limit`. A TLS client that meets a plaintext Redis waits: the
    /// server reads the handshake as the start of a command that never ends.
    pub(crate) fn timeout_error(&self, shown: &str, limit: std::time::Duration) -> Error {
        let hint = match self.tls() {
            true => " (a TLS handshake nobody answers may be a plaintext port)",
            false => "",
        };
        Error::unavailable(format!("{shown}: no connection within {limit:?}{hint}"))
    }
}

/// The names of `pairs`, for an error about unknown parameters: never their values, which may be secrets.
pub(crate) fn names(pairs: &[(String, String)]) -> Vec<&str> {
    pairs.iter().map(|(name, _)| name.as_str()).collect()
}

/// What a refusal by the server or its certificate becomes, or `None` for anything a retry may fix.
pub(crate) fn refusal(e: &RedisError, shown: &str) -> Option<Error> {
    if is_auth_refusal(e) {
        return Some(Error::invalid(format!("authentication failed for {shown}: {e}")));
    }
    if e.kind() == RedisErrorKind::Server(ServerErrorKind::NoPerm) {
        return Some(Error::invalid(format!("{shown}: the ACL user may not do this: {e}")));
    }
    if is_tls_refusal(e) {
        return Some(tls::refused(shown, e));
    }
    None
}

/// A credential the server refused (`WRONGPASS`, a password for a server without one), or none given where one is
/// needed (`NOAUTH`). redis-rs reports the first as its own kind at connect; the others arrive as server errors,
/// and a cluster's connect error quotes them in its text.
fn is_auth_refusal(e: &RedisError) -> bool {
    const SAID: [&str; 5] = [
        "WRONGPASS",
        "NOAUTH",
        "invalid username-password pair",
        "AUTH <password> called without",
        "Password authentication failed",
    ];
    e.kind() == RedisErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"))
        || SAID.iter().any(|s| e.to_string().contains(s))
}

/// A handshake rustls refused. redis-rs keeps the I/O error under an `Arc<dyn Error>`, whose `source()` skips the
/// `io::Error` and with it the rustls error inside, so the chain is opened there by hand. A cluster's connect error
/// keeps only the text of its nodes' errors, so that is read for what rustls says when it refuses a peer.
fn is_tls_refusal(e: &RedisError) -> bool {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    const RUSTLS_SAYS: [&str; 5] = [
        "invalid peer certificate",
        "received fatal alert",
        "peer is incompatible",
        "peer misbehaved",
        "peer sent no certificates",
    ];
    let inner = std::error::Error::source(e).and_then(|s| s.downcast_ref::<Shared>());
    tls::is_refusal(e)
        || inner.is_some_and(|inner| tls::is_refusal(&**inner))
        || (e.kind() == RedisErrorKind::Io && RUSTLS_SAYS.iter().any(|s| e.to_string().contains(s)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn files_need_tls_and_are_read_at_once() {
        let e = Security::take(pairs(&[("ca", "/a.pem")]), false, "redis://h", "use rediss://").unwrap_err();
        assert!(e.message().contains("ca= given but TLS is off (use rediss://)"), "{e}");
        let e = Security::take(pairs(&[("ca", "/nonexistent.pem")]), true, "rediss://h", "").unwrap_err();
        assert!(e.message().contains("ca=\"/nonexistent.pem\" cannot be read"), "{e}");
        let (plain, rest) = Security::take(pairs(&[("protocol", "resp3")]), false, "redis://h", "").unwrap();
        assert!(!plain.tls() && plain.certificates().is_none());
        assert_eq!(names(&rest), ["protocol"]);
        assert!(Security::take(vec![], true, "rediss://h", "").unwrap().0.tls());
    }

    #[test]
    fn refused_credentials_are_invalid_arguments() {
        let wrong = redis::make_extension_error("WRONGPASS".into(), Some("invalid username-password pair".into()));
        let noauth = redis::make_extension_error("NOAUTH".into(), Some("Authentication required.".into()));
        for e in
            [wrong, noauth, RedisError::from((RedisErrorKind::AuthenticationFailed, "Password authentication failed"))]
        {
            let err = refusal(&e, "redis://u:***@h:1").unwrap();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
            assert!(err.message().starts_with("authentication failed for redis://u:***@h:1"), "{err}");
        }
        let reset = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(refusal(&reset, "x").is_none());
        let e = Security::default().connect_error(&reset, "redis://h:1");
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        let tls = RedisError::from(std::io::Error::other(rustls::Error::General("bad certificate".into())));
        assert_eq!(refusal(&tls, "x").unwrap().kind(), ErrorKind::InvalidArgument);
        let quoted = RedisError::from((
            RedisErrorKind::Io,
            "Failed to create initial connections",
            "Io: invalid peer certificate: UnknownIssuer".to_string(),
        ));
        assert!(refusal(&quoted, "x").unwrap().message().contains("TLS handshake refused"));
    }
}
