//! The referee: the protected resource, in the orchestrator's process and never faulted. Every request is applied
//! three ways (SAFETY-TESTING.md §2.3) and logged with its decisions:
//! - `fenced`: reads and writes pass iff `token ≥ max_token`, which they raise (the read must raise it too, §4); a
//!   write the SDK's own register on the backend refused (`fenced: false`, the worker's report of its answer) is
//!   refused here too; an accepted or unknown answer (`true`, absent or null) leaves the order's view. The
//!   checker's stale-write check runs on the registers' answers themselves;
//! - `shadow`: everything passes — what a resource without fencing would have done;
//! - `cas`: a read claims the register (`owner = token`); a write passes iff `owner == token`.
//!
//! Protocol (JSON lines over TCP, one reply per request):
//! `{"op":"read"|"write","key":K,"client":C,"session":S,"token":T,"values":[f,s,c],"fenced":B}` (values and
//! fenced: writes only; fenced defaults to true)
//! → `{"ok":[f,s,c],"values":[f,s,c]}` (the register values after the request).

use crate::clock::t_ref;
use crate::history::Event;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

#[derive(Debug, Deserialize)]
pub struct Request {
    pub op: String,
    pub key: String,
    pub client: String,
    pub session: String,
    pub token: u64,
    #[serde(default)]
    pub values: Option<[i64; 3]>,
    /// The rw workload's `read`/`write` (readers of one run share a token and may interleave), logged for the checker.
    #[serde(default)]
    pub hold: Option<String>,
    /// Whether the SDK's Fence register accepted this write (workers write there first); `None`: not known.
    #[serde(default)]
    pub fenced: Option<bool>,
}

#[derive(Debug, Default, Clone)]
struct Registers {
    max_token: u64,
    owner: u64,
    values: [i64; 3],
}

/// The registers of every key; `apply` is the whole policy.
#[derive(Debug, Default)]
pub struct Referee {
    keys: HashMap<String, Registers>,
}

impl Referee {
    /// Decides and applies one request; returns its log event.
    pub fn apply(&mut self, req: &Request, now: u64) -> Event {
        let reg = self.keys.entry(req.key.clone()).or_default();
        let before = reg.values;
        let fenced = req.token >= reg.max_token;
        let ok = match req.op.as_str() {
            "read" => {
                if fenced {
                    reg.max_token = req.token;
                }
                reg.owner = req.token;
                [fenced, true, true]
            }
            "write" => {
                let fenced = fenced && req.fenced != Some(false);
                let ok = [fenced, true, reg.owner == req.token];
                if fenced {
                    reg.max_token = req.token;
                }
                let new = req.values.unwrap_or(before);
                for p in 0..3 {
                    if ok[p] {
                        reg.values[p] = new[p];
                    }
                }
                ok
            }
            _ => [false; 3],
        };
        let mut e = Event::new("referee", "op", &req.op, now);
        e.client = Some(req.client.clone());
        e.session = Some(req.session.clone());
        e.token = Some(req.token);
        e.ok = Some(ok);
        e.before = Some(before);
        e.after = Some(reg.values);
        e.detail = Some(req.key.clone());
        e.hold = req.hold.clone();
        e
    }
}

/// Serves the referee on `listener` until the task is dropped; every decision is appended to `log`.
pub async fn serve(listener: TcpListener, log: Arc<Mutex<Vec<Event>>>) {
    let referee = Arc::new(Mutex::new(Referee::default()));
    loop {
        let Ok((sock, _)) = listener.accept().await else { continue };
        let (referee, log) = (referee.clone(), log.clone());
        tokio::spawn(async move {
            let (r, mut w) = sock.into_split();
            let mut lines = BufReader::new(r).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let reply = match serde_json::from_str::<Request>(&line) {
                    Ok(req) => {
                        // One lock for decision, stamp and log: the log order is the decision order.
                        let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                        let e = referee.lock().unwrap_or_else(|p| p.into_inner()).apply(&req, t_ref());
                        let reply = serde_json::json!({ "ok": e.ok, "values": e.after });
                        log.push(e);
                        reply
                    }
                    Err(err) => serde_json::json!({ "error": format!("bad request: {err}") }),
                };
                let mut out = reply.to_string();
                out.push('\n');
                if w.write_all(out.as_bytes()).await.is_err() {
                    break;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(op: &str, token: u64, values: Option<[i64; 3]>) -> Request {
        Request {
            op: op.into(),
            key: "k".into(),
            client: "c".into(),
            session: format!("s{token}"),
            token,
            values,
            hold: None,
            fenced: None,
        }
    }

    #[test]
    fn a_read_raises_the_fence_so_a_stale_write_is_rejected_but_shadowed() {
        let mut r = Referee::default();
        assert_eq!(r.apply(&req("read", 5, None), 1).ok, Some([true, true, true]));
        assert_eq!(r.apply(&req("read", 6, None), 2).ok, Some([true, true, true]));
        // Token 5 writes after 6 read: fenced and cas reject it, the shadow takes it.
        let e = r.apply(&req("write", 5, Some([1, 1, 1])), 3);
        assert_eq!(e.ok, Some([false, true, false]));
        assert_eq!(e.after, Some([0, 1, 0]));
        let e = r.apply(&req("write", 6, Some([1, 2, 1])), 4);
        assert_eq!(e.ok, Some([true, true, true]));
        assert_eq!(e.after, Some([1, 2, 1]));
        // A stale read is refused by the fence alone; cas lets anyone claim.
        assert_eq!(r.apply(&req("read", 4, None), 5).ok, Some([false, true, true]));
        // A write the SDK's register refused is refused here too, whatever the order says.
        let refused = Request { fenced: Some(false), ..req("write", 6, Some([2, 3, 2])) };
        assert_eq!(r.apply(&refused, 6).ok, Some([false, true, false]));
    }
}
