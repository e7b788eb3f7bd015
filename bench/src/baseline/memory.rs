//! Raw in-process limit: a map behind a mutex for the cycle, and a task-to-task wake-up for the round trip (a
//! hand-off inside one process cannot beat waking the next task).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::BoxResult;
use crate::stats::{Samples, timed};

#[derive(Debug, Default)]
pub struct MemoryRaw {
    map: Mutex<HashMap<String, String>>,
}

impl MemoryRaw {
    pub async fn cycles(&self, span: Duration) -> BoxResult<Samples> {
        timed(span, || async {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            let took = map.insert("bench".to_string(), "raw-holder".to_string()).is_none();
            let freed = map.remove("bench").is_some_and(|h| h == "raw-holder");
            if !(took && freed) {
                return Err("raw memory cycle found the key taken".into());
            }
            Ok(())
        })
        .await
    }

    pub async fn round_trips(&self, n: usize) -> BoxResult<Samples> {
        let (ping_tx, mut ping_rx) = mpsc::channel::<Instant>(1);
        let (pong_tx, mut pong_rx) = mpsc::channel::<Instant>(1);
        let echo = tokio::spawn(async move {
            while let Some(t) = ping_rx.recv().await {
                if pong_tx.send(t).await.is_err() {
                    break;
                }
            }
        });
        let start = Instant::now();
        let mut lat = Vec::with_capacity(n);
        for _ in 0..n {
            ping_tx.send(Instant::now()).await?;
            let sent = pong_rx.recv().await.ok_or("echo task ended")?;
            lat.push(sent.elapsed());
        }
        drop(ping_tx);
        echo.await?;
        Ok(Samples::from_vec(lat, start.elapsed()))
    }
}
