package dev.fencelock;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The changes of leader of one election, pulled one at a time with {@link #next()}: in order, starting with the
 * current leader (or none), each a new leader, a proclaimed value, or empty when nobody leads; a term lower than one
 * already reported never follows it. Thread-safe: each change goes to one caller. {@link #close()} frees it.
 */
public final class ElectionObserver implements AutoCloseable {
    private final NativeHandle handle;
    private final String name;
    /** The native read of the next change, until a caller takes its result; guarded by {@code this}. */
    private CompletableFuture<Optional<LeaderInfo>> pending;

    ElectionObserver(FencelockClient client, String name) {
        this.handle = new NativeHandle(client.call(p -> Native.observerNew(p, name)), Native::observerFree)
                .register(this);
        this.name = name;
    }

    /** The election's name. */
    public String name() {
        return name;
    }

    /**
     * The next change, waiting as long as it takes. An outage is thrown ({@code UNAVAILABLE}) and the next call goes
     * on observing; {@code CLOSED} once the client or this observer is closed. An interrupt throws {@code CANCELLED}
     * (the flag stays set) and loses no change.
     */
    public Optional<LeaderInfo> next() {
        return next(null);
    }

    /** {@link #next()} waiting at most {@code timeout} ({@code null}: forever): {@code TIMEOUT} if nothing changed. */
    public Optional<LeaderInfo> next(Duration timeout) {
        long deadline = timeout == null ? 0 : System.nanoTime() + Math.max(0, timeout.toNanos());
        while (true) {
            CompletableFuture<Optional<LeaderInfo>> p = pending();
            try {
                if (timeout == null) {
                    p.get();
                } else {
                    p.get(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new LockException(ErrorKind.CANCELLED,
                        "election " + FencelockClient.quote(name) + ": interrupted while observing", e);
            } catch (TimeoutException e) {
                // The read stays pending: the change it brings goes to the next call.
                throw new LockException(ErrorKind.TIMEOUT, "election " + FencelockClient.quote(name)
                        + ": no change of leader within " + timeout.toMillis() + " ms");
            } catch (CancellationException e) {
                throw closed();
            } catch (ExecutionException e) {
                // Done with an error: taken below like a result.
            }
            if (take(p)) {
                return Call.await(p);
            }
            // Another caller took this change; wait for the one after it.
        }
    }

    /** Starts a native read of the next change (for {@link LeaderSubscription}, which keeps one in flight). */
    CompletableFuture<Optional<LeaderInfo>> nextStart() {
        return handle.call(this::closed, h -> Call.start((a, b, t, d) -> LeaderInfo.of(a, b, d), null,
                c -> Native.observerNext(h, c)));
    }

    private synchronized CompletableFuture<Optional<LeaderInfo>> pending() {
        if (pending == null) {
            pending = nextStart();
        }
        return pending;
    }

    /** Whether this caller takes {@code p}'s result (no other caller did). */
    private synchronized boolean take(CompletableFuture<Optional<LeaderInfo>> p) {
        if (pending != p) {
            return false;
        }
        pending = null;
        return true;
    }

    private LockException closed() {
        return new LockException(ErrorKind.CLOSED,
                "election " + FencelockClient.quote(name) + ": the observer was closed");
    }

    /** Stops observing; a {@link #next()} under way throws {@code CLOSED}. */
    @Override
    public void close() {
        CompletableFuture<Optional<LeaderInfo>> p;
        synchronized (this) {
            p = pending;
            pending = null;
        }
        if (p != null) {
            p.cancel(false); // aborts the native read, which holds its own reference to the observer
        }
        handle.close();
    }

    @Override
    public String toString() {
        return "ElectionObserver[" + FencelockClient.quote(name) + (handle.isClosed() ? ", closed]" : "]");
    }
}
