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

/** The kind of hold of a `lock`/`try_lock` step: `{ kind, permits }`, kind null for a mutex. */
function kindOf(step) {
  const kind = step.kind ?? null;
  assert.ok([null, 'read', 'write', 'permit', 'leader'].includes(kind), `unknown kind ${kind}`);
  return { kind, permits: kind === 'permit' ? step.permits : 0 };
}

/** The value a step campaigns or proclaims with: `value` (UTF-8), or `value_len` bytes. */
function valueOf(step) {
  return step.value_len !== undefined ? Buffer.alloc(step.value_len, 'v') : (step.value ?? '');
}

/** One acquire of `kind` through the public API: `lock` (`once` false) or `tryLock` and their kin; a campaign with
 * the step's value for a leadership. */
function acquire(client, name, { kind, permits }, opts, once, step) {
  if (kind === 'leader') {
    const election = client.election(name);
    return once ? election.tryCampaign(valueOf(step), opts) : election.campaign(valueOf(step), opts);
  }
  if (kind === 'read' || kind === 'write') {
    const rw = client.rwLock(name);
    if (kind === 'read') return once ? rw.tryRead(opts) : rw.read(opts);
    return once ? rw.tryWrite(opts) : rw.write(opts);
  }
  if (kind === 'permit') {
    const sem = client.semaphore(name, permits);
    return once ? sem.tryAcquire(opts) : sem.acquire(opts);
  }
  return once ? client.tryLock(name, opts) : client.lock(name, opts);
}

/** An observer started by an `observe` step: its reports, pumped from `election.observe()` in the background. */
class Watch {
  constructor(iterator) {
    Object.assign(this, { iterator, reports: [], waiters: [] });
    (async () => {
      try {
        for await (const leader of iterator) this.#push({ leader });
      } catch (error) {
        this.#push({ error });
      }
    })();
  }

  #push(report) {
    this.reports.push(report);
    for (const wake of this.waiters.splice(0)) wake();
  }

  /** The next report, or undefined if none comes within `ms`. */
  async next(ms) {
    if (this.reports.length === 0) {
      let timer;
      await new Promise((resolve) => {
        this.waiters.push(resolve);
        timer = setTimeout(resolve, ms);
      });
      clearTimeout(timer);
    }
    return this.reports.shift();
  }
}

/** A leader read or observed against the step: `none`, or `value` and `term_of` (a leadership's term). */
function checkLeader(run, step, leader) {
  if (step.none) {
    if (leader !== null) throw new Error(`leader of term ${leader.term}, expected none`);
    return;
  }
  if (leader === null) throw new Error('no leader, expected one');
  assert.ok(Buffer.isBuffer(leader.value) && typeof leader.term === 'bigint', 'a leader is { value, term }');
  if (step.value !== undefined && !leader.value.equals(Buffer.from(step.value, 'utf8'))) {
    throw new Error(`leader value ${JSON.stringify(String(leader.value))}, expected ${JSON.stringify(step.value)}`);
  }
  if (step.term_of !== undefined) {
    const want = run.lease(step, 'term_of').term;
    if (leader.term !== want) throw new Error(`leader term ${leader.term}, expected ${want} (${step.term_of})`);
  }
}

/** The state of one scenario run. */
class Run {
  constructor(url, unreachable, prefix) {
    // names: every name used, with the kind of hold it was first used for (the clean check differs per kind);
    // tasks: acquires started with `spawn`, awaited by `join`; previousStart, currentStart: when the previous and the
    // current step began (`min_elapsed_ms` counts from the previous one).
    // watches: the observers of `observe` steps.
    Object.assign(this, {
      url,
      unreachable,
      prefix,
      clients: new Map(),
      leases: new Map(),
      names: [],
      tasks: new Map(),
      watches: new Map(),
    });
    this.previousStart = this.currentStart = performance.now();
  }

  name(step) {
    if (step.name_len !== undefined) return 'n'.repeat(step.name_len);
    const label = step.name ?? 'L';
    if (label === '' || label.includes('\0')) return label;
    const name = `${this.prefix}/${label}`;
    let kind = { kind: null, permits: 0 };
    if (step.op === 'lock' || step.op === 'try_lock') kind = kindOf(step);
    else if (step.op === 'expect_available') kind = { kind: 'permit', permits: step.permits };
    else if (step.op === 'expect_leader' || step.op === 'observe') kind = { kind: 'leader', permits: 0 };
    const zero = kind.kind === 'permit' && kind.permits === 0;
    if (!zero && !this.names.some(([n]) => n === name)) this.names.push([name, kind]);
    return name;
  }

  /** Checks an acquire's outcome against the step (`expect`, `min_elapsed_ms`) and keeps the lease `as`. */
  async settle(step, lease) {
    const busyExpected = step.expect === 'busy';
    if (lease && busyExpected) {
      await lease.release();
      throw new Error('acquired, expected busy');
    }
    if (!lease && !busyExpected) throw new Error('busy, expected to acquire');
    if (!lease) return;
    // From the previous step's start: the hold this one waits out was written after it.
    const elapsed = performance.now() - this.previousStart;
    if (step.min_elapsed_ms !== undefined && elapsed < step.min_elapsed_ms) {
      throw new Error(`acquired ${elapsed.toFixed(1)} ms after the previous step began, sooner than ${step.min_elapsed_ms} ms`);
    }
    if (step.as) this.leases.set(step.as, lease);
    else await lease.release();
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
  async op(step) {
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
        const once = step.op === 'try_lock';
        const acquiring = acquire(this.client(step), this.name(step), kindOf(step), Run.options(step), once, step);
        if (step.spawn !== undefined) {
          // Settled as an outcome, so that a rejection waits for its `join` instead of going unhandled.
          this.tasks.set(step.spawn, acquiring.then((lease) => ({ lease }), (error) => ({ error })));
          return;
        }
        return this.settle(step, await acquiring);
      }
      case 'join': {
        const task = this.tasks.get(step.task);
        assert.ok(task, `join of a task never spawned: ${step.task}`);
        this.tasks.delete(step.task);
        const { lease, error } = await task;
        if (error) throw error;
        return this.settle(step, lease);
      }
      case 'expect_slot': {
        const slot = (l) => {
          if (l.slot === null || typeof l.slot !== 'number') throw new Error(`lease ${l.name} has no slot`);
          return l.slot;
        };
        const mine = slot(this.lease(step, 'lease'));
        if (step.eq !== undefined && mine !== slot(this.lease(step, 'eq'))) {
          throw new Error(`slot ${mine} is not the slot of ${step.eq}`);
        }
        if (step.ne !== undefined && mine === slot(this.lease(step, 'ne'))) {
          throw new Error(`slot ${mine} is also the slot of ${step.ne}`);
        }
        if (step.below !== undefined && mine >= step.below) throw new Error(`slot ${mine} is not below ${step.below}`);
        return;
      }
      case 'expect_available': {
        const n = await this.client(step).semaphore(this.name(step), step.permits).available();
        if (step.count !== undefined && n !== step.count) {
          throw new Error(`${n} permits available, expected ${step.count}`);
        }
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
      case 'proclaim':
      case 'resign': {
        const leadership = this.lease(step, 'lease');
        assert.ok(leadership instanceof fencelock.Leadership, `${step.lease} is no leadership`);
        return step.op === 'proclaim' ? leadership.proclaim(valueOf(step)) : leadership.resign();
      }
      case 'expect_leader':
        return checkLeader(this, step, await this.client(step).election(this.name(step)).leader());
      case 'observe':
        this.watches.set(step.as, new Watch(this.client(step).election(this.name(step)).observe()));
        return;
      case 'expect_observed': {
        const watch = this.watches.get(step.observer);
        assert.ok(watch, `no observer ${step.observer}`);
        const bound = step.within_ms ?? 10000;
        const report = await watch.next(bound);
        if (!report) throw new Error(`no change observed within ${bound} ms`);
        if (report.error) throw new Error(`observe failed: ${report.error.code}: ${report.error.message}`);
        return checkLeader(this, step, report.leader);
      }
      default:
        throw new Error(`unknown op ${step.op}`);
    }
  }

  /** Runs one step, again every 20 ms within `eventually_ms` until it meets its expectations. */
  async step(step) {
    [this.previousStart, this.currentStart] = [this.currentStart, performance.now()];
    if (step.eventually_ms === undefined) return this.stepOnce(step);
    const deadline = performance.now() + step.eventually_ms;
    for (;;) {
      try {
        return await this.stepOnce(step);
      } catch (e) {
        if (performance.now() >= deadline) throw new Error(`not within ${step.eventually_ms} ms: ${e.message}`);
        await sleep(20);
      }
    }
  }

  async stepOnce(step) {
    const want = expectedErrors(step);
    const started = performance.now();
    let error;
    try {
      if ((await this.op(step)) === SKIP) return;
    } catch (e) {
      if (!(e instanceof LockError)) throw e;
      error = e;
    }
    const elapsed = performance.now() - started;
    const bounded = step.op !== 'expect_lost' && step.op !== 'expect_observed'; // their within_ms bounds a wait
    if (step.within_ms !== undefined && bounded && elapsed > step.within_ms) {
      throw new Error(`took ${elapsed.toFixed(0)} ms, more than ${step.within_ms} ms`);
    }
    if (!error && want.length) throw new Error(`succeeded, expected ${want}`);
    if (error && !want.length) throw new Error(`failed: ${error.code}: ${error.message}`);
    if (error && !want.includes(error.code)) throw new Error(`failed with ${error.code}: ${error.message}, expected ${want}`);
    if (error) assert.equal(error.retryable, ['TIMEOUT', 'UNAVAILABLE'].includes(error.code));
    if (error) checkMentions(step, error);
  }

  /** Stops the observers (their native pollers with them). */
  async stopWatches() {
    for (const watch of this.watches.values()) await watch.iterator.return();
  }

  /** After the scenario: nothing may be left held. */
  async checkClean() {
    await this.stopWatches();
    for (const lease of this.leases.values()) await lease.release().catch(() => {});
    const checker = await connect(this.url);
    try {
      for (const client of this.clients.values()) {
        if (client.localEntries !== 0) throw new Error(`${client.localEntries} local queue entries left`);
      }
      for (const [name, { kind, permits }] of this.names) {
        const tolerated = (codes) => (e) => {
          if (e instanceof LockError && codes.includes(e.code)) return SKIP;
          throw e;
        };
        if (kind === 'read' || kind === 'write') {
          const lease = await checker.rwLock(name).tryWrite().catch(tolerated(['UNSUPPORTED']));
          if (lease === SKIP) continue;
          if (!lease) throw new Error(`read-write lock ${name} left held`);
          await lease.release();
        } else if (kind === 'leader') {
          const leader = await checker.election(name).leader().catch(tolerated(['UNSUPPORTED']));
          if (leader !== SKIP && leader !== null) throw new Error(`election ${name} left a leader (${leader.term})`);
        } else if (kind === 'permit') {
          const n = await checker.semaphore(name, permits).available().catch(tolerated(['UNSUPPORTED', 'INVALID_ARGUMENT']));
          if (n !== SKIP && n !== permits) throw new Error(`semaphore ${name} left ${n} of ${permits} permits`);
        } else {
          const info = await checker.inspect(name);
          if (info.holder != null) throw new Error(`${name} left held by ${info.holder}`);
        }
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
    rw_lock: caps.rwLock,
    semaphore: caps.semaphore,
    election: caps.election,
  })
    .filter(([, on]) => on)
    .map(([n]) => n);
  const row = [];
  const failures = [];
  let passed = 0;
  for (const sc of scenarios()) {
    if ((sc.unless ?? []).some((c) => flags.includes(c)) || (sc.requires ?? []).some((c) => !flags.includes(c))) {
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
      await run.stopWatches();
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
