//! TLS to etcd: tonic's rustls configuration from the files `backend/tls.rs` reads, and the diagnosis of a refused
//! handshake. With TLS 1.3 the server judges the client's certificate after the client has finished its handshake,
//! so a missing or foreign certificate reaches tonic only as a closed connection; one handshake of our own, made
//! only after a connect failed, finds the server's alert and turns it into a clear, final error. The same probe
//! tells a plaintext URL that it reached a TLS server.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::timeout;
use tonic::Status;
use tonic::transport::{ClientTlsConfig, Identity};

use super::describe;
use crate::backend::tls::{self, TlsFiles};
use crate::error::{Error, Result};

/// tonic's TLS configuration for a URL's files, checked now so that a bad file is reported by connect, by name.
pub(super) fn tls_config(files: &TlsFiles, shown: &str) -> Result<ClientTlsConfig> {
    let pem = files.read(shown)?;
    let mut config = ClientTlsConfig::new().trust_anchors(pem.roots(files, shown)?.roots);
    pem.identity(files, shown)?;
    if let (Some(cert), Some(key)) = (&pem.cert, &pem.key) {
        config = config.identity(Identity::from_pem(cert, key));
    }
    Ok(config)
}

/// A status and its causes in one line: what went wrong in a handshake is deep in the chain.
pub(super) fn causes(e: &Status) -> String {
    let mut text = describe(e);
    let mut next = std::error::Error::source(e);
    while let Some(cause) = next {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        next = cause.source();
    }
    text
}

/// The final error for a connect that failed with `e`, if TLS is why: rustls refused the server, or the first
/// endpoint refused us (asked again with a handshake of our own, within `within`).
pub(super) async fn refusal(
    e: &Status,
    endpoints: &[String],
    files: &TlsFiles,
    shown: &str,
    within: Duration,
) -> Option<Error> {
    if tls::is_refusal(e) {
        return Some(tls::refused(shown, causes(e)));
    }
    match probe(endpoints.first()?.strip_prefix("https://")?, files, shown, within).await? {
        Err(e) if tls::is_refusal(&*e) => Some(tls::refused(shown, e)),
        _ => None,
    }
}

/// The final error for a plaintext connect that failed because the server speaks TLS: it sent a certificate (which
/// the probe need not trust) or an alert.
pub(super) async fn tls_expected(endpoints: &[String], shown: &str, within: Duration) -> Option<Error> {
    let endpoint = endpoints.first()?.strip_prefix("http://")?;
    let speaks_tls = match probe(endpoint, &TlsFiles::default(), shown, within).await? {
        Ok(()) => true,
        Err(e) => e
            .downcast_ref::<rustls::Error>()
            .is_some_and(|e| matches!(e, rustls::Error::InvalidCertificate(_) | rustls::Error::AlertReceived(_))),
    };
    speaks_tls.then(|| {
        Error::invalid(format!(
            "{shown}: the server speaks TLS; use etcd+https:// or tls=true (and ca= for a private CA)"
        ))
    })
}

/// [`tls::probe`] of `host:port` as an HTTP/2 client would speak (the server's verdict on our certificate is the
/// first thing it sends after the preface), within `within` (`None`: no answer, or no configuration to try with).
async fn probe(endpoint: &str, files: &TlsFiles, shown: &str, within: Duration) -> Option<Result<(), tls::ProbeError>> {
    let mut config = files.client_config(shown).ok()?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    let (host, port) = endpoint.rsplit_once(':')?;
    let port = port.parse().ok()?;
    timeout(within, tls::probe(Arc::new(config), host, port, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")).await.ok()
}
