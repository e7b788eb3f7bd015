//! Secrets never leak (issue 17, point 4): connecting to each URL of tests/conformance/secrets.json, each pointed
//! at a port where nothing answers or malformed, fails with an error whose message, Display and Debug never contain
//! the secret, but still name the host. No server is needed.

use std::time::Duration;

use fencelock::{Client, ClientOptions};
use serde_json::Value;

fn words(step: &Value, field: &str) -> Vec<String> {
    step[field].as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default()
}

#[tokio::test]
async fn connect_errors_never_show_a_secret() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/conformance/secrets.json");
    let table: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let opts = ClientOptions::default().connect_timeout(Duration::from_millis(300));
    let steps = table["steps"].as_array().unwrap();
    assert!(steps.len() >= 20, "the table has {} URLs", steps.len());
    for step in steps {
        let url = step["url"].as_str().unwrap();
        let err = match Client::connect_with(url, &opts).await {
            Ok(c) => panic!("{url}: connected to {}", c.url()),
            Err(e) => e,
        };
        let texts = [err.message().to_string(), err.to_string(), format!("{err:?}"), err.detail()];
        for secret in words(step, "not_mentions") {
            for text in &texts {
                assert!(!text.contains(&secret), "{url}: the error shows {secret:?}: {text}");
            }
        }
        for host in words(step, "mentions") {
            assert!(err.message().contains(&host), "{url}: the error does not name {host:?}: {err}");
        }
    }
}

#[test]
fn redact_is_public_and_keeps_hosts() {
    assert_eq!(fencelock::redact("etcd://root:pa/ss@h1:2379,h2"), "etcd://root:***@h1:2379,h2");
    assert_eq!(fencelock::redact("redlock://u:p@ss@h1,h2,h3"), "redlock://u:***@h1,h2,h3");
}

#[tokio::test]
async fn client_url_shows_no_secret() {
    let dir = std::env::temp_dir().join(format!("fencelock-secrets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}?key=sqlitesecret", dir.join("locks.db").display());
    let client = Client::connect(&url).await.unwrap();
    assert!(!client.url().contains("sqlitesecret") && client.url().ends_with("?key=***"), "{}", client.url());
    assert!(!format!("{client:?}").contains("sqlitesecret"));
    client.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}
