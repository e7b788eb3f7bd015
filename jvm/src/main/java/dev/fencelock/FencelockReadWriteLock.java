package dev.fencelock;

import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;

/**
 * A read-write lock on one name (DESIGN.md §4b): many readers or one writer, and a waiting writer blocks new readers.
 * {@link #readLock()} and {@link #writeLock()} are {@link Lock}s owned by the calling thread, reentrant per thread;
 * a thread holding the write lock may take the read lock too (a downgrade), a thread holding the read lock asking for
 * the write lock gets {@code INVALID_ARGUMENT} (an upgrade would deadlock). The lease methods return {@link Lease}s
 * for try-with-resources and fencing: each write hold, and each run of overlapping read holds, has its own token.
 *
 * <pre>{@code
 * FencelockReadWriteLock rw = client.readWriteLock("catalog");
 * try (Lease read = rw.read(LockOptions.defaults())) { ... }
 * }</pre>
 */
public final class FencelockReadWriteLock implements ReadWriteLock {
    private final FencelockClient client;
    private final String name;
    private final Lock readLock;
    private final Lock writeLock;

    FencelockReadWriteLock(FencelockClient client, String name, LockOptions options) {
        this.client = client;
        this.name = name;
        this.readLock = new FencelockMutex(client, name, options, Hold.READ);
        this.writeLock = new FencelockMutex(client, name, options, Hold.WRITE);
    }

    /** The lock name. */
    public String name() {
        return name;
    }

    @Override
    public Lock readLock() {
        return readLock;
    }

    @Override
    public Lock writeLock() {
        return writeLock;
    }

    /** A read hold, waiting up to {@code options.timeout()} while a writer holds or waits. */
    public Lease read(LockOptions options) {
        return client.hold(name, Hold.READ, options);
    }

    /** One attempt at a read hold: empty while a writer holds or waits. */
    public Optional<Lease> tryRead(LockOptions options) {
        return client.tryHold(name, Hold.READ, options);
    }

    /** {@link #read(LockOptions)} without blocking. */
    public CompletableFuture<Lease> readAsync(LockOptions options) {
        return client.holdAsync(name, Hold.READ, options);
    }

    /** The write hold, waiting up to {@code options.timeout()} for readers and another writer to leave. */
    public Lease write(LockOptions options) {
        return client.hold(name, Hold.WRITE, options);
    }

    /** One attempt at the write hold: empty while anyone holds. */
    public Optional<Lease> tryWrite(LockOptions options) {
        return client.tryHold(name, Hold.WRITE, options);
    }

    /** {@link #write(LockOptions)} without blocking. */
    public CompletableFuture<Lease> writeAsync(LockOptions options) {
        return client.holdAsync(name, Hold.WRITE, options);
    }

    @Override
    public String toString() {
        return "FencelockReadWriteLock[" + FencelockClient.quote(name) + "]";
    }
}
