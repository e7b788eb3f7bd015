//! What `Client::metrics` returns: plain data, the same in every binding (they convert its JSON), and the one
//! mapping from it to metric families that every exporter uses — Prometheus text here, the Python, Node and Java
//! adapters through [`MetricsSnapshot::families`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::histogram::HistogramSnapshot;

/// A client's metrics at one moment. Counters count from the client's creation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricsSnapshot {
    /// The backend's scheme (`redis`, `sqlite`, …), every series' `backend` label.
    pub backend: String,
    /// Whether this client records at all (`ClientOptions::metrics`).
    pub enabled: bool,
    /// Time spent in `lock`/`try_lock`, by outcome: `acquired`, `busy` (a `try_lock` that found it held),
    /// `timeout`, `cancelled` (the caller stopped waiting) and `error`.
    pub acquire_wait: BTreeMap<String, HistogramSnapshot>,
    /// Time from grant to release or loss.
    pub hold_time: HistogramSnapshot,
    /// Grants held now (reentrant holds of one owner count once).
    pub active_leases: u64,
    /// Backend renewals (watchdog and explicit) by outcome: `ok`, `failed`.
    pub renewals: BTreeMap<String, u64>,
    /// Leases lost while held, by reason: `expired` (the TTL passed unrenewed), `taken` (the record was gone or
    /// another's), `unreachable` (no renewal got through within the validity).
    pub lost: BTreeMap<String, u64>,
    /// Fenced writes by outcome: `ok`, `refused` (a stale token), `error`.
    pub fence_writes: BTreeMap<String, u64>,
    /// `lock` calls of this client still waiting, in its local queue or for the backend.
    pub local_queue_depth: u64,
    /// Backend round trips by operation (`acquire`, `renew`, `release`, `force_release`, `inspect`, `fence_write`,
    /// `fence_read`) and outcome (`ok` when the backend answered, refusals included; `error` when it did not).
    pub backend_ops: BTreeMap<String, BTreeMap<String, HistogramSnapshot>>,
    /// Per-lock figures, only for names opted in (`ClientOptions::metrics_names`); names past the cap are summed
    /// under `_other`.
    pub names: BTreeMap<String, NameSnapshot>,
}

/// One lock name's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NameSnapshot {
    /// Time spent in `lock`/`try_lock`, by outcome (the keys of `MetricsSnapshot::acquire_wait`).
    pub acquire_wait: BTreeMap<String, HistogramSnapshot>,
    /// Time from grant to release or loss.
    pub hold_time: HistogramSnapshot,
    /// Grants of this name held now.
    pub active_leases: u64,
    /// Losses of this name, any reason.
    pub lost: u64,
    /// Calls waiting for this name.
    pub local_queue_depth: u64,
}

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FamilyKind {
    Counter,
    Gauge,
    Histogram,
}

/// One metric family: a name, its help, its type and its labelled samples (Prometheus's and OpenMetrics' model).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Family {
    /// The full name (`fencelock_renewals_total`).
    pub name: String,
    pub help: String,
    #[serde(rename = "type")]
    pub kind: FamilyKind,
    pub samples: Vec<Sample>,
}

/// One series of a family: a value for counters and gauges, a histogram for histograms.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub histogram: Option<HistogramSnapshot>,
}

impl Family {
    /// An empty family.
    pub fn new(name: &str, help: &str, kind: FamilyKind) -> Self {
        Family { name: name.to_string(), help: help.to_string(), kind, samples: Vec::new() }
    }

    /// Adds a counter or gauge sample.
    pub fn value(&mut self, labels: &[(&str, &str)], value: f64) -> &mut Self {
        self.samples.push(Sample { labels: label_map(labels), value: Some(value), histogram: None });
        self
    }

    /// Adds a histogram sample.
    pub fn histogram(&mut self, labels: &[(&str, &str)], h: &HistogramSnapshot) -> &mut Self {
        self.samples.push(Sample { labels: label_map(labels), value: None, histogram: Some(h.clone()) });
        self
    }
}

fn label_map(labels: &[(&str, &str)]) -> BTreeMap<String, String> {
    labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

impl MetricsSnapshot {
    /// The snapshot as metric families, every series labelled with `backend`. Per-name series are families of their
    /// own (`fencelock_lock_*`, labelled `lock`), so summing a client-wide family never counts a lock twice.
    pub fn families(&self) -> Vec<Family> {
        let b = self.backend.as_str();
        let mut out = Vec::new();
        let mut f = Family::new(
            "fencelock_acquire_wait_seconds",
            "Time spent in lock/try_lock, by outcome",
            FamilyKind::Histogram,
        );
        for (outcome, h) in &self.acquire_wait {
            f.histogram(&[("backend", b), ("outcome", outcome)], h);
        }
        out.push(f);
        let mut f = Family::new("fencelock_hold_seconds", "Time from grant to release or loss", FamilyKind::Histogram);
        f.histogram(&[("backend", b)], &self.hold_time);
        out.push(f);
        let mut f = Family::new("fencelock_active_leases", "Grants held now", FamilyKind::Gauge);
        f.value(&[("backend", b)], self.active_leases as f64);
        out.push(f);
        out.push(counters("fencelock_renewals_total", "Backend renewals by outcome", b, "outcome", &self.renewals));
        out.push(counters("fencelock_lost_total", "Leases lost while held, by reason", b, "reason", &self.lost));
        out.push(counters(
            "fencelock_fence_writes_total",
            "Fenced writes by outcome",
            b,
            "outcome",
            &self.fence_writes,
        ));
        let mut f = Family::new(
            "fencelock_local_queue_depth",
            "Lock calls still waiting (locally or at the backend)",
            FamilyKind::Gauge,
        );
        f.value(&[("backend", b)], self.local_queue_depth as f64);
        out.push(f);
        let mut f = Family::new(
            "fencelock_backend_op_seconds",
            "Backend round trips by operation and outcome",
            FamilyKind::Histogram,
        );
        for (op, by_outcome) in &self.backend_ops {
            for (outcome, h) in by_outcome {
                f.histogram(&[("backend", b), ("op", op), ("outcome", outcome)], h);
            }
        }
        out.push(f);
        if !self.names.is_empty() {
            out.extend(self.name_families());
        }
        out
    }

    fn name_families(&self) -> Vec<Family> {
        let b = self.backend.as_str();
        let mut wait = Family::new(
            "fencelock_lock_acquire_wait_seconds",
            "Time spent in lock/try_lock per lock name, by outcome",
            FamilyKind::Histogram,
        );
        let mut hold = Family::new(
            "fencelock_lock_hold_seconds",
            "Time from grant to release or loss per lock name",
            FamilyKind::Histogram,
        );
        let mut active =
            Family::new("fencelock_lock_active_leases", "Grants held now per lock name", FamilyKind::Gauge);
        let mut lost = Family::new("fencelock_lock_lost_total", "Leases lost per lock name", FamilyKind::Counter);
        let mut queue = Family::new(
            "fencelock_lock_local_queue_depth",
            "Lock calls still waiting per lock name",
            FamilyKind::Gauge,
        );
        for (name, n) in &self.names {
            let labels = [("backend", b), ("lock", name.as_str())];
            for (outcome, h) in &n.acquire_wait {
                wait.histogram(&[("backend", b), ("lock", name), ("outcome", outcome)], h);
            }
            hold.histogram(&labels, &n.hold_time);
            active.value(&labels, n.active_leases as f64);
            lost.value(&labels, n.lost as f64);
            queue.value(&labels, n.local_queue_depth as f64);
        }
        vec![wait, hold, active, lost, queue]
    }

    /// The snapshot in Prometheus's text exposition format (0.0.4).
    pub fn prometheus_text(&self) -> String {
        prometheus_text(&self.families())
    }

    /// The snapshot as JSON (what the bindings hand their languages).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a snapshot always serialises")
    }
}

fn counters(name: &str, help: &str, backend: &str, label: &str, values: &BTreeMap<String, u64>) -> Family {
    let mut f = Family::new(name, help, FamilyKind::Counter);
    for (k, v) in values {
        f.value(&[("backend", backend), (label, k)], *v as f64);
    }
    f
}

/// Families as JSON, for adapters that rebuild them in their own registry.
pub fn families_json(families: &[Family]) -> String {
    serde_json::to_string(families).expect("families always serialise")
}

/// Renders families in Prometheus's text exposition format (0.0.4).
pub fn prometheus_text(families: &[Family]) -> String {
    let mut out = String::new();
    for f in families {
        let kind = match f.kind {
            FamilyKind::Counter => "counter",
            FamilyKind::Gauge => "gauge",
            FamilyKind::Histogram => "histogram",
        };
        let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(&f.help));
        let _ = writeln!(out, "# TYPE {} {kind}", f.name);
        for s in &f.samples {
            match &s.histogram {
                Some(h) => {
                    for bucket in &h.buckets {
                        let le = if bucket.le.is_finite() { format_number(bucket.le) } else { "+Inf".to_string() };
                        let _ = writeln!(out, "{}_bucket{} {}", f.name, labels(&s.labels, Some(&le)), bucket.count);
                    }
                    let _ = writeln!(out, "{}_sum{} {}", f.name, labels(&s.labels, None), format_number(h.sum));
                    let _ = writeln!(out, "{}_count{} {}", f.name, labels(&s.labels, None), h.count);
                }
                None => {
                    let v = s.value.unwrap_or(0.0);
                    let _ = writeln!(out, "{}{} {}", f.name, labels(&s.labels, None), format_number(v));
                }
            }
        }
    }
    out
}

fn labels(labels: &BTreeMap<String, String>, le: Option<&str>) -> String {
    if labels.is_empty() && le.is_none() {
        return String::new();
    }
    let mut parts: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape_value(v))).collect();
    if let Some(le) = le {
        parts.push(format!("le=\"{le}\""));
    }
    format!("{{{}}}", parts.join(","))
}

fn escape_value(v: &str) -> String {
    v.replace('\\', r"\\").replace('"', "\\\"").replace('\n', r"\n")
}

fn escape_help(v: &str) -> String {
    v.replace('\\', r"\\").replace('\n', r"\n")
}

fn format_number(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 { format!("{}", v as i64) } else { format!("{v}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_escapes_label_values_and_writes_histograms_whole() {
        let mut f = Family::new("x_total", "help with \\ and\nnewline", FamilyKind::Counter);
        f.value(&[("lock", "a\"b\\c\nd")], 3.0);
        let mut h = Family::new("y_seconds", "h", FamilyKind::Histogram);
        h.histogram(&[("backend", "redis")], &HistogramSnapshot::empty());
        let text = prometheus_text(&[f, h]);
        assert!(text.contains("# HELP x_total help with \\\\ and\\nnewline\n"), "{text}");
        assert!(text.contains("x_total{lock=\"a\\\"b\\\\c\\nd\"} 3\n"), "{text}");
        assert!(text.contains("y_seconds_bucket{backend=\"redis\",le=\"0.0001\"} 0\n"), "{text}");
        assert!(text.contains("y_seconds_bucket{backend=\"redis\",le=\"+Inf\"} 0\n"), "{text}");
        assert!(text.contains("y_seconds_count{backend=\"redis\"} 0\n"), "{text}");
    }
}
