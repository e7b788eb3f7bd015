//! A loopback TCP relay that holds every server reply for a fixed delay: a network where latency, not CPU,
//! dominates. Each chunk is stamped when it arrives and forwarded at stamp + delay, so replies in flight overlap as
//! they would on a real link (a relay that slept per chunk would add its delays up).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::BoxResult;

/// Starts a relay to `target` (`host:port`) on a free loopback port and returns that port. It runs until the
/// process ends.
pub async fn start(target: String, delay: Duration) -> BoxResult<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(&target).await else { continue };
            let _ = (client.set_nodelay(true), server.set_nodelay(true));
            let ((mut from_client, mut to_client), (mut from_server, mut to_server)) =
                (client.into_split(), server.into_split());
            tokio::spawn(async move { tokio::io::copy(&mut from_client, &mut to_server).await });
            let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
            tokio::spawn(async move {
                let mut buf = vec![0; 64 * 1024];
                while let Ok(n @ 1..) = from_server.read(&mut buf).await {
                    if tx.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                while let Some((due, bytes)) = rx.recv().await {
                    tokio::time::sleep_until(due).await;
                    if to_client.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    Ok(port)
}
