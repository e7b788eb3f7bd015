//! ZooKeeper security against the server of `FENCELOCK_TEST_ZK`: digest authentication from the URL user-info, the
//! creator-only ACLs it puts on every node fencelock makes (tried from raw sessions of another identity and of none),
//! a wrong password as non-retryable INVALID_ARGUMENT; and TLS against the same server's secureClientPort
//! (`FENCELOCK_TEST_ZK_TLS`, which requires a client certificate): working, plaintext refused, a wrong CA, a rogue
//! client certificate and a missing one refused with a clear error. Each test works under its own chroot and removes
//! it.

mod support;

use std::time::Duration;

use fencelock::{Client, ClientOptions, Error, ErrorKind, LockOptions};
use zookeeper_client as zk;

const OWNER: &str = "owner:owner-pw";

fn fast() -> LockOptions {
    LockOptions::default().ttl(Duration::from_secs(5))
}

/// `host:port` of a `zk://host:port[?…]` URL.
fn host_port(url: &str) -> &str {
    let rest = url.trim_start_matches("zk://");
    rest.split(['/', '?']).next().unwrap_or(rest)
}

/// The plaintext server's `host:port` and a fresh chroot; `None` (test skipped) without a server.
fn plain() -> Option<(String, String)> {
    let url = support::service_url("FENCELOCK_TEST_ZK")?;
    Some((host_port(&url).to_string(), format!("/{}", support::unique("fencelock-zk-auth"))))
}

/// A raw session on `hosts`, authenticated as `user:password` if given.
async fn raw(hosts: &str, digest: Option<&str>) -> zk::Client {
    let mut connector = zk::Client::connector();
    if let Some(digest) = digest {
        connector = connector.with_auth("digest", digest.as_bytes());
    }
    connector.connect(hosts).await.expect("raw ZooKeeper session")
}

/// Deletes `root` and everything under it, as the identity that owns it.
async fn remove_tree(zk: &zk::Client, root: &str) {
    let mut stack = vec![root.to_string()];
    let mut all = Vec::new();
    while let Some(path) = stack.pop() {
        match zk.list_children(&path).await {
            Ok(children) => stack.extend(children.into_iter().map(|c| format!("{path}/{c}"))),
            Err(zk::Error::NoNode) => continue,
            Err(e) => panic!("list {path}: {e}"),
        }
        all.push(path);
    }
    for path in all.iter().rev() {
        match zk.delete(path, None).await {
            Ok(()) | Err(zk::Error::NoNode) => {}
            Err(e) => panic!("delete {path}: {e}"),
        }
    }
}

/// Exactly one ACL: all permissions for the digest identity `user:…`.
fn assert_creator_only(path: &str, acls: &[zk::Acl], user: &str) {
    assert_eq!(acls.len(), 1, "{path}: {acls:?}");
    let acl = &acls[0];
    assert_eq!(acl.scheme(), "digest", "{path}: {acls:?}");
    assert!(acl.id().starts_with(&format!("{user}:")), "{path}: {acls:?}");
    assert_eq!(acl.permission(), zk::Permission::ALL, "{path}: {acls:?}");
}

/// A refused credential: non-retryable INVALID_ARGUMENT naming the redacted URL, and not the password.
fn assert_auth_failed(e: &Error, shown: &str, password: &str) {
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(!e.retryable(), "{e}");
    let text = format!("{e} {e:?}");
    assert!(text.contains(&format!("authentication failed for {shown}")), "{text}");
    assert!(!text.contains(password), "the password shows: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digest_auth_makes_every_node_creator_only() {
    let Some((hosts, root)) = plain() else { return };
    let owner = Client::connect(&format!("zk://{OWNER}@{hosts}{root}")).await.unwrap();
    assert!(!owner.url().contains("owner-pw"), "{}", owner.url());
    let lease = owner.lock("orders", &fast()).await.unwrap();
    let fence = owner.fence("ledger");
    fence.write(lease.fence(), b"v1").await.unwrap();

    // The owner's own raw session sees the nodes, chroot included, and their ACLs.
    let own = raw(&hosts, Some(OWNER)).await;
    let dir = format!("{root}/orders");
    let children = own.list_children(&dir).await.unwrap();
    assert_eq!(children.len(), 1, "{children:?}");
    let node = format!("{dir}/{}", children[0]);
    let register = format!("{root}/fencelock/fences/ledger");
    for path in [root.as_str(), &dir, &node, &format!("{root}/fencelock"), &register] {
        let (acls, _) = own.get_acl(path).await.unwrap();
        assert_creator_only(path, &acls, "owner");
    }

    // Another identity, and no identity at all, can neither delete the lock node nor touch the register.
    for (who, digest) in [("another identity", Some("intruder:intruder-pw")), ("no identity", None)] {
        let other = raw(&hosts, digest).await;
        let refused = |what: &str, r: Result<(), zk::Error>| {
            assert!(matches!(r, Err(zk::Error::NoAuth)), "{who} could {what}: {r:?}");
        };
        refused("delete the lock node", other.delete(&node, None).await);
        refused(
            "write the fence register",
            other.set_data(&register, b"\xff\xff\xff\xff\xff\xff\xff\xffx", None).await.map(drop),
        );
        refused("read the fence register", other.get_data(&register).await.map(drop));
        refused("delete the fence register", other.delete(&register, None).await);
    }
    assert_eq!(own.list_children(&dir).await.unwrap(), children, "the lock node is still there");
    assert_eq!(fence.read().await.unwrap(), (lease.fence(), b"v1".to_vec()));

    lease.release().await.unwrap();
    assert!(own.list_children(&dir).await.unwrap().is_empty(), "release deleted the node");
    owner.close().await;
    remove_tree(&own, &root).await;

    // Without credentials, nodes stay world-writable, as Curator makes them by default.
    let anonymous = Client::connect(&format!("zk://{hosts}{root}")).await.unwrap();
    let lease = anonymous.lock("orders", &fast()).await.unwrap();
    let children = own.list_children(&dir).await.unwrap();
    for path in [dir.clone(), format!("{dir}/{}", children[0])] {
        let (acls, _) = own.get_acl(&path).await.unwrap();
        assert_eq!(acls, [zk::Acl::new(zk::Permission::ALL, zk::AuthId::anyone())], "{path}");
    }
    lease.release().await.unwrap();
    anonymous.close().await;
    remove_tree(&own, &root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_a_non_retryable_invalid_argument() {
    let Some((hosts, root)) = plain() else { return };
    let owner = Client::connect(&format!("zk://{OWNER}@{hosts}{root}")).await.unwrap();
    let lease = owner.lock("orders", &fast()).await.unwrap();
    owner.fence("ledger").write(lease.fence(), b"v1").await.unwrap();

    // Digest accepts any password (it only names an identity): the refusal comes at the first node it may not touch.
    for (url, password) in [
        (format!("zk://owner:wrong-pw@{hosts}{root}"), "wrong-pw"),
        (format!("zk://intruder:intruder-pw@{hosts}{root}"), "intruder-pw"),
    ] {
        let shown = fencelock::redact(&url);
        let intruder = Client::connect(&url).await.unwrap();
        let e = intruder.try_lock("orders", &fast()).await.unwrap_err();
        assert_auth_failed(&e, &shown, password);
        let e = intruder.force_release("orders").await.unwrap_err();
        assert_auth_failed(&e, &shown, password);
        let e = intruder.fence("ledger").write(u64::MAX, b"mine").await.unwrap_err();
        assert_auth_failed(&e, &shown, password);
        intruder.close().await;
    }
    // No credentials at all against the owner's chroot: refused the same way.
    let anonymous = Client::connect(&format!("zk://{hosts}{root}")).await.unwrap();
    let e = anonymous.try_lock("orders", &fast()).await.unwrap_err();
    assert_auth_failed(&e, &format!("zk://{hosts}{root}"), "owner-pw");

    assert!(lease.is_valid(), "the holder kept its lock");
    lease.release().await.unwrap();
    owner.close().await;
    anonymous.close().await;
    remove_tree(&raw(&hosts, Some(OWNER)).await, &root).await;
}

/// The secureClientPort of the test server and the test PKI's CA and client certificate.
struct Tls {
    hosts: String,
    ca: String,
    cert: String,
    key: String,
}

impl Tls {
    fn from_env() -> Option<Tls> {
        let url = support::service_url("FENCELOCK_TEST_ZK_TLS")?;
        let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} with FENCELOCK_TEST_ZK_TLS"));
        Some(Tls {
            hosts: host_port(&url).to_string(),
            ca: var("FENCELOCK_TEST_CA"),
            cert: var("FENCELOCK_TEST_CLIENT_CERT"),
            key: var("FENCELOCK_TEST_CLIENT_KEY"),
        })
    }

    /// A `tls=true` URL with the given user-info, chroot, `ca=` and, unless `None`, `cert=` and `key=`.
    fn url(&self, userinfo: &str, root: &str, ca: &str, identity: Option<(&str, &str)>) -> String {
        let identity = identity.map_or(String::new(), |(cert, key)| format!("&cert={cert}&key={key}"));
        format!("zk://{userinfo}{}{root}?tls=true&ca={ca}{identity}", self.hosts)
    }
}

fn quick() -> ClientOptions {
    ClientOptions::default().connect_timeout(Duration::from_secs(3))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_client_certificate_and_digest_auth_works() {
    let Some(tls) = Tls::from_env() else { return };
    let root = format!("/{}", support::unique("fencelock-zk-tls"));
    let url = tls.url(&format!("{OWNER}@"), &root, &tls.ca, Some((&tls.cert, &tls.key)));
    let client = Client::connect_with(&url, &quick()).await.unwrap();
    let lease = client.lock("orders", &fast()).await.unwrap();
    assert!(client.try_lock("orders", &fast()).await.unwrap().is_none(), "the lock excludes");
    client.fence("ledger").write(lease.fence(), b"v1").await.unwrap();
    assert_eq!(client.fence("ledger").read().await.unwrap(), (lease.fence(), b"v1".to_vec()));
    lease.release().await.unwrap();

    // The nodes are creator-only over TLS too; the plaintext port serves the same tree to the same identity.
    let (plain, _) = plain().expect("FENCELOCK_TEST_ZK with FENCELOCK_TEST_ZK_TLS");
    let own = raw(&plain, Some(OWNER)).await;
    let (acls, _) = own.get_acl(&format!("{root}/fencelock/fences/ledger")).await.unwrap();
    assert!(acls.iter().any(|a| a.scheme() == "digest" && a.id().starts_with("owner:")), "{acls:?}");
    assert!(acls.iter().all(|a| a.scheme() != "world"), "{acls:?}");
    client.close().await;
    remove_tree(&own, &root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_is_refused_on_the_tls_port() {
    let Some(tls) = Tls::from_env() else { return };
    let url = format!("zk://{}", tls.hosts);
    let e = Client::connect_with(&url, &quick()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    assert!(e.message().contains("needs ?tls=true"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_or_a_bad_client_certificate_is_refused_clearly() {
    let Some(tls) = Tls::from_env() else { return };
    let var = |name: &str| std::env::var(name).unwrap();
    let (rogue_cert, rogue_key) = (var("FENCELOCK_TEST_ROGUE_CERT"), var("FENCELOCK_TEST_ROGUE_KEY"));
    let wrong_ca = var("FENCELOCK_TEST_WRONG_CA");
    let identity = Some((tls.cert.as_str(), tls.key.as_str()));
    for (why, url, says) in [
        ("a wrong CA", tls.url("", "", &wrong_ca, identity), "invalid peer certificate"),
        (
            "a rogue client certificate",
            tls.url("", "", &tls.ca, Some((&rogue_cert, &rogue_key))),
            "received fatal alert",
        ),
        ("no client certificate", tls.url("", "", &tls.ca, None), "received fatal alert"),
    ] {
        let e = Client::connect_with(&url, &quick()).await.map(drop).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{why}: {e}");
        assert!(!e.retryable(), "{why}: {e}");
        assert!(e.message().contains("TLS handshake refused") && e.message().contains(says), "{why}: {e}");
    }
    // zookeeper-client has no trust roots of its own: tls=true needs ca=.
    let url = format!("zk://{}?tls=true", tls.hosts);
    let e = Client::connect_with(&url, &quick()).await.map(drop).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("tls=true needs ca="), "{e}");
}
