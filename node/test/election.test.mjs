// Leader elections through the Node idioms: Promises of leaderships (Leases with a term), AbortSignal on a waiting
// campaign, `for await` over observe() with break and abort, string/Buffer/Uint8Array values, and the error codes of
// bad input (INVALID_ARGUMENT, never a crash). The shared scenarios (conformance.mjs) hold the semantics; these run on
// memory://, SQLite and the served backends whose variables are set.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { fencelock, rejectsWith, serviceUrl, sqliteUrl, unique, until } from './support.mjs';

const { connect, Election, Lease, Leadership, LockError } = fencelock;

const unhandled = [];
process.on('unhandledRejection', (e) => unhandled.push(e));

/** [label, () => a URL two clients share]: memory:// (a fresh store per call), SQLite and the served backends. */
function backends() {
  const sqlite = sqliteUrl();
  const list = [
    ['memory', () => `memory://${unique('node-election')}`],
    ['sqlite', () => sqlite],
  ];
  for (const [label, variable] of [
    ['redis', 'FENCELOCK_TEST_REDIS'],
    ['etcd', 'FENCELOCK_TEST_ETCD'],
    ['zk', 'FENCELOCK_TEST_ZK'],
    ['postgres', 'FENCELOCK_TEST_POSTGRES'],
    ['redlock', 'FENCELOCK_TEST_REDLOCK'],
  ]) {
    const url = serviceUrl(variable);
    if (url) list.push([label, () => url]);
  }
  return list;
}

/** The next report of an observation, which must not be the end. */
async function nextLeader(it) {
  const { value, done } = await it.next();
  assert.equal(done, false, 'the observation goes on');
  return value;
}

for (const [label, urlOf] of backends()) {
  describe(`elections on ${label}`, () => {
    test('campaign, tryCampaign, leader, proclaim and resign', async () => {
      const url = urlOf();
      const [a, b] = [await connect(url), await connect(url)];
      assert.equal(a.capability.election, true);
      const name = unique('e');
      const election = a.election(name);
      assert.ok(election instanceof Election);
      assert.equal(election.name, name);
      assert.equal(await election.leader(), null);

      const first = await election.campaign('a1', { ttlMs: 10000, timeoutMs: 5000 });
      assert.ok(first instanceof Leadership && first instanceof Lease);
      assert.equal(typeof first.term, 'bigint');
      assert.equal(first.term, first.fence, 'the term is the fencing token');
      assert.equal(first.name, name);
      assert.ok(first.valid);
      let now = await b.election(name).leader();
      assert.ok(Buffer.isBuffer(now.value));
      assert.deepEqual([String(now.value), now.term], ['a1', first.term]);

      assert.equal(await b.election(name).tryCampaign('b'), null, 'one leader at a time');
      await rejectsWith(b.election(name).campaign('b', { timeoutMs: 100 }), 'TIMEOUT');

      await first.proclaim(Buffer.from('a2'));
      now = await b.election(name).leader();
      assert.deepEqual([String(now.value), now.term], ['a2', first.term], 'proclaim keeps the term');
      const bytes = new Uint8Array([0, 1, 2, 3, 255]);
      await first.proclaim(bytes.subarray(1, 4));
      assert.deepEqual([...(await election.leader()).value], [1, 2, 3], 'a view of a Uint8Array, its bytes only');

      await first.resign();
      assert.ok(first.released);
      assert.equal(await election.leader(), null);
      await rejectsWith(first.proclaim('stale'), 'NOT_HELD');
      await rejectsWith(first.resign(), 'NOT_HELD');

      const second = await b.election(name).tryCampaign(Buffer.from('b'));
      assert.ok(second instanceof Leadership);
      assert.ok(second.term > first.term, 'a new leader has a higher term');
      assert.equal(String((await election.leader()).value), 'b');
      await second.release(); // release is resign
      assert.equal(await election.leader(), null);
      assert.equal(a.localEntries + b.localEntries, 0);
      await a.close();
      await b.close();
    });

    test('an aborted campaign leaves no candidate behind', async () => {
      const url = urlOf();
      const [a, b, c] = [await connect(url), await connect(url), await connect(url)];
      const name = unique('e-abort');
      const leader = await a.election(name).campaign('a');
      const ac = new AbortController();
      const waiting = b.election(name).campaign('b', { signal: ac.signal });
      await until(() => b.localEntries === 1, 'the campaign waits (a local queue entry)');
      ac.abort(new Error('stop'));
      const err = await rejectsWith(waiting, 'CANCELLED');
      assert.equal(err.cause.message, 'stop');
      await until(() => b.localEntries === 0, 'the cancelled campaign leaves no queue entry');
      assert.equal((await c.election(name).leader()).term, leader.term);
      await leader.resign();
      assert.equal(await c.election(name).leader(), null, 'the aborted candidate did not take over');
      const next = await c.election(name).tryCampaign('c');
      assert.ok(next, 'another candidate leads at once');
      await next.resign();
      await rejectsWith(b.election(name).campaign('b', { signal: AbortSignal.abort() }), 'CANCELLED');
      await rejectsWith(b.election(name).tryCampaign('b', { signal: AbortSignal.abort() }), 'CANCELLED');
      assert.equal(await c.election(name).leader(), null);
      for (const client of [a, b, c]) await client.close();
    });

    test('observe: the leader, its proclaimed value, then no leader; break stops it', async () => {
      const url = urlOf();
      const [a, b] = [await connect(url), await connect(url)];
      const name = unique('e-observe');
      const it = b.election(name).observe();
      assert.equal(it[Symbol.asyncIterator](), it);
      assert.equal(await nextLeader(it), null, 'first, who leads now: nobody');
      const lead = await a.election(name).campaign('one');
      const seen = await nextLeader(it);
      assert.deepEqual([String(seen.value), seen.term], ['one', lead.term]);
      await lead.proclaim('uno');
      const proclaimed = await nextLeader(it);
      assert.deepEqual([String(proclaimed.value), proclaimed.term], ['uno', lead.term]);
      await lead.resign();
      assert.equal(await nextLeader(it), null);
      assert.deepEqual(await it.return(), { value: undefined, done: true });
      assert.deepEqual(await it.next(), { value: undefined, done: true }, 'done after return');

      // The for-await form, leaving with break.
      const again = await a.election(name).campaign('two');
      const values = [];
      for await (const leader of b.election(name).observe()) {
        values.push(leader && String(leader.value));
        if (leader === null) break;
        await again.resign();
      }
      assert.deepEqual(values, ['two', null]);
      await a.close();
      await b.close();
    });

    test('observe: return() and an AbortSignal end a waiting next()', async () => {
      const url = urlOf();
      const c = await connect(url);
      const election = c.election(unique('e-stop'));
      const it = election.observe();
      assert.equal(await nextLeader(it), null);
      const waiting = it.next(); // nothing changes: it waits
      await it.return();
      assert.deepEqual(await waiting, { value: undefined, done: true });

      const ac = new AbortController();
      const watched = election.observe({ signal: ac.signal });
      assert.equal(await nextLeader(watched), null);
      const pending = watched.next();
      ac.abort(new Error('enough'));
      const err = await rejectsWith(pending, 'CANCELLED');
      assert.equal(err.cause.message, 'enough');
      await rejectsWith(watched.next(), 'CANCELLED');
      await rejectsWith(election.observe({ signal: AbortSignal.abort() }).next(), 'CANCELLED');
      await c.close();
    });
  });
}

describe('elections: failures', () => {
  const memoryUrl = () => `memory://${unique('node-election-bad')}`;

  test('bad values and names are INVALID_ARGUMENT, rejected, and leave nothing behind', async () => {
    const c = await connect(memoryUrl());
    const name = unique('e-bad');
    const election = c.election(name);
    const err = await rejectsWith(election.campaign(Buffer.alloc(65537)), 'INVALID_ARGUMENT');
    assert.match(err.message, /65536/);
    assert.match(err.message, /65537/);
    assert.equal(err.lock, name);
    await rejectsWith(election.tryCampaign('x'.repeat(65537)), 'INVALID_ARGUMENT');
    for (const bad of [undefined, null, 42, 42n, {}, [1, 2], new ArrayBuffer(2), () => 'x']) {
      const e = await rejectsWith(election.campaign(bad), 'INVALID_ARGUMENT');
      assert.match(e.message, /value must be a string, Buffer or Uint8Array/);
      await rejectsWith(election.tryCampaign(bad), 'INVALID_ARGUMENT');
    }
    await rejectsWith(election.campaign('v', { ttlMs: -1 }), 'INVALID_ARGUMENT');
    await rejectsWith(election.campaign('v', { signal: 'soon' }), 'INVALID_ARGUMENT');
    await rejectsWith(election.campaign('v', 'options'), 'INVALID_ARGUMENT');
    await rejectsWith(c.election('').campaign('v'), 'INVALID_ARGUMENT');
    await rejectsWith(c.election(7).campaign('v'), 'INVALID_ARGUMENT');
    await rejectsWith(c.election(7).leader(), 'INVALID_ARGUMENT');
    await rejectsWith(c.election('').leader(), 'INVALID_ARGUMENT');
    const invalid = (e) => e instanceof LockError && e.code === 'INVALID_ARGUMENT';
    assert.throws(() => election.observe({ signal: {} }), invalid);
    assert.throws(() => election.observe(5), invalid);
    assert.throws(() => c.election(7).observe(), invalid);
    assert.equal(await election.leader(), null, 'no bad campaign left a leader');
    assert.equal(c.localEntries, 0);

    const big = await election.campaign(Buffer.alloc(65536, 'v'));
    assert.equal((await election.leader()).value.length, 65536, 'exactly 64 KiB is allowed');
    await rejectsWith(big.proclaim(Buffer.alloc(65537)), 'INVALID_ARGUMENT');
    await rejectsWith(big.proclaim(17), 'INVALID_ARGUMENT');
    assert.equal((await election.leader()).value.length, 65536, 'a refused proclaim changes nothing');
    await big.resign();
    await c.close();
  });

  test('a lost leadership: its signal aborts and its proclaim is LOCK_LOST', async () => {
    const url = memoryUrl();
    const [a, b] = [await connect(url), await connect(url)];
    const name = unique('e-lost');
    const stale = await a.election(name).campaign('a', { ttlMs: 300, watchdog: false });
    const lost = new Promise((resolve) => stale.once('lost', resolve));
    const fresh = await b.election(name).campaign('b', { timeoutMs: 5000 });
    assert.ok(fresh.term > stale.term);
    assert.equal((await lost).code, 'LOCK_LOST');
    assert.ok(stale.signal.aborted);
    await rejectsWith(stale.proclaim('stale'), 'LOCK_LOST');
    assert.equal(String((await a.election(name).leader()).value), 'b');
    await fresh.resign();
    await a.close();
    await b.close();
  });

  test('a closed client: CLOSED, and its observation ends', async () => {
    const c = await connect(memoryUrl());
    const election = c.election(unique('e-closed'));
    const it = election.observe();
    assert.equal(await nextLeader(it), null);
    const waiting = it.next();
    await c.close();
    await rejectsWith(waiting, 'CLOSED');
    assert.deepEqual(await it.next(), { value: undefined, done: true }, 'a failure ends the iteration');
    await rejectsWith(election.campaign('v'), 'CLOSED');
    await rejectsWith(election.leader(), 'CLOSED');
  });

  test('no unhandled rejections', async () => {
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(unhandled, []);
  });
});
