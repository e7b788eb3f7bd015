package dev.fencelock;

import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * A running {@link FencelockElection#observe(LeaderListener)}: one native read in flight at a time, its result
 * handed to the listener on the common pool before the next read starts, so calls come one at a time and in order.
 * {@link #close()} stops it.
 */
public final class LeaderSubscription implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(LeaderSubscription.class.getName());

    private final ElectionObserver observer;
    private final LeaderListener listener;
    /** Held while the listener runs, so {@link #close()} can wait for a call under way. */
    private final Object delivering = new Object();
    private volatile boolean closed;
    /** The read in flight; guarded by {@code this}. */
    private CompletableFuture<Optional<LeaderInfo>> current;

    private LeaderSubscription(ElectionObserver observer, LeaderListener listener) {
        this.observer = observer;
        this.listener = listener;
    }

    /** Delivers {@code first} (read by the caller, so its errors were thrown there), then keeps reading. */
    static LeaderSubscription start(ElectionObserver observer, LeaderListener listener, Optional<LeaderInfo> first) {
        LeaderSubscription s = new LeaderSubscription(observer, listener);
        CompletableFuture.runAsync(() -> s.handle(first, null));
        return s;
    }

    /** The election's name. */
    public String name() {
        return observer.name();
    }

    /** Whether the listener may still be called: not closed, and not ended by a final error. */
    public boolean isActive() {
        return !closed;
    }

    /** Delivers one report (on the common pool), then starts the next read unless the observation ended. */
    private void handle(Optional<LeaderInfo> leader, Throwable error) {
        if (!deliver(leader, error)) {
            end();
            return;
        }
        CompletableFuture<Optional<LeaderInfo>> next;
        synchronized (this) {
            if (closed) {
                return;
            }
            try {
                next = observer.nextStart();
            } catch (LockException e) {
                return; // closed meanwhile
            }
            current = next;
        }
        next.whenCompleteAsync((v, e) -> handle(v, e));
    }

    /** Runs the listener unless closed; whether the observation goes on. */
    private boolean deliver(Optional<LeaderInfo> leader, Throwable error) {
        synchronized (delivering) {
            if (closed) {
                return false;
            }
            LockException failure = error == null ? null
                    : error instanceof LockException le ? le
                    : new LockException(ErrorKind.INTERNAL, String.valueOf(error), error);
            try {
                if (failure == null) {
                    listener.onChange(leader);
                } else {
                    listener.onError(failure);
                }
            } catch (RuntimeException thrown) {
                // A listener's bug must not end everyone's observation silently.
                LOG.log(System.Logger.Level.WARNING,
                        "a leader listener of election " + FencelockClient.quote(name()) + " threw", thrown);
            }
            // Core's stream goes on after an outage (a reconnect resumes it); any other error ends it.
            return failure == null || failure.retryable();
        }
    }

    private void end() {
        closed = true;
        observer.close();
    }

    /**
     * Stops the observation: no listener call starts after this returns, and one under way on another thread is
     * waited for. From inside the listener it stops it too (that call is the last). Idempotent.
     */
    @Override
    public void close() {
        closed = true;
        CompletableFuture<Optional<LeaderInfo>> f;
        synchronized (this) {
            f = current;
        }
        if (f != null) {
            f.cancel(false);
        }
        synchronized (delivering) {
            // Entered once no call is under way (at once from the listener itself: the monitor is reentrant).
            observer.close();
        }
    }

    @Override
    public String toString() {
        return "LeaderSubscription[" + FencelockClient.quote(name()) + (closed ? ", closed]" : "]");
    }
}
