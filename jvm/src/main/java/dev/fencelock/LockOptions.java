package dev.fencelock;

import java.time.Duration;
import java.util.Objects;

/**
 * How one {@code lock}/{@code tryLock} call behaves. Immutable; {@code with…} methods return a changed copy:
 * {@code LockOptions.defaults().withTtl(Duration.ofSeconds(10)).withTimeout(Duration.ofSeconds(2))}.
 */
public final class LockOptions {
    /** Lease time to live when none is given. */
    public static final Duration DEFAULT_TTL = Duration.ofSeconds(30);

    private static final LockOptions DEFAULTS = new LockOptions(DEFAULT_TTL, null, true, null, null);

    private final Duration ttl;
    private final Duration timeout;
    private final boolean watchdog;
    private final String owner;
    private final Boolean fair;

    private LockOptions(Duration ttl, Duration timeout, boolean watchdog, String owner, Boolean fair) {
        this.ttl = ttl;
        this.timeout = timeout;
        this.watchdog = watchdog;
        this.owner = owner;
        this.fair = fair;
    }

    /** TTL 30 s, wait forever, watchdog on, the calling thread as owner. */
    public static LockOptions defaults() {
        return DEFAULTS;
    }

    /** The lease TTL on the backend (the session timeout on ZooKeeper); 1 ms to 24 h. */
    public LockOptions withTtl(Duration ttl) {
        return new LockOptions(Objects.requireNonNull(ttl, "ttl"), timeout, watchdog, owner, fair);
    }

    /** How long {@code lock} waits for a holder to let go before {@code TIMEOUT}; ignored by {@code tryLock}. */
    public LockOptions withTimeout(Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        if (timeout.isNegative()) {
            throw new LockException(ErrorKind.INVALID_ARGUMENT, "timeout must not be negative, got " + timeout);
        }
        return new LockOptions(ttl, timeout, watchdog, owner, fair);
    }

    /** Wait as long as it takes (the default). */
    public LockOptions waitForever() {
        return new LockOptions(ttl, null, watchdog, owner, fair);
    }

    /** Renew every ttl/3 until released (default on). */
    public LockOptions withWatchdog(boolean watchdog) {
        return new LockOptions(ttl, timeout, watchdog, owner, fair);
    }

    /**
     * The reentrancy key: a second lock of the same name by the same owner on the same client returns at once with the
     * same fence. {@code null} (the default) means the calling thread.
     */
    public LockOptions withOwner(String owner) {
        return new LockOptions(ttl, timeout, watchdog, owner, fair);
    }

    /**
     * Wait in arrival order among all clients ({@code true}) or not ({@code false}) where the backend offers both
     * (Redis); {@code null} (the default) keeps the backend's default.
     */
    public LockOptions withFair(Boolean fair) {
        return new LockOptions(ttl, timeout, watchdog, owner, fair);
    }

    public Duration ttl() {
        return ttl;
    }

    /** The wait bound; {@code null} waits forever. */
    public Duration timeout() {
        return timeout;
    }

    public boolean watchdog() {
        return watchdog;
    }

    /** The explicit owner; {@code null} means the calling thread. */
    public String owner() {
        return owner;
    }

    /** The wait order asked for; {@code null}: the backend's default. */
    public Boolean fair() {
        return fair;
    }

    /** {@link #fair()} as the native layer takes it: 0 the default, 1 arrival order, -1 none. */
    int fairCode() {
        return fair == null ? 0 : fair ? 1 : -1;
    }

    /** The owner a call made now on this thread uses. */
    String ownerForCaller() {
        return owner != null ? owner : threadOwner(Thread.currentThread());
    }

    static String threadOwner(Thread t) {
        return "java-thread-" + t.getId();
    }

    long ttlMillis() {
        // Sub-millisecond TTLs round to 0, which the core refuses with a message naming the TTL.
        return ttl.isNegative() ? 0 : saturatedMillis(ttl);
    }

    long timeoutMillis() {
        return timeout == null ? -1 : saturatedMillis(timeout);
    }

    /** {@code d} in whole milliseconds, {@code Long.MAX_VALUE} if longer: the core refuses or saturates it. */
    static long saturatedMillis(Duration d) {
        try {
            return d.toMillis();
        } catch (ArithmeticException e) {
            return Long.MAX_VALUE;
        }
    }

    @Override
    public String toString() {
        return "LockOptions[ttl=" + ttl + ", timeout=" + (timeout == null ? "forever" : timeout) + ", watchdog="
                + watchdog + ", owner=" + (owner == null ? "<thread>" : owner) + ", fair=" + (fair == null ? "default" : fair)
                + "]";
    }
}
