// client.metrics() moves as a scripted workload says it must, on SQLite and, where served, Redis: a timed-out lock,
// a lease taken by forceRelease, one expired with the watchdog off, a refused fenced write, opted-in lock names and
// metrics off. Then fencelock/prometheus puts the same figures in a real prom-client Registry.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';

import { fencelock, rejectsWith, serviceUrl, sqliteUrl, unique } from './support.mjs';

const require = createRequire(import.meta.url);
const { Registry } = require('prom-client');
const { registerFencelockMetrics } = require('../prometheus.js');
const { connect, LockError } = fencelock;

const urls = [['sqlite', sqliteUrl()]];
const redis = serviceUrl('FENCELOCK_TEST_REDIS');
if (redis) urls.push(['redis', redis]);


/** Resolves with the lease's 'lost' error; fails after `ms`. */
function lostWithin(lease, ms) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`lease not lost within ${ms} ms`)), ms);
    lease.once('lost', (e) => {
      clearTimeout(timer);
      resolve(e);
    });
  });
}

/** The value of the one line `name{labels} value` of Prometheus text whose labels are exactly `labels`. */
function sampleValue(text, name, labels) {
  const want = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort()
    .join(',');
  const found = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = (m[2] ?? '').split(/,(?=[a-zA-Z_]+=")/).filter(Boolean).sort().join(',');
    if (got === want) found.push(Number(m[3]));
  }
  assert.equal(found.length, 1, `one ${name}{${want}} in:\n${text}`);
  return found[0];
}

for (const [label, url] of urls) {
  describe(`metrics on ${label}`, () => {
    test('a scripted workload moves the snapshot', async () => {
      const [a, b] = [await connect(url), await connect(url)];
      const name = unique('m');
      const fresh = a.metrics();
      assert.equal(fresh.backend, label);
      assert.equal(fresh.enabled, true);
      assert.deepEqual([fresh.acquireWait.acquired.count, fresh.activeLeases, fresh.localQueueDepth], [0, 0, 0]);
      assert.deepEqual(fresh.names, {});
      assert.equal(fresh.holdTime.buckets.at(-1).le, Infinity);

      // timeout: b waits 150 ms for what a holds.
      const held = await a.lock(name, { ttlMs: 5000 });
      assert.equal(a.metrics().activeLeases, 1);
      await rejectsWith(b.lock(name, { ttlMs: 5000, timeoutMs: 150 }), 'TIMEOUT');
      let m = b.metrics();
      assert.equal(m.acquireWait.timeout.count, 1);
      assert.ok(m.acquireWait.timeout.sum >= 0.15, `${m.acquireWait.timeout.sum}`);
      assert.equal(m.acquireWait.acquired.count, 0);
      await held.release();
      m = a.metrics();
      assert.deepEqual([m.activeLeases, m.holdTime.count, m.backendOps.release.ok.count], [0, 1, 1]);

      // taken: b force-releases, a's next renewal finds the record gone.
      const taken = await a.lock(name, { ttlMs: 5000, watchdog: false });
      assert.equal(await b.forceRelease(name), true);
      await rejectsWith(taken.renew(), 'LOCK_LOST');
      m = a.metrics();
      assert.deepEqual([m.lost.taken, m.renewals.failed, m.activeLeases], [1, 1, 0]);
      assert.equal(m.backendOps.force_release.ok.count, 0, 'b forced it, not a');
      assert.equal(b.metrics().backendOps.force_release.ok.count, 1);
      // A lost lease keeps its local slot until released (which reports the loss again).
      await rejectsWith(taken.release(), 'LOCK_LOST');

      // expired: the watchdog is off and the TTL passes.
      const expiring = await a.lock(name, { ttlMs: 200, watchdog: false });
      await lostWithin(expiring, 5000);
      assert.equal(a.metrics().lost.expired, 1);
      await rejectsWith(expiring.release(), 'LOCK_LOST');

      // refused: a fenced write with an older token than one accepted.
      const resource = unique('m-res');
      await a.fence(resource).write(expiring.fence + 1n, 'new');
      await rejectsWith(a.fence(resource).write(expiring.fence, 'stale'), 'FENCED');
      m = a.metrics();
      assert.deepEqual([m.fenceWrites.ok, m.fenceWrites.refused, m.fenceWrites.error], [1, 1, 0]);
      assert.equal(m.backendOps.fence_write.ok.count, 2, 'a refusal is the backend answering');
      await a.close();
      await b.close();
    });

    test("metricsNames: ['x'] gives series to that name only", async () => {
      const c = await connect(url, { metricsNames: ['x'] });
      for (const n of ['x', unique('other')]) await (await c.lock(n)).release();
      const m = c.metrics();
      assert.deepEqual(Object.keys(m.names), ['x']);
      assert.deepEqual([m.names.x.acquireWait.acquired.count, m.names.x.holdTime.count, m.names.x.lost], [1, 1, 0]);
      assert.equal(m.acquireWait.acquired.count, 2);
      await c.close();
    });

    test('metrics: false records nothing', async () => {
      const c = await connect(url, { metrics: false, metricsNames: true });
      await (await c.lock(unique('off'))).release();
      assert.equal(await c.tryLock(unique('off')).then((l) => l.release()), undefined);
      const m = c.metrics();
      assert.equal(m.enabled, false);
      assert.deepEqual([m.acquireWait.acquired.count, m.holdTime.count, m.activeLeases], [0, 0, 0]);
      assert.ok(Object.values(m.backendOps).every((o) => o.ok.count === 0 && o.error.count === 0));
      assert.deepEqual(m.names, {});
      await c.close();
    });

    test('prom-client: a Registry exposes core families with their values and the given labels', async () => {
      const [a, b] = [await connect(url, { metricsNames: ['hot'] }), await connect(url)];
      const registry = new Registry();
      const registered = registerFencelockMetrics(a, registry, { labels: { service: 'billing' } });
      assert.ok(registered.includes('fencelock_lock_hold_seconds'), 'the opted-in name families, from the start');
      const name = unique('p');
      const held = await b.lock(name);
      await rejectsWith(a.lock(name, { timeoutMs: 100 }), 'TIMEOUT');
      await held.release();
      const taken = await a.lock(name, { watchdog: false });
      await b.forceRelease(name);
      await rejectsWith(taken.renew(), 'LOCK_LOST');
      await rejectsWith(taken.release(), 'LOCK_LOST');
      await (await a.lock('hot')).release();
      await (await a.lock('hot')).release();

      const text = await registry.metrics();
      const base = { backend: label, service: 'billing' };
      assert.equal(sampleValue(text, 'fencelock_acquire_wait_seconds_count', { ...base, outcome: 'timeout' }), 1);
      assert.equal(sampleValue(text, 'fencelock_acquire_wait_seconds_count', { ...base, outcome: 'acquired' }), 3);
      const bucket = (le) =>
        sampleValue(text, 'fencelock_acquire_wait_seconds_bucket', { ...base, outcome: 'timeout', le });
      assert.deepEqual([bucket('0.05'), bucket('+Inf')], [0, 1], 'a 100 ms wait is above 50 ms');
      assert.ok(sampleValue(text, 'fencelock_acquire_wait_seconds_sum', { ...base, outcome: 'timeout' }) >= 0.1);
      assert.equal(sampleValue(text, 'fencelock_lost_total', { ...base, reason: 'taken' }), 1);
      assert.equal(sampleValue(text, 'fencelock_renewals_total', { ...base, outcome: 'failed' }), 1);
      assert.equal(sampleValue(text, 'fencelock_active_leases', base), 0);
      assert.equal(sampleValue(text, 'fencelock_lock_hold_seconds_count', { ...base, lock: 'hot' }), 2);
      assert.match(text, /^# TYPE fencelock_lost_total counter$/m);
      assert.match(text, /^# TYPE fencelock_backend_op_seconds histogram$/m);
      assert.match(text, /^# HELP fencelock_active_leases Grants held now$/m);
      // The same figures as the snapshot's.
      const acquireOk = { ...base, op: 'acquire', outcome: 'ok' };
      const acquires = sampleValue(text, 'fencelock_backend_op_seconds_count', acquireOk);
      assert.equal(acquires, a.metrics().backendOps.acquire.ok.count);
      await a.close();
      await b.close();
    });
  });
}

test('prom-client: one scrape reads one snapshot; OpenMetrics keeps one _total on counters', async () => {
  const c = await connect(sqliteUrl());
  const registry = new Registry(Registry.OPENMETRICS_CONTENT_TYPE);
  registerFencelockMetrics(c, registry);
  const read = c.metricFamilies.bind(c);
  let reads = 0;
  c.metricFamilies = () => (reads++, read());
  const text = await registry.metrics();
  assert.equal(reads, 1, 'every family of a scrape from one snapshot');
  await registry.metrics();
  assert.equal(reads, 2, 'a later scrape reads anew');
  assert.match(text, /^# TYPE fencelock_lost counter$/m);
  assert.equal(sampleValue(text, 'fencelock_lost_total', { backend: 'sqlite', reason: 'expired' }), 0);
  assert.doesNotMatch(text, /_total_total/);
  await c.close();
});

test('bad connect options and adapter arguments are INVALID_ARGUMENT naming the problem', async () => {
  for (const [options, words] of [
    [{ metrics: 'yes' }, /metrics must be a boolean, got "yes"/],
    [{ metricsNames: 'x' }, /metricsNames must be a boolean or an array of lock names, got "x"/],
    [{ metricsNames: ['x', 7] }, /metricsNames must be .* got object/],
  ]) {
    const e = await rejectsWith(connect(sqliteUrl(), options), 'INVALID_ARGUMENT');
    assert.match(e.message, words);
  }
  const c = await connect(sqliteUrl());
  for (const [call, words] of [
    [() => registerFencelockMetrics({}, new Registry()), /client must be a fencelock Client/],
    [() => registerFencelockMetrics(c, {}), /registry must be a prom-client Registry/],
    [() => registerFencelockMetrics(c, new Registry(), { labels: ['a'] }), /labels must be an object .* got an array/],
    [() => registerFencelockMetrics(c, new Registry(), { labels: { 'bad-name': 'x' } }), /"bad-name" is not a label/],
    [() => registerFencelockMetrics(c, new Registry(), { labels: { n: 1 } }), /labels.n must be a string/],
    [() => registerFencelockMetrics(c, new Registry(), { labels: { outcome: 'x' } }), /"outcome" of .* clashes/],
  ]) {
    assert.throws(call, (e) => e instanceof LockError && e.code === 'INVALID_ARGUMENT' && words.test(e.message));
  }
  const registry = new Registry();
  registerFencelockMetrics(c, registry);
  assert.throws(() => registerFencelockMetrics(c, registry), /already been registered/);
  await c.close();
});

test('requiring fencelock/prometheus without prom-client names the package', () => {
  // prom-client is a dev dependency here, so the child hides it from the resolver as a machine without it would.
  const hide = `const M = require('module'); const r = M._resolveFilename;
    M._resolveFilename = function (req, ...rest) {
      if (req !== 'prom-client') return r.call(this, req, ...rest);
      const e = new Error("Cannot find module 'prom-client'"); e.code = 'MODULE_NOT_FOUND'; throw e;
    };`;
  const body = `try { require(${JSON.stringify(require.resolve('../prometheus.js'))}); console.log('loaded'); }
    catch (e) { console.log(e.code + ': ' + e.message); }`;
  const r = spawnSync(process.execPath, ['-e', hide + body], { encoding: 'utf8', timeout: 15000 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^MODULE_NOT_FOUND: fencelock\/prometheus needs the prom-client package/);
});
