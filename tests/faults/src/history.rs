//! One history line: a worker event, a referee decision, a nemesis action or a run phase (README.md lists them).

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::Path;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Event {
    /// `worker`, `referee`, `nemesis` or `run`.
    pub src: String,
    /// Workers: `invoke`, `ok`, `fail`, `info`, `lost`. Referee: `op`. Nemesis: `start`, `stop`. Run: `phase`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Raw CLOCK_MONOTONIC in ns (clock.rs).
    pub t_ref: u64,
    /// Workers: `acquire`, `nested-acquire`, `nested-release`, `renew`, `release`. Referee: `read`, `write`.
    /// Nemesis: the fault. Run: the phase (`start`, `faults`, `heal`, `end`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lang: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The error code (DESIGN.md §5 names) of a `fail`/`info`, or the reason of a `lost`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Referee: the decision per policy, in the order fenced, shadow, cas (also for `before` and `after`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<[bool; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<[i64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<[i64; 3]>,
    /// Nemesis: what was hit (client slots, pids, server names) and how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The rw and semaphore workloads: `read`, `write` or `permit` (workers' acquire events, referee ops); none for
    /// the mutex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<String>,
    /// A semaphore permit's slot (0…permits−1), on the worker's `ok acquire`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u32>,
}

impl Event {
    pub fn new(src: &str, kind: &str, f: &str, t_ref: u64) -> Event {
        Event { src: src.into(), kind: kind.into(), f: Some(f.into()), t_ref, ..Event::default() }
    }

    pub fn is(&self, src: &str, kind: &str, f: &str) -> bool {
        self.src == src && self.kind == kind && self.f.as_deref() == Some(f)
    }
}

/// Reads a history file; a line that does not parse is an error naming the line.
pub fn read(path: &Path) -> Result<Vec<Event>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(serde_json::from_str(&line).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?);
    }
    Ok(out)
}

/// Writes the events in `t_ref` order (stable: the referee's own order is kept for equal stamps).
pub fn write(path: &Path, events: &mut [Event]) -> std::io::Result<()> {
    events.sort_by_key(|e| e.t_ref);
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    for e in events.iter() {
        serde_json::to_writer(&mut w, e)?;
        w.write_all(b"\n")?;
    }
    w.flush()
}
