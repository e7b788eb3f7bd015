//! TLS as every backend configures it (DESIGN.md §8): one stack (rustls with ring) and the same URL parameters,
//! `ca=` (a PEM file of trusted roots; without it the web's public roots), and `cert=` with `key=` (a client
//! certificate chain and its private key, both PEM). Each backend says how TLS is switched on (`rediss://`,
//! `?tls=true`, `sslmode=`); this module turns the files into a rustls configuration and says what went wrong with
//! them, naming the parameter and never the URL's secrets.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};

use crate::error::{Error, Result};

/// The value of a URL's `tls=`, read alike on every scheme that takes it: `true`/`1` or `false`/`0`.
pub(crate) fn flag(value: &str, shown: &str) -> Result<bool> {
    match value {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(Error::invalid(format!("URL {shown:?}: tls={value:?} is neither true nor false"))),
    }
}

/// The files a URL's `ca=`, `cert=` and `key=` name (percent-decoded paths).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TlsFiles {
    pub ca: Option<String>,
    pub cert: Option<String>,
    pub key: Option<String>,
}

impl TlsFiles {
    /// Takes `ca`, `cert` and `key` from decoded query pairs, returning the pairs left for the backend.
    pub fn take(pairs: Vec<(String, String)>) -> (TlsFiles, Vec<(String, String)>) {
        let mut files = TlsFiles::default();
        let mut rest = Vec::new();
        for (name, value) in pairs {
            match name.as_str() {
                "ca" => files.ca = Some(value),
                "cert" => files.cert = Some(value),
                "key" => files.key = Some(value),
                _ => rest.push((name, value)),
            }
        }
        (files, rest)
    }

    /// Whether any file is named (a backend refuses them when TLS is off rather than ignore them).
    pub fn any(&self) -> bool {
        self.ca.is_some() || self.cert.is_some() || self.key.is_some()
    }

    /// An error unless TLS is on or no file is named: `ca=` on a plaintext URL is a mistake, not a preference.
    pub fn require_tls(&self, tls: bool, shown: &str, how: &str) -> Result<()> {
        if tls || !self.any() {
            return Ok(());
        }
        let which = [("ca", &self.ca), ("cert", &self.cert), ("key", &self.key)]
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(n, _)| format!("{n}="))
            .collect::<Vec<_>>()
            .join(", ");
        Err(Error::invalid(format!("{shown}: {which} given but TLS is off ({how})")))
    }

    /// The PEM bytes of each named file, read now so that a missing file is reported at connect, by name.
    pub fn read(&self, shown: &str) -> Result<TlsPem> {
        if self.cert.is_some() != self.key.is_some() {
            return Err(Error::invalid(format!(
                "{shown}: cert= and key= go together (a client certificate and its key)"
            )));
        }
        let read = |param: &str, path: &Option<String>| -> Result<Option<Vec<u8>>> {
            path.as_deref()
                .map(|p| {
                    std::fs::read(p).map_err(|e| Error::invalid(format!("{shown}: {param}={p:?} cannot be read: {e}")))
                })
                .transpose()
        };
        Ok(TlsPem { ca: read("ca", &self.ca)?, cert: read("cert", &self.cert)?, key: read("key", &self.key)? })
    }

    /// A rustls client configuration: the roots of `ca=` (else the web's), and the client certificate if named.
    pub fn client_config(&self, shown: &str) -> Result<ClientConfig> {
        self.read(shown)?.client_config(self, shown)
    }
}

/// The contents of [`TlsFiles`], for drivers that take PEM bytes rather than a rustls configuration.
#[derive(Clone, Default)]
pub(crate) struct TlsPem {
    pub ca: Option<Vec<u8>>,
    pub cert: Option<Vec<u8>>,
    pub key: Option<Vec<u8>>,
}

impl std::fmt::Debug for TlsPem {
    // The key is a secret: only whether each part is there.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsPem")
            .field("ca", &self.ca.is_some())
            .field("cert", &self.cert.is_some())
            .field("key", &self.key.is_some())
            .finish()
    }
}

impl TlsPem {
    /// The trusted roots: every certificate in `ca=`, else the web's public roots.
    pub fn roots(&self, files: &TlsFiles, shown: &str) -> Result<RootCertStore> {
        let Some(pem) = &self.ca else {
            return Ok(RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() });
        };
        let path = files.ca.as_deref().unwrap_or_default();
        let mut roots = RootCertStore::empty();
        for cert in certs(pem, "ca", path, shown)? {
            roots.add(cert).map_err(|e| Error::invalid(format!("{shown}: ca={path:?}: not a usable CA: {e}")))?;
        }
        Ok(roots)
    }

    /// The client certificate chain and key, if `cert=` and `key=` were given.
    pub fn identity(
        &self,
        files: &TlsFiles,
        shown: &str,
    ) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>> {
        let (Some(cert), Some(key)) = (&self.cert, &self.key) else { return Ok(None) };
        let chain = certs(cert, "cert", files.cert.as_deref().unwrap_or_default(), shown)?;
        let path = files.key.as_deref().unwrap_or_default();
        // The parser's error would not quote the key, but nothing of it is worth showing either.
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|_| Error::invalid(format!("{shown}: key={path:?} holds no PEM private key")))?;
        Ok(Some((chain, key)))
    }

    /// A rustls client configuration from these files.
    pub fn client_config(&self, files: &TlsFiles, shown: &str) -> Result<ClientConfig> {
        let roots = Arc::new(self.roots(files, shown)?);
        let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider())
            .build()
            .map_err(|e| Error::invalid(format!("{shown}: ca=: {e}")))?;
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::internal(format!("the TLS provider offers no protocol version: {e}")))?
            .with_webpki_verifier(verifier);
        match self.identity(files, shown)? {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| Error::invalid(format!("{shown}: cert= and key= do not make a client identity: {e}"))),
            None => Ok(builder.with_no_client_auth()),
        }
    }
}

/// Every certificate in a PEM file; none at all is an error (a wrong path is more likely than an empty CA).
fn certs(pem: &[u8], param: &str, path: &str, shown: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::invalid(format!("{shown}: {param}={path:?} is not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(Error::invalid(format!("{shown}: {param}={path:?} holds no PEM certificate")));
    }
    Ok(certs)
}

/// The one crypto provider: ring. Installed as the process default too (once, unless the host application chose
/// one), because some drivers build their rustls configuration with `ClientConfig::builder()`, which panics when
/// more than one provider is compiled in and none is the default.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    if CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: any default will do for those drivers.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Whether an error, or anything in its source chain, is rustls refusing the peer (certificate, name or protocol),
/// which no retry fixes, as opposed to the network failing.
pub(crate) fn is_refusal(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(e) = next {
        if e.is::<rustls::Error>() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.get_ref().is_some_and(|inner| inner.is::<rustls::Error>())
        {
            return true;
        }
        next = e.source();
    }
    false
}

/// An error of [`probe`]: rustls' verdict (a `rustls::Error`) or the network's.
pub(crate) type ProbeError = Box<dyn std::error::Error + Send + Sync>;

/// One TLS handshake of our own with `host:port`, then `hello` and one read: for drivers that report a refused
/// handshake only as a lost connection. With TLS 1.3 a server judges the client's certificate after the client has
/// finished, and refuses it by an alert in place of its first record, so the verdict is that read. `Ok` means the
/// server accepted us; the connection is dropped either way. The caller bounds the time.
pub(crate) async fn probe(
    config: Arc<ClientConfig>,
    host: &str,
    port: u16,
    hello: &[u8],
) -> std::result::Result<(), ProbeError> {
    use std::io::Write;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let host = host.trim_start_matches('[').trim_end_matches(']');
    let mut tls = rustls::ClientConnection::new(config, ServerName::try_from(host.to_string())?)?;
    let mut tcp = tokio::net::TcpStream::connect((host, port)).await?;
    let mut buf = vec![0; 16 * 1024];
    let mut sent = false;
    loop {
        if !tls.is_handshaking() {
            if sent {
                return Ok(());
            }
            tls.writer().write_all(hello)?;
            sent = true;
        }
        while tls.wants_write() {
            let mut out = Vec::new();
            tls.write_tls(&mut out)?;
            tcp.write_all(&out).await?;
        }
        let n = tcp.read(&mut buf).await?;
        if n == 0 {
            return Err("the server closed the connection".into());
        }
        tls.read_tls(&mut &buf[..n])?;
        tls.process_new_packets()?;
    }
}

/// The error for a refused handshake: `INVALID_ARGUMENT`, naming what to check.
pub(crate) fn refused(shown: &str, detail: impl std::fmt::Display) -> Error {
    Error::invalid(format!("{shown}: TLS handshake refused: {detail} (check ca=, cert= and key=)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn tls_is_true_or_false() {
        assert!(flag("true", "x").unwrap() && flag("1", "x").unwrap());
        assert!(!flag("false", "x").unwrap() && !flag("0", "x").unwrap());
        assert!(flag("yes", "x").unwrap_err().message().contains("tls=\"yes\" is neither true nor false"));
    }

    #[test]
    fn takes_its_parameters_and_leaves_the_rest() {
        let (files, rest) = TlsFiles::take(pairs(&[("ca", "/a.pem"), ("db", "3"), ("cert", "/c"), ("key", "/k")]));
        assert_eq!(files.ca.as_deref(), Some("/a.pem"));
        assert_eq!(files.cert.as_deref(), Some("/c"));
        assert_eq!(files.key.as_deref(), Some("/k"));
        assert_eq!(rest, pairs(&[("db", "3")]));
    }

    #[test]
    fn refuses_files_without_tls_or_half_an_identity() {
        let (files, _) = TlsFiles::take(pairs(&[("ca", "/a.pem")]));
        let e = files.require_tls(false, "redis://h", "use rediss://").unwrap_err();
        assert!(e.message().contains("ca= given but TLS is off (use rediss://)"), "{e}");
        assert!(files.require_tls(true, "x", "y").is_ok());
        let (files, _) = TlsFiles::take(pairs(&[("cert", "/c.pem")]));
        let e = files.read("x").unwrap_err();
        assert!(e.message().contains("cert= and key= go together"), "{e}");
    }

    #[test]
    fn names_a_missing_or_wrong_file() {
        let (files, _) = TlsFiles::take(pairs(&[("ca", "/nonexistent/ca.pem")]));
        let e = files.client_config("x").unwrap_err();
        assert!(e.message().contains("ca=\"/nonexistent/ca.pem\" cannot be read"), "{e}");
        let dir = std::env::temp_dir().join(format!("fencelock-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let (files, _) = TlsFiles::take(pairs(&[("ca", junk.to_str().unwrap())]));
        let e = files.client_config("x").unwrap_err();
        assert!(e.message().contains("holds no PEM certificate"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_public_roots_serve_when_no_ca_is_named() {
        let config = TlsFiles::default().client_config("x").unwrap();
        assert!(!config.client_auth_cert_resolver.has_certs());
    }

    #[test]
    fn a_refusal_is_found_down_the_source_chain() {
        let inner = std::io::Error::other(rustls::Error::General("bad".into()));
        assert!(is_refusal(&inner));
        assert!(!is_refusal(&std::io::Error::other("connection reset")));
    }
}
