// Runs the language-neutral scenarios of tests/conformance/ against every backend (DESIGN.md §7): the interpreter
// of core/tests/conformance.rs, in JS, through the public Node API. Prints one matrix row per backend.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { inspect } from 'node:util';

import { backends, fencelock, sleep, unique } from './support.mjs';

const { connect, LockError } = fencelock;
const DIR = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '../../tests/conformance');

function scenarios() {
  return readdirSync(DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(DIR, f), 'utf8')));
}

/** `mentions` must be in the error's message; no `not_mentions` in its message, string, inspection (stack and
 * cause included) or fields. */
function checkMentions(step, error) {
  for (const word of step.mentions ?? []) {
    if (!error.message.includes(word)) throw new Error(`the error does not mention ${word}: ${error.message}`);
  }
  const texts = [error.message, String(error), inspect(error, { depth: 5 }), String(error.backend), String(error.lock)];
  for (const word of step.not_mentions ?? []) {
    const text = texts.find((t) => t.includes(word));
    if (text !== undefined) throw new Error(`the error mentions ${word}: ${text}`);
  }
}

function expectedErrors(step) {
  const e = step.expect_error;
  const kinds = typeof e === 'string' ? [e] : Array.isArray(e) ? e : [];
  for (const k of kinds) assert.ok(fencelock.ErrorCode[k], `unknown error kind ${k}`);
  return kinds;
}

const SKIP = Symbol('skip');

/** The state of one scenario run. */
class Run {
  constructor(url, unreachable, prefix) {
    Object.assign(this, { url, unreachable, prefix, clients: new Map(), leases: new Map(), names: [] });
  }

  name(step) {
    if (step.name_len !== undefined) return 'n'.repeat(step.name_len);
    const label = step.name ?? 'L';
    if (label === '' || label.includes('\0')) return label;
    const name = `${this.prefix}/${label}`;
    if (!this.names.includes(name)) this.names.push(name);
    return name;
  }

  client(step) {
    const c = this.clients.get(step.client);
    assert.ok(c, `no client ${step.client}`);
    return c;
  }

  lease(step, key) {
    const l = this.leases.get(step[key]);
    assert.ok(l, `no lease ${step[key]}`);
    return l;
  }

  static options(step) {
    const o = { ttlMs: step.ttl_ms ?? 30000 };
    if (step.timeout_ms !== undefined) o.timeoutMs = step.timeout_ms;
    if (step.watchdog !== undefined) o.watchdog = step.watchdog;
    if (step.owner !== undefined) o.owner = step.owner;
    if (step.fair !== undefined) o.fair = step.fair;
    return o;
  }

  /** Runs the operation of `step`; throws a LockError the step may expect, or a plain Error for a failed check. */
  async op(step, started) {
    switch (step.op) {
      case 'connect': {
        let url = step.url ?? this.url;
        if (url === '$UNREACHABLE') {
          if (!this.unreachable) return SKIP; // this backend has no such address (memory://)
          url = this.unreachable;
        }
        const opts = step.connect_timeout_ms === undefined ? undefined : { connectTimeoutMs: step.connect_timeout_ms };
        this.clients.set(step.client, await connect(url, opts));
        return;
      }
      case 'close':
        return this.client(step).close();
      case 'lock':
      case 'try_lock': {
        const name = this.name(step);
        const client = this.client(step);
        const opts = Run.options(step);
        const lease = step.op === 'lock' ? await client.lock(name, opts) : await client.tryLock(name, opts);
        const busyExpected = step.expect === 'busy';
        if (lease && busyExpected) throw new Error('acquired, expected busy');
        if (!lease && !busyExpected) throw new Error('busy, expected to acquire');
        if (!lease) return;
        const elapsed = performance.now() - started;
        if (step.min_elapsed_ms !== undefined && elapsed < step.min_elapsed_ms) {
          throw new Error(`acquired after ${elapsed.toFixed(0)} ms, sooner than ${step.min_elapsed_ms} ms`);
        }
        if (step.as) this.leases.set(step.as, lease);
        else await lease.release();
        return;
      }
      case 'release':
        return this.lease(step, 'lease').release();
      case 'renew': {
        const lease = this.lease(step, 'lease');
        await lease.renew(step.ttl_ms);
        if (step.min_remaining_ms !== undefined && lease.remainingMs < step.min_remaining_ms) {
          throw new Error(`remaining ${lease.remainingMs} ms < ${step.min_remaining_ms} ms after renew`);
        }
        return;
      }
      case 'expect_token': {
        const a = this.lease(step, 'lease').fence;
        const rel = step.gt !== undefined ? 'gt' : 'eq';
        const b = this.lease(step, rel).fence;
        assert.equal(typeof a, 'bigint');
        if (!(rel === 'gt' ? a > b : a === b)) throw new Error(`token ${a} is not ${rel} ${b}`);
        return;
      }
      case 'pause':
        return sleep(step.ms);
      case 'expect_lost': {
        const { signal } = this.lease(step, 'lease');
        if (signal.aborted) return;
        const fired = await Promise.race([
          new Promise((r) => signal.addEventListener('abort', () => r(true), { once: true })),
          sleep(step.within_ms).then(() => false),
        ]);
        if (!fired) throw new Error(`lost did not fire within ${step.within_ms} ms`);
        assert.equal(signal.reason.code, 'LOCK_LOST');
        return;
      }
      case 'expect_not_lost': {
        const lease = this.lease(step, 'lease');
        if (lease.signal.aborted || !lease.valid) {
          throw new Error(`lease lost=${lease.signal.aborted} valid=${lease.valid}`);
        }
        return;
      }
      case 'force_release':
        return this.client(step).forceRelease(this.name(step));
      case 'expect_free':
      case 'expect_held': {
        const info = await this.client(step).inspect(this.name(step));
        if ((info.holder != null) !== (step.op === 'expect_held')) {
          throw new Error(`${step.op}: holder is ${info.holder}`);
        }
        return;
      }
      case 'fence_write':
      case 'fence_read': {
        const fence = this.client(step).fence(`${this.prefix}/${step.resource}`);
        const token = step.token_of !== undefined ? this.lease(step, 'token_of').fence : BigInt(step.token);
        const value = Buffer.from(step.value ?? '', 'utf8');
        if (step.op === 'fence_write') return fence.write(token, value);
        const got = await fence.read();
        if (got.token !== token || !Buffer.isBuffer(got.value) || !got.value.equals(value)) {
          throw new Error(`read (${got.token}, ${JSON.stringify(String(got.value))}), expected (${token}, ${JSON.stringify(step.value)})`);
        }
        return;
      }
      default:
        throw new Error(`unknown op ${step.op}`);
    }
  }

  async step(step) {
    const want = expectedErrors(step);
    const started = performance.now();
    let error;
    try {
      if ((await this.op(step, started)) === SKIP) return;
    } catch (e) {
      if (!(e instanceof LockError)) throw e;
      error = e;
    }
    const elapsed = performance.now() - started;
    if (step.within_ms !== undefined && step.op !== 'expect_lost' && elapsed > step.within_ms) {
      throw new Error(`took ${elapsed.toFixed(0)} ms, more than ${step.within_ms} ms`);
    }
    if (!error && want.length) throw new Error(`succeeded, expected ${want}`);
    if (error && !want.length) throw new Error(`failed: ${error.code}: ${error.message}`);
    if (error && !want.includes(error.code)) throw new Error(`failed with ${error.code}: ${error.message}, expected ${want}`);
    if (error) assert.equal(error.retryable, ['TIMEOUT', 'UNAVAILABLE'].includes(error.code));
    if (error) checkMentions(step, error);
  }

  /** After the scenario: nothing may be left held. */
  async checkClean() {
    for (const lease of this.leases.values()) await lease.release().catch(() => {});
    const checker = await connect(this.url);
    try {
      for (const client of this.clients.values()) {
        if (client.localEntries !== 0) throw new Error(`${client.localEntries} local queue entries left`);
      }
      for (const name of this.names) {
        const info = await checker.inspect(name);
        if (info.holder != null) throw new Error(`${name} left held by ${info.holder}`);
      }
    } finally {
      await checker.close();
      for (const client of this.clients.values()) await client.close();
    }
  }
}

async function runBackend(label, url, unreachable) {
  const probe = await connect(url);
  const caps = probe.capability;
  await probe.close();
  const flags = Object.entries({
    fencing: caps.fencing,
    native_wait: caps.nativeWait,
    fair: caps.fair,
    session_bound: caps.sessionBound,
  })
    .filter(([, on]) => on)
    .map(([n]) => n);
  const row = [];
  const failures = [];
  let passed = 0;
  for (const sc of scenarios()) {
    // Read-write locks and semaphores are not in this binding yet (issue 18): their scenarios are skipped.
    const needsKinds =
      (sc.requires ?? []).length > 0 ||
      sc.steps.some((st) => 'kind' in st || ['join', 'expect_slot', 'expect_available'].includes(st.op));
    if (needsKinds || (sc.unless ?? []).some((c) => flags.includes(c))) {
      row.push(`${sc.name}=skip`);
      continue;
    }
    const run = new Run(url, unreachable, unique(`conformance/${sc.name}`));
    let failure;
    for (const [i, step] of sc.steps.entries()) {
      try {
        await run.step(step);
      } catch (e) {
        failure = `step ${i + 1} ${JSON.stringify(step)}: ${e.message}`;
        break;
      }
    }
    if (!failure) {
      try {
        await run.checkClean();
      } catch (e) {
        failure = e.message;
      }
    } else {
      for (const client of run.clients.values()) await client.close().catch(() => {});
    }
    if (failure) {
      row.push(`${sc.name}=FAIL`);
      failures.push(`${label}/${sc.name}: ${failure}`);
    } else {
      row.push(`${sc.name}=pass`);
      passed++;
    }
  }
  console.log(`conformance matrix row: node × ${label}: ${row.join(' ')}`);
  assert.deepEqual(failures, [], `conformance failures:\n${failures.join('\n')}`);
  assert.ok(passed > 0, `${label}: no scenario ran`);
}

test('conformance', { concurrency: true }, async (t) => {
  await Promise.all(backends().map(([label, url, unreachable]) => t.test(label, () => runBackend(label, url, unreachable))));
});
