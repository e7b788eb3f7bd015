//! Raw ZooKeeper: the create and the delete of one EPHEMERAL_SEQUENTIAL node per cycle with zookeeper-client, on
//! one session, with nothing around them.

use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client as zk;

use crate::BoxResult;
use crate::stats::{Samples, timed};

const DIR: &str = "/bench-raw";
const RTT_NODE: &str = "/bench-raw/rtt";

const EPHEMERAL_SEQUENTIAL: zk::CreateOptions<'static> =
    zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
const PERSISTENT: zk::CreateOptions<'static> = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());

#[derive(Debug)]
pub struct ZkRaw {
    client: zk::Client,
}

impl ZkRaw {
    /// `zk://h1:2181,h2…[/chroot]`: the same session settings as fencelock's (10 s timeout).
    pub async fn connect(url: &str) -> BoxResult<ZkRaw> {
        let rest = url.split_once("://").map(|(_, r)| r).ok_or_else(|| format!("{url:?}: expected zk://host:port"))?;
        let (hosts, chroot) = match rest.split_once('/') {
            Some((hosts, root)) => (hosts, Some(format!("/{}", root.trim_end_matches('/'))).filter(|r| r != "/")),
            None => (rest, None),
        };
        let mut client = zk::Client::connector().with_session_timeout(Duration::from_secs(10)).connect(hosts).await?;
        if let Some(root) = chroot {
            client.mkdir(&root, &PERSISTENT).await?;
            client = client.chroot(root).map_err(|_| format!("{url:?}: bad chroot"))?;
        }
        match client.create(DIR, &[], &PERSISTENT).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(ZkRaw { client })
    }

    pub async fn cycles(&self, span: Duration) -> BoxResult<Samples> {
        let prefix = format!("{DIR}/lock-");
        timed(span, || async {
            let (_, seq) = self.client.create(&prefix, b"raw-holder", &EPHEMERAL_SEQUENTIAL).await?;
            self.client.delete(&format!("{prefix}{seq}"), None).await?;
            Ok(())
        })
        .await
    }

    /// One setData: a write, one quorum commit, like the delete that starts a hand-off.
    pub async fn round_trips(&self, n: usize) -> BoxResult<Samples> {
        match self.client.create(RTT_NODE, &[], &PERSISTENT).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(e.into()),
        }
        let start = Instant::now();
        let mut lat = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            self.client.set_data(RTT_NODE, b"", None).await?;
            lat.push(t.elapsed());
        }
        Ok(Samples::from_vec(lat, start.elapsed()))
    }
}
