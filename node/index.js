'use strict';
// fencelock for Node: a thin wrapper over the native addon (bindings/node). Every method returns a Promise and
// reports failure by rejecting it with a LockError; the Node idioms (AbortSignal, withLock, lease.signal,
// Symbol.asyncDispose) live here, the lock semantics in the Rust core.

const { EventEmitter } = require('node:events');
const native = require('./native.js');
const { CODES, LockError, fromNative, invalid } = require('./errors.js');

/** The error codes, as `ErrorCode.TIMEOUT === 'TIMEOUT'`. */
const ErrorCode = Object.freeze(Object.fromEntries(CODES.map((c) => [c, c])));

let nextCancelId = 0;
function cancelId() {
  nextCancelId = (nextCancelId + 1) % 0x1_0000_0000 || 1;
  return nextCancelId;
}

function describe(v) {
  if (v === null) return 'null';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'bigint') return `${v}n`;
  return typeof v === 'object' || typeof v === 'function' ? typeof v : String(v);
}

function checkName(what, name) {
  if (typeof name !== 'string') throw invalid(`${what} must be a string, got ${describe(name)}`);
}

function checkMs(what, v, { infinite = false } = {}) {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || Number.isNaN(v) || v < 0 || (!infinite && !Number.isFinite(v))) {
    throw invalid(`${what} must be a non-negative number of milliseconds, got ${describe(v)}`);
  }
  return v;
}

/** `{ ttlMs, timeoutMs, watchdog, owner, fair }` checked and copied for the addon; `signal` is returned apart. */
function lockOptions(options) {
  const { ttlMs, timeoutMs, watchdog, owner, fair, signal } = optionsObject(options);
  const opts = {};
  if (checkMs('ttlMs', ttlMs) !== undefined) opts.ttlMs = ttlMs;
  if (checkMs('timeoutMs', timeoutMs, { infinite: true }) !== undefined) opts.timeoutMs = timeoutMs;
  if (watchdog !== undefined && watchdog !== null) {
    if (typeof watchdog !== 'boolean') throw invalid(`watchdog must be a boolean, got ${describe(watchdog)}`);
    opts.watchdog = watchdog;
  }
  if (owner !== undefined && owner !== null) {
    if (typeof owner !== 'string') throw invalid(`owner must be a string, got ${describe(owner)}`);
    opts.owner = owner;
  }
  if (fair !== undefined && fair !== null) {
    if (typeof fair !== 'boolean') throw invalid(`fair must be a boolean, got ${describe(fair)}`);
    opts.fair = fair;
  }
  return { opts, signal: checkSignal(signal) };
}

/** `options` as an object to read fields of: `{}` when absent. */
function optionsObject(options) {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object') throw invalid(`options must be an object, got ${describe(options)}`);
  return options;
}

/** An options object's `signal`: an AbortSignal, or undefined when absent. */
function checkSignal(signal) {
  if (signal === undefined || signal === null) return undefined;
  if (!(signal instanceof AbortSignal)) throw invalid(`signal must be an AbortSignal, got ${describe(signal)}`);
  return signal;
}

function cancelled(name, signal) {
  return new LockError('CANCELLED', `lock ${JSON.stringify(name)}: cancelled by its AbortSignal`, {
    cause: signal.reason,
  });
}

/** Runs `fn`, turning whatever it throws (synchronously or not) into a rejected LockError. */
async function guard(fn) {
  try {
    return await fn();
  } catch (e) {
    throw fromNative(e);
  }
}

/**
 * The wait of `lock`, `rwLock(…).read`, …: `call(opts, cancelId)` starts the native acquire; an AbortSignal in the
 * options cancels it (CANCELLED) and leaves no hold behind.
 */
async function waitFor(name, options, call, wrap = (n) => new Lease(n)) {
  checkName('name', name);
  const { opts, signal } = lockOptions(options);
  if (!signal) return wrap(await call(opts, undefined));
  if (signal.aborted) throw cancelled(name, signal);
  const id = cancelId();
  const onAbort = () => native.cancel(id);
  signal.addEventListener('abort', onAbort, { once: true });
  let n;
  try {
    n = await call(opts, id);
  } catch (e) {
    const err = fromNative(e);
    throw err.code === 'CANCELLED' ? cancelled(name, signal) : err;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  if (signal.aborted) {
    // Acquired just as the signal fired: the caller asked for no hold, so give it back.
    await n.release().catch(() => {});
    throw cancelled(name, signal);
  }
  return wrap(n);
}

/** One attempt through `call(opts)`: a Lease (`wrap` of the native one), or null while it is taken. */
async function tryOnce(name, options, call, wrap = (n) => new Lease(n)) {
  checkName('name', name);
  const { opts, signal } = lockOptions(options);
  if (signal && signal.aborted) throw cancelled(name, signal);
  const n = await call(opts);
  return n ? wrap(n) : null;
}

/** A leader's value for the addon: a string (as UTF-8) or bytes; core checks the length (at most 64 KiB). */
function leaderValue(value) {
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  throw invalid(`value must be a string, Buffer or Uint8Array, got ${describe(value)}`);
}

/** `withLock` and its kin: takes a hold by `acquire(options)`, runs `fn(lease)`, releases whatever `fn` does. */
async function withLease(what, options, fn, acquire) {
  if (typeof options === 'function' && fn === undefined) [options, fn] = [undefined, options];
  if (typeof fn !== 'function') throw invalid(`${what} needs a function, got ${describe(fn)}`);
  const lease = await acquire(options);
  let result;
  try {
    result = await fn(lease);
  } catch (e) {
    await lease.release().catch(() => {}); // fn's own error is the one to report, unchanged
    throw e;
  }
  // A failed release (LOCK_LOST: the section ran unprotected) is reported even though fn succeeded.
  await lease.release();
  return result;
}

/** A number of permits for the addon: a safe integer (core checks the range, 1 to 65536). */
function checkPermits(name, permits) {
  if (typeof permits !== 'number' || !Number.isSafeInteger(permits)) {
    throw new LockError(
      'INVALID_ARGUMENT',
      `lock ${JSON.stringify(name)}: a semaphore has 1 to 65536 permits, not ${describe(permits)}`,
      { lock: typeof name === 'string' ? name : undefined },
    );
  }
  return permits;
}

/** `{ connectTimeoutMs, requestTimeoutMs, metrics, metricsNames }` checked and copied for the addon. */
function connectOptions(options) {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object') throw invalid(`options must be an object, got ${describe(options)}`);
  const opts = {};
  for (const key of ['connectTimeoutMs', 'requestTimeoutMs']) {
    if (checkMs(key, options[key]) !== undefined) opts[key] = options[key];
  }
  const { metrics, metricsNames } = options;
  if (metrics !== undefined && metrics !== null) {
    if (typeof metrics !== 'boolean') throw invalid(`metrics must be a boolean, got ${describe(metrics)}`);
    opts.metrics = metrics;
  }
  if (metricsNames !== undefined && metricsNames !== null) {
    const list = Array.isArray(metricsNames);
    if (typeof metricsNames !== 'boolean' && !(list && metricsNames.every((n) => typeof n === 'string'))) {
      throw invalid(`metricsNames must be a boolean or an array of lock names, got ${describe(metricsNames)}`);
    }
    opts.metricsNames = list ? [...metricsNames] : metricsNames;
  }
  return opts;
}

/** snake_case → camelCase (`acquire_wait` → `acquireWait`). */
const camel = (key) => key.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());

// Fields of core's snapshot whose keys are data (outcomes, reasons, ops, lock names), and how many levels deep:
// those keys stay as core spells them, the fields below them are converted again.
const DATA_KEYED = { acquire_wait: 1, renewals: 1, lost: 1, fence_writes: 1, backend_ops: 2, names: 1 };

/** Core's JSON value with its field names in camelCase, the data keys below `dataLevels` levels kept. */
function camelFields(value, dataLevels = 0) {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => camelFields(v));
  const out = {};
  for (const [k, v] of Object.entries(value)) {
    if (dataLevels > 0) out[k] = camelFields(v, dataLevels - 1);
    else out[camel(k)] = camelFields(v, DATA_KEYED[k] ?? 0);
  }
  return out;
}

/** Core's snapshot JSON as a JS object; a bucket's `le: null` (+Inf) becomes `Infinity`. */
function metricsSnapshot(json) {
  return camelFields(JSON.parse(json, (k, v) => (k === 'le' && v === null ? Infinity : v)));
}

/**
 * Connects to `url` (redis://, redlock://, etcd://, zk://, postgres://, sqlite:, memory://); with no URL,
 * `FENCELOCK_URL`, else the SQLite file `fencelock.db` in the working directory. `connectTimeoutMs` and
 * `requestTimeoutMs` default to 5000 each.
 */
function connect(url, options) {
  return guard(async () => {
    if (url !== undefined && url !== null && typeof url !== 'string') {
      throw invalid(`url must be a string, got ${describe(url)}`);
    }
    return new Client(await native.connect(url ?? undefined, connectOptions(options)));
  });
}

class Client {
  #n;

  /** @internal Use `connect()`. */
  constructor(n) {
    this.#n = n;
  }

  /** The backend URL, without secrets. */
  get url() {
    return this.#n.url;
  }

  /** What the backend can do: `{ fencing, nativeWait, fair, sessionBound, rwLock, semaphore, election }`. */
  get capability() {
    return this.#n.capability();
  }

  /** Number of lock names this client holds or queues for locally (0 when idle: nothing leaks). */
  get localEntries() {
    return this.#n.localEntries();
  }

  /** Takes `name`, waiting up to `timeoutMs` (forever by default); `signal` aborts the wait, leaving no lock. */
  lock(name, options) {
    return guard(() => waitFor(name, options, (opts, id) => this.#n.lock(name, opts, id)));
  }

  /** One attempt: the Lease, or null if someone else holds `name`. */
  tryLock(name, options) {
    return guard(() => tryOnce(name, options, (opts) => this.#n.tryLock(name, opts)));
  }

  /** Runs `fn(lease)` holding `name` and releases it afterwards, whatever `fn` does. Resolves to what `fn` returns. */
  async withLock(name, options, fn) {
    return withLease('withLock', options, fn, (o) => this.lock(name, o));
  }

  /** The read-write lock `name`: many readers or one writer (`read`, `write`, `tryRead`, `tryWrite`, …). */
  rwLock(name) {
    return new RwLock(this.#n, name);
  }

  /** The semaphore `name` of `permits` leased permits; every client of the name must use the same number. */
  semaphore(name, permits) {
    return new Semaphore(this.#n, name, permits);
  }

  /** The election `name`: one leader at a time, each with a value and a rising term. */
  election(name) {
    return new Election(this.#n, name);
  }

  /** The fenced register `resource` in this client's backend. */
  fence(resource) {
    return new Fence(this.#n, resource);
  }

  /** Who holds `name`: `{ holder, remainingMs, lastToken }` (null/undefined when free or unknown). */
  inspect(name) {
    return guard(async () => {
      checkName('name', name);
      return await this.#n.inspect(name);
    });
  }

  /** Deletes the record of `name` whoever holds it (an operator's tool); resolves to whether there was one. */
  forceRelease(name) {
    return guard(async () => {
      checkName('name', name);
      return await this.#n.forceRelease(name);
    });
  }

  /**
   * This client's metrics now, as plain data (core's snapshot): acquire waits by outcome, hold times, active leases,
   * renewals, losses by reason, fenced writes, waiting calls, backend round trips, and the opted-in lock names.
   */
  metrics() {
    return metricsSnapshot(this.#n.metricsJson());
  }

  /** @internal Core's metric families now (`fencelock::metrics::families_json`), for node/prometheus.js. */
  metricFamilies() {
    return JSON.parse(this.#n.metricsFamiliesJson());
  }

  /** Releases every lease this client holds and closes its connections. Later calls reject with CLOSED. */
  close() {
    return guard(() => this.#n.close());
  }
}

/**
 * A read-write lock: many readers or one writer; a waiting writer blocks new readers. Each hold is a Lease (TTL,
 * watchdog, lost signal, reentrancy per `owner`). An owner holding the write lock may take the read lock too (a
 * downgrade); one holding the read lock that asks for the write lock is refused with INVALID_ARGUMENT (an upgrade).
 * A backend without read-write locks (`capability.rwLock` false) rejects with UNSUPPORTED.
 */
class RwLock {
  #n;
  #name;

  /** @internal Use `client.rwLock(name)`. */
  constructor(client, name) {
    this.#n = client;
    this.#name = name;
  }

  /** The lock name. */
  get name() {
    return this.#name;
  }

  /** A read hold, waiting up to `timeoutMs` while a writer holds or waits; `signal` aborts the wait. */
  read(options) {
    return guard(() => waitFor(this.#name, options, (opts, id) => this.#n.hold(this.#name, 'read', 0, opts, id)));
  }

  /** One attempt at a read hold: the Lease, or null while a writer holds or waits. */
  tryRead(options) {
    return guard(() => tryOnce(this.#name, options, (opts) => this.#n.tryHold(this.#name, 'read', 0, opts)));
  }

  /** The write hold, waiting up to `timeoutMs` for readers and another writer; `signal` aborts the wait. */
  write(options) {
    return guard(() => waitFor(this.#name, options, (opts, id) => this.#n.hold(this.#name, 'write', 0, opts, id)));
  }

  /** One attempt at the write hold: the Lease, or null while anyone holds. */
  tryWrite(options) {
    return guard(() => tryOnce(this.#name, options, (opts) => this.#n.tryHold(this.#name, 'write', 0, opts)));
  }

  /** Runs `fn(lease)` holding a read hold and releases it afterwards; resolves to what `fn` returns. */
  async withRead(options, fn) {
    return withLease('withRead', options, fn, (o) => this.read(o));
  }

  /** Runs `fn(lease)` holding the write hold and releases it afterwards; resolves to what `fn` returns. */
  async withWrite(options, fn) {
    return withLease('withWrite', options, fn, (o) => this.write(o));
  }
}

/**
 * At most `permits` holds at once across every client. Each permit is a Lease whose `slot` (0…permits−1) has its own
 * rising token, so a resource partitioned by slot is fenced like a mutex. A backend without semaphores rejects with
 * UNSUPPORTED.
 */
class Semaphore {
  #n;
  #name;
  #permits;

  /** @internal Use `client.semaphore(name, permits)`. */
  constructor(client, name, permits) {
    this.#n = client;
    this.#name = name;
    this.#permits = permits;
  }

  /** The semaphore's name. */
  get name() {
    return this.#name;
  }

  /** The number of permits it was opened with. */
  get permits() {
    return this.#permits;
  }

  /** A permit, waiting up to `timeoutMs` while all are held; `signal` aborts the wait. */
  acquire(options) {
    return guard(() =>
      waitFor(this.#name, options, (opts, id) =>
        this.#n.hold(this.#name, 'permit', checkPermits(this.#name, this.#permits), opts, id),
      ),
    );
  }

  /** One attempt at a permit: the Lease, or null while all are held. */
  tryAcquire(options) {
    return guard(() =>
      tryOnce(this.#name, options, (opts) =>
        this.#n.tryHold(this.#name, 'permit', checkPermits(this.#name, this.#permits), opts),
      ),
    );
  }

  /** Permits not held now, per the backend. */
  available() {
    return guard(async () => {
      checkName('name', this.#name);
      return await this.#n.available(this.#name, checkPermits(this.#name, this.#permits));
    });
  }

  /** Runs `fn(permit)` holding a permit and releases it afterwards, whatever `fn` does; resolves to what it returns. */
  async withPermit(options, fn) {
    return withLease('withPermit', options, fn, (o) => this.acquire(o));
  }
}

/**
 * Leader election: at most one leader at a time. A leadership is a Lease (TTL, watchdog, lost signal) whose `term` is
 * its fencing token, rising with every new leader; `observe()` reports each change of leader. A backend without
 * elections (`capability.election` false) rejects with UNSUPPORTED.
 */
class Election {
  #n;
  #name;

  /** @internal Use `client.election(name)`. */
  constructor(client, name) {
    this.#n = client;
    this.#name = name;
  }

  /** The election's name. */
  get name() {
    return this.#name;
  }

  /** Campaigns with `value`, waiting up to `timeoutMs` while another leads; `signal` aborts, leaving no candidate. */
  campaign(value, options) {
    return guard(async () => {
      const v = leaderValue(value);
      return waitFor(this.#name, options, (opts, id) => this.#n.campaign(this.#name, v, opts, id), this.#wrap);
    });
  }

  /** One attempt: the Leadership, or null while another leads. */
  tryCampaign(value, options) {
    return guard(async () => {
      const v = leaderValue(value);
      return tryOnce(this.#name, options, (opts) => this.#n.tryCampaign(this.#name, v, opts), this.#wrap);
    });
  }

  /** Who leads now: `{ value: Buffer, term: bigint }`, or null. */
  leader() {
    return guard(async () => {
      checkName('name', this.#name);
      return (await this.#n.leader(this.#name)) ?? null;
    });
  }

  /**
   * The changes of leader, as an async iterable: the leader now (`{ value, term }`, or null when nobody leads), then
   * every change in order, never a leader older than one already reported. `break` (or `return()`) stops observing;
   * aborting `signal` rejects the waiting `next()` with CANCELLED. A failure (CLOSED once the client closes) rejects
   * `next()` and ends the iteration.
   */
  observe(options) {
    const signal = checkSignal(optionsObject(options).signal);
    checkName('name', this.#name);
    return new Observation(this.#n.observe(this.#name), this.#name, signal);
  }

  #wrap = (n) => new Leadership(n, this.#n, this.#name);
}

/**
 * The async iterator of `election.observe()`. One native `next` runs at a time (so reports keep their order); its
 * wait is cancellable, which is how `return()` and the AbortSignal stop it.
 */
class Observation {
  #n;
  #name;
  #signal;
  #done = false;
  #pending = undefined; // the cancel id of the native next in flight
  #queue = Promise.resolve();
  #onAbort = () => this.#finish();

  /** @internal Use `election.observe()`. */
  constructor(n, name, signal) {
    this.#n = n;
    this.#name = name;
    this.#signal = signal;
    if (signal) signal.addEventListener('abort', this.#onAbort, { once: true });
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  /** `{ value: { value, term } | null, done: false }`, or `{ done: true }` once stopped. */
  next() {
    const result = this.#queue.then(() => this.#pull());
    this.#queue = result.catch(() => {});
    return result;
  }

  /** Stops observing: a waiting `next()` resolves done, the native observer is dropped. */
  async return() {
    this.#finish();
    return { value: undefined, done: true };
  }

  async #pull() {
    if (this.#signal?.aborted) throw cancelled(this.#name, this.#signal);
    if (this.#done) return { value: undefined, done: true };
    const id = cancelId();
    this.#pending = id;
    try {
      const leader = await this.#n.next(id);
      return { value: leader ?? null, done: false };
    } catch (e) {
      if (this.#signal?.aborted) throw cancelled(this.#name, this.#signal);
      if (this.#done) return { value: undefined, done: true }; // cancelled by return()
      this.#finish();
      throw fromNative(e);
    } finally {
      this.#pending = undefined;
    }
  }

  #finish() {
    if (this.#done) return;
    this.#done = true;
    if (this.#signal) this.#signal.removeEventListener('abort', this.#onAbort);
    if (this.#pending !== undefined) native.cancel(this.#pending);
    this.#n.close();
  }
}

class Lease extends EventEmitter {
  #n;
  #controller = null;
  #watching = false;
  #lostError = null;
  #released = false;

  /** @internal Returned by `client.lock` / `client.tryLock`. */
  constructor(n) {
    super();
    this.#n = n;
    /** The lock name. */
    this.name = n.name;
    /** The fencing token: larger than every earlier grant's on this lock; readable after release. */
    this.fence = n.fence;
    /** A semaphore permit's slot, 0…permits−1 (its token is the slot's own counter); null for other holds. */
    this.slot = n.slot ?? null;
    this.on('newListener', (event) => {
      if (event === 'lost') this.#watch();
    });
  }

  /** An AbortSignal aborted (with a LOCK_LOST LockError as its reason) when the lease is lost. */
  get signal() {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#lostError) this.#controller.abort(this.#lostError);
    }
    this.#watch();
    return this.#controller.signal;
  }

  /** `<client uuid>:<owner>`, as written into the backend record. */
  get holder() {
    return this.#n.holder;
  }

  /** Not released, not lost, and within its validity by our clock. */
  get valid() {
    return this.#n.isValid();
  }

  /** Milliseconds of validity left unless renewed. */
  get remainingMs() {
    return this.#n.remainingMs();
  }

  /** Extends the lease to `ttlMs` from now (its current TTL if omitted). */
  renew(ttlMs) {
    return guard(async () => {
      checkMs('ttlMs', ttlMs);
      return await this.#n.renew(ttlMs ?? undefined);
    });
  }

  /** Releases the lease. NOT_HELD if already released; LOCK_LOST if it was lost while held. */
  release() {
    this.#released = true;
    return guard(() => this.#n.release());
  }

  /** Whether `release()` was called. */
  get released() {
    return this.#released;
  }

  #watch() {
    if (this.#watching) return;
    this.#watching = true;
    // Core reports a loss that already happened at once, with its own reason.
    this.#n.onLost((fields) => this.#lost(fields));
  }

  #lost(fields) {
    if (this.#lostError) return;
    this.#lostError = LockError.fromFields(fields);
    if (this.#controller) this.#controller.abort(this.#lostError);
    this.emit('lost', this.#lostError);
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  // `await using lease = await client.lock(…)`: released at the end of the block unless released already.
  Object.defineProperty(Lease.prototype, Symbol.asyncDispose, {
    value: async function dispose() {
      if (!this.released) await this.release();
    },
    configurable: true,
    writable: true,
  });
}

/** A leadership won by `election.campaign`: a Lease whose fence is the `term`; `resign()` releases it. */
class Leadership extends Lease {
  #n;
  #client;
  #election;

  /** @internal Returned by `election.campaign` / `election.tryCampaign`. */
  constructor(n, client, election) {
    super(n);
    this.#n = n;
    this.#client = client;
    this.#election = election;
    /** The term: the leadership's fencing token, larger than every earlier leader's of this election. */
    this.term = n.fence;
  }

  /** Replaces the leader's value, keeping the term. NOT_HELD after a resign, LOCK_LOST if the leadership was lost. */
  proclaim(value) {
    return guard(async () => await this.#client.proclaim(this.#election, this.#n, leaderValue(value)));
  }

  /** Gives the leadership up (a release). */
  resign() {
    return this.release();
  }
}

class Fence {
  #n;
  #resource;

  /** @internal Use `client.fence(resource)`. */
  constructor(client, resource) {
    this.#n = client;
    this.#resource = resource;
  }

  get resource() {
    return this.#resource;
  }

  #native() {
    checkName('resource', this.#resource);
    return this.#n.fence(this.#resource);
  }

  /** Stores `value` if `token` ≥ the highest token accepted so far; rejects with FENCED if it is older. */
  write(token, value) {
    return guard(async () => {
      if (typeof token === 'number' && Number.isSafeInteger(token) && token >= 0) token = BigInt(token);
      if (typeof token !== 'bigint' || token < 0n || token >= 1n << 64n) {
        throw invalid(`token must be a bigint in 0..2^64, got ${describe(token)}`);
      }
      if (typeof value === 'string') value = Buffer.from(value);
      else if (value instanceof Uint8Array && !Buffer.isBuffer(value)) value = Buffer.from(value);
      else if (!Buffer.isBuffer(value)) throw invalid(`value must be a Buffer, got ${describe(value)}`);
      return await this.#native().write(token.toString(), value);
    });
  }

  /** The highest accepted token and its value: `{ token: bigint, value: Buffer }` (`0n` and empty if never written). */
  read() {
    return guard(() => this.#native().read());
  }
}

module.exports = { connect, Client, Lease, Leadership, Election, Fence, RwLock, Semaphore, LockError, ErrorCode };
