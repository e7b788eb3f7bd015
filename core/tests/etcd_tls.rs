//! etcd over TLS with authentication: the second etcd scripts/services.sh starts (`FENCELOCK_TEST_ETCD_TLS`), which
//! listens on https only, requires a client certificate signed by `FENCELOCK_TEST_CA` (`--client-cert-auth`) and has
//! authentication on. The URL's user fencelock may read and write every key. The client certificate's CN
//! (fencelock-client) is no etcd user, so without the password etcd refuses the requests: the password authorizes,
//! the certificate only gets the connection in. The root user's password is etcd-root-pw; auth tokens are JWTs.

mod support;

use std::process::Stdio;
use std::time::Duration;

use fencelock::{Client, ErrorKind, LockOptions};
use support::secured::{assert_refused, locks_fence_and_wake, quick, with_params};
use tokio::process::Command;

const PASSWORD: &str = "etcd-tls-pw";

fn env(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| panic!("{var} is set by scripts/services.sh"))
}

/// The TLS etcd's URL (user and password, no files), or `None` (skipped) without the servers.
fn target() -> Option<String> {
    support::service_url("FENCELOCK_TEST_ETCD_TLS")
}

/// `ca=` the test CA and the client certificate `who` (CLIENT, OTHER or ROGUE), if any.
fn files(ca: &str, who: Option<&str>) -> String {
    let mut params = format!("ca={ca}");
    if let Some(who) = who {
        params += &format!(
            "&cert={}&key={}",
            env(&format!("FENCELOCK_TEST_{who}_CERT")),
            env(&format!("FENCELOCK_TEST_{who}_KEY"))
        );
    }
    params
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_a_client_certificate_and_a_password_lock_fence_and_wake() {
    let Some(url) = target() else { return };
    locks_fence_and_wake(&with_params(&url, &files(&env("FENCELOCK_TEST_CA"), Some("CLIENT")))).await;
}

#[tokio::test]
async fn tls_true_on_etcd_scheme_is_the_same() {
    let Some(url) = target() else { return };
    let url = with_params(&url.replacen("etcd+https://", "etcd://", 1), "tls=true");
    let client = Client::connect_with(&with_params(&url, &files(&env("FENCELOCK_TEST_CA"), Some("CLIENT"))), &quick())
        .await
        .expect("etcd://…?tls=true connects");
    assert!(client.try_lock(&support::unique("tls-param"), &Default::default()).await.unwrap().is_some());
    client.close().await;
}

#[tokio::test]
async fn plaintext_is_refused_where_tls_connects() {
    let Some(url) = target() else { return };
    let plain = url.replacen("etcd+https://", "etcd://", 1);
    let err = Client::connect_with(&plain, &quick()).await.expect_err("a TLS-only etcd refuses plaintext");
    assert_refused(&err, "the server speaks TLS; use etcd+https://", PASSWORD);
    let tls = with_params(&url, &files(&env("FENCELOCK_TEST_CA"), Some("CLIENT")));
    Client::connect_with(&tls, &quick()).await.expect("the same server over TLS").close().await;
}

#[tokio::test]
async fn a_wrong_ca_is_refused_naming_ca() {
    let Some(url) = target() else { return };
    let err =
        Client::connect_with(&with_params(&url, &files(&env("FENCELOCK_TEST_WRONG_CA"), Some("CLIENT"))), &quick())
            .await
            .unwrap_err();
    assert_refused(&err, "TLS handshake refused", PASSWORD);
    assert!(err.message().contains("ca="), "{err}");
}

#[tokio::test]
async fn a_missing_or_foreign_client_certificate_is_refused() {
    let Some(url) = target() else { return };
    let ca = env("FENCELOCK_TEST_CA");
    for who in [None, Some("ROGUE")] {
        let err = Client::connect_with(&with_params(&url, &files(&ca, who)), &quick()).await.unwrap_err();
        assert_refused(&err, "TLS handshake refused", PASSWORD);
    }
}

#[tokio::test]
async fn a_wrong_or_missing_password_is_final_and_not_shown() {
    let Some(url) = target() else { return };
    let params = files(&env("FENCELOCK_TEST_CA"), Some("CLIENT"));
    let wrong = "not-the-etcd-pw-8Rw";
    let err = Client::connect_with(&with_params(&url.replace(PASSWORD, wrong), &params), &quick()).await.unwrap_err();
    assert_refused(&err, "authentication failed for etcd+https://fencelock:***@127.0.0.1", wrong);
    // The certificate alone names user fencelock-client, whom etcd does not know.
    let anonymous = url.replacen(&format!("fencelock:{PASSWORD}@"), "", 1);
    let err = Client::connect_with(&with_params(&anonymous, &params), &quick()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}

/// etcdctl as root against the TLS etcd.
async fn etcdctl_root(url: &str, args: &[&str]) {
    let endpoint = format!("https://{}", url.rsplit_once('@').expect("a user in the URL").1);
    let status = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &endpoint, "--cacert", &env("FENCELOCK_TEST_CA"), "--user", "root:etcd-root-pw"])
        .args(["--cert", &env("FENCELOCK_TEST_CLIENT_CERT"), "--key", &env("FENCELOCK_TEST_CLIENT_KEY")])
        .args(["--dial-timeout", "2s", "--command-timeout", "5s"])
        .args(args)
        .stdout(Stdio::null())
        .status()
        .await
        .expect("etcdctl runs");
    assert!(status.success(), "etcdctl {args:?}");
}

/// A change to users or roles makes etcd refuse writes under every older token ("revision of auth store is old"),
/// however fresh: the backend must authenticate again rather than fail for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_outdated_by_a_change_of_users_is_replaced() {
    let Some(url) = target() else { return };
    let url = with_params(&url, &files(&env("FENCELOCK_TEST_CA"), Some("CLIENT")));
    let client = Client::connect_with(&url, &quick()).await.unwrap();
    let name = support::unique("auth-revision");
    let opts = LockOptions::default().ttl(Duration::from_secs(10));
    client.lock(&name, &opts).await.unwrap().release().await.unwrap();
    let someone = support::unique("someone");
    etcdctl_root(&url, &["user", "add", &someone, "--new-user-password=x-pw"]).await;
    let lease = client.lock(&name, &opts).await.expect("a lock after the auth store changed");
    lease.release().await.unwrap();
    etcdctl_root(&url, &["user", "delete", &someone]).await;
    client.close().await;
}
