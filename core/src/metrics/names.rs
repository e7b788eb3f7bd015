//! Per-lock-name series, only for the names a user opts in: lock names are unbounded, a metrics backend's series are
//! not. Even `MetricsNames::All` keeps at most `MAX_NAMED_SERIES` names; later ones share the `_other` series.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::histogram::Histogram;
use super::snapshot::NameSnapshot;
use super::{gauge, outcomes};

/// Most distinct lock names a client keeps series for.
pub const MAX_NAMED_SERIES: usize = 1000;
/// The name under which the names past the cap are summed.
pub const OTHER_NAMES: &str = "_other";

/// Which lock names get series of their own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum MetricsNames {
    /// None: only client-wide series (the default).
    #[default]
    None,
    /// Every name, up to `MAX_NAMED_SERIES`.
    All,
    /// These names only.
    Only(BTreeSet<String>),
}

#[derive(Debug, Default)]
pub(crate) struct NameStats {
    pub(crate) acquire: [Histogram; 5],
    pub(crate) hold: Histogram,
    pub(crate) active: AtomicI64,
    pub(crate) lost: AtomicU64,
    pub(crate) waiting: AtomicI64,
}

#[derive(Debug)]
pub(crate) struct Names {
    policy: MetricsNames,
    table: Mutex<HashMap<String, Arc<NameStats>>>,
}

impl Names {
    pub(crate) fn new(policy: MetricsNames) -> Self {
        Names { policy, table: Mutex::default() }
    }

    /// The series of `name`, if it has one.
    pub(crate) fn stats(&self, name: &str) -> Option<Arc<NameStats>> {
        match &self.policy {
            MetricsNames::None => return None,
            MetricsNames::Only(allowed) if !allowed.contains(name) => return None,
            _ => {}
        }
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = table.get(name) {
            return Some(s.clone());
        }
        // The cap counts real names; `_other` is the one extra series.
        let key = if table.len() - usize::from(table.contains_key(OTHER_NAMES)) < MAX_NAMED_SERIES {
            name
        } else {
            OTHER_NAMES
        };
        Some(table.entry(key.to_string()).or_default().clone())
    }

    pub(crate) fn snapshot(&self) -> BTreeMap<String, NameSnapshot> {
        let table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        table
            .iter()
            .map(|(name, s)| {
                let snap = NameSnapshot {
                    acquire_wait: outcomes(&s.acquire),
                    hold_time: s.hold.snapshot(),
                    active_leases: gauge(&s.active),
                    lost: s.lost.load(Ordering::Relaxed),
                    local_queue_depth: gauge(&s.waiting),
                };
                (name.clone(), snap)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kept_only_when_opted_in_and_capped() {
        assert!(Names::new(MetricsNames::None).stats("a").is_none());
        let only = Names::new(MetricsNames::Only(BTreeSet::from(["a".to_string()])));
        assert!(only.stats("a").is_some() && only.stats("b").is_none());
        let all = Names::new(MetricsNames::All);
        for i in 0..MAX_NAMED_SERIES + 50 {
            all.stats(&format!("n{i}"));
        }
        let snap = all.snapshot();
        assert_eq!(snap.len(), MAX_NAMED_SERIES + 1);
        assert!(snap.contains_key(OTHER_NAMES) && snap.contains_key("n0") && !snap.contains_key("n1020"));
        // A name seen before the cap keeps its own series.
        assert!(Arc::ptr_eq(&all.stats("n0").unwrap(), &all.stats("n0").unwrap()));
    }
}
