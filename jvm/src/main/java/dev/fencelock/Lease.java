package dev.fencelock;

import java.time.Duration;
import java.util.OptionalInt;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A held lock. {@link #close()} releases it, for try-with-resources. Any thread may renew or release a lease; the
 * watchdog renews it every ttl/3 unless turned off. The fence token stays readable after release. A
 * {@link Leadership} is the lease of an election's leader.
 */
public sealed class Lease implements AutoCloseable permits Leadership {
    private final NativeHandle handle;
    private final String name;
    private final long fence;
    private final long slot;
    private final AtomicBoolean released = new AtomicBoolean();
    private CompletableFuture<Void> lost;
    private volatile boolean lostAtRelease;

    Lease(long ptr, String name, long fence) {
        this.handle = new NativeHandle(ptr, Native::leaseFree).register(this);
        this.name = name;
        this.fence = fence;
        this.slot = Native.leaseSlot(ptr);
    }

    /** The lock name. */
    public String name() {
        return name;
    }

    /** The fencing token: larger than every earlier grant's on this lock and backend. Readable after release. */
    public long fence() {
        return fence;
    }

    /**
     * A semaphore permit's slot (0…permits−1; its token is that slot's own counter); empty for other holds. Readable
     * after release.
     */
    public OptionalInt slot() {
        return slot < 0 ? OptionalInt.empty() : OptionalInt.of((int) slot);
    }

    /** The holder id written to the backend: {@code <client uuid>:<owner>}. */
    public String holder() {
        return call(Native::leaseHolder);
    }

    /** Whether the lease is still ours by our own clock: not released, not lost, validity not passed. */
    public boolean isValid() {
        return !released.get() && ifHeld(p -> Native.leaseIsValid(p), false);
    }

    /** Time left before the lease's validity ends unless renewed (zero once released). */
    public Duration remaining() {
        return Duration.ofMillis(ifHeld(p -> Native.leaseRemainingMs(p), 0L));
    }

    /** Whether the lease is lost: its lost signal fired, or its validity passed without a renewal (it fires then). */
    public boolean isLost() {
        return ifHeld(p -> Native.leaseIsLost(p), lostAtRelease);
    }

    /** Extends the lease to its current TTL from now. {@code LOCK_LOST} if it is no longer ours. */
    public void renew() {
        Call.await(renewStart(-1));
    }

    /** Extends the lease to {@code ttl} from now. {@code LOCK_LOST} if it is no longer ours. */
    public void renew(Duration ttl) {
        Call.await(renewStart(renewMillis(ttl)));
    }

    /** {@link #renew(Duration)} without blocking. */
    public CompletableFuture<Void> renewAsync(Duration ttl) {
        return Call.publish(renewStart(renewMillis(ttl)), null);
    }

    /** A renewal TTL in ms: negative is 0 and too long for a long is {@code Long.MAX_VALUE}, both refused by the core. */
    private static long renewMillis(Duration ttl) {
        return ttl.isNegative() ? 0 : LockOptions.saturatedMillis(ttl);
    }

    private CompletableFuture<Void> renewStart(long ttlMs) {
        return call(p -> Call.start((a, b, t, d) -> null, null, c -> Native.leaseRenew(p, ttlMs, c)));
    }

    /**
     * Releases this hold (the lock itself once every reentrant hold is released). {@code NOT_HELD} if already
     * released; {@code LOCK_LOST} if the lock was lost while held (the critical section was not protected).
     */
    public void release() {
        claimRelease();
        if (Threads.currentIsVirtual()) {
            Call.await(releaseTask());
            return;
        }
        try {
            handle.call(this::releasedError, p -> {
                Native.leaseReleaseBlocking(p);
                return null;
            });
        } finally {
            releaseDone();
        }
    }

    /** {@link #release()} without blocking. */
    public CompletableFuture<Void> releaseAsync() {
        return Call.publish(releaseStart(), null);
    }

    /** Releases the lease unless it was already released; for try-with-resources. */
    @Override
    public void close() {
        if (!released.get()) {
            release();
        }
    }

    private CompletableFuture<Void> releaseStart() {
        claimRelease();
        return releaseTask();
    }

    private void claimRelease() {
        if (!released.compareAndSet(false, true)) {
            throw new LockException(ErrorKind.NOT_HELD, "lock " + FencelockClient.quote(name) + ": already released");
        }
    }

    /** Records whether the lease was lost, then frees the handle (the release kept its own reference). */
    private void releaseDone() {
        lostAtRelease = ifHeld(p -> Native.leaseIsLost(p), false);
        handle.close();
    }

    private CompletableFuture<Void> releaseTask() {
        CompletableFuture<Void> releasing;
        try {
            releasing = handle.call(this::releasedError,
                    p -> Call.<Void>start((a, b, t, d) -> null, null, c -> Native.leaseRelease(p, c)));
        } catch (LockException e) {
            handle.close();
            throw e;
        }
        return releasing.whenComplete((v, e) -> releaseDone());
    }

    /**
     * Completes when the lease is lost (expired, taken, or not renewed in time); never if it is released first.
     * Callbacks run on the common pool. Each call returns a new dependent future, so cancelling one affects no other.
     */
    public CompletableFuture<Void> lost() {
        synchronized (this) {
            if (lost == null) {
                CompletableFuture<Void> signal = new CompletableFuture<>();
                lost = signal;
                if (lostAtRelease) {
                    signal.complete(null);
                } else if (!released.get()) {
                    try {
                        handle.call(this::releasedError, p -> {
                            Native.leaseOnLost(p, new Completion() {
                                @Override
                                void done(long a, long b, String text, byte[] data) {
                                    signal.completeAsync(() -> null);
                                }

                                @Override
                                void fail(int code, String message, String lock, String backend, boolean retryable) {
                                    signal.completeExceptionally(
                                            new LockException(code, message, lock, backend, retryable));
                                }
                            });
                            return null;
                        });
                    } catch (LockException releasedMeanwhile) {
                        // A released lease is never lost.
                    }
                }
            }
            return lost.copy();
        }
    }

    /** Why the lease was lost, as core reports it; empty while it is not lost (or once its handle is gone). */
    public java.util.Optional<String> lostReason() {
        String reason = ifHeld(Native::leaseLostReason, "");
        return reason.isEmpty() ? java.util.Optional.empty() : java.util.Optional.of(reason);
    }

    /** Releases a lease nobody will see (its caller gave up), without blocking. */
    static void abandon(Lease lease) {
        try {
            lease.releaseStart();
        } catch (LockException e) {
            lease.handle.close();
        }
    }

    /** Whether {@link #release()} (or {@link #close()}) was called. */
    boolean released() {
        return released.get();
    }

    private LockException releasedError() {
        return new LockException(ErrorKind.NOT_HELD, "lock " + FencelockClient.quote(name) + ": the lease was released");
    }

    /** Runs {@code f} with the live lease pointer; {@code NOT_HELD} once released. */
    <T> T call(java.util.function.LongFunction<T> f) {
        return handle.call(this::releasedError, f);
    }

    private <T> T ifHeld(java.util.function.LongFunction<T> f, T released) {
        try {
            return handle.call(this::releasedError, f);
        } catch (LockException e) {
            return released;
        }
    }

    @Override
    public String toString() {
        return "Lease[" + FencelockClient.quote(name) + ", fence=" + fence + (released.get() ? ", released]" : "]");
    }
}
