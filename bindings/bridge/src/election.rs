//! Elections for bindings: a leadership travels as the binding's own lease object (its token is the term), and
//! `observe` is a handle whose `next` a host's iterator calls.

use std::pin::Pin;

use fencelock::{Client, Leader, Lease, LockOptions, Result};
use futures::StreamExt as _;
use tokio::sync::Mutex;

type Changes = Pin<Box<dyn futures::Stream<Item = Result<Option<Leader>>> + Send>>;

/// Campaigns for `name` with `value`: one attempt (`None` while another leads) when `once`, else waiting up to the
/// options' timeout. The leadership comes back as its lease; [`proclaim`] and `release` (resign) take it.
pub async fn campaign(
    client: &Client,
    name: &str,
    value: &[u8],
    opts: &LockOptions,
    once: bool,
) -> Result<Option<Lease>> {
    let election = client.election(name);
    if once {
        Ok(election.try_campaign(value, opts).await?.map(|l| l.into_lease()))
    } else {
        Ok(Some(election.campaign(value, opts).await?.into_lease()))
    }
}

/// Replaces the value of the leadership `lease` of the election `name`, keeping its term.
pub async fn proclaim(client: &Client, name: &str, lease: &Lease, value: &[u8]) -> Result<()> {
    client.election(name).proclaim(lease, value).await
}

/// The current leader of `name`, or `None`.
pub async fn leader(client: &Client, name: &str) -> Result<Option<Leader>> {
    client.election(name).leader().await
}

/// The changes of leader of one election, in order (see `Election::observe`); shared by a host's threads.
pub struct Observer {
    changes: Mutex<Changes>,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

impl Observer {
    pub fn new(client: &Client, name: &str) -> Self {
        Observer { changes: Mutex::new(Box::pin(client.election(name).observe())) }
    }

    /// The next change: a leader, or `None` when nobody leads. The stream never ends; a closed client is `Closed`.
    pub async fn next(&self) -> Result<Option<Leader>> {
        let mut changes = self.changes.lock().await;
        changes.next().await.expect("observe never ends")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock::ErrorKind;

    #[test]
    fn a_leadership_as_a_lease() {
        crate::block_on(async {
            let a = Client::connect("memory://bridge-election").await.unwrap();
            let b = Client::connect("memory://bridge-election").await.unwrap();
            let opts = LockOptions::default();
            let observer = Observer::new(&b, "e");
            assert_eq!(observer.next().await.unwrap(), None);
            let lead = campaign(&a, "e", b"one", &opts, false).await.unwrap().unwrap();
            assert!(campaign(&b, "e", b"two", &opts, true).await.unwrap().is_none());
            assert_eq!(observer.next().await.unwrap().unwrap().value, b"one");
            proclaim(&a, "e", &lead, b"uno").await.unwrap();
            let now = leader(&b, "e").await.unwrap().unwrap();
            assert_eq!((now.value.as_slice(), now.term), (&b"uno"[..], lead.fence()));
            // A lease of another election, or of a read lock, is no leadership of this one.
            assert_eq!(proclaim(&a, "f", &lead, b"x").await.unwrap_err().kind(), ErrorKind::InvalidArgument);
            let read = a.rw_lock("p").read(&opts).await.unwrap();
            assert_eq!(proclaim(&a, "p", &read, b"x").await.unwrap_err().kind(), ErrorKind::InvalidArgument);
            assert_eq!(observer.next().await.unwrap().unwrap().value, b"uno");
            lead.release().await.unwrap();
            assert_eq!(observer.next().await.unwrap(), None);
            a.close().await;
            b.close().await;
        })
        .unwrap();
    }
}
