//! How fencelockd is reached: server TLS and mutual TLS from `--tls-cert`, `--tls-key` and `--client-ca` (tonic's
//! rustls with ring, the workspace's one TLS stack), and the warning for a plaintext port off loopback.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};

/// A client that connects and never finishes its handshake is dropped after this long.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server TLS configuration: the certificate chain and key the server presents, and, for mutual TLS, the CA
/// every client certificate must chain to. Errors name the flag and the file.
pub fn server_tls(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Result<ServerTlsConfig, String> {
    let read = |flag: &str, path: &Path| {
        std::fs::read(path).map_err(|e| format!("{flag} {}: cannot be read: {e}", path.display()))
    };
    let identity = Identity::from_pem(read("--tls-cert", cert)?, read("--tls-key", key)?);
    let mut config = ServerTlsConfig::new().identity(identity).timeout(HANDSHAKE_TIMEOUT);
    if let Some(ca) = client_ca {
        config = config.client_ca_root(Certificate::from_pem(read("--client-ca", ca)?));
    }
    // tonic builds it with ServerConfig::builder(), which panics without a process default provider once two are
    // compiled in (zookeeper-client's rustls brings aws-lc-rs beside ring): make it ring, unless one is set.
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    // Built once here so a bad file is reported at start, not at the first connection.
    Server::builder().tls_config(config.clone()).map_err(|e| {
        let mut detail = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            detail = format!("{detail}: {s}");
            source = s.source();
        }
        format!("--tls-cert, --tls-key or --client-ca: not a usable TLS configuration ({detail})")
    })?;
    Ok(config)
}

/// The warning for a listen address anyone off this host may reach without TLS, unless `insecure` says the operator
/// knows (a private network, a TLS-terminating proxy).
pub fn exposure_warning(addr: SocketAddr, tls: bool, insecure: bool) -> Option<String> {
    (!tls && !insecure && !addr.ip().is_loopback()).then(|| {
        format!(
            "listening on {addr} without TLS: anyone who can reach it can take, keep alive and release locks as the one \
             anonymous identity, and read the traffic; give --tls-cert and --tls-key (and --client-ca for mutual TLS), \
             or --insecure to accept this"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plaintext_off_loopback_warns() {
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        for quiet in ["127.0.0.1:2379", "127.0.0.4:0", "[::1]:2379"] {
            assert_eq!(exposure_warning(at(quiet), false, false), None, "{quiet}");
        }
        let warning = exposure_warning(at("0.0.0.0:2379"), false, false).expect("a warning");
        assert!(warning.contains("0.0.0.0:2379") && warning.contains("--insecure"), "{warning}");
        assert!(exposure_warning(at("[::]:2379"), false, false).is_some());
        assert_eq!(exposure_warning(at("0.0.0.0:2379"), true, false), None, "TLS");
        assert_eq!(exposure_warning(at("0.0.0.0:2379"), false, true), None, "--insecure");
    }

    #[test]
    fn a_missing_file_names_its_flag() {
        let e = server_tls(Path::new("/nonexistent/c.pem"), Path::new("/nonexistent/k.pem"), None).unwrap_err();
        assert!(e.starts_with("--tls-cert /nonexistent/c.pem: cannot be read"), "{e}");
    }
}
