package dev.fencelock;

/**
 * What a backend can do, so callers branch on capabilities rather than on backend names.
 *
 * @param fencing grants carry fencing tokens that rise per lock name
 * @param nativeWait waiters are woken by the backend (pub/sub, watch, LISTEN) rather than by polling
 * @param fair waiters across clients are served in arrival order
 * @param sessionBound leases are bound to a session (ZooKeeper) rather than to a per-lock TTL
 * @param rwLock the backend has read-write locks ({@link FencelockClient#readWriteLock(String)})
 * @param semaphore the backend has semaphores ({@link FencelockClient#semaphore(String, int)})
 * @param election the backend has leader elections ({@link FencelockClient#election(String)})
 */
public record Capability(boolean fencing, boolean nativeWait, boolean fair, boolean sessionBound, boolean rwLock,
        boolean semaphore, boolean election) {
    static Capability fromBits(int bits) {
        return new Capability((bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0, (bits & 8) != 0, (bits & 16) != 0,
                (bits & 32) != 0, (bits & 64) != 0);
    }
}
