//! Who is calling: the user of an etcd auth token (`--users`, see `users`); else, with mutual TLS (`--client-ca`),
//! the subject CN of the client certificate that CA signed (as etcd names a certificate's user); otherwise the one
//! anonymous identity. Leases belong to the identity that granted them (see `registry`).

use std::fmt;
use std::sync::Arc;

use tonic::{Request, Status};

/// A caller, as leases record their owner.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Identity {
    /// No client certificate: plaintext, or TLS without `--client-ca`.
    Anonymous,
    /// The subject CN of a client certificate the `--client-ca` signed.
    Subject(Arc<str>),
    /// A user of the `--users` file, by the token `Auth.Authenticate` gave it.
    User(Arc<str>),
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Anonymous => f.write_str("anonymous"),
            Identity::Subject(cn) => write!(f, "CN={cn}"),
            Identity::User(name) => write!(f, "user {name}"),
        }
    }
}

impl Identity {
    /// The caller of `req`. The TLS layer has already verified the certificate against `--client-ca` and refused a
    /// client without one, so any certificate here is trusted; without mutual TLS there is none.
    pub fn of<T>(req: &Request<T>) -> Result<Identity, Status> {
        // Put there by `users::Authenticator` from the call's token.
        if let Some(user) = req.extensions().get::<Identity>() {
            return Ok(user.clone());
        }
        let Some(certs) = req.peer_certs() else { return Ok(Identity::Anonymous) };
        let Some(leaf) = certs.first() else { return Ok(Identity::Anonymous) };
        let unusable = || Status::unauthenticated("fencelockd: the client certificate has no usable subject CN");
        let cert = webpki::EndEntityCert::try_from(leaf).map_err(|_| unusable())?;
        common_name(cert.subject()).map(|cn| Identity::Subject(cn.into())).ok_or_else(unusable)
    }
}

/// One DER element: its tag, its contents, and what follows it.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        // Long form: 1–4 length bytes (a certificate's name is far below 4 GiB).
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

const SET: u8 = 0x31;
const SEQUENCE: u8 = 0x30;
const OID: u8 = 0x06;
/// id-at-commonName, 2.5.4.3.
const COMMON_NAME: [u8; 3] = [0x55, 0x04, 0x03];
/// The string types a CN comes in: UTF8String, PrintableString, IA5String.
const TEXT: [u8; 3] = [0x0c, 0x13, 0x16];

/// The (last) commonName of a DER Name's contents (its RDNSequence without the outer SEQUENCE header), if it is text.
fn common_name(mut rdns: &[u8]) -> Option<String> {
    let mut found = None;
    while !rdns.is_empty() {
        let (tag, mut set, rest) = element(rdns)?;
        rdns = rest;
        if tag != SET {
            return None;
        }
        while !set.is_empty() {
            let (tag, pair, rest) = element(set)?;
            set = rest;
            if tag != SEQUENCE {
                return None;
            }
            let (tag, oid, value) = element(pair)?;
            let (vtag, text, _) = element(value)?;
            if tag == OID && oid == COMMON_NAME {
                found = TEXT.contains(&vtag).then(|| std::str::from_utf8(text).ok().map(str::to_string)).flatten();
            }
        }
    }
    found.filter(|cn| !cn.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One RDN `SET { SEQUENCE { OID oid, tag value } }`.
    fn rdn(oid: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
        let mut pair = vec![OID, oid.len() as u8];
        pair.extend_from_slice(oid);
        pair.extend([tag, value.len() as u8]);
        pair.extend_from_slice(value);
        let mut seq = vec![SEQUENCE, pair.len() as u8];
        seq.extend(pair);
        let mut set = vec![SET, seq.len() as u8];
        set.extend(seq);
        set
    }

    #[test]
    fn finds_the_cn_among_other_attributes() {
        // O=Example, CN=fencelock-client (id-at-organizationName is 2.5.4.10).
        let name = [rdn(&[0x55, 0x04, 0x0a], 0x0c, b"Example"), rdn(&COMMON_NAME, 0x0c, b"fencelock-client")].concat();
        assert_eq!(common_name(&name).as_deref(), Some("fencelock-client"));
        assert_eq!(common_name(&rdn(&COMMON_NAME, 0x13, b"printable")).as_deref(), Some("printable"));
    }

    #[test]
    fn no_cn_or_a_broken_name_is_none() {
        assert_eq!(common_name(&rdn(&[0x55, 0x04, 0x0a], 0x0c, b"Example")), None);
        assert_eq!(common_name(&rdn(&COMMON_NAME, 0x0c, b"")), None, "an empty CN names nobody");
        assert_eq!(common_name(&rdn(&COMMON_NAME, 0x04, b"octets")), None, "not a string type");
        let name = rdn(&COMMON_NAME, 0x0c, b"fencelock-client");
        assert_eq!(common_name(&name[..name.len() - 3]), None, "truncated");
        assert_eq!(common_name(&[0x31, 0x85, 1, 2, 3, 4, 5]), None, "a length over 4 bytes");
    }

    #[test]
    fn long_form_lengths_are_read() {
        let long = "x".repeat(200);
        let mut pair = vec![OID, 3];
        pair.extend_from_slice(&COMMON_NAME);
        pair.extend([0x0c, 0x81, 200]);
        pair.extend_from_slice(long.as_bytes());
        let mut seq = vec![SEQUENCE, 0x81, pair.len() as u8];
        seq.extend(pair);
        let mut set = vec![SET, 0x81, seq.len() as u8];
        set.extend(seq);
        assert_eq!(common_name(&set), Some(long));
    }
}
