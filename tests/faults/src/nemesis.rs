//! The fault menu, the profiles, and the seeded schedule (SAFETY-TESTING.md §3). Durations are multiples of the TTL,
//! so every backend gets the same pressure; about one fault in five is shorter than the TTL, as a control.

use crate::servers::Backend;
use rand::{Rng, rngs::StdRng, seq::SliceRandom};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    /// Client pauses only: violations without fencing must show, or the faults do not bite.
    Canary,
    /// Every fault that applies to the backend (each at least once), 38 s of faults.
    Ci,
    /// The same menu for longer, on demand.
    Soak,
    /// The ci menu with two faults at once: each step runs with a background fault on the links or the clock of a
    /// client (delay, loss, freeze, clock jump) for at least a TTL.
    Mixed,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Canary => "canary",
            Profile::Ci => "ci",
            Profile::Soak => "soak",
            Profile::Mixed => "mixed",
        }
    }

    /// How long the fault phase lasts.
    pub fn fault_phase(self) -> Duration {
        match self {
            Profile::Canary => Duration::from_secs(20),
            Profile::Ci => Duration::from_secs(38),
            Profile::Soak => Duration::from_secs(600),
            Profile::Mixed => Duration::from_secs(38),
        }
    }

    pub fn faults(self, backend: Backend) -> Vec<Fault> {
        use Fault::*;
        if self == Profile::Canary {
            return vec![ClientPause];
        }
        let mut f = vec![ClientPause, ClientKill, ClockJump];
        if backend != Backend::Sqlite {
            f.extend([ServerKill, ServerKillDelayed]);
        }
        // Behind Sentinel a paused master is the master-pause fault.
        if !matches!(backend, Backend::Sqlite | Backend::RedisSentinel) {
            f.push(ServerPause);
        }
        if backend.proxied() {
            f.extend([ProxyDelay, ProxyFreeze, ProxyCut, ProxyLossy]);
        }
        if backend == Backend::RedisSentinel {
            f.extend([SentinelFailover, MasterPause]);
        }
        if backend.has_leader() {
            f.push(LeaderKill);
        }
        if backend.skewable().is_some() {
            f.push(ServerClockJump);
        }
        if matches!(backend, Backend::Mysql | Backend::Postgres) {
            f.push(ConnKill);
        }
        f
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGSTOP the holder's process group, SIGCONT after the duration.
    ClientPause,
    /// SIGKILL the holder's process group; a fresh worker takes its slot.
    ClientKill,
    /// Jump the clock of a libfaketime'd client (Rust or Python) by ±2×TTL, back after the duration.
    ClockJump,
    /// SIGKILL a server member and restart it at once (data not persisted: lost).
    ServerKill,
    /// SIGSTOP a server member (every process of it), mostly past the TTL, then SIGCONT: a server that hangs, keeps
    /// its clients' connections open and answers nothing, then carries on with its clock moved on.
    ServerPause,
    /// SIGKILL a server member and restart it after ≥ TTL (the Redlock delayed-restart case).
    ServerKillDelayed,
    /// Redlock: jump the wall clocks of one instance, or of a minority, forward by 2×TTL (the clockskew.c shim), back
    /// after the duration. Forward is the direction that hurts: their keys expire at once, so another client may take those
    /// instances, and only the majority that still holds the key keeps the lock single.
    ServerClockJump,
    /// SIGKILL the etcd or ZooKeeper leader, restart it after up to 1.5×TTL.
    LeaderKill,
    /// Delay every chunk on the holder's links by 0.3–1×TTL.
    ProxyDelay,
    /// Hold everything on the holder's links, deliver it late.
    ProxyFreeze,
    /// Close the holder's connections and refuse new ones (a client partition).
    ProxyCut,
    /// Jitter and loss on the holder's links (proxy::Mode::Lossy).
    ProxyLossy,
    /// MySQL and PostgreSQL: the server ends every client connection (`KILL <id>`, `pg_terminate_backend`), as an
    /// administrator or a failover would.
    ConnKill,
    /// Sentinel: SIGKILL the master, let the sentinels promote a replica, restart the old one as its replica.
    SentinelFailover,
    /// Sentinel: SIGSTOP the master past the down-after time, so the sentinels fail over while it still holds its
    /// clients' connections; SIGCONT it (the sentinels demote it).
    MasterPause,
}

impl Fault {
    pub const ALL: [Fault; 15] = [
        Fault::ClientPause,
        Fault::ClientKill,
        Fault::ClockJump,
        Fault::ServerClockJump,
        Fault::ServerKill,
        Fault::ServerPause,
        Fault::ServerKillDelayed,
        Fault::LeaderKill,
        Fault::ProxyDelay,
        Fault::ProxyFreeze,
        Fault::ProxyCut,
        Fault::ProxyLossy,
        Fault::ConnKill,
        Fault::SentinelFailover,
        Fault::MasterPause,
    ];

    pub fn parse(name: &str) -> Result<Fault, String> {
        Fault::ALL.into_iter().find(|f| f.name() == name).ok_or_else(|| {
            let names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
            format!("unknown fault {name:?} (one of {})", names.join(", "))
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Fault::ClientPause => "client-pause",
            Fault::ClientKill => "client-kill",
            Fault::ClockJump => "clock-jump",
            Fault::ServerClockJump => "server-clock-jump",
            Fault::ServerKill => "server-kill",
            Fault::ServerPause => "server-pause",
            Fault::ServerKillDelayed => "server-kill-delayed",
            Fault::LeaderKill => "leader-kill",
            Fault::ProxyDelay => "proxy-delay",
            Fault::ProxyFreeze => "proxy-freeze",
            Fault::ProxyCut => "proxy-cut",
            Fault::ProxyLossy => "proxy-lossy",
            Fault::ConnKill => "conn-kill",
            Fault::SentinelFailover => "sentinel-failover",
            Fault::MasterPause => "master-pause",
        }
    }

    /// Faults that make the sentinels fail over (the checker's failover windows).
    pub fn fails_over(name: &str) -> bool {
        name == Fault::SentinelFailover.name() || name == Fault::MasterPause.name()
    }
}

/// One planned fault: what, how long it lasts, the pause after it, and a free choice for its parameters.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub fault: Fault,
    pub duration: Duration,
    pub gap: Duration,
    /// In [0, 1): picks the target, the jump direction, the delay.
    pub pick: f64,
    /// The mixed profile: the fault that runs in the background of this one.
    pub also: Option<Fault>,
}

/// The faults that can run in the background of another (the mixed profile): a client's links or clock.
pub const BACKGROUND: [Fault; 4] = [Fault::ProxyDelay, Fault::ProxyLossy, Fault::ProxyFreeze, Fault::ClockJump];

/// The mixed profile's pairs: each step gets a background fault of the menu other than itself.
pub fn pair_up(rng: &mut StdRng, steps: &mut [Step], menu: &[Fault]) {
    let background: Vec<Fault> = BACKGROUND.into_iter().filter(|f| menu.contains(f)).collect();
    for step in steps {
        let others: Vec<Fault> = background.iter().copied().filter(|&f| f != step.fault).collect();
        step.also = (!others.is_empty()).then(|| others[rng.random_range(0..others.len())]);
    }
}

/// The seeded schedule: the menu in a shuffled order, again and again, until `phase` is used up — so a run long enough
/// for the menu gets every fault once.
pub fn schedule(rng: &mut StdRng, menu: &[Fault], ttl: Duration, phase: Duration) -> Vec<Step> {
    let mut out = Vec::new();
    let mut used = Duration::ZERO;
    let mut round: Vec<Fault> = Vec::new();
    while used < phase && !menu.is_empty() {
        if round.is_empty() {
            round = menu.to_vec();
            round.shuffle(rng);
        }
        let fault = round.pop().expect("refilled");
        let factor = match fault {
            Fault::ServerKill | Fault::ClientKill | Fault::ConnKill => 0.0,
            Fault::ServerKillDelayed => rng.random_range(1.2..2.0),
            Fault::LeaderKill => rng.random_range(0.0..1.5),
            // How long the killed master stays down after the promotion.
            Fault::SentinelFailover => rng.random_range(0.5..1.5),
            _ if rng.random_bool(0.2) => rng.random_range(0.2..0.6), // a control: shorter than the TTL
            _ => rng.random_range(1.2..2.0),
        };
        let step = Step {
            fault,
            duration: ttl.mul_f64(factor),
            gap: Duration::from_millis(rng.random_range(500..1500)),
            pick: rng.random_range(0.0..1.0),
            also: None,
        };
        used += step.duration + step.gap;
        out.push(step);
    }
    out
}

/// The canary's extra fault once its schedule is used up without a violation: its menu's first fault (a client pause
/// unless `--faults` says otherwise) for 1.2–2.5×TTL, always longer than the TTL (no control), so a holder's lock
/// expires mid-critical-section.
pub fn canary_step(rng: &mut StdRng, ttl: Duration, fault: Fault) -> Step {
    Step {
        fault,
        duration: ttl.mul_f64(rng.random_range(1.2..2.5)),
        gap: Duration::from_millis(rng.random_range(500..1500)),
        pick: rng.random_range(0.0..1.0),
        also: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_schedule_is_a_function_of_the_seed_and_fills_the_phase() {
        let ttl = Duration::from_secs(2);
        let menu = Profile::Ci.faults(Backend::Etcd);
        for seed in 0..20 {
            let a = schedule(&mut StdRng::seed_from_u64(seed), &menu, ttl, Profile::Ci.fault_phase());
            let b = schedule(&mut StdRng::seed_from_u64(seed), &menu, ttl, Profile::Ci.fault_phase());
            assert_eq!(format!("{a:?}"), format!("{b:?}"));
            let total: Duration = a.iter().map(|s| s.duration + s.gap).sum();
            assert!(total >= Profile::Ci.fault_phase(), "{a:?}");
            assert!(menu.iter().all(|f| a.iter().any(|s| s.fault == *f)), "seed {seed}: not every fault: {a:?}");
        }
        assert!(menu.contains(&Fault::LeaderKill));
        assert!(!Profile::Ci.faults(Backend::Sqlite).contains(&Fault::ServerKill));
        assert!(Profile::Ci.faults(Backend::Mysql).contains(&Fault::ConnKill));
        assert!(Profile::Ci.faults(Backend::Postgres).contains(&Fault::ConnKill));
        assert!(!Profile::Ci.faults(Backend::Redis).contains(&Fault::ConnKill));
        assert_eq!(Profile::Canary.faults(Backend::Redis), vec![Fault::ClientPause]);
        let sentinel = Profile::Ci.faults(Backend::RedisSentinel);
        assert!(sentinel.contains(&Fault::SentinelFailover) && sentinel.contains(&Fault::MasterPause));
        assert!(!sentinel.iter().any(|f| matches!(f, Fault::ProxyDelay | Fault::ProxyFreeze | Fault::ProxyCut)));
        assert!(!Profile::Ci.faults(Backend::Redis).contains(&Fault::SentinelFailover));
        assert!(!Profile::Ci.faults(Backend::Redis).contains(&Fault::ServerClockJump));
        assert!(Profile::Ci.faults(Backend::Redlock5).contains(&Fault::ServerClockJump));
        assert!(Profile::Ci.faults(Backend::Postgres).contains(&Fault::ServerPause));
        assert!(!sentinel.contains(&Fault::ServerPause), "behind Sentinel a paused master is master-pause");
        let cluster = Profile::Ci.faults(Backend::RedisCluster);
        assert!(cluster.contains(&Fault::ServerKill) && cluster.contains(&Fault::ServerPause));
        assert!(!cluster.contains(&Fault::ProxyCut), "cluster clients follow the nodes' own addresses: no proxies");
        for seed in 0..20 {
            let a = schedule(&mut StdRng::seed_from_u64(seed), &sentinel, ttl, Profile::Ci.fault_phase());
            assert!(sentinel.iter().all(|f| a.iter().any(|s| s.fault == *f)), "seed {seed}: not every fault: {a:?}");
        }
    }

    #[test]
    fn mixed_steps_pair_each_fault_with_another_in_the_background() {
        let ttl = Duration::from_secs(2);
        let menu = Profile::Mixed.faults(Backend::Etcd);
        let mut rng = StdRng::seed_from_u64(9);
        let mut steps = schedule(&mut rng, &menu, ttl, Profile::Mixed.fault_phase());
        pair_up(&mut rng, &mut steps, &menu);
        for s in &steps {
            let also = s.also.expect("etcd's menu has background faults");
            assert!(also != s.fault && BACKGROUND.contains(&also), "{s:?}");
        }
        // No proxies, no clocks in the menu: nothing to pair with.
        let mut steps = schedule(&mut rng, &[Fault::ServerKill], ttl, Profile::Mixed.fault_phase());
        pair_up(&mut rng, &mut steps, &[Fault::ServerKill]);
        assert!(steps.iter().all(|s| s.also.is_none()));
    }

    #[test]
    fn the_canarys_extra_pauses_outlast_the_ttl() {
        let ttl = Duration::from_secs(2);
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..100 {
            let s = canary_step(&mut rng, ttl, Fault::ClientPause);
            assert_eq!(s.fault, Fault::ClientPause);
            assert!(s.duration > ttl, "{s:?}");
        }
    }
}
