// Type declarations for fencelock (hand-written; node/index.js is the implementation).

/** The error codes of DESIGN.md §5, the same strings in every language. */
export type ErrorCodeName =
  | 'TIMEOUT'
  | 'LOCK_LOST'
  | 'NOT_HELD'
  | 'FENCED'
  | 'UNAVAILABLE'
  | 'INVALID_ARGUMENT'
  | 'UNSUPPORTED'
  | 'CLOSED'
  | 'CANCELLED'
  | 'INTERNAL';

export declare const ErrorCode: { readonly [K in ErrorCodeName]: K };

/** Every fencelock failure: a rejected Promise carries one of these. */
export declare class LockError extends Error {
  readonly name: 'LockError';
  /** What went wrong; codes, not messages, are API. */
  readonly code: ErrorCodeName;
  /** Whether trying the same call again later may succeed (TIMEOUT, UNAVAILABLE), as the core decides it. */
  readonly retryable: boolean;
  /** The lock the error is about, when there is one. */
  readonly lock?: string;
  /** The backend it came from, as its URL without secrets, when known. */
  readonly backend?: string;
}

export interface ConnectOptions {
  /** How long connecting may take, in ms (default 5000). */
  connectTimeoutMs?: number;
  /** How long one backend request may take, in ms (default 5000). */
  requestTimeoutMs?: number;
  /** Record metrics (`client.metrics()`); default true. False makes every hook a branch and records nothing. */
  metrics?: boolean;
  /**
   * Which lock names get series of their own: none by default (names are unbounded), `true` for all (at most 1000,
   * the rest summed under `_other`), or these names only.
   */
  metricsNames?: boolean | string[];
}

/** Durations in fixed buckets, as Prometheus has them. */
export interface Histogram {
  /** Observations so far. */
  count: number;
  /** Their sum, in seconds. */
  sum: number;
  /** Cumulative counts by upper bound in seconds; the last `le` is `Infinity`. */
  buckets: { le: number; count: number }[];
}

/** The outcomes of a `lock`/`tryLock` call: `busy` is a tryLock that found it held, `cancelled` an aborted wait. */
export type AcquireOutcome = 'acquired' | 'busy' | 'timeout' | 'cancelled' | 'error';

/** One opted-in lock name's figures. */
export interface NameMetrics {
  acquireWait: Record<AcquireOutcome, Histogram>;
  holdTime: Histogram;
  activeLeases: number;
  /** Losses of this name, any reason. */
  lost: number;
  localQueueDepth: number;
}

/** A client's metrics at one moment (core's snapshot). Counters count from the client's creation. */
export interface MetricsSnapshot {
  /** The backend's scheme: `redis`, `sqlite`, … */
  backend: string;
  /** Whether this client records at all (the `metrics` connect option). */
  enabled: boolean;
  /** Time spent in `lock`/`tryLock`, by outcome. */
  acquireWait: Record<AcquireOutcome, Histogram>;
  /** Time from grant to release or loss. */
  holdTime: Histogram;
  /** Grants held now. */
  activeLeases: number;
  /** Backend renewals (watchdog and explicit) by outcome. */
  renewals: Record<'ok' | 'failed', number>;
  /** Leases lost while held: the TTL passed unrenewed, the record was gone or another's, or no renewal got through. */
  lost: Record<'expired' | 'taken' | 'unreachable', number>;
  /** Fenced writes by outcome; `refused` is a stale token. */
  fenceWrites: Record<'ok' | 'refused' | 'error', number>;
  /** `lock` calls still waiting, locally or at the backend. */
  localQueueDepth: number;
  /** Backend round trips by operation, then `ok` (the backend answered, refusals included) or `error`. */
  backendOps: Record<
    'acquire' | 'renew' | 'release' | 'force_release' | 'inspect' | 'fence_write' | 'fence_read',
    Record<'ok' | 'error', Histogram>
  >;
  /** Per-lock figures for the names opted in (`metricsNames`); names past the cap are summed under `_other`. */
  names: Record<string, NameMetrics>;
}

export interface LockOptions {
  /** Lease time to live on the backend, in ms (default 30000; session timeout on ZooKeeper). */
  ttlMs?: number;
  /** How long `lock` waits for the holder to let go, in ms; absent or `Infinity` waits forever. */
  timeoutMs?: number;
  /** Renew every ttl/3 until released (default true). */
  watchdog?: boolean;
  /** Reentrancy key: a second `lock` by the same owner on the same client returns the same grant. */
  owner?: string;
  /**
   * Wait in arrival order among all clients (`true`) or not (`false`) where the backend offers both (Redis);
   * absent: the backend's default.
   */
  fair?: boolean;
  /** Aborting it cancels a waiting `lock` (rejects with CANCELLED) and leaves no lock behind. */
  signal?: AbortSignal;
}

export interface Capability {
  fencing: boolean;
  nativeWait: boolean;
  fair: boolean;
  sessionBound: boolean;
  /** Read-write locks (`client.rwLock`); without them their calls reject with UNSUPPORTED. */
  rwLock: boolean;
  /** Semaphores of leased permits (`client.semaphore`); without them their calls reject with UNSUPPORTED. */
  semaphore: boolean;
  /** Leader elections (`client.election`); without them their calls reject with UNSUPPORTED. */
  election: boolean;
}

export interface LockInfo {
  /** `<client uuid>:<owner>` of the holder, if held. */
  holder?: string | null;
  remainingMs?: number | null;
  /** The last fencing token handed out for this name. */
  lastToken?: bigint | null;
}

/**
 * Connects to `url` (`redis://`, `redlock://h1,h2,h3`, `etcd://`, `zk://`, `postgres://`, `sqlite:PATH`,
 * `memory://NAME`); with none, `FENCELOCK_URL`, else the SQLite file `fencelock.db` in the working directory.
 */
export declare function connect(url?: string | null, options?: ConnectOptions): Promise<Client>;

export declare class Client {
  private constructor();
  /** The backend URL, without secrets. */
  readonly url: string;
  readonly capability: Capability;
  /** Number of lock names this client holds or queues for locally (0 when idle). */
  readonly localEntries: number;
  /** Takes `name`, waiting up to `timeoutMs` (forever by default). Rejects with TIMEOUT if it stays taken. */
  lock(name: string, options?: LockOptions): Promise<Lease>;
  /** One attempt: the Lease, or null if someone else holds `name`. */
  tryLock(name: string, options?: LockOptions): Promise<Lease | null>;
  /** Runs `fn(lease)` holding `name`, releasing it in `finally`; resolves to what `fn` returns. */
  withLock<T>(name: string, options: LockOptions | undefined, fn: (lease: Lease) => T | Promise<T>): Promise<T>;
  withLock<T>(name: string, fn: (lease: Lease) => T | Promise<T>): Promise<T>;
  /** The read-write lock `name`: many readers or one writer. */
  rwLock(name: string): RwLock;
  /** The semaphore `name` of `permits` leased permits (1 to 65536; every client of the name must use the same). */
  semaphore(name: string, permits: number): Semaphore;
  /** The election `name`: one leader at a time, each with a value and a rising term. */
  election(name: string): Election;
  /** The fenced register `resource`, stored in this client's backend. */
  fence(resource: string): Fence;
  /** Who holds `name`, for how long, and the last token handed out. */
  inspect(name: string): Promise<LockInfo>;
  /** Deletes the record of `name` whoever holds it (an operator's tool); resolves to whether there was one. */
  forceRelease(name: string): Promise<boolean>;
  /** This client's metrics now, as plain data. */
  metrics(): MetricsSnapshot;
  /** Releases every lease and closes the connections; later calls reject with CLOSED. */
  close(): Promise<void>;
}

/**
 * Many readers or one writer; a waiting writer blocks new readers. An owner holding the write lock may take the read
 * lock too (a downgrade); one holding the read lock that asks for the write lock gets INVALID_ARGUMENT (an upgrade).
 * Readers of one run of overlapping holds share a fencing token; every write hold and every new run draws a larger one.
 */
export declare class RwLock {
  private constructor();
  readonly name: string;
  /** A read hold, waiting up to `timeoutMs` while a writer holds or waits. Rejects with TIMEOUT, CANCELLED, … */
  read(options?: LockOptions): Promise<Lease>;
  /** One attempt at a read hold: the Lease, or null while a writer holds or waits. */
  tryRead(options?: LockOptions): Promise<Lease | null>;
  /** The write hold, waiting up to `timeoutMs` for readers and another writer. */
  write(options?: LockOptions): Promise<Lease>;
  /** One attempt at the write hold: the Lease, or null while anyone holds. */
  tryWrite(options?: LockOptions): Promise<Lease | null>;
  /** Runs `fn(lease)` holding a read hold, releasing it in `finally`; resolves to what `fn` returns. */
  withRead<T>(options: LockOptions | undefined, fn: (lease: Lease) => T | Promise<T>): Promise<T>;
  withRead<T>(fn: (lease: Lease) => T | Promise<T>): Promise<T>;
  /** Runs `fn(lease)` holding the write hold, releasing it in `finally`; resolves to what `fn` returns. */
  withWrite<T>(options: LockOptions | undefined, fn: (lease: Lease) => T | Promise<T>): Promise<T>;
  withWrite<T>(fn: (lease: Lease) => T | Promise<T>): Promise<T>;
}

/** At most `permits` holds at once across every client; each permit occupies a `slot` with its own rising token. */
export declare class Semaphore {
  private constructor();
  readonly name: string;
  readonly permits: number;
  /** A permit, waiting up to `timeoutMs` while all are held. INVALID_ARGUMENT for a bad or disagreeing `permits`. */
  acquire(options?: LockOptions): Promise<Lease>;
  /** One attempt at a permit: the Lease, or null while all are held. */
  tryAcquire(options?: LockOptions): Promise<Lease | null>;
  /** Permits not held now, per the backend. */
  available(): Promise<number>;
  /** Runs `fn(permit)` holding a permit, releasing it in `finally`; resolves to what `fn` returns. */
  withPermit<T>(options: LockOptions | undefined, fn: (permit: Lease) => T | Promise<T>): Promise<T>;
  withPermit<T>(fn: (permit: Lease) => T | Promise<T>): Promise<T>;
}

/** A leader's value: a string (stored as UTF-8) or bytes, at most 65536 bytes (INVALID_ARGUMENT beyond). */
export type LeaderValue = string | Buffer | Uint8Array;

/** Who leads an election. */
export interface Leader {
  /** The value it campaigned with, or last proclaimed. */
  value: Buffer;
  /** Its term: the fencing token of its leadership, rising with every new leader. */
  term: bigint;
}

export interface ObserveOptions {
  /** Aborting it stops observing: the waiting `next()` rejects with CANCELLED. */
  signal?: AbortSignal;
}

/**
 * At most one leader at a time. A campaign waits up to `timeoutMs` (forever by default) while another leads; a
 * campaign that times out or is aborted leaves no candidate behind.
 */
export declare class Election {
  private constructor();
  readonly name: string;
  /** Campaigns with `value`, waiting while another leads. Rejects with TIMEOUT, CANCELLED, INVALID_ARGUMENT, … */
  campaign(value: LeaderValue, options?: LockOptions): Promise<Leadership>;
  /** One attempt: the Leadership, or null while another leads. */
  tryCampaign(value: LeaderValue, options?: LockOptions): Promise<Leadership | null>;
  /** Who leads now, or null. */
  leader(): Promise<Leader | null>;
  /**
   * The leader now (null when nobody leads), then every change in order, never a leader older than one already
   * reported: `for await (const leader of election.observe())`. `break` stops observing; a failure (CLOSED once the
   * client closes) rejects and ends the iteration.
   */
  observe(options?: ObserveOptions): AsyncIterableIterator<Leader | null>;
}

export interface LeaseEvents {
  lost: [error: LockError];
}

export declare class Lease {
  /** Leases come from `lock`, `campaign`, …; protected only so that Leadership can extend it. */
  protected constructor();
  readonly name: string;
  /** The fencing token: larger than every earlier grant's on this lock; readable after release. */
  readonly fence: bigint;
  /** `<client uuid>:<owner>`, as written into the backend record. */
  readonly holder: string;
  /** A semaphore permit's slot, 0…permits−1 (its token is the slot's own counter); null for other holds. */
  readonly slot: number | null;
  /** Aborted, with a LOCK_LOST LockError as its reason, when the lease is lost. */
  readonly signal: AbortSignal;
  /** Not released, not lost, and within its validity by our clock. */
  readonly valid: boolean;
  /** Milliseconds of validity left unless renewed. */
  readonly remainingMs: number;
  /** Whether `release()` was called. */
  readonly released: boolean;
  /** Extends the lease to `ttlMs` from now (its current TTL if omitted). LOCK_LOST if it is no longer ours. */
  renew(ttlMs?: number): Promise<void>;
  /** Releases the lease. NOT_HELD if already released; LOCK_LOST if it was lost while held. */
  release(): Promise<void>;
  on(event: 'lost', listener: (error: LockError) => void): this;
  once(event: 'lost', listener: (error: LockError) => void): this;
  off(event: 'lost', listener: (error: LockError) => void): this;
  /** `await using lease = await client.lock(…)` releases it at the end of the block. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** A leadership: a Lease whose fence is the term; it renews, is lost and is released like any lease. */
export declare class Leadership extends Lease {
  /** The term, equal to `fence`: larger than every earlier leader's of this election. */
  readonly term: bigint;
  /** Replaces the leader's value, keeping the term. NOT_HELD after a resign, LOCK_LOST if the leadership was lost. */
  proclaim(value: LeaderValue): Promise<void>;
  /** Gives the leadership up (the same as `release()`). */
  resign(): Promise<void>;
}

export declare class Fence {
  private constructor();
  readonly resource: string;
  /** Stores `value` if `token` ≥ the highest token accepted so far; rejects with FENCED if it is older. */
  write(token: bigint, value: Buffer | Uint8Array | string): Promise<void>;
  /** The highest accepted token and its value (`0n` and an empty Buffer if never written). */
  read(): Promise<{ token: bigint; value: Buffer }>;
}
