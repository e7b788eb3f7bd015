//! PostgreSQL over TLS with a password: user fencelock_tls of the server scripts/services.sh starts
//! (`FENCELOCK_TEST_POSTGRES_TLS`), whom pg_hba.conf admits over TLS only (`hostssl` with scram-sha-256,
//! `hostnossl … reject`), and user fencelock-client (`FENCELOCK_TEST_POSTGRES_CERT`), whom it admits by the client
//! certificate of that CN (`hostssl … cert`). The server's certificate is for 127.0.0.1 and signed by
//! `FENCELOCK_TEST_CA`.

mod support;

use fencelock::{Client, ErrorKind};
use support::secured::{assert_refused, locks_fence_and_wake, quick, with_params};

const PASSWORD: &str = "pg-tls-pw";

/// The TLS user's URL and the test CA, or `None` (skipped) without the servers.
fn target() -> Option<(String, String)> {
    Some((support::service_url("FENCELOCK_TEST_POSTGRES_TLS")?, std::env::var("FENCELOCK_TEST_CA").ok()?))
}

fn env(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| panic!("{var} is set by scripts/services.sh"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verified_tls_with_a_password_locks_fences_and_wakes_waiters() {
    let Some((url, ca)) = target() else { return };
    locks_fence_and_wake(&with_params(&url, &format!("sslmode=verify-full&ca={ca}"))).await;
}

#[tokio::test]
async fn each_sslmode_that_encrypts_connects_and_disable_is_refused() {
    let Some((url, ca)) = target() else { return };
    // prefer (the default) and require encrypt without checking the certificate, as libpq's do; libpq's parameter
    // names work too.
    for params in ["", "sslmode=prefer", "sslmode=require", &format!("sslmode=verify-ca&sslrootcert={ca}")] {
        let url = if params.is_empty() { url.clone() } else { with_params(&url, params) };
        let client = Client::connect_with(&url, &quick()).await.unwrap_or_else(|e| panic!("{params:?}: {e}"));
        client.close().await;
    }
    // The server admits this user over TLS only: a plaintext connection is refused, for good.
    let err = Client::connect_with(&with_params(&url, "sslmode=disable"), &quick()).await.unwrap_err();
    assert_refused(&err, "authentication failed for postgres://fencelock_tls@127.0.0.1", PASSWORD);
    assert!(err.message().contains("no encryption"), "{err}");
}

#[tokio::test]
async fn a_wrong_ca_or_host_name_is_refused_and_verify_ca_skips_the_name() {
    let Some((url, ca)) = target() else { return };
    let wrong = env("FENCELOCK_TEST_WRONG_CA");
    for params in
        [format!("sslmode=verify-full&ca={wrong}"), format!("ca={wrong}"), format!("sslmode=require&ca={wrong}")]
    {
        let err = Client::connect_with(&with_params(&url, &params), &quick()).await.unwrap_err();
        assert_refused(&err, "TLS handshake refused", PASSWORD);
        assert!(err.message().contains("ca="), "{params}: {err}");
    }
    // The certificate is for 127.0.0.1, not localhost: verify-full refuses the name, verify-ca only checks the chain.
    let by_name = url.replace("@127.0.0.1:", "@localhost:");
    let err = Client::connect_with(&with_params(&by_name, &format!("sslmode=verify-full&ca={ca}")), &quick())
        .await
        .unwrap_err();
    assert_refused(&err, "TLS handshake refused", PASSWORD);
    let client = Client::connect_with(&with_params(&by_name, &format!("sslmode=verify-ca&ca={ca}")), &quick())
        .await
        .expect("verify-ca does not compare the name");
    client.close().await;
}

#[tokio::test]
async fn a_wrong_password_is_final_and_not_shown() {
    let Some((url, ca)) = target() else { return };
    let wrong = "not-the-pg-pw-4Qz";
    let url = with_params(&url.replace(PASSWORD, wrong), &format!("sslmode=verify-full&ca={ca}"));
    let err = Client::connect_with(&url, &quick()).await.unwrap_err();
    assert_refused(&err, "authentication failed for postgres://fencelock_tls@127.0.0.1", wrong);
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let no_password = url.replace(&format!(":{wrong}@"), "@");
    let err = Client::connect_with(&no_password, &quick()).await.unwrap_err();
    assert_refused(&err, "authentication failed for", wrong);
}

#[tokio::test]
async fn bad_tls_parameters_name_themselves() {
    for (url, says) in [
        ("postgres://u@127.0.0.1:1/db?sslmode=verify-full&ca=/nonexistent/ca.pem", "ca=\"/nonexistent/ca.pem\""),
        ("postgres://u@127.0.0.1:1/db?sslmode=disable&ca=/ca.pem", "TLS is off (sslmode=disable)"),
        ("postgres://u@127.0.0.1:1/db?sslmode=allow", "sslmode=\"allow\""),
        ("postgres://u@127.0.0.1:1/db?sslmode=require&cert=/c.pem", "cert= and key= go together"),
    ] {
        let err = Client::connect_with(url, &quick()).await.unwrap_err();
        assert_refused(&err, says, "no secret here");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_logs_in_and_a_missing_or_foreign_one_is_refused() {
    let Some(url) = support::service_url("FENCELOCK_TEST_POSTGRES_CERT") else { return };
    let ca = env("FENCELOCK_TEST_CA");
    let with = |who: &str| {
        let (cert, key) = (env(&format!("FENCELOCK_TEST_{who}_CERT")), env(&format!("FENCELOCK_TEST_{who}_KEY")));
        with_params(&url, &format!("sslmode=verify-full&sslrootcert={ca}&sslcert={cert}&sslkey={key}"))
    };
    locks_fence_and_wake(&with("CLIENT")).await;
    let err =
        Client::connect_with(&with_params(&url, &format!("sslmode=verify-full&ca={ca}")), &quick()).await.unwrap_err();
    assert_refused(&err, "authentication failed for postgres://fencelock-client@127.0.0.1", "no secret here");
    // Signed by the wrong CA, or for another user: refused in the handshake, or by the name.
    let err = Client::connect_with(&with("ROGUE"), &quick()).await.unwrap_err();
    assert_refused(&err, "TLS handshake refused", "no secret here");
    let err = Client::connect_with(&with("OTHER"), &quick()).await.unwrap_err();
    assert_refused(&err, "authentication failed for", "no secret here");
}
