//! Deliberate bugs for the mutation check (tests/mutants/run.sh), which builds core with one of them at a time and
//! requires the server-free tests to catch each. The compile-time variable `FENCELOCK_MUTANT` names the bug; in every
//! normal build it is unset, so `active` is a constant `false` and each one-line hook compiles away.

/// The bugs a build may carry; tests/mutants/run.sh lists the same names.
pub(crate) const MUTANTS: [&str; 9] = [
    "release_skips_holder_check",
    "renew_extends_lost_lease",
    "fence_accepts_older_token",
    "abort_leaves_record",
    "watchdog_renews_at_ttl",
    "shared_hold_keeps_gate",
    "upgrade_allowed",
    "readers_pass_waiting_writers",
    "lost_check_ignores_validity",
];

const CHOSEN: Option<&str> = match option_env!("FENCELOCK_MUTANT") {
    Some(chosen) if !chosen.is_empty() => Some(chosen),
    _ => None,
};

// A misspelt mutant would build a correct core and "survive": refuse to build instead.
const _: () = assert!(CHOSEN.is_none() || known(CHOSEN), "FENCELOCK_MUTANT names no mutant of core/src/mutant.rs");

/// Whether this build carries the bug `name` (one of `MUTANTS`).
pub(crate) const fn active(name: &str) -> bool {
    match CHOSEN {
        Some(chosen) => same(chosen, name),
        None => false,
    }
}

const fn known(chosen: Option<&str>) -> bool {
    let Some(chosen) = chosen else { return false };
    let mut i = 0;
    while i < MUTANTS.len() {
        if same(MUTANTS[i], chosen) {
            return true;
        }
        i += 1;
    }
    false
}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
