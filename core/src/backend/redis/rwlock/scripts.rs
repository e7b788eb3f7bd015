//! The read-write lock's Lua, on Redisson `RReadWriteLock`'s layout plus two keys of fencelock's own.
//!
//! Every script takes the same keys, all in the lock's hash slot:
//!
//! | KEYS | key | whose |
//! |---|---|---|
//! | 1 | `<name>`: hash, `mode` = `read` / `write`, reader fields `<holder>` and the writer's `<holder>:write`, each a hold count | Redisson's |
//! | 2 | `redisson_lock_token:{<name>}`: the lock's fence counter, shared with the mutex | RFencedLock's |
//! | 3 | `fencelock_rw_epoch:{<name>}`: the token of the current run of overlapping reads | ours |
//! | 4 | `fencelock_rw_writers:{<name>}`: zset of waiting writers → deadline (server ms) | ours |
//! | 5 | `redisson_rwlock:{<name>}`: the release channel | Redisson's |
//!
//! ARGV[1] is always the key prefix `{<name>}` (Redisson's, `<name>` for a name with its own hash tag), from which
//! each read hold's timeout key `<prefix>:<holder>:rwlock_timeout:<n>` is built, as Redisson builds it. A reader
//! lives while one of its timeout keys does; the hash's PTTL is the longest of them, or the writer's own.
//!
//! Where fencelock differs from Redisson, and why:
//! - Readers whose every timeout key has expired (a crashed holder) are dropped from the hash by the next script
//!   that looks; Redisson leaves them until the hash expires, and its read renewal extends every reader's timeout
//!   keys, so a crashed reader would live as long as a live one renews. Ours extend only their own.
//! - Writer preference: a writer that waits writes itself into KEYS[4] with a server-clock deadline, refreshed by
//!   each attempt; our readers do not pass a live mark (unless their owner holds the write lock: a downgrade).
//!   Redisson's readers know nothing of it and pass waiting writers, as Redisson always lets them.
//! - Fencing: a write hold draws a token from the counter (`max(counter + 1, server µs)`, as the mutex does); the
//!   first read hold of a run draws one too and stores it in KEYS[3], and a reader joining live readers shares it,
//!   but only if no draw happened since (the epoch still equals the counter): the run may have been started by a
//!   Redisson reader after our last one left, and then a fresh token is drawn.

use crate::backend::redis::NEXT_TOKEN;

/// Helpers every script starts with: the server clock, the timeout key of a hold, and the pruning of dead readers.
const PRELUDE: &str = r"
local prefix = ARGV[1]
local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function timeout_key(field, n)
  return prefix .. ':' .. field .. ':rwlock_timeout:' .. n
end
local function is_writer(field)
  return string.sub(field, -6) == ':write'
end
-- Drops readers whose timeout keys all expired. Returns the live readers other than `me`, and the soonest any
-- live reader's hold expires (ms, -1 if none).
local function prune(me)
  if not redis.call('hget', KEYS[1], 'mode') then return 0, -1 end
  local fields = redis.call('hgetall', KEYS[1])
  local others, soonest = 0, -1
  for i = 1, #fields, 2 do
    local f, c = fields[i], tonumber(fields[i + 1])
    if f ~= 'mode' and c and not is_writer(f) then
      local best = -2
      for n = 1, c do
        local t = redis.call('pttl', timeout_key(f, n))
        if t > best then best = t end
      end
      if best < 0 then
        redis.call('hdel', KEYS[1], f)
      else
        if f ~= me then others = others + 1 end
        if soonest < 0 or best < soonest then soonest = best end
      end
    end
  end
  if redis.call('hlen', KEYS[1]) <= 1 then
    redis.call('del', KEYS[1])
  end
  return others, soonest
end
-- Whether `field` is a reader with a live timeout key.
local function reading(field)
  local c = tonumber(redis.call('hget', KEYS[1], field))
  if not c then return false end
  for n = 1, c do
    if redis.call('exists', timeout_key(field, n)) == 1 then return true end
  end
  return false
end
-- Sets the hash's PTTL to the longest live reader's when it holds readers only.
local function expire_as_readers()
  if redis.call('hget', KEYS[1], 'mode') ~= 'read' then return end
  local fields = redis.call('hgetall', KEYS[1])
  local longest = -1
  for i = 1, #fields, 2 do
    local f, c = fields[i], tonumber(fields[i + 1])
    if f ~= 'mode' and c then
      for n = 1, c do
        local t = redis.call('pttl', timeout_key(f, n))
        if t > longest then longest = t end
      end
    end
  end
  if longest > 0 then redis.call('pexpire', KEYS[1], longest) end
end
-- Releases `field`'s hold (a reader's, or the writer's `<holder>:write`); 1 if there was one. Publishes whenever a
-- hold goes, so readers kept out by a writer and writers waiting for the last reader look again.
local function release(field)
  local mode = redis.call('hget', KEYS[1], 'mode')
  if not mode or redis.call('hexists', KEYS[1], field) == 0 then return 0 end
  if is_writer(field) then
    if mode ~= 'write' then return 0 end
    redis.call('hdel', KEYS[1], field)
    if redis.call('hlen', KEYS[1]) > 1 then
      redis.call('hset', KEYS[1], 'mode', 'read')
    end
  else
    local live = reading(field)
    local c = redis.call('hincrby', KEYS[1], field, -1)
    redis.call('del', timeout_key(field, c + 1))
    if c <= 0 then redis.call('hdel', KEYS[1], field) end
    if not live then
      prune('')
      return 0
    end
  end
  prune('')
  expire_as_readers()
  redis.call('{publish}', KEYS[5], 0)
  return 1
end
";

/// The body of a script after the prelude, with the deployment's publish command.
fn script(body: &str, publish: &str) -> String {
    format!("{PRELUDE}{DRAW}{body}").replace("NEXT_TOKEN_HERE", NEXT_TOKEN).replace("{publish}", publish)
}

/// `draw()`: the next token of the counter KEYS[2] (the mutex's `NEXT_TOKEN`), and `foreign()`: whether KEYS[1] is
/// a record that is no read-write lock, which no script touches: a mutex's hash (busy until it goes), or `'other'`,
/// a key of another type such as a semaphore's count (the acquire is refused: {-2, 0}).
const DRAW: &str = concat!(
    "local function draw()\n",
    // NEXT_TOKEN declares and sets `token`.
    "NEXT_TOKEN_HERE",
    "  return token\nend\n",
    "local function foreign()\n",
    "  local kind = redis.call('type', KEYS[1])['ok']\n",
    "  if kind == 'none' then return false end\n",
    "  if kind ~= 'hash' then return 'other' end\n",
    "  return not redis.call('hget', KEYS[1], 'mode')\n",
    "end\n",
    "local function busy_or_refused()\n",
    "  if foreign() == 'other' then return {-2, 0} end\n",
    "  return {0, redis.call('pttl', KEYS[1])}\n",
    "end\n",
);

/// ARGV: prefix, ttl ms, holder. Returns {1, epoch token}, or {0, ms until something in the way may change}.
pub(super) fn read(publish: &str) -> String {
    let body = r"
local ttl, me = tonumber(ARGV[2]), ARGV[3]
if foreign() then return busy_or_refused() end
local now = now_ms()
redis.call('zremrangebyscore', KEYS[4], '-inf', now)
local others = prune(me)
local mode = redis.call('hget', KEYS[1], 'mode')
local downgrade = redis.call('hexists', KEYS[1], me .. ':write') == 1
if mode == 'write' and not downgrade then
  return {0, redis.call('pttl', KEYS[1])}
end
if not downgrade then
  local w = redis.call('zrange', KEYS[4], 0, 0, 'WITHSCORES')
  if w[1] then
    local left = tonumber(w[2]) - now
    local pttl = redis.call('pttl', KEYS[1])
    if pttl > 0 and pttl < left then left = pttl end
    return {0, left}
  end
end
if reading(me) then
  -- A re-take of a hold already ours (a reply lost): refresh it.
  local c = tonumber(redis.call('hget', KEYS[1], me))
  redis.call('pexpire', timeout_key(me, c), ttl)
  if redis.call('pttl', KEYS[1]) < ttl then redis.call('pexpire', KEYS[1], ttl) end
  return {1, tonumber(redis.call('get', KEYS[3]))}
end
local token
local epoch = redis.call('get', KEYS[3])
if others > 0 and epoch and epoch == redis.call('get', KEYS[2]) then
  token = tonumber(epoch)
else
  token = draw()
  redis.call('set', KEYS[3], redis.call('get', KEYS[2]))
end
if not mode then redis.call('hset', KEYS[1], 'mode', 'read') end
redis.call('hdel', KEYS[1], me)
local n = redis.call('hincrby', KEYS[1], me, 1)
redis.call('set', timeout_key(me, n), 1, 'px', ttl)
if redis.call('pttl', KEYS[1]) < ttl then redis.call('pexpire', KEYS[1], ttl) end
return {1, token}
";
    script(body, publish)
}

/// ARGV: prefix, ttl ms, holder, mark ms (0: do not mark). Returns {1, token}, or {0, ms until the holds in the
/// way may change}, having marked the writer as waiting for `mark ms` when asked.
pub(super) fn write(publish: &str) -> String {
    let body = r"
local ttl, me, mark = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local field = me .. ':write'
if foreign() then return busy_or_refused() end
local now = now_ms()
redis.call('zremrangebyscore', KEYS[4], '-inf', now)
local others, soonest = prune(me)
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode or (mode == 'write' and redis.call('hexists', KEYS[1], field) == 1) then
  local token = draw()
  redis.call('hset', KEYS[1], 'mode', 'write', field, 1)
  redis.call('pexpire', KEYS[1], ttl)
  redis.call('zrem', KEYS[4], me)
  return {1, token}
end
if mark > 0 then
  redis.call('zadd', KEYS[4], now + mark, me)
end
if mode == 'read' and soonest >= 0 then return {0, soonest} end
return {0, redis.call('pttl', KEYS[1])}
";
    script(body, publish)
}

/// ARGV: prefix, ttl ms, field (`<holder>` or `<holder>:write`). 1 if extended, 0 if the hold is gone.
pub(super) fn renew(publish: &str) -> String {
    let body = r"
local ttl, field = tonumber(ARGV[2]), ARGV[3]
if is_writer(field) then
  if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hexists', KEYS[1], field) == 0 then return 0 end
  if redis.call('hlen', KEYS[1]) > 2 and redis.call('pttl', KEYS[1]) > ttl then return 1 end
  redis.call('pexpire', KEYS[1], ttl)
  return 1
end
if not reading(field) then return 0 end
local c = tonumber(redis.call('hget', KEYS[1], field))
for n = 1, c do redis.call('pexpire', timeout_key(field, n), ttl) end
if redis.call('pttl', KEYS[1]) < ttl then redis.call('pexpire', KEYS[1], ttl) end
return 1
";
    script(body, publish)
}

/// ARGV: prefix, field. 1 if released, 0 if not held.
pub(super) fn release(publish: &str) -> String {
    script("return release(ARGV[2])\n", publish)
}

/// What an ended attempt leaves undone: its waiting mark, and a hold it may have taken in doubt. ARGV: prefix,
/// holder, field. Publishes if it removed a mark, so readers it kept out look again.
pub(super) fn abandon(publish: &str) -> String {
    let body = r"
local marked = redis.call('zrem', KEYS[4], ARGV[2])
local released = release(ARGV[3])
if marked == 1 and released == 0 then redis.call('{publish}', KEYS[5], 0) end
return released
";
    script(body, publish)
}

/// Deletes the lock whoever holds it: the hash and its holders' timeout keys; the counter and epoch stay. ARGV:
/// prefix. 1 if there was a read-write lock, 0 if no key, -1 if the key is something else.
pub(super) fn force(publish: &str) -> String {
    let body = r"
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then return 0 end
if kind ~= 'hash' or not redis.call('hget', KEYS[1], 'mode') then return -1 end
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
  local c = tonumber(fields[i + 1])
  if fields[i] ~= 'mode' and c and not is_writer(fields[i]) then
    for n = 1, c do redis.call('del', timeout_key(fields[i], n)) end
  end
end
redis.call('del', KEYS[1])
redis.call('{publish}', KEYS[5], 0)
return 1
";
    script(body, publish)
}
