//! Metrics for JS: the snapshot and its metric families as core's own JSON, which node/index.js and
//! node/prometheus.js only convert, so the mapping to families stays core's alone.

use fencelock::Client;
use fencelock::metrics::{HistogramSnapshot, NameSnapshot, families_json};

/// Core's families of `client`'s snapshot now, as JSON. Core lists the per-name families once some name has series;
/// for a client that opted names in (`named`) they are listed from the start, without samples, because prom-client
/// registers every family up front.
pub(crate) fn families(client: &Client, named: bool) -> String {
    let snapshot = client.metrics();
    let mut families = snapshot.families();
    if named && snapshot.names.is_empty() {
        let mut probe = snapshot.clone();
        let empty = NameSnapshot {
            acquire_wait: snapshot.acquire_wait.keys().map(|k| (k.clone(), HistogramSnapshot::empty())).collect(),
            hold_time: HistogramSnapshot::empty(),
            active_leases: 0,
            lost: 0,
            local_queue_depth: 0,
        };
        probe.names.insert(String::new(), empty);
        for mut family in probe.families() {
            if !families.iter().any(|f| f.name == family.name) {
                family.samples.clear();
                families.push(family);
            }
        }
    }
    families_json(&families)
}
