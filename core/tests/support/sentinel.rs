//! The sentinel topology scripts/services.sh starts (`redis-sentinel`): finding its master, cutting replication,
//! killing the master, and putting everything back as it was.

use std::collections::HashMap;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

/// How long the sentinels get to promote a replica (they start after 1 s of silence, and take ~2–3 s).
pub const FAILOVER_BOUND: Duration = Duration::from_secs(30);
pub const MASTER: &str = "fencelock-master";

/// The `redis-sentinel` service of one test run.
pub struct Topology {
    pub url: String,
    sentinels: Vec<String>,
    data_ports: Vec<u16>,
    restart: String,
}

async fn conn(addr: &str) -> MultiplexedConnection {
    redis::Client::open(format!("redis://{addr}")).unwrap().get_multiplexed_async_connection().await.unwrap()
}

impl Topology {
    pub fn from_env() -> Option<Topology> {
        let url = crate::support::service_url("FENCELOCK_TEST_SENTINEL")?;
        let var = |v: &str| std::env::var(v).unwrap_or_else(|_| panic!("{v} is not set"));
        Some(Topology {
            url,
            sentinels: var("FENCELOCK_TEST_SENTINEL_SENTINELS").split(' ').map(String::from).collect(),
            data_ports: var("FENCELOCK_TEST_SENTINEL_DATA_PORTS").split(' ').map(|p| p.parse().unwrap()).collect(),
            restart: var("FENCELOCK_TEST_SENTINEL_DATA_RESTART"),
        })
    }

    /// The URL with `query` appended.
    pub fn url_with(&self, query: &str) -> String {
        format!("{}?{query}", self.url)
    }

    /// The port of the master the first answering sentinel names.
    pub async fn master_port(&self) -> u16 {
        for s in &self.sentinels {
            let Ok(client) = redis::Client::open(format!("redis://{s}")) else { continue };
            let Ok(mut c) = client.get_multiplexed_async_connection().await else { continue };
            let addr: Option<(String, u16)> =
                redis::cmd("SENTINEL").arg("get-master-addr-by-name").arg(MASTER).query_async(&mut c).await.ok();
            if let Some((_, port)) = addr {
                return port;
            }
        }
        panic!("no sentinel names the master");
    }

    /// A plain connection to the data node on `port`.
    pub async fn node(&self, port: u16) -> MultiplexedConnection {
        conn(&format!("127.0.0.1:{port}")).await
    }

    /// Stops replication from the master without touching its clients: the replicas' user is disabled and they
    /// are disconnected.
    pub async fn cut_replication(&self, master: u16) {
        let mut m = self.node(master).await;
        let _: () = redis::cmd("ACL").arg("SETUSER").arg("replicator").arg("off").query_async(&mut m).await.unwrap();
        let _: i64 = redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica").query_async(&mut m).await.unwrap();
    }

    /// Lets the replicas back in, and waits until they are in sync again.
    pub async fn mend_replication(&self, master: u16) {
        let mut m = self.node(master).await;
        let _: () = redis::cmd("ACL").arg("SETUSER").arg("replicator").arg("on").query_async(&mut m).await.unwrap();
        self.wait_healthy().await;
    }

    /// SIGKILLs the data node on `port`; the guard starts it again, at once if the test panics.
    pub async fn kill(&self, port: u16) -> Killed {
        let mut m = self.node(port).await;
        let info: String = redis::cmd("INFO").arg("server").query_async(&mut m).await.unwrap();
        let pid = info.lines().find_map(|l| l.strip_prefix("process_id:")).unwrap().trim().to_string();
        let status = std::process::Command::new("kill").arg("-9").arg(&pid).status().unwrap();
        assert!(status.success(), "kill -9 {pid}");
        let n = self.data_ports.iter().position(|&p| p == port).unwrap() + 1;
        Killed { script: Some(self.restart.replace('N', &n.to_string())) }
    }

    /// Waits until the sentinels name a master other than `old`, and it says it is one.
    pub async fn wait_failover(&self, old: u16) -> u16 {
        let deadline = Instant::now() + FAILOVER_BOUND;
        loop {
            let port = self.master_port().await;
            if port != old {
                let mut m = self.node(port).await;
                let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut m).await.unwrap();
                if matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master") {
                    return port;
                }
            }
            assert!(Instant::now() < deadline, "no failover from {old} within {FAILOVER_BOUND:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until every sentinel sees two replicas, up and linked to the master.
    pub async fn wait_healthy(&self) {
        // A test that failed between cutting and mending replication left it cut.
        for &port in &self.data_ports {
            if let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}"))
                && let Ok(mut c) = client.get_multiplexed_async_connection().await
            {
                let _: redis::RedisResult<()> =
                    redis::cmd("ACL").arg("SETUSER").arg("replicator").arg("on").query_async(&mut c).await;
            }
        }
        let deadline = Instant::now() + FAILOVER_BOUND;
        'again: loop {
            assert!(Instant::now() < deadline, "the topology did not heal within {FAILOVER_BOUND:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
            for s in &self.sentinels {
                let mut c = conn(s).await;
                let replicas: Vec<HashMap<String, String>> =
                    match redis::cmd("SENTINEL").arg("replicas").arg(MASTER).query_async(&mut c).await {
                        Ok(r) => r,
                        Err(_) => continue 'again,
                    };
                let good = replicas
                    .iter()
                    .filter(|r| {
                        let flags = r.get("flags").map_or("", String::as_str);
                        !flags.contains("s_down")
                            && !flags.contains("disconnected")
                            && r.get("master-link-status").map(String::as_str) == Some("ok")
                    })
                    .count();
                if good < 2 {
                    continue 'again;
                }
            }
            let master = self.master_port().await;
            let mut m = self.node(master).await;
            let info: String = redis::cmd("INFO").arg("replication").query_async(&mut m).await.unwrap();
            if info.contains("connected_slaves:2") {
                return;
            }
        }
    }
}

/// A data node a test killed: [`Killed::restore`] starts it again and waits until the topology is whole; dropped
/// without that (a failed test), it still starts it, so the next test finds three data nodes.
pub struct Killed {
    script: Option<String>,
}

impl Killed {
    fn start(script: &str) {
        let status = std::process::Command::new(script).status().unwrap();
        assert!(status.success(), "{script}");
    }

    pub async fn restore(mut self, topo: &Topology) {
        Self::start(&self.script.take().unwrap());
        topo.wait_healthy().await;
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        if let Some(script) = self.script.take() {
            Self::start(&script);
        }
    }
}

/// Tests on the topology run one at a time.
pub static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits until some client subscribes to the release channel of `name` on `node`.
pub async fn wait_subscribed(node: &mut MultiplexedConnection, name: &str) {
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (_, n): (String, i64) = redis::cmd("PUBSUB").arg("NUMSUB").arg(&channel).query_async(node).await.unwrap();
        if n > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "nobody subscribed to {channel}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
