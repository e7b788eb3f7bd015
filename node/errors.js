'use strict';
// The one place native failures become LockError (DESIGN.md §5). The addon rejects with a reason
// "<CODE>: <message>" because napi-rs cannot carry a custom code out of an async call.

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
const RETRYABLE = new Set(['TIMEOUT', 'UNAVAILABLE']);
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

/** A fencelock failure: `.code` is one of the CODES, `.retryable` says whether trying again later may succeed. */
class LockError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.name = 'LockError';
    this.code = CODES.includes(code) ? code : 'INTERNAL';
    this.retryable = RETRYABLE.has(this.code);
  }
}

const REASON = /^([A-Z_]+): ([\s\S]*)$/;

/** Any error from the addon (or a LockError already) as a LockError. */
function fromNative(err) {
  if (err instanceof LockError) return err;
  const message = err && typeof err.message === 'string' ? err.message : String(err);
  const m = REASON.exec(message);
  if (m && CODES.includes(m[1])) return new LockError(m[1], m[2]);
  if (err && NAPI_ARG_STATUSES.has(err.code)) return new LockError('INVALID_ARGUMENT', message, { cause: err });
  return new LockError('INTERNAL', message, { cause: err });
}

function invalid(message) {
  return new LockError('INVALID_ARGUMENT', message);
}

module.exports = { CODES, LockError, fromNative, invalid };
