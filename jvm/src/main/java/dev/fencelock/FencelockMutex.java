package dev.fencelock;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * {@link Lock} over one lock name (a mutex, or one side of a read-write lock), owned by the calling thread and
 * reentrant per thread like {@code ReentrantLock}:
 * each thread's holds are a stack of leases sharing one grant (the core counts the holds), the last {@code unlock}
 * releases the lock.
 */
final class FencelockMutex implements Lock {
    private final FencelockClient client;
    private final String name;
    private final LockOptions options;
    private final Hold hold;
    private final ThreadLocal<ArrayDeque<Lease>> holds = ThreadLocal.withInitial(ArrayDeque::new);

    FencelockMutex(FencelockClient client, String name, LockOptions options, Hold hold) {
        LockOptions o = options == null ? LockOptions.defaults() : options;
        if (o.owner() != null) {
            throw new LockException(ErrorKind.INVALID_ARGUMENT, hold.label() + " " + FencelockClient.quote(name)
                    + ": its owner is the calling thread; use client.lock(name, options) for an explicit owner");
        }
        this.client = client;
        this.name = name;
        this.options = o.waitForever();
        this.hold = hold;
    }

    @Override
    public void lock() {
        holds.get().push(Threads.currentIsVirtual() ? Call.await(client.acquire(name, hold, options, false))
                : client.acquireHere(name, hold, options, false, false));
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
        holds.get().push(acquireInterruptibly(options));
    }

    /** Waits for the lock; an interrupt cancels the wait (nothing is left held) and throws InterruptedException. */
    private Lease acquireInterruptibly(LockOptions o) throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        if (Threads.currentIsVirtual()) {
            return Call.awaitInterruptibly(client.acquire(name, hold, o, false));
        }
        try {
            return client.acquireHere(name, hold, o, false, true);
        } catch (LockException e) {
            if (e.kind() == ErrorKind.CANCELLED && Thread.interrupted()) {
                InterruptedException ie = new InterruptedException(hold.label() + " " + FencelockClient.quote(name)
                        + ": interrupted while waiting");
                ie.initCause(e);
                throw ie;
            }
            throw e;
        }
    }

    @Override
    public boolean tryLock() {
        Lease lease = Threads.currentIsVirtual() ? Call.await(client.acquire(name, hold, options, true))
                : client.acquireHere(name, hold, options, true, false);
        if (lease == null) {
            return false;
        }
        holds.get().push(lease);
        return true;
    }

    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        LockOptions timed = options.withTimeout(Duration.ofNanos(Math.max(0, unit.toNanos(time))));
        try {
            holds.get().push(acquireInterruptibly(timed));
            return true;
        } catch (LockException e) {
            if (e.kind() == ErrorKind.TIMEOUT) {
                return false;
            }
            throw e;
        }
    }

    /** Releases the calling thread's latest hold; {@link IllegalMonitorStateException} if it holds none. */
    @Override
    public void unlock() {
        ArrayDeque<Lease> mine = holds.get();
        Lease lease = mine.poll();
        if (lease == null) {
            throw new IllegalMonitorStateException(hold.label() + " " + FencelockClient.quote(name) + " is not held by "
                    + Thread.currentThread());
        }
        lease.release();
    }

    /** Conditions would need a distributed wait set; not offered. */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("fencelock mutexes have no conditions");
    }

    @Override
    public String toString() {
        return "FencelockMutex[" + hold.label() + " " + FencelockClient.quote(name) + ", held by this thread " + holds.get().size()
                + " times]";
    }
}
