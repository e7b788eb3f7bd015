//! PostgreSQL TLS: libpq's `sslmode=` on the workspace's one stack (rustls with ring, `backend/tls.rs`), as a
//! `MakeTlsConnect` for tokio-postgres, which has no rustls adapter of its own.
//!
//! | `sslmode=`         | TLS                     | the server's certificate                                  |
//! |--------------------|-------------------------|-----------------------------------------------------------|
//! | `disable`          | never                   | –                                                         |
//! | `prefer` (default) | if the server offers it | not checked (libpq's meaning: no eavesdropper, no proof)  |
//! | `require`          | always                  | not checked; with `ca=`, as `verify-ca` (as libpq does)   |
//! | `verify-ca`        | always                  | signed by `ca=` (else the web's public roots)             |
//! | `verify-full`      | always                  | signed so, and for the host the URL names                 |
//!
//! A URL that names `ca=`, `cert=` or `key=` asks for a verified server, so with `prefer` it is `verify-full`: never a
//! silent fall back to plaintext or to an unchecked certificate (DESIGN.md §8). libpq's `sslrootcert=`, `sslcert=`
//! and `sslkey=` are accepted as other names for `ca=`, `cert=` and `key=`, so libpq URLs work as they are.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};
use url::form_urlencoded;

use crate::backend::redact;
use crate::backend::tls::{TlsFiles, provider};
use crate::error::{Error, Result};
use crate::redact::userinfo_end;

/// libpq's `sslmode=` values that tokio-postgres can carry out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    fn parse(value: &str, shown: &str) -> Result<Mode> {
        Ok(match value {
            "disable" => Mode::Disable,
            "prefer" => Mode::Prefer,
            "require" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" => Mode::VerifyFull,
            other => {
                return Err(Error::invalid(format!(
                    "URL {shown:?}: sslmode={other:?} is not one of disable, prefer, require, verify-ca, verify-full"
                )));
            }
        })
    }

    /// What the mode means once the certificate files are known: naming one asks for a verified server.
    fn settle(self, files: &TlsFiles) -> Mode {
        match self {
            Mode::Prefer if files.any() => Mode::VerifyFull,
            Mode::Require if files.ca.is_some() => Mode::VerifyCa,
            mode => mode,
        }
    }

    /// The mode tokio-postgres negotiates with: whether TLS may be skipped.
    pub(super) fn negotiation(self) -> SslMode {
        match self {
            Mode::Disable => SslMode::Disable,
            Mode::Prefer => SslMode::Prefer,
            _ => SslMode::Require,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Mode::Disable => "disable",
            Mode::Prefer => "prefer",
            Mode::Require => "require",
            Mode::VerifyCa => "verify-ca",
            Mode::VerifyFull => "verify-full",
        }
    }
}

/// A URL's TLS settings, and the URL without them (tokio-postgres refuses parameters it does not know).
#[derive(Debug)]
pub(super) struct Split {
    pub url: String,
    pub mode: Mode,
    pub files: TlsFiles,
}

/// Takes `sslmode=`, `ca=`, `cert=`, `key=` (and libpq's names for the files) out of a `postgres://` URL.
pub(super) fn split(url: &str) -> Result<Split> {
    let shown = redact(url);
    // The query starts after the user-info, which may hold a `?` of its own (and a query value may hold a `@`).
    let authority = url.find("://").map_or(0, |i| i + 3);
    let after_auth = userinfo_end(&url[authority..]).map_or(authority, |i| authority + i + 1);
    let Some(q) = url[after_auth..].find('?').map(|i| after_auth + i) else {
        return Ok(Split { url: url.to_string(), mode: Mode::Prefer, files: TlsFiles::default() });
    };
    let (base, query) = (&url[..q], &url[q + 1..]);
    let (mut kept, mut ours) = (Vec::new(), Vec::new());
    let mut mode = None;
    for piece in query.split('&').filter(|p| !p.is_empty()) {
        let Some((name, value)) = form_urlencoded::parse(piece.as_bytes()).next() else { continue };
        let param = match name.as_ref() {
            "sslmode" => {
                mode = Some(Mode::parse(&value, &shown)?);
                continue;
            }
            "ca" | "sslrootcert" => "ca",
            "cert" | "sslcert" => "cert",
            "key" | "sslkey" => "key",
            _ => {
                kept.push(piece);
                continue;
            }
        };
        if ours.iter().any(|(p, _): &(String, String)| p == param) {
            return Err(Error::invalid(format!("URL {shown:?}: {param}= is given twice (or with its libpq name)")));
        }
        ours.push((param.to_string(), value.into_owned()));
    }
    let (files, _) = TlsFiles::take(ours);
    let mode = mode.unwrap_or(Mode::Prefer);
    files.require_tls(mode != Mode::Disable, &shown, "sslmode=disable")?;
    let url = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    Ok(Split { url, mode: mode.settle(&files), files })
}

/// The rustls configuration `mode` calls for, reading the files now so that a missing one is reported by connect,
/// by name. (With `disable`, tokio-postgres never starts a handshake.)
pub(super) fn connector(mode: Mode, files: &TlsFiles, shown: &str) -> Result<MakeRustls> {
    let pem = files.read(shown)?;
    let mut config: ClientConfig = pem.client_config(files, shown)?;
    match mode {
        Mode::Prefer | Mode::Require => config.dangerous().set_certificate_verifier(Arc::new(Unchecked(provider()))),
        Mode::VerifyCa => {
            let chain = WebPkiServerVerifier::builder_with_provider(Arc::new(pem.roots(files, shown)?), provider())
                .build()
                .map_err(|e| Error::invalid(format!("{shown}: ca=: {e}")))?;
            config.dangerous().set_certificate_verifier(Arc::new(ChainOnly(chain)));
        }
        Mode::Disable | Mode::VerifyFull => {}
    }
    Ok(MakeRustls(tokio_rustls::TlsConnector::from(Arc::new(config))))
}

/// `sslmode=prefer` and `require` without `ca=`: encrypted, the certificate taken as it comes (the handshake's
/// signatures are still checked, so the peer holds the key of the certificate it showed).
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `sslmode=verify-ca`: the chain must lead to a trusted root; the name in the certificate is not compared.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        // webpki checks the name only after the chain, so a name error means the chain was good.
        match self.0.verify_server_cert(end_entity, intermediates, name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            verdict => verdict,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// tokio-postgres's TLS factory: one per backend, shared by the command and the listening connections.
#[derive(Clone)]
pub(super) struct MakeRustls(tokio_rustls::TlsConnector);

impl std::fmt::Debug for MakeRustls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MakeRustls")
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> MakeTlsConnect<S> for MakeRustls {
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, host: &str) -> io::Result<RustlsConnect> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("host {host:?} as a TLS name: {e}")))?;
        Ok(RustlsConnect { connector: self.0.clone(), name })
    }
}

/// One connection's handshake.
pub(super) struct RustlsConnect {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

type Handshake<S> = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> TlsConnect<S> for RustlsConnect {
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Handshake<S>;

    fn connect(self, stream: S) -> Handshake<S> {
        Box::pin(async move { Ok(RustlsStream(self.connector.connect(self.name, stream).await?)) })
    }
}

/// A TLS connection to the server.
pub(super) struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for RustlsStream<S> {
    // No channel binding: SCRAM runs without it (tokio-postgres's default `channel_binding=prefer` allows that).
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_its_parameters_out_and_settles_the_mode() {
        let s = split("postgres://u:p@h/db?sslmode=require&application_name=x&sslrootcert=%2Fca.pem").unwrap();
        assert_eq!(s.url, "postgres://u:p@h/db?application_name=x");
        assert_eq!((s.mode, s.files.ca.as_deref()), (Mode::VerifyCa, Some("/ca.pem")));
        let s = split("postgres://u@h/db?ca=/ca.pem").unwrap();
        assert_eq!((s.url.as_str(), s.mode), ("postgres://u@h/db", Mode::VerifyFull), "prefer with ca= verifies");
        assert_eq!(split("postgres://u@h/db").unwrap().mode, Mode::Prefer);
        assert_eq!(split("postgres://u@h/db?sslmode=require").unwrap().mode, Mode::Require);
        // A `@` in a query value or a `?` in the password moves neither the query nor the user-info.
        let s = split("postgres://u:p?w@h/db?application_name=a@b&sslmode=verify-full").unwrap();
        assert_eq!((s.url.as_str(), s.mode), ("postgres://u:p?w@h/db?application_name=a@b", Mode::VerifyFull));
    }

    #[test]
    fn refuses_bad_modes_and_files_without_tls() {
        let e = split("postgres://u:pw-x@h/db?sslmode=allow").unwrap_err();
        assert!(e.message().contains("sslmode=\"allow\" is not one of"), "{e}");
        assert!(!e.message().contains("pw-x"), "{e}");
        let e = split("postgres://u@h/db?sslmode=disable&ca=/ca.pem").unwrap_err();
        assert!(e.message().contains("ca= given but TLS is off (sslmode=disable)"), "{e}");
        let e = split("postgres://u@h/db?ca=/a&sslrootcert=/b").unwrap_err();
        assert!(e.message().contains("ca= is given twice"), "{e}");
    }
}
