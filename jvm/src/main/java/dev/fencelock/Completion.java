package dev.fencelock;

/**
 * Where a native task reports its result, called once from a runtime thread (attached to the JVM as a daemon):
 * {@link #done} with per-operation values (see {@link Native}) or {@link #fail} with an error code of DESIGN.md §5.
 * These run no user code: user callbacks on the public futures run on the common pool.
 */
abstract class Completion {
    abstract void done(long a, long b, String text, byte[] data);

    /** The core error's fields: its code, message (naming lock and backend), lock, backend, retryable. */
    abstract void fail(int code, String message, String lock, String backend, boolean retryable);
}
