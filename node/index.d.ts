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
  /** Aborting it cancels a waiting `lock` (rejects with CANCELLED) and leaves no lock behind. */
  signal?: AbortSignal;
}

export interface Capability {
  fencing: boolean;
  nativeWait: boolean;
  fair: boolean;
  sessionBound: boolean;
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
  /** The fenced register `resource`, stored in this client's backend. */
  fence(resource: string): Fence;
  /** Who holds `name`, for how long, and the last token handed out. */
  inspect(name: string): Promise<LockInfo>;
  /** Deletes the record of `name` whoever holds it (an operator's tool); resolves to whether there was one. */
  forceRelease(name: string): Promise<boolean>;
  /** Releases every lease and closes the connections; later calls reject with CLOSED. */
  close(): Promise<void>;
}

export interface LeaseEvents {
  lost: [error: LockError];
}

export declare class Lease {
  private constructor();
  readonly name: string;
  /** The fencing token: larger than every earlier grant's on this lock; readable after release. */
  readonly fence: bigint;
  /** `<client uuid>:<owner>`, as written into the backend record. */
  readonly holder: string;
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

export declare class Fence {
  private constructor();
  readonly resource: string;
  /** Stores `value` if `token` ≥ the highest token accepted so far; rejects with FENCED if it is older. */
  write(token: bigint, value: Buffer | Uint8Array | string): Promise<void>;
  /** The highest accepted token and its value (`0n` and an empty Buffer if never written). */
  read(): Promise<{ token: bigint; value: Buffer }>;
}
