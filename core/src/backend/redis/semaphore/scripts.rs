//! The semaphore's Lua, on Redisson `RPermitExpirableSemaphore`'s layout plus three keys of fencelock's own.
//!
//! Every script takes the same keys, all in the semaphore's hash slot:
//!
//! | KEYS | key | whose |
//! |---|---|---|
//! | 1 | `<name>`: string, the permits available now (`trySetPermits` sets it) | Redisson's |
//! | 2 | `{<name>}:timeout`: zset of permit ids (ours: the holder id) → expiry (ms since the epoch) | Redisson's |
//! | 3 | `redisson_sc:{<name>}`: the channel; messages are the new count | Redisson's |
//! | 4 | `fencelock_sem_slots:{<name>}`: hash slot (0…N−1) → the permit id occupying it | ours |
//! | 5 | `fencelock_sem_tokens:{<name>}`: hash slot → the slot's fence counter | ours |
//! | 6 | `fencelock_sem_permits:{<name>}`: N, the number of permits every client agreed on | ours |
//!
//! A permit expires server-side as Redisson's do: any script that looks first returns the permits whose expiry
//! passed (zset score ≤ now) to the count, and publishes the count. Expiries are the server's clock here (Redisson
//! writes its client's); a permit of a Redisson client counts against N but occupies no slot. A slot is free when
//! no live permit id in the zset maps to it. A slot's token is `max(counter + 1, server µs, start floor)`, as the mutex's
//! is, so slot tokens rise across failovers and restarts too.
//!
//! N: the first client sets the count and N (a count a Redisson client set before is adopted if it adds up to N
//! with the permits out); a client asking another N gets a mismatch while any permit is out, and resets both to
//! its N when none is (as the memory backend does).

use crate::backend::redis::START_FLOOR;

/// Expiry of lapsed permits, the check of N, and the slot counter, which every script starts with.
const PRELUDE: &str = r"
local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local now = now_ms()
-- Whether KEYS[1] is something else than a count string: a lock's or read-write lock's hash of the same name.
local foreign = redis.call('type', KEYS[1])['ok']
foreign = foreign ~= 'none' and foreign ~= 'string'
do
  local expired = redis.call('zrangebyscore', KEYS[2], '-inf', now)
  for _, id in ipairs(expired) do redis.call('zrem', KEYS[2], id) end
  if #expired > 0 and redis.call('exists', KEYS[1]) == 1 and not foreign then
    redis.call('publish_cmd', KEYS[3], redis.call('incrby', KEYS[1], #expired))
  end
end
-- Checks (and on first use sets) N. Returns nil if the clients agree, else the number the semaphore has.
local function agree(n)
  local stored = tonumber(redis.call('get', KEYS[6]))
  local count = tonumber(redis.call('get', KEYS[1]))
  local out = redis.call('zcard', KEYS[2])
  if stored == n then
    if not count then redis.call('set', KEYS[1], n - out) end
    return nil
  end
  if not stored and count and count + out ~= n then return count + out end
  if stored and out > 0 then return stored end
  redis.call('set', KEYS[6], n)
  redis.call('set', KEYS[1], n - out)
  if out == 0 then redis.call('del', KEYS[4]) end
  return nil
end
-- The slot occupied by permit `id`, if any.
local function slot_of(id)
  local slots = redis.call('hgetall', KEYS[4])
  for i = 1, #slots, 2 do
    if slots[i + 1] == id then return tonumber(slots[i]) end
  end
  return nil
end
local function next_token(slot)
  local t = redis.call('time')
  local clock = t[1] .. string.format('%06d', tonumber(t[2]))
  not_before(start_floor(t), clock)
  local token = redis.call('hincrby', KEYS[5], slot, 1)
  if tonumber(clock) > token then
    redis.call('hset', KEYS[5], slot, clock)
    token = tonumber(clock)
  end
  return token
end
";

fn script(body: &str, publish: &str) -> String {
    format!("{START_FLOOR}{PRELUDE}{body}").replace("publish_cmd", publish)
}

/// ARGV: N, permit id, ttl ms. Returns {1, token, slot}, {0, ms until the first permit out expires (-1: none of
/// ours)}, {-1, the N the semaphore has}, or {-2, 0} if the name holds no semaphore.
pub(super) fn acquire(publish: &str) -> String {
    let body = r"
local n, id, ttl = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
if foreign then return {-2, 0} end
local other = agree(n)
if other then return {-1, other} end
if redis.call('zscore', KEYS[2], id) then
  -- A re-take of a permit already ours (a reply lost).
  local slot = slot_of(id)
  if slot then
    redis.call('zadd', KEYS[2], now + ttl, id)
    return {1, tonumber(redis.call('hget', KEYS[5], slot)), slot}
  end
end
if tonumber(redis.call('get', KEYS[1])) >= 1 then
  local taken = {}
  local slots = redis.call('hgetall', KEYS[4])
  for i = 1, #slots, 2 do
    if redis.call('zscore', KEYS[2], slots[i + 1]) then taken[tonumber(slots[i])] = true end
  end
  for slot = 0, n - 1 do
    if not taken[slot] then
      -- The token first: in a server's first second next_token refuses, and must leave no permit taken.
      local token = next_token(slot)
      redis.call('decr', KEYS[1])
      redis.call('zadd', KEYS[2], now + ttl, id)
      redis.call('hset', KEYS[4], slot, id)
      return {1, token, slot}
    end
  end
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[1] then return {0, tonumber(first[2]) - now} end
return {0, -1}
";
    script(body, publish)
}

/// ARGV: permit id, ttl ms, slot, token. 1 if extended, 0 if the permit is gone or its slot is another's.
pub(super) fn renew(publish: &str) -> String {
    let body = r"
local id, ttl, slot, token = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
if not redis.call('zscore', KEYS[2], id) then return 0 end
if redis.call('hget', KEYS[4], slot) ~= id or redis.call('hget', KEYS[5], slot) ~= token then return 0 end
redis.call('zadd', KEYS[2], now + ttl, id)
return 1
";
    script(body, publish)
}

/// ARGV: permit id. 1 if released (the count raised and published), 0 if the permit had gone.
pub(super) fn release(publish: &str) -> String {
    let body = r"
local id = ARGV[1]
local slot = slot_of(id)
if slot then redis.call('hdel', KEYS[4], slot) end
if redis.call('zrem', KEYS[2], id) == 0 then return 0 end
redis.call('publish_cmd', KEYS[3], redis.call('incrby', KEYS[1], 1))
return 1
";
    script(body, publish)
}

/// ARGV: N. Returns {1, permits available}, {-1, the N the semaphore has}, or {-2, 0} if the name holds no
/// semaphore.
pub(super) fn available(publish: &str) -> String {
    let body = r"
if foreign then return {-2, 0} end
local other = agree(tonumber(ARGV[1]))
if other then return {-1, other} end
return {1, tonumber(redis.call('get', KEYS[1]))}
";
    script(body, publish)
}

/// Deletes every permit whoever holds it and gives the count back; the slot counters stay. Returns 1 if it was a
/// semaphore, 0 if no key, -1 if the key is something else.
pub(super) fn force(publish: &str) -> String {
    let body = r"
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then return 0 end
local stored = tonumber(redis.call('get', KEYS[6]))
if kind ~= 'string' or not stored then return -1 end
redis.call('del', KEYS[2], KEYS[4])
redis.call('set', KEYS[1], stored)
redis.call('publish_cmd', KEYS[3], stored)
return 1
";
    script(body, publish)
}
