//! TLS to ZooKeeper's secureClientPort: zookeeper-client's own rustls connector, fed the PEM files of `ca=`, `cert=`
//! and `key=` (checked by backend/tls.rs). zookeeper-client drops the reason a handshake failed (it reports a lost
//! connection, then no host), so after a failed connect one handshake of our own, with a configuration built from the
//! same files, tells a refused certificate (a wrong CA, an unknown client certificate) from a server that is down.

use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use zookeeper_client as zk;

use crate::backend::Host;
use crate::backend::tls::{self, TlsFiles};
use crate::error::{Error, Result};

/// The TLS set-up of one client.
#[derive(Debug)]
pub(super) struct Secure {
    /// What zookeeper-client connects with.
    pub(super) options: zk::TlsOptions,
    /// The same files as a rustls configuration, for [`Secure::refusal`].
    config: Arc<ClientConfig>,
}

impl Secure {
    /// Reads and checks the files now, so that a missing or wrong one is reported at connect, by parameter; and the
    /// host names, which zookeeper-client would panic on if they were no certificate name.
    pub(super) fn new(files: &TlsFiles, hosts: &[Host], shown: &str) -> Result<Secure> {
        if let Some(host) = hosts.iter().find(|h| server_name(h).is_err()) {
            return Err(Error::invalid(format!(
                "{shown}: host {:?} cannot be checked against a certificate",
                host.name
            )));
        }
        if files.ca.is_none() {
            return Err(Error::invalid(format!(
                "{shown}: tls=true needs ca= (the CA of the servers' certificates): zookeeper-client has no built-in \
                 trust roots"
            )));
        }
        let pem = files.read(shown)?;
        // The shared checks and messages; tls::client_config also installs ring as the process's default provider,
        // which zookeeper-client needs: it calls ClientConfig::builder() and takes no provider of ours.
        let config = Arc::new(pem.client_config(files, shown)?);
        let text = |param: &str, bytes: &[u8]| {
            std::str::from_utf8(bytes)
                .map(str::to_owned)
                .map_err(|_| Error::invalid(format!("{shown}: {param}= is not PEM text")))
        };
        let refused =
            |e: zk::Error| Error::invalid(format!("{shown}: ca=, cert= or key= refused by the ZooKeeper client: {e}"));
        let ca = text("ca", pem.ca.as_deref().unwrap_or_default())?;
        let mut options = zk::TlsOptions::new().with_pem_ca(&ca).map_err(refused)?;
        if let (Some(cert), Some(key)) = (&pem.cert, &pem.key) {
            options = options.with_pem_identity(&text("cert", cert)?, &text("key", key)?).map_err(refused)?;
        }
        Ok(Secure { options, config })
    }

    /// After a TLS connect failed: the refusal, if a handshake with one of `hosts` is refused (each bounded by
    /// `bound`), as `INVALID_ARGUMENT`; `None` if none refused (the servers are down or unreachable).
    pub(super) async fn refusal(&self, hosts: &[Host], bound: Duration, shown: &str) -> Option<Error> {
        for host in hosts {
            if let Ok(Err(e)) =
                tokio::time::timeout(bound, tls::probe(self.config.clone(), &host.name, host.port, b"")).await
                && tls::is_refusal(&*e)
            {
                return Some(tls::refused(shown, format!("{host}: {e}")));
            }
        }
        None
    }
}

/// The name a certificate must carry: an IP address (IPv6 without its brackets) or a DNS name.
fn server_name(host: &Host) -> std::result::Result<ServerName<'static>, rustls::pki_types::InvalidDnsNameError> {
    ServerName::try_from(unbracketed(host).to_string())
}

fn unbracketed(host: &Host) -> &str {
    host.name.trim_start_matches('[').trim_end_matches(']')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use crate::backend::parse_hosts;

    #[test]
    fn refuses_hosts_no_certificate_can_name_and_tls_without_a_ca() {
        let bad = parse_hosts("127.0.0.1,[1::2::3]", 2181).unwrap();
        let e = Secure::new(&TlsFiles::default(), &bad, "zk://x").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("host \"[1::2::3]\" cannot be checked against a certificate"), "{e}");
        let good = parse_hosts("zk-1.example,[::1]", 2181).unwrap();
        let e = Secure::new(&TlsFiles::default(), &good, "zk://x").unwrap_err();
        assert!(e.message().contains("tls=true needs ca="), "{e}");
    }
}
