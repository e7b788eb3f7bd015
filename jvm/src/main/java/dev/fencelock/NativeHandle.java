package dev.fencelock;

import java.lang.ref.Cleaner;
import java.util.function.LongConsumer;
import java.util.function.LongFunction;
import java.util.function.Supplier;

/**
 * One native handle and the calls in flight on it. It is freed once, when it has been closed and no call is using
 * it, so a close racing a call on another thread never frees memory under that call. Registered with a
 * {@link Cleaner} as a safety net for objects that are dropped without {@code close()}.
 */
final class NativeHandle implements Runnable {
    static final Cleaner CLEANER = Cleaner.create();

    private final LongConsumer free;
    private long ptr;
    private int calls;
    private boolean closed;

    NativeHandle(long ptr, LongConsumer free) {
        this.ptr = ptr;
        this.free = free;
    }

    /** Frees the handle with the Cleaner once {@code owner} is unreachable. */
    NativeHandle register(Object owner) {
        CLEANER.register(owner, this);
        return this;
    }

    /** Runs {@code f} with the live pointer; throws {@code whenClosed} after {@link #close()}. */
    <T> T call(Supplier<LockException> whenClosed, LongFunction<T> f) {
        long p = enter(whenClosed);
        try {
            return f.apply(p);
        } finally {
            leave();
        }
    }

    boolean isClosed() {
        synchronized (this) {
            return closed;
        }
    }

    private synchronized long enter(Supplier<LockException> whenClosed) {
        if (closed) {
            throw whenClosed.get();
        }
        calls++;
        return ptr;
    }

    private synchronized void leave() {
        if (--calls == 0 && closed) {
            freeNow();
        }
    }

    /** Marks the handle closed; it is freed now or when the last call in flight returns. False if already closed. */
    synchronized boolean close() {
        if (closed) {
            return false;
        }
        closed = true;
        if (calls == 0) {
            freeNow();
        }
        return true;
    }

    private void freeNow() {
        long p = ptr;
        ptr = 0;
        if (p != 0) {
            free.accept(p);
        }
    }

    /** The Cleaner's action. */
    @Override
    public void run() {
        close();
    }
}
