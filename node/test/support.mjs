// Helpers shared by the node tests: the addon, test servers and unique names.
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
/** The package under test (node/index.js). */
export const fencelock = require('../index.js');

/** Awaits `promise`, which must reject with a LockError of `code`; returns the error. */
export async function rejectsWith(promise, code) {
  assert.ok(promise instanceof Promise, 'a Promise, not a synchronous throw');
  const err = await promise.then(
    () => assert.fail(`resolved, expected ${code}`),
    (e) => e,
  );
  assert.ok(err instanceof fencelock.LockError, `a LockError, got ${err}`);
  assert.equal(err.code, code, err.message);
  return err;
}

/** A name no other test run uses. */
export function unique(prefix) {
  return `${prefix}-${randomUUID().replaceAll('-', '')}`;
}

/** A fresh SQLite URL in a temp dir. */
export function sqliteUrl() {
  return `sqlite:${join(mkdtempSync(join(tmpdir(), 'fencelock-node-')), 'locks.db')}`;
}

/**
 * The URL of a test server from `variable` (set by scripts/services.sh). Undefined skips the test, unless
 * FENCELOCK_REQUIRE_SERVICES=1 (the test command), where a missing server fails.
 */
export function serviceUrl(variable) {
  const url = process.env[variable];
  if (url) return url;
  if (process.env.FENCELOCK_REQUIRE_SERVICES === '1') {
    throw new Error(`${variable} is not set but FENCELOCK_REQUIRE_SERVICES=1: start the servers with scripts/services.sh`);
  }
  return undefined;
}

/** Backends as [label, url, unreachable URL], the served ones only where their variable is set. */
export function backends() {
  const list = [
    ['memory', `memory://${unique('node-conformance')}`, undefined],
    ['sqlite', sqliteUrl(), 'sqlite:/nonexistent-dir/fencelock/locks.db'],
  ];
  const served = [
    ['redis', 'FENCELOCK_TEST_REDIS', 'redis://127.0.0.1:1'],
    ['redis-tls', 'FENCELOCK_TEST_REDIS_SECURE', 'rediss://127.0.0.1:1'],
    ['redlock', 'FENCELOCK_TEST_REDLOCK', 'redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3'],
    ['redis_sentinel', 'FENCELOCK_TEST_SENTINEL', 'redis+sentinel://127.0.0.1:1/fencelock-master'],
    ['etcd', 'FENCELOCK_TEST_ETCD', 'etcd://127.0.0.1:1'],
    ['postgres', 'FENCELOCK_TEST_POSTGRES', 'postgres://postgres@127.0.0.1:1/fencelock_test'],
    ['mysql', 'FENCELOCK_TEST_MYSQL', 'mysql://root@127.0.0.1:1/fencelock_test'],
    ['zk', 'FENCELOCK_TEST_ZK', 'zk://127.0.0.1:1'],
  ];
  for (const [label, variable, unreachable] of served) {
    const url = serviceUrl(variable);
    if (url) list.push([label, url, unreachable]);
    else console.log(`# skipped ${label}: ${variable} is not set (run through scripts/test.sh to start the servers)`);
  }
  return list;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Resolves once `check()` holds, polling every 5 ms; fails naming `what` after `ms`. */
export async function until(check, what, ms = 5000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(5);
  }
}
