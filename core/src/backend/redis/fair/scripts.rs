//! The fair queue's Lua, on Redisson RFairLock's keys: list `redisson_lock_queue:{name}` (waiters in arrival order),
//! zset `redisson_lock_timeout:{name}` (each waiter's timeout, epoch ms, in Redisson's scheme), one channel per
//! waiter `redisson_lock__channel:{name}:<holder>`; and fencelock's own zset `fencelock_queue_deadline:{name}`, the
//! deadlines of fencelock's waiters.
//!
//! Deadlines are read against the server's clock (`TIME`), never a client's: Redisson compares them with the
//! caller's clock, so one client whose clock runs ahead prunes live waiters and one that runs behind keeps dead ones
//! (the deadlocks of redisson #2883 and #3730). A fencelock waiter's deadline is its own TTL from its last attempt,
//! and a live waiter attempts at least every third of it: a crashed waiter blocks the queue for at most one TTL, as a
//! crashed holder does. Only the head is pruned, as Redisson does: a dead waiter further back is pruned when it
//! reaches the head, so it costs the same once. A Redisson waiter (absent from our zset) is pruned by its Redisson
//! timeout, read on the server clock too.
//!
//! Why a zset of our own: Redisson's timeouts are relative to the queue, not a liveness lease. A new waiter's is the
//! last waiter's plus Redisson's `threadWaitTime` (5 min by default), and every Redisson acquire subtracts that from
//! every waiter's. A fencelock deadline stored there would be pushed into the past by the first Redisson acquire, and
//! Redisson would prune the live waiter. So in Redisson's zset we write what a Redisson waiter would (and raise it
//! to now + 5 min on each refresh), and keep the liveness deadline here.

use crate::backend::redis::NEXT_TOKEN;

/// Redisson's default `threadWaitTime`, the step of its timeouts.
const REDISSON_WAIT_MS: u64 = 300_000;

/// Lua that defines `clock()` (the server clock in ms, read once and only if needed: the uncontended path never
/// reads it), `due(w)` (a waiter's deadline: ours, else its Redisson timeout), `drop(w)`, `pop()` (the head) and
/// `prune()`, and runs `prune()`: it pops every head waiter whose deadline has passed, or that has none (an entry
/// half-removed), and leaves the live head in `head`.
/// KEYS[3]: queue, KEYS[4]: Redisson's timeouts, KEYS[5]: our deadlines.
const PRUNE: &str = r"
local t, now
local function clock()
  if not now then
    t = redis.call('time')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end
local function due(w)
  return tonumber(redis.call('zscore', KEYS[5], w)) or tonumber(redis.call('zscore', KEYS[4], w))
end
local function drop(w)
  redis.call('zrem', KEYS[4], w)
  redis.call('zrem', KEYS[5], w)
end
local head
local function pop()
  redis.call('lpop', KEYS[3])
  drop(head)
end
local function prune()
  head = redis.call('lindex', KEYS[3], 0)
  while head do
    local d = due(head)
    if d and d > clock() then break end
    pop()
    head = redis.call('lindex', KEYS[3], 0)
  end
end
prune()
";

/// Lua that wakes the live head waiter [`PRUNE`] found, if any, on its own channel (`publish` is the deployment's
/// command), else the waiters of the free-for-all on the shared one. KEYS[2]: shared channel.
fn wake(publish: &str) -> String {
    format!(
        r"
if head then
  redis.call('{publish}', KEYS[2] .. ':' .. head, 0)
else
  redis.call('{publish}', KEYS[2], 0)
end
"
    )
}

/// Drops head entries of this client's other owners first: the local queue lets one call per client and name reach
/// the server at a time, so any such entry is a call that ended and whose leave is still on its way.
/// Takes the lock if it is ours (a grant whose reply was lost), or free with nobody queued ahead; else, when
/// ARGV[3] is not 0, queues the caller once (refreshing its deadline to now + ARGV[3] ms). The token is drawn as in
/// the free-for-all's script ([`NEXT_TOKEN`]). KEYS: lock, token counter, queue, Redisson's timeouts, our deadlines.
/// ARGV: ttl ms, holder, place ms. Returns {1, token}, or {0, ms worth waiting before the next look, 0-based place or -1 if not queued}: the
/// holder's TTL or, if sooner, the time until another head's deadline (a live head refreshes long before it, so
/// this wakes the next waiter only when the head seems dead).
pub(super) fn acquire() -> String {
    format!(
        r"{PRUNE}
local me = string.match(ARGV[2], '^[^:]*:') or ARGV[2]
while head and head ~= ARGV[2] and string.sub(head, 1, #me) == me do
  pop()
  prune()
end
local mine = redis.call('hexists', KEYS[1], ARGV[2]) == 1
if mine or (redis.call('exists', KEYS[1]) == 0 and (not head or head == ARGV[2])) then
  if head then
    redis.call('lrem', KEYS[3], 0, ARGV[2])
    drop(ARGV[2])
  end
{NEXT_TOKEN}  redis.call('del', KEYS[1])
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {{1, token}}
end
local wait = redis.call('pttl', KEYS[1])
local place = redis.call('lpos', KEYS[3], ARGV[2])
if tonumber(ARGV[3]) > 0 then
  redis.call('zadd', KEYS[5], clock() + tonumber(ARGV[3]), ARGV[2])
  if place then
    redis.call('zadd', KEYS[4], 'GT', clock() + {REDISSON_WAIT_MS}, ARGV[2])
  else
    local last = redis.call('lindex', KEYS[3], -1)
    local base = (last and tonumber(redis.call('zscore', KEYS[4], last))) or (clock() + math.max(wait, 0))
    redis.call('zadd', KEYS[4], base + {REDISSON_WAIT_MS}, ARGV[2])
    place = redis.call('rpush', KEYS[3], ARGV[2]) - 1
  end
end
if head and head ~= ARGV[2] then
  local left = due(head) - clock()
  if wait < 0 or left < wait then wait = left end
end
return {{0, wait, place or -1}}
"
    )
}

/// Compare-and-delete for both orders: wakes only the queue's head when one waits, else the free-for-all's
/// waiters (Redisson's RFairLock wakes the head only; its RLock the shared channel only). KEYS: lock, shared
/// channel, queue, Redisson's timeouts, our deadlines. ARGV: holder. 1 if deleted, 0 if not ours.
pub(in crate::backend::redis) fn release(publish: &str) -> String {
    format!(
        r"
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('del', KEYS[1])
{PRUNE}{wake}
return 1
",
        wake = wake(publish)
    )
}

/// What a waiter that leaves undoes: its queue entry, and with ARGV[2] = 1 (an attempt in doubt) the record it may
/// have taken. If the lock is then free, the next head is woken, since this waiter may have been the one woken.
/// KEYS: lock, shared channel, queue, Redisson's timeouts, our deadlines. ARGV: holder, in doubt.
pub(super) fn leave(publish: &str) -> String {
    format!(
        r"
redis.call('lrem', KEYS[3], 0, ARGV[1])
redis.call('zrem', KEYS[4], ARGV[1])
redis.call('zrem', KEYS[5], ARGV[1])
if ARGV[2] == '1' and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('del', KEYS[1])
end
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
{PRUNE}{wake}
return 1
",
        wake = wake(publish)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_publish_with_the_deployments_command() {
        for script in [release("spublish"), leave("spublish")] {
            assert!(script.contains("redis.call('spublish', KEYS[2] .. ':' .. head, 0)"), "{script}");
            assert!(!script.contains("'publish'"), "{script}");
            assert!(!script.contains("{{"), "{script}");
        }
        assert!(!acquire().contains("{{"));
    }
}
