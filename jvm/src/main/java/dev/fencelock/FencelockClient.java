package dev.fencelock;

import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.Lock;
import java.util.function.LongFunction;

/**
 * A connection to one lock backend, chosen by URL ({@code redis://…}, {@code redlock://…}, {@code redis+cluster://…},
 * {@code etcd://…}, {@code zk://…}, {@code postgres://…}, {@code sqlite:PATH}). Thread-safe; close it when done
 * (closing releases every lease it holds).
 *
 * <pre>{@code
 * try (FencelockClient client = FencelockClient.connect("redis://127.0.0.1:6379");
 *      Lease lease = client.lock("orders")) {
 *     client.fence("orders-table").write(lease.fence(), newState);
 * }
 * }</pre>
 *
 * Blocking methods wait in Java, so an interrupt ends the wait: the acquire is cancelled (nothing is left held), the
 * call throws {@code LockException(CANCELLED)} and the interrupt flag stays set. Each has an {@code …Async} twin whose
 * future completes on the common pool; cancelling it cancels the operation.
 */
public final class FencelockClient implements AutoCloseable {
    private final NativeHandle handle;
    private final String url;

    private FencelockClient(long ptr) {
        this.handle = new NativeHandle(ptr, Native::clientFree).register(this);
        this.url = Native.clientUrl(ptr);
    }

    /** Connects to {@code FENCELOCK_URL}, else the embedded SQLite file {@code fencelock.db} in the working directory. */
    public static FencelockClient connect() {
        return connect(null);
    }

    /** Connects to the backend {@code url} names ({@code null}: as {@link #connect()}). */
    public static FencelockClient connect(String url) {
        return connect(url, ClientOptions.defaults());
    }

    /** {@link #connect(String)} with client options (metrics). */
    public static FencelockClient connect(String url, ClientOptions options) {
        return Call.awaitCancellable(open(url, options), "connect");
    }

    /** {@link #connect(String)} with a connect timeout in ms (0: the default), for tests that expect no answer. */
    static FencelockClient connect(String url, long connectTimeoutMs) {
        return connect(url, ClientOptions.defaults().withConnectTimeoutMillis(connectTimeoutMs));
    }

    /** {@link #connect(String)} without blocking. */
    public static CompletableFuture<FencelockClient> connectAsync(String url) {
        return connectAsync(url, ClientOptions.defaults());
    }

    /** {@link #connect(String, ClientOptions)} without blocking. */
    public static CompletableFuture<FencelockClient> connectAsync(String url, ClientOptions options) {
        return Call.publish(open(url, options), FencelockClient::discard);
    }

    private static CompletableFuture<FencelockClient> open(String url, ClientOptions options) {
        ClientOptions o = Objects.requireNonNull(options, "options");
        return Call.start((a, b, text, data) -> new FencelockClient(a), FencelockClient::discard,
                c -> Native.connect(url, o.connectTimeoutMillis(), 0, o.metrics(), o.allMetricsNames(),
                        o.metricsNamesArray(), c));
    }

    private static void discard(FencelockClient client) {
        client.handle.close();
    }

    /** This client's id, the first half of every holder id it writes. */
    public String id() {
        return call(Native::clientId);
    }

    /** The backend URL, without secrets. */
    public String url() {
        return url;
    }

    /** What the backend can do. */
    public Capability capability() {
        return Capability.fromBits(call(p -> Native.clientCapability(p)));
    }

    /** Lock names this client holds or queues for locally (0 when idle). */
    public long localEntries() {
        return call(p -> Native.clientLocalEntries(p));
    }

    /**
     * This client's metrics now, counted from its creation: acquire waits by outcome, holds, active leases,
     * renewals, losses, fenced writes, queue depth and backend round trips (all zero with metrics off).
     */
    public FencelockMetrics metrics() {
        return MetricsJson.metrics(call(Native::clientMetrics));
    }

    /**
     * The same figures as metric families (name, help, type, labelled samples): core's one mapping, which exporter
     * adapters such as fencelock-micrometer loop over.
     */
    public List<MetricFamily> metricFamilies() {
        return MetricsJson.families(call(Native::clientMetricFamilies));
    }

    /** Takes {@code name} with the default options, waiting as long as it takes. */
    public Lease lock(String name) {
        return lock(name, LockOptions.defaults());
    }

    /** Takes {@code name}, waiting up to {@code options.timeout()} ({@code TIMEOUT} after that). */
    public Lease lock(String name, LockOptions options) {
        return hold(name, Hold.MUTEX, options);
    }

    /** One attempt with the default options: the lease, or empty if someone else holds {@code name}. */
    public Optional<Lease> tryLock(String name) {
        return tryLock(name, LockOptions.defaults());
    }

    /** One attempt: the lease, or empty if someone else holds {@code name}. */
    public Optional<Lease> tryLock(String name, LockOptions options) {
        return tryHold(name, Hold.MUTEX, options);
    }

    /** {@link #lock(String, LockOptions)} without blocking; the owner defaults to the calling thread. */
    public CompletableFuture<Lease> lockAsync(String name, LockOptions options) {
        return holdAsync(name, Hold.MUTEX, options);
    }

    /** {@link #lock(String)} without blocking. */
    public CompletableFuture<Lease> lockAsync(String name) {
        return lockAsync(name, LockOptions.defaults());
    }

    /** {@link #tryLock(String, LockOptions)} without blocking. */
    public CompletableFuture<Optional<Lease>> tryLockAsync(String name, LockOptions options) {
        return Call.publish(tryAcquire(name, Hold.MUTEX, options), lease -> lease.ifPresent(Lease::abandon));
    }

    /**
     * A {@link Lock} on {@code name}, reentrant per thread like {@code ReentrantLock}: {@code lock()} waits
     * uninterruptibly, {@code lockInterruptibly()} and {@code tryLock(time, unit)} honour interrupts.
     */
    public Lock mutex(String name) {
        return mutex(name, LockOptions.defaults());
    }

    /** {@link #mutex(String)} with a TTL and watchdog setting; the owner is always the calling thread. */
    public Lock mutex(String name, LockOptions options) {
        return new FencelockMutex(this, name, options, Hold.MUTEX);
    }

    /**
     * The read-write lock {@code name} (DESIGN.md §4b): a {@link java.util.concurrent.locks.ReadWriteLock} whose
     * locks belong to the calling thread, plus lease methods ({@code read}, {@code write}, their {@code try…} and
     * {@code …Async} forms). {@code UNSUPPORTED} on first use if the backend has none.
     */
    public FencelockReadWriteLock readWriteLock(String name) {
        return readWriteLock(name, LockOptions.defaults());
    }

    /** {@link #readWriteLock(String)} whose {@code Lock}s use a TTL and watchdog setting of their own. */
    public FencelockReadWriteLock readWriteLock(String name, LockOptions options) {
        return new FencelockReadWriteLock(this, name, options);
    }

    /**
     * The semaphore {@code name} of {@code permits} leased permits (DESIGN.md §4b); every client of the name must use
     * the same number. {@code UNSUPPORTED} on first use if the backend has none.
     */
    public FencelockSemaphore semaphore(String name, int permits) {
        return new FencelockSemaphore(this, name, permits);
    }

    /**
     * The election {@code name} (DESIGN.md §4b): campaigns that return a {@link Leadership} (a lease whose token is
     * the term), the current leader, and observers of every change. {@code UNSUPPORTED} on first use if the backend
     * has none.
     */
    public FencelockElection election(String name) {
        return new FencelockElection(this, name);
    }

    /** A hold of {@code hold} on {@code name}, waiting up to {@code options.timeout()}: the engine of every kind. */
    Lease hold(String name, Hold hold, LockOptions options) {
        if (Threads.currentIsVirtual()) {
            return Call.awaitCancellable(acquire(name, hold, options, false), hold.label() + " " + quote(name));
        }
        return acquireHere(name, hold, options, false, true);
    }

    /** One attempt at a hold: empty if busy. */
    Optional<Lease> tryHold(String name, Hold hold, LockOptions options) {
        if (Threads.currentIsVirtual()) {
            return Call.awaitCancellable(tryAcquire(name, hold, options), "try " + hold.label() + " " + quote(name));
        }
        return Optional.ofNullable(acquireHere(name, hold, options, true, true));
    }

    /** {@link #hold} without blocking. */
    CompletableFuture<Lease> holdAsync(String name, Hold hold, LockOptions options) {
        return Call.publish(acquire(name, hold, options, false), Lease::abandon);
    }

    /** The fenced register {@code resource}, stored in this client's backend. */
    public Fence fence(String resource) {
        return new Fence(this, resource);
    }

    /** Who holds {@code name}, for how long, and the last token handed out. */
    public LockInfo inspect(String name) {
        return Call.await(call(p -> Call.start((a, b, holder, data) -> new LockInfo(Optional.ofNullable(holder),
                b < 0 ? Optional.empty() : Optional.of(Duration.ofMillis(b)),
                a < 0 ? OptionalLong.empty() : OptionalLong.of(a)), null, c -> Native.inspect(p, name, c))));
    }

    /**
     * Deletes the record of {@code name} whoever holds it (an operator's tool); the holder's lease is lost at its next
     * renewal. Whether there was a record.
     */
    public boolean forceRelease(String name) {
        return Call.await(call(p -> Call.start((a, b, t, d) -> a != 0, null, c -> Native.forceRelease(p, name, c))));
    }

    /** Releases every lease this client holds and closes its connections. Later calls fail with {@code CLOSED}. */
    @Override
    public void close() {
        if (handle.isClosed()) {
            return;
        }
        CompletableFuture<Object> closing;
        try {
            closing = call(p -> Call.start((a, b, t, d) -> null, null, c -> Native.clientClose(p, c)));
        } catch (LockException e) {
            if (e.kind() == ErrorKind.CLOSED) {
                return;
            }
            throw e;
        }
        try {
            Call.await(closing);
        } finally {
            handle.close();
        }
    }

    /**
     * Acquires on this (platform) thread: null if {@code once} found the lock busy. With {@code interruptible}, an
     * interrupt cancels the wait and throws {@code CANCELLED} with the interrupt flag left set.
     */
    Lease acquireHere(String name, Hold hold, LockOptions options, boolean once, boolean interruptible) {
        LockOptions o = options == null ? LockOptions.defaults() : options;
        String owner = o.ownerForCaller();
        long lease = call(p -> Native.lockBlocking(p, name, hold.kind(), hold.permits(), o.ttlMillis(),
                once ? -1 : o.timeoutMillis(), o.watchdog(), owner, o.fairCode(), once, interruptible));
        return lease == 0 ? null : new Lease(lease, name, Native.leaseFence(lease));
    }

    CompletableFuture<Lease> acquire(String name, Hold hold, LockOptions options, boolean once) {
        LockOptions o = options == null ? LockOptions.defaults() : options;
        String owner = o.ownerForCaller();
        return call(p -> Call.start((a, fence, t, d) -> a == 0 ? null : new Lease(a, name, fence), Lease::abandon,
                c -> Native.lock(p, name, hold.kind(), hold.permits(), o.ttlMillis(), o.timeoutMillis(), o.watchdog(),
                        owner, o.fairCode(), once, c)));
    }

    private CompletableFuture<Optional<Lease>> tryAcquire(String name, Hold hold, LockOptions options) {
        LockOptions o = options == null ? LockOptions.defaults() : options;
        String owner = o.ownerForCaller();
        return call(p -> Call.start(
                (a, fence, t, d) -> a == 0 ? Optional.<Lease>empty() : Optional.of(new Lease(a, name, fence)),
                lease -> lease.ifPresent(Lease::abandon),
                c -> Native.lock(p, name, hold.kind(), hold.permits(), o.ttlMillis(), -1, o.watchdog(), owner,
                        o.fairCode(), true, c)));
    }

    /** Runs {@code f} with the live client pointer; {@code CLOSED} after close. */
    <T> T call(LongFunction<T> f) {
        return handle.call(() -> new LockException(ErrorKind.CLOSED, url + ": the client was closed"), f);
    }

    static String quote(String name) {
        return name == null ? "null" : '"' + name + '"';
    }

    @Override
    public String toString() {
        return "FencelockClient[" + url + (handle.isClosed() ? ", closed]" : "]");
    }
}
