'use strict';
// The one place native failures become LockError (DESIGN.md §5). The addon rejects with a reason that is the core
// error's fields as one JSON object — { code, message, lock, backend, retryable } — because napi-rs cannot carry a
// custom code out of an async call; the lost callback receives the same fields as an object.

const CODES = Object.freeze([
  'TIMEOUT',
  'LOCK_LOST',
  'NOT_HELD',
  'FENCED',
  'UNAVAILABLE',
  'INVALID_ARGUMENT',
  'UNSUPPORTED',
  'CLOSED',
  'CANCELLED',
  'INTERNAL',
]);
// napi's own statuses for arguments of the wrong JS type.
const NAPI_ARG_STATUSES = new Set([
  'InvalidArg',
  'ObjectExpected',
  'StringExpected',
  'NumberExpected',
  'BooleanExpected',
  'BigintExpected',
  'FunctionExpected',
  'ArrayExpected',
]);

/**
 * A fencelock failure: `.code` is one of the CODES, `.retryable` says whether trying again later may succeed (as
 * core decides it), `.lock` and `.backend` name the lock and the backend (its URL without secrets) when known.
 */
class LockError extends Error {
  constructor(code, message, { cause, lock, backend, retryable } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'LockError';
    this.code = CODES.includes(code) ? code : 'INTERNAL';
    this.retryable = retryable === true;
    this.lock = lock ?? undefined;
    this.backend = backend ?? undefined;
  }

  /** A LockError from the fields the addon reports. */
  static fromFields(f, cause) {
    return new LockError(f.code, f.message, { cause, lock: f.lock, backend: f.backend, retryable: f.retryable });
  }
}

/** The fields in a native rejection's message, or null if it carries none (napi's own argument errors). */
function fields(message) {
  let f;
  try {
    f = JSON.parse(message);
  } catch {
    return null;
  }
  return f && typeof f === 'object' && typeof f.code === 'string' && typeof f.message === 'string' ? f : null;
}

/** Any error from the addon (or a LockError already) as a LockError. */
function fromNative(err) {
  if (err instanceof LockError) return err;
  const message = err && typeof err.message === 'string' ? err.message : String(err);
  const f = fields(message);
  if (f) return LockError.fromFields(f);
  if (err && NAPI_ARG_STATUSES.has(err.code)) return new LockError('INVALID_ARGUMENT', message, { cause: err });
  return new LockError('INTERNAL', message, { cause: err });
}

function invalid(message) {
  return new LockError('INVALID_ARGUMENT', message);
}

module.exports = { CODES, LockError, fromNative, invalid };
