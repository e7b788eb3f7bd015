package dev.fencelock;

/**
 * The native methods of {@code libfencelock_jni.so} (bindings/jvm). Handles are {@code long}s owned by a
 * {@link NativeHandle}; every operation that waits on a backend starts a task, reports to a {@link Completion} and
 * returns the task's handle ({@code taskCancel}, {@code taskFree}). Each method may throw {@link LockException}.
 */
final class Native {
    static {
        NativeLoader.load();
    }

    private Native() {}

    /** {@code allNames}: every lock name gets series; else the {@code names} listed (null: none). */
    static native long connect(String url, long connectMs, long requestMs, boolean metrics, boolean allNames,
            String[] names, Completion c);

    static native long clientClose(long client, Completion c);

    static native void clientFree(long client);

    static native String clientId(long client);

    static native String clientUrl(long client);

    static native int clientCapability(long client);

    static native long clientLocalEntries(long client);

    /** Core's {@code MetricsSnapshot::to_json}. */
    static native String clientMetrics(long client);

    /** Core's {@code families_json} of the snapshot's families. */
    static native String clientMetricFamilies(long client);

    /**
     * {@code done(lease handle or 0 if busy, fence)}. Every {@code done} layout is {@code Value::wire} in
     * bindings/jvm/src/callback.rs.
     */
    static native long lock(long client, String name, String kind, long permits, long ttlMs, long timeoutMs,
            boolean watchdog, String owner, int fair, boolean once, Completion c);

    /**
     * {@code kind} is a {@link Hold}'s: {@code lock}, {@code read}, {@code write} or {@code permit} of {@code permits}.
     * {@code lock}/{@code tryLock} on the calling platform thread: the lease handle, 0 if {@code once} found it busy.
     * With {@code interruptible}, an interrupt cancels the wait ({@code CANCELLED}, flag left set).
     */
    static native long lockBlocking(long client, String name, String kind, long permits, long ttlMs, long timeoutMs,
            boolean watchdog, String owner, int fair, boolean once, boolean interruptible);

    /** {@code done(permits of the semaphore not held now)}. */
    static native long available(long client, String name, long permits, Completion c);

    /** {@code done(last token or -1, remaining ms or -1, holder or null)}. */
    static native long inspect(long client, String name, Completion c);

    static native long forceRelease(long client, String name, Completion c);

    static native long fenceWrite(long client, String resource, long token, byte[] value, Completion c);

    /** {@code done(token, 0, null, value)}. */
    static native long fenceRead(long client, String resource, Completion c);

    static native void leaseFree(long lease);

    static native long leaseFence(long lease);

    static native String leaseHolder(long lease);

    /** A permit's semaphore slot; -1 for other holds. */
    static native long leaseSlot(long lease);

    static native long leaseRemainingMs(long lease);

    static native boolean leaseIsValid(long lease);

    static native boolean leaseIsLost(long lease);

    /** Core's reason for the loss; empty while not lost. */
    static native String leaseLostReason(long lease);

    static native long leaseRenew(long lease, long ttlMs, Completion c);

    static native long leaseRelease(long lease, Completion c);

    static native void leaseReleaseBlocking(long lease);

    /** Calls {@code c.done(0, 0, reason, null)} once if the lease is lost; never if it is released or freed first. */
    static native void leaseOnLost(long lease, Completion c);

    /**
     * {@code done(lease handle or 0 if another leads, term)}: a campaign in the election {@code name} with
     * {@code value}; the leadership is an ordinary lease handle (its fence is the term, releasing it resigns).
     */
    static native long campaign(long client, String name, byte[] value, long ttlMs, long timeoutMs, boolean watchdog,
            String owner, int fair, boolean once, Completion c);

    /** {@code campaign} on the calling platform thread, as {@code lockBlocking}: the lease handle, 0 if busy. */
    static native long campaignBlocking(long client, String name, byte[] value, long ttlMs, long timeoutMs,
            boolean watchdog, String owner, int fair, boolean once, boolean interruptible);

    static native long proclaim(long client, String name, long lease, byte[] value, Completion c);

    /** {@code done(1, term, null, value)} for the current leader, {@code done(0, …)} when nobody leads. */
    static native long leader(long client, String name, Completion c);

    /** A new observer of the election {@code name}; nothing is read until {@code observerNext}. */
    static native long observerNew(long client, String name);

    /** The observer's next change, laid out as {@code leader}'s. */
    static native long observerNext(long observer, Completion c);

    static native void observerFree(long observer);

    /** Core's answer to whether errors of kind {@code code} may succeed if retried. */
    static native boolean kindRetryable(int code);

    static native void taskCancel(long task);

    static native void taskFree(long task);
}
