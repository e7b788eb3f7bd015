//! The userspace fault proxy (no `tc netem` in this kernel): one per client slot and server, between the client and
//! the server. It passes bytes, delays every chunk, freezes them (held, then delivered late on release), or cuts
//! every open connection and refuses new ones for a while (a partition of that client from that server).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    Pass,
    Delay(Duration),
    Freeze,
    /// A lossy, jittery link: each chunk waits 0–`JITTER` ms, and one in `LOSS_ONE_IN` waits 200–600 ms more, the
    /// retransmission a lost segment costs TCP (the proxy carries a byte stream, so loss shows as that delay).
    Lossy,
    /// Connections are closed at once and new ones refused.
    Cut,
}

const JITTER: u64 = 50;
const LOSS_ONE_IN: u32 = 10;

/// The hold of one chunk on a lossy link.
fn lossy_delay() -> Duration {
    use rand::Rng;
    let mut rng = rand::rng();
    let mut ms = rng.random_range(0..=JITTER);
    if rng.random_ratio(1, LOSS_ONE_IN) {
        ms += rng.random_range(200..=600);
    }
    Duration::from_millis(ms)
}

#[derive(Debug, Clone)]
pub struct Proxy {
    pub addr: SocketAddr,
    mode: Arc<watch::Sender<Mode>>,
}

impl Proxy {
    /// Listens on `listen` (port 0: any free one) and forwards to `upstream`.
    pub async fn start(listen: SocketAddr, upstream: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let (tx, _) = watch::channel(Mode::Pass);
        let mode = Arc::new(tx);
        let m = mode.clone();
        tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else { continue };
                if *m.borrow() == Mode::Cut {
                    continue; // dropped: refused
                }
                let rx = m.subscribe();
                tokio::spawn(async move {
                    let Ok(up) = TcpStream::connect(upstream).await else { return };
                    let _ = sock.set_nodelay(true);
                    let _ = up.set_nodelay(true);
                    let (cr, cw) = sock.into_split();
                    let (ur, uw) = up.into_split();
                    // Either direction ending (or a cut) ends both: dropping the halves closes the sockets.
                    tokio::select! {
                        _ = pump(cr, uw, rx.clone()) => {}
                        _ = pump(ur, cw, rx) => {}
                    }
                });
            }
        });
        Ok(Proxy { addr, mode })
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }
}

async fn pump(mut r: impl AsyncReadExt + Unpin, mut w: impl AsyncWriteExt + Unpin, mut mode: watch::Receiver<Mode>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            n = r.read(&mut buf) => match n { Ok(0) | Err(_) => return, Ok(n) => n },
            _ = cut(&mut mode) => return,
        };
        // Hold the chunk as the mode says; a cut drops it.
        loop {
            let m = *mode.borrow_and_update();
            match m {
                Mode::Pass => break,
                Mode::Cut => return,
                Mode::Delay(_) | Mode::Lossy => {
                    let d = if let Mode::Delay(d) = m { d } else { lossy_delay() };
                    tokio::select! {
                        _ = tokio::time::sleep(d) => break,
                        _ = cut(&mut mode) => return,
                    }
                }
                Mode::Freeze => {
                    if mode.changed().await.is_err() {
                        return;
                    }
                }
            }
        }
        if w.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Resolves when the mode becomes `Cut` (or the proxy is gone).
async fn cut(mode: &mut watch::Receiver<Mode>) {
    let mut rx = mode.clone();
    let _ = rx.wait_for(|m| *m == Mode::Cut).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    async fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut b = [0u8; 64];
                    while let Ok(n) = s.read(&mut b).await {
                        if n == 0 || s.write_all(&b[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn roundtrip(s: &mut TcpStream) -> std::io::Result<()> {
        s.write_all(b"x").await?;
        let mut b = [0u8; 1];
        match s.read(&mut b).await? {
            1 => Ok(()),
            _ => Err(std::io::ErrorKind::UnexpectedEof.into()),
        }
    }

    #[tokio::test]
    async fn passes_delays_freezes_and_cuts() {
        let p = Proxy::start("127.0.0.1:0".parse().unwrap(), echo_server().await).await.unwrap();
        let mut s = TcpStream::connect(p.addr).await.unwrap();
        roundtrip(&mut s).await.unwrap();

        p.set(Mode::Delay(Duration::from_millis(100)));
        let t = Instant::now();
        roundtrip(&mut s).await.unwrap();
        assert!(t.elapsed() >= Duration::from_millis(200), "both directions delayed: {:?}", t.elapsed());

        p.set(Mode::Freeze);
        let held = tokio::time::timeout(Duration::from_millis(200), roundtrip(&mut s)).await;
        assert!(held.is_err(), "frozen bytes must not pass");
        p.set(Mode::Pass);
        let mut b = [0u8; 1];
        assert_eq!(s.read(&mut b).await.unwrap(), 1, "held bytes are delivered late on release");

        p.set(Mode::Cut);
        assert!(roundtrip(&mut s).await.is_err(), "the open connection is closed");
        let mut s2 = TcpStream::connect(p.addr).await.unwrap();
        assert!(roundtrip(&mut s2).await.is_err(), "new connections are refused");
        p.set(Mode::Pass);
        let mut s3 = TcpStream::connect(p.addr).await.unwrap();
        roundtrip(&mut s3).await.unwrap();
    }
}
