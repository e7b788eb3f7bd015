//! This process's resident memory and CPU time, read from /proc (Linux only; the benchmark targets the CI host).

use std::time::Duration;

use crate::BoxResult;

/// Clock ticks per second of /proc/*/stat times: USER_HZ, fixed at 100 in the Linux user ABI.
const USER_HZ: u64 = 100;

/// Resident set size in bytes (VmRSS of /proc/self/status).
pub fn rss_bytes() -> BoxResult<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).ok_or("/proc/self/status has no VmRSS line")?;
    let kib: u64 = line.split_whitespace().nth(1).ok_or("VmRSS line has no value")?.parse()?;
    Ok(kib * 1024)
}

/// User + system CPU time of every thread of this process so far (utime + stime of /proc/self/stat).
pub fn cpu_time() -> BoxResult<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The command name may hold spaces; fields are counted from after its closing parenthesis (field 3 = index 0).
    let rest = stat.rsplit_once(')').ok_or("/proc/self/stat has no ')'")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> BoxResult<u64> { Ok(fields.get(i).ok_or("/proc/self/stat is short")?.parse()?) };
    // utime is field 14 and stime field 15 of proc(5).
    let total = ticks(11)? + ticks(12)?;
    Ok(Duration::from_millis(total * 1000 / USER_HZ))
}
