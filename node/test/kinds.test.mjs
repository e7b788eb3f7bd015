// Read-write locks and semaphores through the Node idioms: Promises of leases, AbortSignal on a waiting read,
// withRead/withWrite/withPermit releasing whatever the callback does, lease.slot, and the error codes (upgrade and
// bad permits: INVALID_ARGUMENT; a backend without the kind: UNSUPPORTED). The shared scenarios (conformance.mjs)
// hold the semantics. On memory:// (which has both kinds) and the backends that lack them.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { fencelock, rejectsWith, serviceUrl, sleep, sqliteUrl, unique, until } from './support.mjs';

const { connect, Lease, RwLock, Semaphore } = fencelock;

const unhandled = [];
process.on('unhandledRejection', (e) => unhandled.push(e));

const memoryUrl = () => `memory://${unique('node-kinds')}`;

/** URLs of backends whose capability says they lack `kind` ('rwLock' or 'semaphore'). */
async function lacking(kind) {
  const candidates = [sqliteUrl()];
  for (const v of ['FENCELOCK_TEST_REDIS', 'FENCELOCK_TEST_ZK', 'FENCELOCK_TEST_REDLOCK', 'FENCELOCK_TEST_POSTGRES']) {
    const url = serviceUrl(v);
    if (url) candidates.push(url);
  }
  const out = [];
  for (const url of candidates) {
    const c = await connect(url);
    if (!c.capability[kind]) out.push(url);
    await c.close();
  }
  return out;
}

describe('read-write locks', () => {
  test('read, tryRead, write, tryWrite resolve to leases; readers share a token', async () => {
    const url = memoryUrl();
    const [a, b] = [await connect(url), await connect(url)];
    assert.equal(a.capability.rwLock, true);
    const name = unique('rw');
    const rw = a.rwLock(name);
    assert.ok(rw instanceof RwLock);
    assert.equal(rw.name, name);
    const r1 = await rw.read({ ttlMs: 5000, timeoutMs: 1000 });
    assert.ok(r1 instanceof Lease);
    assert.equal(r1.slot, null);
    const r2 = await b.rwLock(name).tryRead();
    assert.equal(r2.fence, r1.fence, 'readers of one run share a token');
    assert.equal(await b.rwLock(name).tryWrite(), null);
    await rejectsWith(b.rwLock(name).write({ timeoutMs: 100 }), 'TIMEOUT');
    await r1.release();
    await r2.release();
    const w = await b.rwLock(name).write({ timeoutMs: 1000 });
    assert.ok(w.fence > r1.fence);
    assert.equal(await rw.tryRead(), null);
    await w.release();
    assert.equal(a.localEntries + b.localEntries, 0);
    await a.close();
    await b.close();
  });

  test('an AbortSignal cancels a waiting read and leaves nothing behind', async () => {
    const url = memoryUrl();
    const [a, b] = [await connect(url), await connect(url)];
    const name = unique('rw-abort');
    const w = await a.rwLock(name).write();
    const ac = new AbortController();
    const waiting = b.rwLock(name).read({ signal: ac.signal });
    await until(() => b.localEntries === 1, 'the read waits (a local queue entry)');
    ac.abort(new Error('stop'));
    const err = await rejectsWith(waiting, 'CANCELLED');
    assert.equal(err.cause.message, 'stop');
    await until(() => b.localEntries === 0, 'the cancelled read leaves no queue entry');
    await w.release();
    const after = await b.rwLock(name).tryWrite();
    assert.ok(after, 'nothing left held after the cancelled read');
    await after.release();
    await rejectsWith(b.rwLock(name).write({ signal: AbortSignal.abort() }), 'CANCELLED');
    await rejectsWith(b.rwLock(name).tryRead({ signal: AbortSignal.abort() }), 'CANCELLED');
    await a.close();
    await b.close();
  });

  test('withRead and withWrite release whatever the callback does', async () => {
    const c = await connect(memoryUrl());
    const rw = c.rwLock(unique('rw-with'));
    assert.equal(await rw.withRead(async (lease) => typeof lease.fence), 'bigint');
    await assert.rejects(
      rw.withWrite({ ttlMs: 5000 }, async () => {
        throw new Error('boom');
      }),
      /boom/,
    );
    const w = await rw.tryWrite();
    assert.ok(w, 'the write hold was released after the throw');
    await w.release();
    await rejectsWith(rw.withRead({}, 'not a function'), 'INVALID_ARGUMENT');
    await c.close();
  });

  test('a reader asking for the write lock is refused (INVALID_ARGUMENT), never deadlocked', async () => {
    const c = await connect(memoryUrl());
    const rw = c.rwLock(unique('rw-upgrade'));
    const w = await rw.write({ owner: 'job' });
    const r = await rw.read({ owner: 'job', timeoutMs: 1000 }); // a downgrade
    assert.ok(r.fence > w.fence);
    await w.release();
    const started = performance.now();
    const err = await rejectsWith(rw.write({ owner: 'job', timeoutMs: 2000 }), 'INVALID_ARGUMENT');
    assert.ok(performance.now() - started < 1000, 'at once');
    assert.match(err.message, /upgrade/);
    assert.equal(err.lock, rw.name);
    await r.release();
    await c.close();
  });
});

describe('semaphores', () => {
  test('acquire, tryAcquire, available and slots', async () => {
    const url = memoryUrl();
    const [a, b] = [await connect(url), await connect(url)];
    assert.equal(a.capability.semaphore, true);
    const name = unique('sem');
    const sem = a.semaphore(name, 2);
    assert.ok(sem instanceof Semaphore);
    assert.deepEqual([sem.name, sem.permits], [name, 2]);
    assert.equal(await sem.available(), 2);
    const p1 = await sem.acquire({ ttlMs: 5000, timeoutMs: 1000 });
    const p2 = await b.semaphore(name, 2).tryAcquire();
    assert.deepEqual(new Set([p1.slot, p2.slot]), new Set([0, 1]));
    assert.equal(typeof p1.fence, 'bigint');
    assert.equal(await sem.available(), 0);
    assert.equal(await b.semaphore(name, 2).tryAcquire(), null);
    await rejectsWith(b.semaphore(name, 2).acquire({ timeoutMs: 100 }), 'TIMEOUT');
    await p1.release();
    await p2.release();
    assert.equal(await sem.available(), 2);
    await a.close();
    await b.close();
  });

  test('withPermit releases on throw', async () => {
    const c = await connect(memoryUrl());
    const sem = c.semaphore(unique('sem-with'), 1);
    assert.equal(await sem.withPermit(async (permit) => permit.slot), 0);
    await assert.rejects(
      sem.withPermit({ timeoutMs: 1000 }, async (permit) => {
        assert.equal(await sem.available(), 0);
        throw new Error(`boom in slot ${permit.slot}`);
      }),
      /boom in slot 0/,
    );
    assert.equal(await sem.available(), 1, 'the permit came back after the throw');
    await c.close();
  });

  test('an AbortSignal cancels a waiting acquire', async () => {
    const c = await connect(memoryUrl());
    const sem = c.semaphore(unique('sem-abort'), 1);
    const held = await sem.acquire();
    const waiting = sem.acquire({ signal: AbortSignal.timeout(100) });
    await rejectsWith(waiting, 'CANCELLED');
    await held.release();
    await until(() => c.localEntries === 0, 'no queue entry left');
    assert.equal(await sem.available(), 1);
    await c.close();
  });

  test('bad permits are INVALID_ARGUMENT naming the number', async () => {
    const c = await connect(memoryUrl());
    const name = unique('sem-bad');
    const held = await c.semaphore(name, 2).acquire();
    for (const [permits, word] of [
      [0, '0'],
      [-1, '-1'],
      [65537, '65537'],
      [3, '3'],
      [1.5, '1.5'],
      [2 ** 60, String(2 ** 60)],
      ['2', '"2"'],
    ]) {
      const sem = c.semaphore(name, permits);
      for (const call of [() => sem.acquire(), () => sem.tryAcquire(), () => sem.available()]) {
        const err = await rejectsWith(call(), 'INVALID_ARGUMENT');
        assert.ok(err.message.includes(word), `${permits}: ${err.message}`);
      }
    }
    await held.release();
    assert.equal(await c.semaphore(name, 2).available(), 2);
    await c.close();
  });
});

describe('a backend without the kind', () => {
  for (const [kind, word] of [
    ['rwLock', 'read-write'],
    ['semaphore', 'semaphore'],
  ]) {
    test(`${kind}: UNSUPPORTED, nothing left behind`, async (t) => {
      const urls = await lacking(kind);
      if (urls.length === 0) return t.skip(`every backend here claims ${kind}`);
      for (const url of urls) {
        const c = await connect(url);
        const name = unique('unsupported');
        const calls =
          kind === 'rwLock'
            ? ['read', 'write', 'tryRead', 'tryWrite'].map((m) => () => c.rwLock(name)[m]())
            : ['acquire', 'tryAcquire', 'available'].map((m) => () => c.semaphore(name, 2)[m]());
        for (const call of calls) {
          const err = await rejectsWith(call(), 'UNSUPPORTED');
          assert.ok(err.message.includes(word), err.message);
        }
        assert.equal(c.localEntries, 0);
        await (await c.lock(name)).release();
        await c.close();
      }
    });
  }
});

test('the README example', async () => {
  const client = await connect(memoryUrl());
  // As in the README's Node section:
  const rw = client.rwLock('catalog');
  await rw.withRead(async (lease) => {
    /* many readers at once */
    assert.ok(lease.valid);
  });
  await rw.withWrite({ timeoutMs: 5_000 }, (lease) => client.fence('catalog-table').write(lease.fence, Buffer.from('v2')));
  const pool = client.semaphore('gpu-pool', 4);
  await pool.withPermit(async (permit) => {
    await client.fence(`gpu-${permit.slot}`).write(permit.fence, Buffer.from('job 17'));
    assert.equal(await pool.available(), 3); // (the test's own check)
  });
  assert.equal(String((await client.fence('catalog-table').read()).value), 'v2');
  const slots = await Promise.all([0, 1, 2, 3].map(async (s) => String((await client.fence(`gpu-${s}`).read()).value)));
  assert.equal(slots.filter((v) => v === 'job 17').length, 1);
  await client.close();
  await sleep(0);
  assert.deepEqual(unhandled, []);
});
