// Node idioms over the core: AbortSignal, withLock, error codes, lease.signal / 'lost', asyncDispose, fences, and an
// event loop that keeps turning while lock() waits. On SQLite (embedded) and, where served, Redis.
import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, test } from 'node:test';

import { fencelock, rejectsWith, serviceUrl, sleep, sqliteUrl, unique, until } from './support.mjs';

const { connect, LockError, Lease, Client } = fencelock;

const unhandled = [];
process.on('unhandledRejection', (e) => unhandled.push(e));

const urls = [['sqlite', sqliteUrl()]];
const redis = serviceUrl('FENCELOCK_TEST_REDIS');
if (redis) urls.push(['redis', redis]);


for (const [label, url] of urls) {
  describe(`node api on ${label}`, () => {
    test('lock, tryLock, fence token, release', async () => {
      const c = await connect(url);
      assert.ok(c instanceof Client);
      const name = unique('api');
      const lease = await c.lock(name, { ttlMs: 5000 });
      assert.ok(lease instanceof Lease);
      assert.equal(typeof lease.fence, 'bigint');
      assert.equal(lease.name, name);
      assert.ok(lease.valid);
      assert.equal(await c.tryLock(name), null);
      await lease.release();
      assert.ok(lease.released && !lease.valid);
      const next = await c.tryLock(name);
      assert.ok(next.fence > lease.fence);
      await next.release();
      await c.close();
    });

    test('fair reaches the backend: served here, refused where waiters race', async () => {
      const c = await connect(url);
      const name = unique('fair');
      await (await c.lock(name, { fair: true, ttlMs: 5000 })).release();
      await (await c.lock(name, { fair: false, ttlMs: 5000 })).release();
      assert.equal((await c.inspect(name)).holder ?? null, null);
      await c.close();
      // The memory backend's waiters race: arrival order is refused.
      const racing = await connect(`memory://${name}`);
      await rejectsWith(racing.lock(name, { fair: true }), 'UNSUPPORTED');
      await rejectsWith(racing.tryLock(name, { fair: true }), 'UNSUPPORTED');
      await racing.close();
    });

    test('an AbortSignal cancels a waiting lock and leaves no lock behind', async () => {
      const [a, b] = [await connect(url), await connect(url)];
      const name = unique('abort');
      const held = await a.lock(name);
      const ac = new AbortController();
      const waiting = b.lock(name, { signal: ac.signal });
      await until(() => b.localEntries === 1, 'the lock() waits (a local queue entry)');
      ac.abort(new Error('stop'));
      const err = await rejectsWith(waiting, 'CANCELLED');
      assert.equal(err.cause.message, 'stop');
      // An abort that cut a request short keeps the name's queue place until its undo is done (by design: the
      // client's next call must not reach the server before it), so the entry goes soon after, not at once.
      await until(() => b.localEntries === 0, 'the cancelled lock() leaves no queue entry');
      await held.release();
      const info = await b.inspect(name);
      assert.equal(info.holder ?? null, null, 'nothing left held after the cancelled acquire');
      const after = await b.tryLock(name);
      assert.ok(after, 'free once the holder released');
      await after.release();
      await rejectsWith(b.lock(name, { signal: AbortSignal.abort() }), 'CANCELLED');
      await a.close();
      await b.close();
    });

    test('the event loop keeps turning while lock() waits', async () => {
      const [a, b] = [await connect(url), await connect(url)];
      const name = unique('loop');
      const held = await a.lock(name);
      let ticks = 0;
      const timer = setInterval(() => ticks++, 10);
      await rejectsWith(b.lock(name, { timeoutMs: 400 }), 'TIMEOUT');
      clearInterval(timer);
      assert.ok(ticks >= 20, `only ${ticks} timer ticks in 400 ms`);
      await held.release();
      await a.close();
      await b.close();
    });

    test('withLock releases in finally and returns what fn returns', async () => {
      const c = await connect(url);
      const name = unique('with');
      let seen;
      const out = await c.withLock(name, { ttlMs: 5000 }, async (lease) => {
        seen = lease;
        assert.equal(await c.tryLock(name), null);
        return 42;
      });
      assert.equal(out, 42);
      assert.ok(seen.released);
      const boom = new Error('boom');
      await assert.rejects(
        c.withLock(name, async () => {
          throw boom;
        }),
        (e) => e === boom,
      );
      const again = await c.tryLock(name);
      assert.ok(again, 'released after fn threw');
      await again.release();
      await c.close();
    });

    test('error codes: bad arguments reject, never throw', async () => {
      const c = await connect(url);
      for (const call of [
        () => c.lock(''),
        () => c.lock(42),
        () => c.lock('x', { ttlMs: -1 }),
        () => c.lock('x', { ttlMs: 0 }),
        () => c.lock('x', { ttlMs: 'soon' }),
        () => c.lock('x', { watchdog: 'yes' }),
        () => c.lock('x', { signal: {} }),
        () => c.lock('x', { fair: 'yes' }),
        () => c.tryLock('a\0b'),
        () => c.withLock('x', {}, 'not a function'),
        () => c.fence('r').write(-1n, Buffer.from('x')),
        () => c.fence('r').write(1n, 12),
        () => c.fence(7).read(),
        () => connect(5),
        () => connect('bogus://nowhere'),
      ]) {
        const e = await rejectsWith(call(), 'INVALID_ARGUMENT');
        assert.equal(e.retryable, false);
      }
      const name = unique('codes');
      const lease = await c.lock(name);
      const t = await rejectsWith(c.lock(name, { timeoutMs: 50 }), 'TIMEOUT');
      assert.equal(t.retryable, true);
      // The lock and backend are fields of their own, not parsed out of the text; the message still names them.
      assert.equal(t.lock, name);
      assert.equal(t.backend, c.url);
      assert.ok(t.message.startsWith(`lock ${JSON.stringify(name)} on ${c.url}: `), t.message);
      await lease.release();
      await rejectsWith(lease.release(), 'NOT_HELD');
      await rejectsWith(lease.renew(), 'NOT_HELD');
      const fresh = await c.lock(name);
      await c.fence(name).write(fresh.fence, 'new');
      await rejectsWith(c.fence(name).write(lease.fence, 'stale'), 'FENCED');
      const read = await c.fence(name).read();
      assert.deepEqual(read, { token: fresh.fence, value: Buffer.from('new') });
      await c.close();
      await c.close(); // idempotent
      await rejectsWith(c.lock(name), 'CLOSED');
      // close released the lease it held; the lease's own calls say CLOSED.
      await rejectsWith(fresh.renew(), 'CLOSED');
      await rejectsWith(fresh.release(), 'CLOSED');
    });

    test('lease.signal aborts and "lost" fires once when the lease is lost', async () => {
      const [a, b] = [await connect(url), await connect(url)];
      const name = unique('lost');
      const victim = await a.lock(name, { ttlMs: 600 });
      const events = [];
      victim.on('lost', (e) => events.push(e));
      const { signal } = victim;
      assert.equal(signal.aborted, false);
      await b.forceRelease(name);
      const thief = await b.lock(name, { timeoutMs: 3000 });
      await new Promise((resolve, reject) => {
        if (signal.aborted) resolve();
        signal.addEventListener('abort', resolve, { once: true });
        setTimeout(() => reject(new Error('lost did not fire within 3 s')), 3000);
      });
      assert.ok(signal.reason instanceof LockError);
      assert.equal(signal.reason.code, 'LOCK_LOST');
      await sleep(50);
      assert.equal(events.length, 1);
      assert.equal(events[0].code, 'LOCK_LOST');
      // Core's reason and fields, not a message made up here.
      assert.equal(events[0].lock, name);
      assert.equal(events[0].backend, a.url);
      assert.match(events[0].message, /the record expired or was taken|no renewal succeeded/);
      await rejectsWith(victim.renew(), 'LOCK_LOST');
      await rejectsWith(victim.release(), 'LOCK_LOST');
      assert.ok(thief.valid);
      await thief.release();
      await a.close();
      await b.close();
    });

    test('reentrancy with an owner; Symbol.asyncDispose releases', async () => {
      const c = await connect(url);
      const name = unique('reenter');
      const outer = await c.lock(name, { owner: 'job-1' });
      const inner = await c.lock(name, { owner: 'job-1', timeoutMs: 0 });
      assert.equal(inner.fence, outer.fence);
      await inner.release();
      await outer.release();
      if (typeof Symbol.asyncDispose === 'symbol') {
        const lease = await c.lock(name);
        await lease[Symbol.asyncDispose]();
        assert.ok(lease.released);
        const again = await c.tryLock(name);
        assert.ok(again);
        await again[Symbol.asyncDispose]();
      }
      await c.close();
    });
  });
}

test('connectTimeoutMs bounds a connect to a server that never answers', async () => {
  // TCP connects (the kernel accepts), but the etcd handshake never comes: only the connect timeout ends the wait.
  const sockets = [];
  const silent = net.createServer((s) => sockets.push(s));
  await new Promise((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const url = `etcd://127.0.0.1:${silent.address().port}`;
  try {
    const started = Date.now();
    const err = await rejectsWith(connect(url, { connectTimeoutMs: 300 }), 'UNAVAILABLE');
    assert.ok(Date.now() - started < 2500, `took ${Date.now() - started} ms (the default is 5000)`);
    assert.equal(err.retryable, true);
    await rejectsWith(connect(url, { connectTimeoutMs: -1 }), 'INVALID_ARGUMENT');
  } finally {
    for (const s of sockets) s.destroy();
    silent.close();
  }
});

test('no unhandled rejections', async () => {
  await sleep(100);
  assert.deepEqual(unhandled, []);
});
